# Output-aware local means: self_local_regression() (R/self-local.R).

# Plain-R reference of the iteration at x0 (levels g0): weights prior * K((x0, m), (x_i, y_i)) *
# Aitchison-Aitken(g0, g_i), the kernel radial in ((x - x0) / h, (y - m) / hy), started from
# the local mean and stopped when a step is at most tol * hy; `out` leaves a point out.
self_local_ref <- function(x, y, x0, h, hy, kernel = "gaussian", g = NULL, g0 = NULL,
                           lambda = 0, w = rep(1, length(y)), out = 0L, max_iter = 100,
                           tol = 1e-6) {
  profile <- switch(kernel, gaussian = function(r2) exp(-r2 / 2),
                    epanechnikov = function(r2) pmax(0, 1 - r2))
  levels_w <- if (is.null(g)) 1 else ifelse(g == g0, 1 - lambda, lambda / (nlevels(g) - 1))
  base <- w * levels_w
  if (out) base[out] <- 0
  m <- sum(base * profile(((x - x0) / h)^2) * y) / sum(base * profile(((x - x0) / h)^2))
  for (i in seq_len(max_iter)) {
    k <- base * profile(((x - x0) / h)^2 + ((y - m) / hy)^2)
    new <- sum(k * y) / sum(k)
    done <- abs(new - m) <= tol * hy
    m <- new
    if (done) break
  }
  m
}

step_data <- function(n = 200, seed = 1) {
  set.seed(seed)
  x <- (seq_len(n) - 0.5) / n
  truth <- ifelse(x < 0.5, 0, 1)
  data.frame(x = x, y = truth + rnorm(n, sd = 0.2), truth = truth)
}

test_that("the output-aware local mean equals a plain-R iteration at fixed bandwidths", {
  d <- step_data(80)
  fit <- self_local_regression(y ~ x, data = d, bandwidth = c(0.06, 0.2), verbose = FALSE)
  ref <- vapply(d$x, function(x0) self_local_ref(d$x, d$y, x0, 0.06, 0.2), 1)
  expect_equal(fitted(fit), ref, tolerance = 1e-10)
  expect_equal(residuals(fit), d$y - ref, tolerance = 1e-10)
  at <- c(0.2, 0.48, 0.52, 0.9)
  expect_equal(predict(fit, data.frame(x = at)),
               vapply(at, function(x0) self_local_ref(d$x, d$y, x0, 0.06, 0.2), 1),
               tolerance = 1e-10)
  loo <- vapply(seq_along(d$x), function(i) self_local_ref(d$x, d$y, d$x[i], 0.06, 0.2, out = i),
                1)
  expect_equal(fit$cv, mean((d$y - loo)^2), tolerance = 1e-10)
  expect_identical(predict(self_local_regression(y ~ x, data = d, bandwidth = c(0.06, 0.2),
                                                 n_threads = 2, verbose = FALSE),
                           data.frame(x = at)), predict(fit, data.frame(x = at)))
})

test_that("the joint kernel is radial in (x, y), with levels and prior weights", {
  d <- step_data(60, seed = 2)
  d$g <- factor(rep(c("a", "b", "c"), 20))
  d$w <- rep(c(1, 2), 30)
  fit <- self_local_regression(y ~ x + g, data = d, kernel = "epanechnikov",
                               bandwidth = c(0.15, 0.3, 0.4), weights = w, verbose = FALSE)
  ref <- vapply(seq_len(nrow(d)), function(i) {
    self_local_ref(d$x, d$y, d$x[i], 0.15, 0.4, "epanechnikov", d$g, d$g[i], 0.3, d$w)
  }, 1)
  expect_equal(fitted(fit), ref, tolerance = 1e-10)
  loo <- vapply(seq_len(nrow(d)), function(i) {
    self_local_ref(d$x, d$y, d$x[i], 0.15, 0.4, "epanechnikov", d$g, d$g[i], 0.3, d$w, out = i)
  }, 1)
  expect_equal(fit$cv, sum(d$w * (d$y - loo)^2) / sum(d$w), tolerance = 1e-10)
  expect_equal(predict(fit, data.frame(x = c(0.3, NA), g = c("b", "a"))),
               c(self_local_ref(d$x, d$y, 0.3, 0.15, 0.4, "epanechnikov", d$g, "b", 0.3, d$w),
                 NA))
})

