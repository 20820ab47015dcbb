# Bootstrap bands against plain-R references at small B: the same draws (the seed fixed, the
# random numbers taken in the package's order), the fits written as weighted least squares or
# weighted glm() per query, the band's quantiles as order statistics.

# The k-th smallest of v, k = ceiling(prob (B + 1)) within 1..B.
order_stat_ref <- function(v, prob) sort(v)[min(length(v), max(1, ceiling(prob * (length(v) + 1))))]

band_ref <- function(fit, D, level, simultaneous, percentile = FALSE) {
  if (!simultaneous) {
    lo <- apply(D, 1, order_stat_ref, prob = (1 - level) / 2)
    hi <- apply(D, 1, order_stat_ref, prob = (1 + level) / 2)
    if (percentile) return(cbind(fit = fit, lwr = fit + lo, upr = fit + hi))
    return(cbind(fit = fit, lwr = fit - hi, upr = fit - lo))
  }
  s <- sqrt(rowMeans(D^2))
  crit <- order_stat_ref(apply(abs(D) / s, 2, max), level)
  cbind(fit = fit, lwr = fit - crit * s, upr = fit + crit * s)
}

# Rademacher signs, drawn as the package draws them.
rademacher_ref <- function(n, B) matrix(2 * rbinom(n * B, 1, 0.5) - 1, n, B)

# Local linear equivalent kernels (rows) at points q, Gaussian kernel of bandwidth h.
local_linear_ref <- function(x, q, h) {
  t(vapply(q, function(q0) {
    w <- dnorm((x - q0) / h)
    X <- cbind(1, x - q0)
    solve(crossprod(X, w * X), t(w * X))[1, ]
  }, numeric(length(x))))
}

test_that("the wild-bootstrap band of a local linear fit matches a plain-R reference", {
  x <- cars$speed
  y <- cars$dist
  h <- 4
  fit <- local_poly(dist ~ speed, cars, bandwidth = h, method = "exact", n_threads = 1)
  q <- c(5, 10, 15.5, 20, 25)
  B <- 19
  L <- local_linear_ref(x, x, h)
  # the pilot variance: corrected squared residuals, local mean at 3 h
  corrected <- (y - drop(L %*% y))^2 / (1 - 2 * diag(L) + rowSums(L^2))
  K <- outer(x, x, function(a, b) dnorm((a - b) / (3 * h)))
  e <- sqrt(drop(K %*% corrected) / rowSums(K))
  Lq <- local_linear_ref(x, q, h)
  for (simultaneous in c(FALSE, TRUE)) {
    set.seed(3)
    band <- predict(fit, data.frame(speed = q), interval = "bootstrap", B = B, level = 0.8,
                    simultaneous = simultaneous, verbose = FALSE)
    set.seed(3)
    D <- Lq %*% (e * rademacher_ref(length(y), B))
    expect_equal(band, band_ref(drop(Lq %*% y), D, 0.8, simultaneous), tolerance = 1e-8)
  }
})

test_that("the model-based bootstrap band of a local logistic fit matches weighted glm()", {
  skip_on_cran()  # 2 x 19 glm() fits
  fit <- local_poly(am ~ wt, mtcars, family = "binomial", bandwidth = 3, n_threads = 1)
  q <- c(2.5, 3.5)
  B <- 19
  set.seed(2)
  band <- predict(fit, data.frame(wt = q), interval = "bootstrap", B = B, level = 0.8,
                  simultaneous = TRUE, type = "link", verbose = FALSE)
  set.seed(2)
  Y <- matrix(rbinom(nrow(mtcars) * B, 1, fitted(fit)), ncol = B)
  eta <- function(yb, q0) {
    w <- dnorm((mtcars$wt - q0) / 3)
    d <- data.frame(yb = yb, u = mtcars$wt - q0)
    unname(coef(suppressWarnings(glm(yb ~ u, binomial, d, weights = w)))[1])
  }
  E <- vapply(seq_len(B), function(b) vapply(q, eta, 1, yb = Y[, b]), numeric(2))
  D <- E - rowMeans(E)
  fit_q <- vapply(q, eta, 1, yb = mtcars$am)
  expect_equal(band, band_ref(fit_q, D, 0.8, TRUE), tolerance = 1e-5)
  # pointwise: the percentile interval (a separating replicate stays in its own tail)
  set.seed(2)
  pointwise <- predict(fit, data.frame(wt = q), interval = "bootstrap", B = B, level = 0.8,
                       type = "link", verbose = FALSE)
  expect_equal(pointwise, band_ref(fit_q, D, 0.8, FALSE, percentile = TRUE), tolerance = 1e-5)
  # on the response scale, the same band through the inverse link
  set.seed(2)
  response <- predict(fit, data.frame(wt = q), interval = "bootstrap", B = B, level = 0.8,
                      simultaneous = TRUE, verbose = FALSE)
  expect_equal(response, plogis(band), tolerance = 1e-12)
})

