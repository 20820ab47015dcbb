# Confidence bands: pointwise and simultaneous (tube formula), constant and local variance.

# Equivalent-kernel weights of the Gaussian local mean (degree 0) or local linear fit (degree 1)
# at the points `at` (one row per point): l_i(x) = K_i / S0, or K_i (S2 - (x_i - x) S1) /
# (S0 S2 - S1^2) with S_j = sum_i K_i (x_i - x)^j.
gaussian_weights_ref <- function(x, at, h, degree) {
  t(vapply(at, function(q) {
    k <- dnorm((x - q) / h)
    if (degree == 0) return(k / sum(k))
    s1 <- sum(k * (x - q))
    s2 <- sum(k * (x - q)^2)
    k * (s2 - (x - q) * s1) / (sum(k) * s2 - s1^2)
  }, numeric(length(x))))
}

# Unit vectors T(x) = l(x) / ||l(x)|| (rows) of a weight function.
unit_rows <- function(l) l / sqrt(rowSums(l^2))

# kappa0 = integral of ||dT/dx|| over [a, b]: central differences and integrate().
kappa0_ref <- function(weights, a, b, delta = 1e-5) {
  speed <- function(u) {
    vapply(u, function(q) {
      tt <- unit_rows(weights(c(q - delta, q + delta)))
      sqrt(sum((tt[2, ] - tt[1, ])^2)) / (2 * delta)
    }, 1)
  }
  integrate(speed, a, b, rel.tol = 1e-8, subdivisions = 1000)$value
}

test_that("pointwise bands are fit +- the t (or normal) quantile times se.fit", {
  fit <- local_poly(dist ~ speed, cars, bandwidth = 4, verbose = FALSE)
  nd <- data.frame(speed = c(4, 10.5, 20, 25))
  p <- predict(fit, nd, se.fit = TRUE)
  for (level in c(0.9, 0.95)) {
    band <- predict(fit, nd, interval = "confidence", level = level)
    expect_equal(colnames(band), c("fit", "lwr", "upr"))
    q <- qt(1 - (1 - level) / 2, df = nrow(cars) - fit$df)
    expect_equal(band[, "fit"], p$fit, tolerance = 1e-12)
    expect_equal(band[, "lwr"], p$fit - q * p$se.fit, tolerance = 1e-12)
    expect_equal(band[, "upr"], p$fit + q * p$se.fit, tolerance = 1e-12)
  }
  full <- predict(fit, nd, interval = "confidence", se.fit = TRUE)
  expect_named(full, c("fit", "se.fit", "df", "residual.scale", "critical"))
  expect_equal(full$se.fit, p$se.fit)
  expect_equal(full$critical, qt(0.975, nrow(cars) - fit$df))
  # the fitted values' band, and a derivative's band with one predictor
  expect_equal(predict(fit, interval = "confidence")[, "fit"], unname(fitted(fit)))
  d1 <- predict(fit, nd, deriv = 1, se.fit = TRUE)
  b1 <- predict(fit, nd, deriv = 1, interval = "confidence")
  expect_equal(b1[, "upr"] - b1[, "fit"], qt(0.975, nrow(cars) - fit$df) * d1$se.fit)
  # local variance: t quantiles with the local degrees of freedom
  loc <- predict(fit, nd, interval = "confidence", variance = "local", se.fit = TRUE)
  expect_equal(loc$fit[, "upr"] - loc$fit[, "fit"], qt(0.975, loc$df) * loc$se.fit)
})

test_that("the local variance is the local mean of leverage-corrected squared residuals", {
  set.seed(3)
  x <- sort(runif(40))
  y <- x + rnorm(40, sd = 0.05 + 0.5 * x)
  h <- 0.12
  at <- c(0.1, 0.5, 0.9)
  for (degree in 0:1) {
    fit <- local_poly(x, y, degree = degree, bandwidth = h, verbose = FALSE)
    L <- gaussian_weights_ref(x, x, h, degree)
    r <- y - drop(L %*% y)
    corrected <- r^2 / (1 - 2 * diag(L) + rowSums(L^2))
    k <- outer(at, x, function(q, xi) dnorm((xi - q) / h))
    sigma2 <- drop(k %*% corrected) / rowSums(k)
    la <- gaussian_weights_ref(x, at, h, degree)
    p <- predict(fit, at, se.fit = TRUE, variance = "local")
    expect_equal(p$residual.scale, sqrt(sigma2), tolerance = 1e-8, info = degree)
    expect_equal(p$se.fit, sqrt(sigma2 * rowSums(la^2)), tolerance = 1e-8, info = degree)
    expect_equal(p$df, rowSums(k)^2 / rowSums(k^2), tolerance = 1e-8, info = degree)
  }
})