test_that("it keeps a jump sharper than the local mean and the local linear fit", {
  d <- step_data(200)
  fit <- self_local_regression(y ~ x, data = d, bandwidth = c(0.05, 0.2), verbose = FALSE)
  plain <- local_mean(y ~ x, data = d, bandwidth = 0.05)
  linear <- local_poly(y ~ x, data = d, bandwidth = 0.05)
  near <- abs(d$x - 0.5) < 0.1
  error <- function(f) mean((f - d$truth)[near]^2)
  expect_lt(error(fitted(fit)), error(fitted(plain)) / 10)
  expect_lt(error(fitted(fit)), error(fitted(linear)) / 10)
  # a huge response bandwidth gives back the local mean
  wide <- self_local_regression(y ~ x, data = d, bandwidth = c(0.05, 1e4), verbose = FALSE)
  expect_equal(fitted(wide), fitted(plain), tolerance = 1e-6)
})

test_that("cross-validated bandwidths and the methods", {
  skip_on_cran()
  d <- step_data(60, seed = 3)
  fit <- self_local_regression(y ~ x, data = d, verbose = FALSE)
  expect_equal(fit$bandwidth_method, "cv")
  for (bw in list(c(0.05, 0.2), c(0.2, 1))) {
    expect_lte(fit$cv, self_local_regression(y ~ x, data = d, bandwidth = bw,
                                             verbose = FALSE)$cv)
  }
  expect_output(print(fit), "output-aware local mean")
  expect_output(print(summary(fit)), "Converged")
  expect_equal(tidy(fit)$term, c("x", "y"))
  expect_equal(glance(fit)$cv, fit$cv)
  aug <- augment(fit)
  expect_equal(aug$.fitted, fitted(fit))
  expect_equal(aug$.resid, residuals(fit))
  expect_equal(augment(fit, newdata = data.frame(x = 0.3))$.fitted,
               predict(fit, data.frame(x = 0.3)))
  expect_equal(nobs(fit), 60L)
  expect_silent(plot(fit))
  skip_if_not_installed("ggplot2")
  p <- ggplot2::autoplot(fit, n_grid = 50)
  expect_s3_class(p, "ggplot")
  expect_equal(p$data$.fitted[1:50], predict(fit, data.frame(x = seq(min(d$x), max(d$x),
                                                                     length.out = 50))))
})

test_that("bad input gets classed errors", {
  d <- step_data(40)
  expect_error(self_local_regression(y ~ x, data = d, bandwidth = c(0.1, 0), verbose = FALSE),
               class = "localmean_error", "response")
  expect_error(self_local_regression(y ~ x, data = d, bandwidth = 0.1, verbose = FALSE),
               class = "localmean_error", "bandwidth")
  d$f <- factor(d$y > 0.5)
  expect_error(self_local_regression(f ~ x, data = d, verbose = FALSE),
               class = "localmean_error", "numeric")
  expect_error(self_local_regression(y ~ x, data = d, max_iter = 0, verbose = FALSE),
               class = "localmean_error", "max_iter")
  fit <- self_local_regression(y ~ x, data = d, bandwidth = c(0.1, 0.2), verbose = FALSE)
  expect_error(plot(self_local_regression(y ~ x + f, data = d, bandwidth = c(0.1, 0.1, 0.2),
                                          verbose = FALSE)), class = "localmean_error")
  expect_error(predict(fit, data.frame(z = 1)), class = "localmean_error")
})

test_that("named bandwidths are matched to the variables", {
  a <- self_local_regression(dist ~ speed, cars, bandwidth = c(dist = 10, speed = 3),
                             verbose = FALSE)
  b <- self_local_regression(dist ~ speed, cars, bandwidth = c(3, 10), verbose = FALSE)
  expect_identical(fitted(a), fitted(b))
  expect_error(self_local_regression(dist ~ speed, cars, bandwidth = c(d = 10, speed = 3)),
               "names of `bandwidth`", class = "localmean_error")
})

test_that("local_self keeps the prior weights as given; predict() takes threads and progress", {
  w <- rep(c(1, 3), length.out = nrow(cars))
  fit <- self_local_regression(dist ~ speed, cars, bandwidth = c(4, 15), weights = w,
                               verbose = FALSE)
  expect_identical(weights(fit), w)
  scaled <- self_local_regression(dist ~ speed, cars, bandwidth = c(4, 15), weights = 10 * w,
                                  verbose = FALSE)
  expect_equal(fitted(scaled), fitted(fit), tolerance = 1e-12)
  expect_equal(scaled$cv, fit$cv, tolerance = 1e-12)
  new <- data.frame(speed = c(7, 15, 22))
  expect_identical(predict(fit, new, n_threads = 2, verbose = FALSE),
                   predict(fit, new, n_threads = 1))
  expect_error(predict(fit, new, n_threads = 0), "n_threads", class = "localmean_error")
})