test_that("the smoothed-bootstrap band of a kde matches a plain-R reference", {
  x <- faithful$eruptions[1:60]
  h <- 0.3
  fit <- kde(x, bandwidth = h, gridsize = 0)
  q <- c(2, 3, 4.5)
  B <- 19
  set.seed(4)
  band <- predict(fit, q, interval = "bootstrap", B = B, level = 0.8, verbose = FALSE)
  set.seed(4)
  rows <- sample.int(60, 60 * B, replace = TRUE)
  draws <- matrix(x[rows] + h * rnorm(60 * B), 60)
  E <- vapply(seq_len(B), function(b) {
    vapply(q, function(q0) mean(dnorm((q0 - draws[, b]) / h)) / h, 1)
  }, numeric(3))
  ref <- band_ref(vapply(q, function(q0) mean(dnorm((q0 - x) / h)) / h, 1),
                  E - rowMeans(E), 0.8, FALSE)
  ref[, "lwr"] <- pmax(ref[, "lwr"], 0)
  expect_equal(band, ref, tolerance = 1e-6)
})

test_that("bootstrap bands are the same for 1 and 2 threads with the same seed", {
  fit <- local_poly(dist ~ speed, cars, bandwidth = 4)
  band <- function(threads) {
    set.seed(5)
    predict(fit, interval = "bootstrap", B = 29, simultaneous = TRUE, n_threads = threads,
            verbose = FALSE)
  }
  one <- band(1)
  expect_equal(dim(one), c(nrow(cars), 3L))
  expect_identical(one, band(2))
  k <- kde(faithful$waiting, bandwidth = 4)
  kband <- function(threads) {
    set.seed(5)
    predict(k, c(50, 70, 80), interval = "bootstrap", B = 19, n_threads = threads,
            verbose = FALSE)
  }
  expect_identical(kband(1), kband(2))
})

test_that("bootstrap bands are the same under a future plan", {
  skip_on_cran()
  skip_if_not_installed("future")
  skip_if_not_installed("future.apply")
  fit <- local_poly(carb ~ wt, mtcars, family = "poisson", bandwidth = 1.5)
  band <- function() {
    set.seed(6)
    predict(fit, data.frame(wt = c(2, 3, 4)), interval = "bootstrap", B = 39, verbose = FALSE)
  }
  plain <- band()
  old <- future::plan(future::multisession, workers = 2)
  on.exit(future::plan(old), add = TRUE)
  expect_identical(band(), plain)
})

test_that("bootstrap bands take categorical predictors and give bootstrap.sd", {
  fit <- local_poly(mpg ~ wt + factor(cyl), mtcars, bandwidth = c(1, 0.2))
  set.seed(7)
  res <- predict(fit, data.frame(wt = 3, cyl = c(4, 8)), interval = "bootstrap", B = 19,
                 simultaneous = TRUE, se.fit = TRUE, verbose = FALSE)
  expect_equal(colnames(res$fit), c("fit", "lwr", "upr"))
  expect_true(all(res$fit[, "lwr"] < res$fit[, "fit"] & res$fit[, "fit"] < res$fit[, "upr"]))
  expect_equal(res$fit[, "upr"] - res$fit[, "fit"], res$critical * res$bootstrap.sd)
})

test_that("bootstrap bands refuse bad input with classed errors", {
  fit <- local_poly(dist ~ speed, cars, bandwidth = 4)
  new <- data.frame(speed = 10)
  expect_error(predict(fit, new, interval = "bootstrap", B = 10), "at least 19",
               class = "localmean_error")
  expect_error(predict(fit, new, interval = "bootstrap", B = 99.5), class = "localmean_error")
  expect_error(predict(fit, new, B = 99), "interval", class = "localmean_error")
  expect_error(predict(fit, new, interval = "prediction", simultaneous = TRUE),
               class = "localmean_error")
  pois <- local_poly(carb ~ wt, mtcars, family = "quasipoisson", bandwidth = 2)
  expect_error(predict(pois, data.frame(wt = 3), interval = "bootstrap", B = 19),
               class = "localmean_error_bootstrap")
  k <- kde(faithful$waiting, bandwidth = nn(20))
  expect_error(predict(k, 70, interval = "bootstrap", B = 19), class = "localmean_error_bootstrap")
  expect_error(predict(kde(faithful$waiting), 70, B = 19), "interval", class = "localmean_error")
  expect_error(predict(kde(faithful$waiting), 70, interval = "bootstrap", B = 5),
               class = "localmean_error")
})