test_that("kappa0 matches a brute-force equivalent kernel in 1-D (degrees 0 and 1)", {
  set.seed(4)
  x <- runif(30, 0, 2)
  y <- rnorm(30)
  for (degree in 0:1) {
    for (h in c(0.15, 0.4)) {
      fit <- local_poly(x, y, degree = degree, bandwidth = h, verbose = FALSE)
      ours <- localmean:::tube_constants(fit, min(x), max(x))
      ref <- kappa0_ref(function(at) gaussian_weights_ref(x, at, h, degree), min(x), max(x))
      expect_equal(ours$kappa0, ref, tolerance = 1e-5, info = paste(degree, h))
      expect_identical(ours$zeta0, 0)
    }
  }
})

test_that("kappa0 and zeta0 match a brute-force local mean in 2-D", {
  set.seed(5)
  x <- matrix(runif(40), ncol = 2)
  h <- 0.2
  weights <- function(at) {
    k <- dnorm((outer(at[, 1], x[, 1], "-")) / h) * dnorm((outer(at[, 2], x[, 2], "-")) / h)
    k / rowSums(k)
  }
  fit <- local_mean(x, rnorm(20), bandwidth = h, verbose = FALSE)
  lo <- apply(x, 2, min)
  hi <- apply(x, 2, max)
  ours <- localmean:::tube_constants(fit, lo, hi, grid_size = 60)
  # area: midpoint rule of sqrt(det G), G the Gram matrix of the central-difference partials
  g <- 100
  mid <- function(j) lo[j] + (seq_len(g) - 0.5) * (hi[j] - lo[j]) / g
  pts <- as.matrix(expand.grid(mid(1), mid(2)))
  delta <- 1e-5
  partial <- function(j) {
    step <- matrix(0, nrow(pts), 2)
    step[, j] <- delta
    (unit_rows(weights(pts + step)) - unit_rows(weights(pts - step))) / (2 * delta)
  }
  d1 <- partial(1)
  d2 <- partial(2)
  element <- sqrt(rowSums(d1^2) * rowSums(d2^2) - rowSums(d1 * d2)^2)
  area <- sum(element) * prod(hi - lo) / g^2
  expect_equal(ours$kappa0, area, tolerance = 1e-3)
  # boundary: the four edges as 1-D curves
  edge <- function(from, to) {
    speed <- function(s) {
      vapply(s, function(u) {
        p0 <- rbind(from + (u - delta) * (to - from), from + (u + delta) * (to - from))
        tt <- unit_rows(weights(p0))
        sqrt(sum((tt[2, ] - tt[1, ])^2)) / (2 * delta)
      }, 1)
    }
    integrate(speed, 0, 1, rel.tol = 1e-8, subdivisions = 1000)$value
  }
  corners <- list(lo, c(hi[1], lo[2]), hi, c(lo[1], hi[2]))
  zeta <- sum(vapply(1:4, function(i) edge(corners[[i]], corners[[i %% 4 + 1]]), 1))
  expect_equal(ours$zeta0, zeta, tolerance = 1e-5)
})

test_that("the tube tail's Student terms are the Gaussian terms averaged over s", {
  df <- 12
  kappa0 <- 5
  zeta0 <- 3
  s_density <- function(s) 2 * s * df * dchisq(df * s^2, df)  # s^2 ~ chi^2_df / df
  for (d in 1:2) {
    for (c in c(2, 3)) {
      averaged <- integrate(function(s) {
        localmean:::tube_tail(c * s, kappa0, zeta0, d) * s_density(s)
      }, 0, Inf)$value
      expect_equal(localmean:::tube_tail(c, kappa0, zeta0, d, df), averaged, tolerance = 1e-7)
    }
  }
})

