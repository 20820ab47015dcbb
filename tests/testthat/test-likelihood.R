# The local likelihood (R/likelihood.R, likelihood_solve() in engine.hpp): per-query glm()
# references with kernel weights, influence, responses as glm takes them, separation.

# The local fit at q by glm() with kernel weights K((x - q) / h) (Gaussian) and prior weights.
local_glm_ref <- function(x, y, q, h, degree, family, prior = 1) {
  w <- prior * dnorm((x - q) / h)
  u <- x - q
  design <- if (degree == 0) matrix(1, length(x)) else cbind(1, outer(u, seq_len(degree), `^`))
  g <- suppressWarnings(glm.fit(design, y, weights = w, family = family,
                                control = glm.control(epsilon = 1e-14, maxit = 100)))
  list(eta = g$coefficients[[1]], design = design, w = w, mu = g$fitted.values)
}

set.seed(11)
n <- 300
xb <- runif(n)
yb <- rbinom(n, 1, plogis(3 * sin(2 * pi * xb)))
xp <- runif(n)
yp <- rpois(n, exp(1 + sin(2 * pi * xp)))

test_that("local logistic and Poisson fits equal per-query glm() with kernel weights", {
  q <- c(0.1, 0.37, 0.8)
  for (degree in 0:2) {
    fb <- local_poly(xb, yb, degree = degree, family = "binomial", bandwidth = 0.15,
                     verbose = FALSE)
    refb <- vapply(q, function(v) local_glm_ref(xb, yb, v, 0.15, degree, binomial())$eta, 1)
    expect_equal(predict(fb, q, type = "link"), refb, tolerance = 1e-6, info = degree)
    expect_equal(predict(fb, q), plogis(refb), tolerance = 1e-6)
    fp <- local_poly(xp, yp, degree = degree, family = poisson(), bandwidth = 0.1,
                     verbose = FALSE)
    refp <- vapply(q, function(v) local_glm_ref(xp, yp, v, 0.1, degree, poisson())$eta, 1)
    expect_equal(predict(fp, q, type = "link"), refp, tolerance = 1e-6, info = degree)
  }
})

test_that("leverages are the influence diagonal and standard errors the sandwich", {
  fit <- local_poly(xp, yp, family = "poisson", bandwidth = 0.1, verbose = FALSE)
  i <- 17
  ref <- local_glm_ref(xp, yp, xp[i], 0.1, 1, poisson())
  X <- ref$design
  info <- crossprod(X, (ref$w * ref$mu) * X)
  # the point's own weight is K(0) = dnorm(0) here; the leverage does not depend on K's scale
  expect_equal(fit$leverage[i], dnorm(0) * ref$mu[i] * solve(info)[1, 1], tolerance = 1e-6)
  k <- dnorm((xp - xp[i]) / 0.1)
  middle <- crossprod(X, (k * ref$w * ref$mu) * X)
  sandwich <- solve(info, middle) %*% solve(info)
  se <- predict(fit, xp[i], type = "link", se.fit = TRUE)$se.fit
  expect_equal(se, sqrt(sandwich[1, 1]), tolerance = 1e-6)
  expect_equal(fit$df, sum(fit$leverage))
})

test_that("binomial responses: 0/1, logical, factor, proportions with trials, matrix", {
  base <- local_poly(xb, yb, family = "binomial", bandwidth = 0.2, verbose = FALSE)
  lgl <- local_poly(xb, yb == 1, family = "binomial", bandwidth = 0.2, verbose = FALSE)
  fac <- local_poly(xb, factor(yb, labels = c("no", "yes")), family = binomial,
                    bandwidth = 0.2, verbose = FALSE)
  expect_equal(fitted(lgl), fitted(base))
  expect_equal(fitted(fac), fitted(base))
  trials <- rep(c(1, 3), length.out = n)
  succ <- rbinom(n, trials, 0.4)
  prop <- local_poly(xb, succ / trials, weights = trials, family = "binomial",
                     bandwidth = 0.2, verbose = FALSE)
  df <- data.frame(x = xb, s = succ, f = trials - succ)
  mat <- local_poly(cbind(s, f) ~ x, data = df, family = "binomial", bandwidth = 0.2,
                    verbose = FALSE)
  expect_equal(unname(fitted(mat)), unname(fitted(prop)))
  ref <- local_glm_ref(xb, succ / trials, 0.5, 0.2, 1, binomial(), prior = trials)
  expect_equal(predict(prop, 0.5, type = "link"), ref$eta, tolerance = 1e-6)
  expect_error(local_poly(xb, yb + 1, family = "binomial", bandwidth = 0.2, verbose = FALSE),
               class = "localmean_error", regexp = "\\[0, 1\\]")
  expect_error(local_poly(xp, -yp, family = "poisson", bandwidth = 0.2, verbose = FALSE),
               class = "localmean_error", regexp = "non-negative")
  expect_error(local_poly(xb, yb, family = binomial("probit"), bandwidth = 0.2,
                          verbose = FALSE), class = "localmean_error", regexp = "canonical")
  expect_error(local_poly(xb, yb, family = "gamma", bandwidth = 0.2, verbose = FALSE),
               class = "localmean_error", regexp = "family")
})

