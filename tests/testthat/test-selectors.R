# The bandwidth-selector list (R/selectors.R): one shape, one place, every family.

test_that("every selector has the documented shape and the families list theirs", {
  sels <- localmean:::bandwidth_selectors
  for (s in sels) {
    expect_named(s, c("name", "families", "select", "max_d", "applies"))
    expect_true(all(s$families %in% c("regression", "classification", "density", "modes",
                                      "conditional")))
    expect_true(is.function(s$select) && is.function(s$applies))
  }
  names_of <- localmean:::selector_names
  expect_setequal(names_of("regression"), c("cv", "gcv", "aicc", "rot", "plugin"))
  expect_setequal(names_of("classification"), c("cv", "rot"))
  expect_setequal(names_of("density"), c("rot", "plugin", "lscv", "scv", "mlcv", "isj"))
  expect_identical(names_of("modes"), c("auto", "plugin"))
  expect_identical(names_of("conditional"), c("rot", "mlcv", "lscv"))
})

test_that("a selector's result is what the family's fit uses", {
  set.seed(3)
  x <- rnorm(200)
  y <- x^2 + rnorm(200, sd = 0.3)
  for (sel in c("rot", "plugin", "lscv", "scv", "isj")) {
    expect_equal(unname(kde(x, bandwidth = sel, gridsize = 0, verbose = FALSE)$bandwidth$h),
                 unname(kde_bandwidth(x, bandwidth = sel)), info = sel)
  }
  fit <- local_poly(x, y, bandwidth = "gcv", verbose = FALSE)
  curve <- fit$cv_curve
  expect_named(curve, c("x", "score"))
  # the chosen bandwidth is at the curve's minimum (refined between its grid neighbours)
  best <- which.min(curve$score)
  expect_gte(fit$bandwidth, curve$x[max(best - 1L, 1L)])
  expect_lte(fit$bandwidth, curve$x[min(best + 1L, nrow(curve))])
  x2 <- cbind(x, rnorm(200))
  h <- localmean:::run_selector("auto", "modes", list(x = x2, kernel = "gaussian",
                                                      weights = NULL, n_threads = 1L))$bandwidth
  expect_equal(mean_shift(x2, verbose = FALSE)$bandwidth, h)
})

test_that("selectors outside their family or dimension are clear errors", {
  x2 <- matrix(rnorm(100), ncol = 2)
  expect_error(kde_bandwidth(x2, bandwidth = "isj"), "one dimension", class = "localmean_error")
  expect_error(local_poly(x2, rnorm(50), bandwidth = "plugin", verbose = FALSE),
               "one dimension", class = "localmean_error")
  expect_error(local_classify(x2, factor(rep(1:2, 25)), bandwidth = "aicc", verbose = FALSE),
               "cv", class = "localmean_error")
  expect_error(mean_shift(x2, bandwidth = "lscv"), "auto", class = "localmean_error")
  expect_error(kde(x2, bandwidth = "auto"), "bandwidth", class = "localmean_error")
})