test_that("kappa0 and the normal critical value agree with locfit", {
  skip_if_not_installed("locfit")
  # locfit::kappa0() evaluates locfit() by name, so it must be attached
  if (!"package:locfit" %in% search()) {
    suppressPackageStartupMessages(library(locfit))
    on.exit(detach("package:locfit"), add = TRUE)
  }
  h <- 4
  fit <- local_poly(dist ~ speed, cars, bandwidth = h, verbose = FALSE)
  ours <- localmean:::tube_constants(fit, min(cars$speed), max(cars$speed))
  # locfit's "gauss" kernel is exp(-(2.5 u)^2 / 2) on its bandwidth: ours times 2.5
  theirs <- locfit::kappa0(dist ~ speed, data = cars, alpha = c(0, 2.5 * h), deg = 1,
                           kern = "gauss")
  expect_equal(ours$kappa0, theirs$const[1], tolerance = 1e-4)
  expect_equal(localmean:::band_critical(0.95, Inf, ours),
               locfit::crit(const = theirs$const, d = 1, cov = 0.95)$crit.val,
               tolerance = 1e-4)
})

test_that("pointwise and simultaneous bands have their coverage on a curve without bias", {
  # a linear truth and local linear fits: no bias, so the bands' errors are exactly Gaussian
  set.seed(6)
  n <- 100
  x <- seq(0, 1, length.out = n)
  truth <- function(u) 1 + 2 * u
  grid <- seq(0, 1, length.out = 201)
  reps <- 300
  sup <- pointwise <- numeric(reps)
  critical <- quantile <- NA
  for (r in seq_len(reps)) {
    fit <- local_poly(x, truth(x) + rnorm(n, sd = 0.5), bandwidth = 0.08, verbose = FALSE)
    band <- predict(fit, grid, interval = "confidence", simultaneous = TRUE, se.fit = TRUE)
    z <- abs(band$fit[, "fit"] - truth(grid)) / band$se.fit
    quantile <- qt(0.975, band$df)
    sup[r] <- max(z)
    pointwise[r] <- mean(z <= quantile)
    critical <- band$critical
  }
  expect_equal(mean(pointwise), 0.95, tolerance = 0.02 / 0.95)
  expect_equal(mean(sup <= critical), 0.95, tolerance = 0.04 / 0.95)
  # the pointwise quantile would cover the whole line far less often
  expect_lt(mean(sup <= quantile), 0.85)
})

test_that("bands refuse what they cannot do, naming the argument", {
  fit <- local_poly(dist ~ speed, cars, bandwidth = 4, verbose = FALSE)
  expect_error(predict(fit, interval = "tolerance"), class = "localmean_error",
               regexp = "interval")
  expect_error(predict(fit, interval = "confidence", level = 95), class = "localmean_error",
               regexp = "level")
  expect_error(predict(fit, simultaneous = TRUE), class = "localmean_error",
               regexp = "interval")
  expect_error(predict(fit, variance = "robust"), class = "localmean_error", regexp = "variance")
  knn <- local_poly(dist ~ speed, cars, bandwidth = nn(15), verbose = FALSE)
  expect_error(predict(knn, interval = "confidence", simultaneous = TRUE),
               class = "localmean_error", regexp = "nn")
  box <- local_poly(dist ~ speed, cars, kernel = "uniform", bandwidth = 6, verbose = FALSE)
  expect_error(predict(box, interval = "confidence", simultaneous = TRUE),
               class = "localmean_error", regexp = "uniform")
  three <- local_poly(mpg ~ wt + hp + qsec, mtcars, bandwidth = c(1, 60, 2), verbose = FALSE)
  expect_error(predict(three, interval = "confidence", simultaneous = TRUE),
               class = "localmean_error", regexp = "two predictors")
  two <- local_poly(mpg ~ wt + hp, mtcars, bandwidth = c(1, 60), verbose = FALSE)
  expect_error(predict(two, interval = "confidence", deriv = 1), class = "localmean_error",
               regexp = "deriv")
  # knn pointwise bands work
  expect_true(all(is.finite(predict(knn, interval = "confidence"))))
})

test_that("plot() draws the pointwise and simultaneous bands", {
  fit <- local_poly(dist ~ speed, cars, bandwidth = 4, verbose = FALSE)
  file <- tempfile(fileext = ".png")
  grDevices::png(file)
  on.exit(unlink(file))
  expect_invisible(plot(fit, simultaneous = TRUE, level = 0.9))
  grDevices::dev.off()
  expect_gt(file.size(file), 0)
})