test_that("deviance, logLik, AIC, residuals and dispersion follow glm's definitions", {
  fit <- local_poly(xp, yp, family = "poisson", bandwidth = 0.1, verbose = FALSE)
  mu <- fitted(fit)
  expect_equal(deviance(fit), sum(poisson()$dev.resids(yp, mu, 1)))
  expect_equal(as.numeric(logLik(fit)), sum(dpois(yp, mu, log = TRUE)))
  expect_equal(AIC(fit), -2 * sum(dpois(yp, mu, log = TRUE)) + 2 * fit$df)
  expect_equal(sum(residuals(fit)^2), deviance(fit))
  expect_equal(residuals(fit, type = "pearson"), (yp - mu) / sqrt(mu))
  expect_equal(residuals(fit, type = "response"), yp - mu)
  expect_equal(sigma(fit), 1)
  expect_equal(df.residual(fit), n - fit$df)
  quasi <- local_poly(xp, yp, family = "quasipoisson", bandwidth = 0.1, verbose = FALSE)
  expect_equal(fitted(quasi), mu)
  expect_equal(sigma(quasi)^2, sum((yp - mu)^2 / mu) / (n - fit$df))
  expect_true(is.na(logLik(quasi)))
  expect_output(print(fit), "Family +: poisson")
  expect_output(print(summary(fit)), "Deviance")
})

test_that("separated windows give NA with a warning; the rest is fitted", {
  x <- seq(0, 1, length.out = 200)
  y <- as.integer(x > 0.5)
  expect_warning(fit <- local_poly(x, y, family = "binomial", bandwidth = 0.03,
                                   verbose = FALSE), class = "localmean_warning",
                 regexp = "no maximum")
  expect_true(anyNA(fitted(fit)))
  noisy <- rbinom(200, 1, 0.3 + 0.4 * x)
  expect_no_warning(ok <- local_poly(x, noisy, family = "binomial", bandwidth = 0.2,
                                     verbose = FALSE))
  expect_false(anyNA(fitted(ok)))
})

test_that("local likelihood fits do not depend on the thread count", {
  one <- local_poly(xp, yp, family = "poisson", bandwidth = 0.05, n_threads = 1,
                    verbose = FALSE)
  two <- local_poly(xp, yp, family = "poisson", bandwidth = 0.05, n_threads = 2,
                    verbose = FALSE)
  expect_identical(fitted(one), fitted(two))
  expect_identical(one$leverage, two$leverage)
})

test_that("the binomial cv bandwidth is near the minimum of the exact LOO deviance", {
  # Our score is the one-step approximation of leave-one-out (see likelihood_cv()); the exact
  # criterion refits without each point. The chosen bandwidth must be nearly as good under it.
  set.seed(13)
  n <- 120
  x <- runif(n)
  y <- rbinom(n, 1, plogis(3 * sin(2 * pi * x)))
  exact_loo <- function(h) {
    dev <- vapply(seq_len(n), function(i) {
      ref <- local_glm_ref(x[-i], y[-i], x[i], h, 1, binomial())
      p <- plogis(ref$eta)
      -2 * (y[i] * log(p) + (1 - y[i]) * log(1 - p))
    }, 1)
    mean(dev)
  }
  best <- stats::optimize(exact_loo, c(0.03, 1))$objective
  fit <- local_poly(x, y, family = "binomial", bandwidth = "cv", verbose = FALSE)
  expect_lte(exact_loo(fit$bandwidth), 1.02 * best)
})
