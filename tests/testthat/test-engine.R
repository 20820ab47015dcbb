# The local-moment engine (R/engine.R): local_control(), strategies (exact, tree, binned),
# truncation, thread invariance and the future path.

test_that("local_control() validates its arguments", {
  ctrl <- local_control()
  expect_s3_class(ctrl, "local_control")
  expect_null(ctrl$gridsize)
  expect_null(ctrl$cutoff)
  expect_true(ctrl$refine)
  expect_identical(local_control(gridsize = c(101, 51))$gridsize, c(101L, 51L))
  expect_error(local_control(gridsize = 2), class = "localmean_error", regexp = "gridsize")
  expect_error(local_control(gridsize = 10.5), class = "localmean_error", regexp = "gridsize")
  for (bad in list(0, -1, Inf, NA_real_, c(1, 2), "4")) {
    expect_error(local_control(cutoff = bad), class = "localmean_error", regexp = "cutoff")
  }
  expect_error(local_control(candidates = numeric(0)), class = "localmean_error",
               regexp = "candidates")
  expect_error(local_control(candidates = "0.1"), class = "localmean_error",
               regexp = "candidates")
  expect_error(local_control(n_candidates = 1), class = "localmean_error",
               regexp = "n_candidates")
  expect_error(local_control(refine = "yes"), class = "localmean_error", regexp = "refine")
  expect_error(local_control(chunk_size = 0), class = "localmean_error", regexp = "chunk_size")
  old <- options(localmean.chunk_size = 123)
  on.exit(options(old), add = TRUE)
  expect_identical(local_control()$chunk_size, 123L)
})

test_that("method = 'auto' picks tree, exact for the Cauchy, binned for large 1-D data", {
  d <- make_data_1d(200)
  expect_identical(local_poly(d$x, d$y, bandwidth = 0.02, verbose = FALSE)$spec$method, "tree")
  # a kernel reach that spans the data (8 Gaussian bandwidths of 0.1 each way on [0, 1]): the
  # tree would prune nothing, and every point is swept (issue 30, defect 7: 5-D)
  expect_identical(local_poly(d$x, d$y, bandwidth = 0.1, verbose = FALSE)$spec$method, "exact")
  set.seed(5)
  x5 <- matrix(rnorm(500), ncol = 5)
  y5 <- rowSums(x5) + rnorm(100)
  expect_identical(local_poly(x5, y5, bandwidth = rep(1, 5))$spec$method, "exact")
  expect_identical(localmean:::engine_spec(x5, "epanechnikov", rep(2, 5))$method, "tree")
  expect_equal(fitted(local_poly(x5, y5, bandwidth = rep(1, 5))),
               fitted(local_poly(x5, y5, bandwidth = rep(1, 5), method = "tree")),
               tolerance = 1e-12)
  expect_identical(local_poly(d$x, d$y, kernel = "cauchy", bandwidth = 0.1,
                              verbose = FALSE)$spec$method, "exact")
  expect_identical(local_poly(d$x, d$y, kernel = "cauchy", bandwidth = 0.1, method = "tree",
                              verbose = FALSE)$spec$method, "exact")
  big <- make_data_1d(10000)
  expect_identical(local_mean(big$x, big$y, bandwidth = 0.05, verbose = FALSE)$spec$method,
                   "binned")
  # a small bandwidth refines the default 1-D grid to four nodes per bandwidth
  small <- local_mean(big$x, big$y, bandwidth = 0.001, verbose = FALSE)
  expect_identical(small$spec$method, "binned")
  expect_gte(small$spec$gridsize, 4 * diff(range(big$x)) / 0.001)
  # too small a bandwidth for a grid the user fixed: tree
  expect_identical(local_mean(big$x, big$y, bandwidth = 0.001, verbose = FALSE,
                              control = local_control(gridsize = 401))$spec$method, "tree")
  expect_identical(local_mean(big$x, big$y, bandwidth = nn(10), verbose = FALSE)$spec$method,
                   "tree")
})

test_that("method = 'binned' refuses nn() bandwidths and more than two predictors", {
  d <- make_data_2d(100)
  x3 <- cbind(d$x, x3 = runif(100))
  expect_error(local_poly(x3, d$y, bandwidth = 0.3, method = "binned", verbose = FALSE),
               class = "localmean_error", regexp = "binned")
  expect_error(local_poly(d$x, d$y, bandwidth = nn(10), method = "binned", verbose = FALSE),
               class = "localmean_error", regexp = "binned")
})

test_that("the tree strategy equals the exact strategy in 3-D and 5-D", {
  set.seed(31)
  for (d in c(3, 5)) {
    x <- matrix(runif(400 * d), ncol = d)
    y <- rowSums(sin(3 * x)) + rnorm(400, sd = 0.1)
    q <- matrix(runif(30 * d), ncol = d)
    for (k in c("epanechnikov", "gaussian", "tricube")) {
      h <- if (k == "gaussian") 0.15 else 0.6
      ex <- local_poly(x, y, kernel = k, bandwidth = h, method = "exact", verbose = FALSE)
      tr <- local_poly(x, y, kernel = k, bandwidth = h, method = "tree", verbose = FALSE)
      expect_equal(predict_beyond(tr, q), predict_beyond(ex, q), tolerance = 1e-12,
                   info = paste(d, k))
      expect_equal(fitted(tr), fitted(ex), tolerance = 1e-12, info = paste(d, k))
    }
    # the reference, once per dimension
    ref <- local_poly_ref(x, y, q, 0.6, "epanechnikov", 1)
    tree <- local_poly(x, y, kernel = "epanechnikov", bandwidth = 0.6, method = "tree",
                       verbose = FALSE)
    expect_equal(predict_beyond(tree, q),
                 ref$coef[, 1], tolerance = 1e-10)
  }
})

test_that("the tree truncates the Gaussian 8 sd beyond the nearest point; exact never does", {
  # two clusters 10 sd apart: at 8 sd truncation they do not see each other
  x <- c(seq(0, 1, length.out = 20), seq(11, 12, length.out = 20))
  y <- c(rep(0, 20), rep(1, 20))
  fit <- local_mean(x, y, bandwidth = 1, method = "tree", verbose = FALSE)
  expect_identical(unname(fitted(fit))[1:20], rep(0, 20))
  flip <- local_mean(x, 1 - y, bandwidth = 1, method = "tree", verbose = FALSE)
  expect_identical(unname(fitted(flip))[21:40], rep(0, 20))
  # exact: a weight of exp(-50) from the other cluster makes these fits tiny but non-zero
  ex <- local_mean(x, y, bandwidth = 1, method = "exact", verbose = FALSE)
  expect_equal(unname(fitted(ex)), local_poly_ref(x, y, x, 1, "gaussian", 0, cutoff = Inf)$coef[, 1],
               tolerance = 1e-10)
  expect_true(all(fitted(ex)[1:20] > 0))
  # far from all data the tree counts from the nearest point, so it agrees with exact
  far <- c(30, -25)
  expect_equal(predict_beyond(fit, far), predict_beyond(ex, far), tolerance = 1e-12)
  for (meth in c("exact", "tree")) {
    # the Laplace reaches 32 scales
    lap <- local_mean(x, y, kernel = "laplace", bandwidth = 1, method = meth, verbose = FALSE)
    expect_true(all(fitted(lap)[1:20] > 0), info = meth)
    expect_equal(unname(fitted(lap)), local_poly_ref(x, y, x, 1, "laplace", 0)$coef[, 1],
                 tolerance = 1e-10)
  }
  # a user cut-off
  d <- make_data_1d(150)
  q <- seq(0, 1, length.out = 11)
  for (meth in c("exact", "tree")) {
    fit <- local_poly(d$x, d$y, bandwidth = 0.2, method = meth,
                      control = local_control(cutoff = 1.5), verbose = FALSE)
    ref <- local_poly_ref(d$x, d$y, q, 0.2, "gaussian", 1, cutoff = 1.5)
    expect_equal(predict_beyond(fit, q), ref$coef[, 1], tolerance = 1e-10, info = meth)
  }
})

# ---- binned ------------------------------------------------------------------------------------

# Documented tolerance: with at least ~20 grid steps per bandwidth (h = 0.1 on the 401-node
# grid in 1-D; h >= 0.12 on the 151 x 151 grid in 2-D) the binned fit is within 1e-3 of the exact
# fit, relative to the range of the exact fit; 2e-3 for local quadratics in 2-D, whose curvature
# terms amplify the O((step / h)^2) errors of linear binning and of interpolation.
binned_tolerance <- 1e-3

test_that("binned fits in 1-D are within 1e-3 (relative to the range) of exact fits", {
  d <- make_data_1d(500)
  q <- seq(0, 1, length.out = 101)
  for (deg in 0:2) {
    for (k in c("gaussian", "epanechnikov", "biweight")) {
      h <- if (k == "gaussian") 0.1 else 0.25
      info <- paste(k, deg)
      ex <- local_poly(d$x, d$y, degree = deg, kernel = k, bandwidth = h, method = "exact",
                       verbose = FALSE)
      bn <- local_poly(d$x, d$y, degree = deg, kernel = k, bandwidth = h, method = "binned",
                       verbose = FALSE)
      expect_identical(bn$spec$method, "binned")
      span <- diff(range(fitted(ex)))
      expect_lt(max(abs(fitted(bn) - fitted(ex))) / span, binned_tolerance, label = info)
      expect_lt(max(abs(predict_beyond(bn, q) - predict_beyond(ex, q))) / span,
                binned_tolerance,
                label = info)
      # and they do differ: the binned strategy really ran
      expect_gt(max(abs(fitted(bn) - fitted(ex))), 1e-12)
    }
  }
})

test_that("binned fits in 2-D are within 1e-3 (2e-3 for degree 2) of exact fits", {
  d <- make_data_2d(500)
  q <- cbind(x1 = c(0.1, 0.5, 0.9, 0.3), x2 = c(0.2, 0.5, 0.8, 0.95))
  check <- function(kernel, h, deg, ctrl) {
    info <- paste(kernel, "degree", deg)
    ex <- local_poly(d$x, d$y, degree = deg, kernel = kernel, bandwidth = h, method = "exact",
                     control = ctrl, verbose = FALSE)
    bn <- local_poly(d$x, d$y, degree = deg, kernel = kernel, bandwidth = h,
                     method = "binned", control = ctrl, verbose = FALSE)
    tol <- if (deg == 2) 2 * binned_tolerance else binned_tolerance
    span <- diff(range(fitted(ex)))
    expect_lt(max(abs(fitted(bn) - fitted(ex))) / span, tol, label = info)
    expect_lt(max(abs(predict(bn, q) - predict(ex, q))) / span, tol, label = info)
    expect_gt(max(abs(fitted(bn) - fitted(ex))), 1e-12)
  }
  for (deg in 0:2) check("biweight", c(0.3, 0.35), deg, local_control())
  # the Gaussian, truncated at 4 sd in both strategies to keep the test quick
  check("gaussian", c(0.12, 0.15), 1, local_control(cutoff = 4))
  # a finer grid gets closer
  ex <- local_poly(d$x, d$y, kernel = "biweight", bandwidth = 0.3, method = "exact",
                   verbose = FALSE)
  err <- vapply(c(31, 61, 121), function(g) {
    bn <- local_poly(d$x, d$y, kernel = "biweight", bandwidth = 0.3, method = "binned",
                     control = local_control(gridsize = g), verbose = FALSE)
    max(abs(fitted(bn) - fitted(ex)))
  }, 1)
  expect_true(all(diff(err) < 0))
})

test_that("binned fits are defined at the ends of the data for every grid size", {
  # the largest x is the last grid node; rounding must not drop it off the grid
  x <- c(0.1, 0.3, 0.7, 0.9)
  y <- c(1, 2, 3, 4)
  for (g in c(16, 31, 57, 401)) {
    fit <- local_mean(x, y, bandwidth = 0.3, method = "binned",
                      control = local_control(gridsize = g), verbose = FALSE)
    expect_true(all(is.finite(fitted(fit))), info = g)
  }
  set.seed(3)
  for (s in 1:15) {
    x <- runif(200)
    fit <- local_mean(x, rnorm(200), bandwidth = 0.1, method = "binned",
                      control = local_control(gridsize = 57), verbose = FALSE)
    expect_true(all(is.finite(fitted(fit))), info = s)
  }
})

test_that("binned fits match KernSmooth::locpoly() on its grid", {
  skip_if_not_installed("KernSmooth")
  d <- make_data_1d(500)
  for (h in c(0.03, 0.08)) {
    for (deg in 0:2) {
      fit <- local_poly(d$x, d$y, degree = deg, bandwidth = h, method = "binned",
                        control = local_control(cutoff = 4), verbose = FALSE)
      for (drv in 0:deg) {
        lp <- KernSmooth::locpoly(d$x, d$y, bandwidth = h, gridsize = 401, degree = deg,
                                  drv = drv)
        expect_equal(predict(fit, lp$x, deriv = drv), lp$y, tolerance = 1e-10,
                     info = sprintf("h = %g, degree %d, drv %d", h, deg, drv))
      }
    }
  }
  lp <- KernSmooth::locpoly(d$x, d$y, bandwidth = 0.05, gridsize = 401, degree = 1)
  fit <- local_poly(d$x, d$y, bandwidth = 0.05, method = "binned",
                    control = local_control(cutoff = 4), verbose = FALSE)
  expect_equal(predict(fit, lp$x), lp$y, tolerance = 1e-10)
})

test_that("binned prior weights match exact prior weights", {
  d <- make_data_1d(400)
  w <- rep(c(0.5, 1, 2), length.out = 400)
  ex <- local_poly(d$x, d$y, bandwidth = 0.1, weights = w, method = "exact", verbose = FALSE)
  bn <- local_poly(d$x, d$y, bandwidth = 0.1, weights = w, method = "binned", verbose = FALSE)
  expect_lt(max(abs(fitted(bn) - fitted(ex))) / diff(range(fitted(ex))), binned_tolerance)
})

# ---- threads -----------------------------------------------------------------------------------

test_that("1-D binning over several fixed chunks gives identical results for 1 and 2 threads", {
  # 3e5 points are three binning chunks of 2^17, each with its own partial grids: the result
  # must not depend on which thread bins which chunk. Sorted and unsorted points, with and
  # without prior weights, local_smooth() and kde().
  set.seed(43)
  n <- 3e5
  x <- runif(n)
  y <- sin(2 * pi * x) + rnorm(n, sd = 0.3)
  w <- rep(c(0.5, 1, 2), length.out = n)
  q <- seq(0, 1, length.out = 257)
  for (xs in list(x, sort(x))) {
    est <- function(threads, weights = NULL) {
      local_smooth(xs, y, at = q, bandwidth = 0.02, weights = weights, method = "binned",
                   n_threads = threads, verbose = FALSE)$estimate
    }
    one <- est(1)
    expect_identical(est(2), one)
    expect_identical(est(2, w), est(1, w))
    expect_true(all(is.finite(one)))
    # and against a direct local linear fit (the binned strategy within its tolerance)
    idx <- seq(1, n, by = 150)
    ex <- local_smooth(xs[idx], y[idx], at = q[100], bandwidth = 0.05, method = "exact",
                       verbose = FALSE)$estimate
    bn <- local_smooth(xs[idx], y[idx], at = q[100], bandwidth = 0.05, method = "binned",
                       verbose = FALSE)$estimate
    expect_lt(abs(bn - ex), 1e-3)
  }
  d1 <- kde(x, bandwidth = 0.02, method = "binned", n_threads = 1, verbose = FALSE)
  d2 <- kde(x, bandwidth = 0.02, method = "binned", n_threads = 2, verbose = FALSE)
  expect_identical(d2$estimate, d1$estimate)
})

test_that("results are identical for 1 and 2 threads", {
  d <- make_data_1d(3000, seed = 41)
  d2 <- make_data_2d(2000, seed = 42)
  q <- seq(-0.02, 1.02, length.out = 2000)
  q2 <- cbind(x1 = runif(1000), x2 = runif(1000))
  fits <- function(threads) {
    list(
      exact = local_poly(d$x, d$y, degree = 2, bandwidth = 0.05, method = "exact",
                         n_threads = threads, verbose = FALSE),
      tree = local_poly(d2$x, d2$y, degree = 1, kernel = "tricube", bandwidth = 0.2,
                        method = "tree", n_threads = threads, verbose = FALSE),
      binned = local_poly(d2$x, d2$y, degree = 1, kernel = "biweight", bandwidth = 0.1,
                          method = "binned", n_threads = threads, verbose = FALSE),
      binned1 = local_mean(d$x, d$y, bandwidth = 0.02, method = "binned",
                           n_threads = threads, verbose = FALSE),
      nn = local_poly(d2$x, d2$y, degree = 1, kernel = "epanechnikov", bandwidth = nn(40),
                      n_threads = threads, verbose = FALSE),
      cv = local_poly(d$x[1:800], d$y[1:800], bandwidth = "cv", n_threads = threads,
                      control = local_control(n_candidates = 10), verbose = FALSE)
    )
  }
  one <- fits(1)
  two <- fits(2)
  for (nm in names(one)) {
    expect_identical(fitted(two[[nm]]), fitted(one[[nm]]), info = nm)
    expect_identical(two[[nm]]$leverage, one[[nm]]$leverage, info = nm)
    newq <- if (ncol(one[[nm]]$x) == 1L) q else q2
    expect_identical(predict_beyond(two[[nm]], newq, n_threads = 2),
                     predict_beyond(one[[nm]], newq, n_threads = 1), info = nm)
    expect_identical(predict_beyond(one[[nm]], newq, n_threads = 2, se.fit = TRUE),
                     predict_beyond(one[[nm]], newq, n_threads = 1, se.fit = TRUE), info = nm)
  }
  expect_identical(two$cv$bandwidth, one$cv$bandwidth)
  expect_identical(two$cv$cv_curve, one$cv$cv_curve)
  # classification
  c1 <- local_classify(iris[, 1:4], iris$Species, bandwidth = "cv", n_threads = 1,
                       control = local_control(n_candidates = 8), verbose = FALSE)
  c2 <- local_classify(iris[, 1:4], iris$Species, bandwidth = "cv", n_threads = 2,
                       control = local_control(n_candidates = 8), verbose = FALSE)
  expect_identical(c2$bandwidth, c1$bandwidth)
  expect_identical(predict(c2, iris[, 1:4], type = "prob"),
                   predict(c1, iris[, 1:4], type = "prob"))
  # the fit records its thread count
  expect_identical(one$exact$n_threads, 1L)
  expect_identical(two$exact$n_threads, 2L)
})

test_that("chunked predict() equals unchunked predict() without a plan", {
  d <- make_data_1d(300)
  q <- seq(0, 1, length.out = 257)
  whole <- local_poly(d$x, d$y, bandwidth = 0.05, verbose = FALSE)
  parts <- local_poly(d$x, d$y, bandwidth = 0.05, control = local_control(chunk_size = 50),
                      verbose = FALSE)
  expect_identical(predict_beyond(parts, q), predict_beyond(whole, q))
  expect_identical(predict_beyond(parts, q, se.fit = TRUE),
                   predict_beyond(whole, q, se.fit = TRUE))
  d2 <- make_data_2d(300)
  q2 <- cbind(x1 = runif(120), x2 = runif(120))
  w2 <- local_poly(d2$x, d2$y, degree = 2, bandwidth = 0.3, verbose = FALSE)
  p2 <- local_poly(d2$x, d2$y, degree = 2, bandwidth = 0.3,
                   control = local_control(chunk_size = 50), verbose = FALSE)
  expect_identical(predict_beyond(p2, q2, deriv = 1), predict_beyond(w2, q2, deriv = 1))
})

# ---- future ------------------------------------------------------------------------------------

test_that("predict() and bandwidth selection on a multisession plan equal the sequential ones", {
  skip_if_not_installed("future.apply")
  skip_if_not_installed("future")
  d <- make_data_1d(300, seed = 51)
  d2 <- make_data_2d(300, seed = 52)
  q <- seq(0, 1, length.out = 333)
  q2 <- cbind(x1 = runif(140), x2 = runif(140))
  ctrl <- local_control(chunk_size = 50, candidates = c(0.02, 0.04, 0.08, 0.16), refine = TRUE)
  run <- function() {
    fit <- local_poly(d$x, d$y, bandwidth = 0.05, control = local_control(chunk_size = 50),
                      verbose = FALSE)
    cv <- local_poly(d$x, d$y, bandwidth = "cv", control = ctrl, verbose = FALSE)
    fit2 <- local_poly(d2$x, d2$y, degree = 2, bandwidth = 0.3,
                       control = local_control(chunk_size = 50), verbose = FALSE)
    cls <- local_classify(iris[, 3:4], iris$Species, bandwidth = c(0.3, 0.1),
                          control = local_control(chunk_size = 50), verbose = FALSE)
    knn <- local_mean(d2$x, d2$y, kernel = "uniform", bandwidth = nn(7),
                      control = local_control(chunk_size = 50), verbose = FALSE)
    list(pred = predict_beyond(fit, q), se = predict_beyond(fit, q, se.fit = TRUE),
         pred2 = predict_beyond(fit2, q2, deriv = 2), fitted = fitted(fit), cv_h = cv$bandwidth,
         cv_curve = cv$cv_curve, cv_fitted = fitted(cv),
         cls = predict_beyond(cls, iris[, 3:4], type = "prob"),
         knn = predict_beyond(knn, q2))
  }
  old <- future::plan(future::sequential)
  on.exit(future::plan(old), add = TRUE)
  sequential <- run()
  future::plan(future::multisession, workers = 2)
  parallel <- run()
  expect_false(inherits(future::plan(), "sequential"))
  for (nm in names(sequential)) {
    expect_identical(parallel[[nm]], sequential[[nm]], info = nm)
  }
})

test_that("absurd binning grids are refused up front with the limit (issue 18)", {
  expect_error(local_control(gridsize = 1e7), class = "localmean_error",
               regexp = "gridsize.*limit is 100,000")
  expect_s3_class(local_control(gridsize = 1e5), "local_control")
  set.seed(1)
  x2 <- matrix(runif(400), 200)
  y <- rowSums(x2) + rnorm(200, sd = 0.1)
  # 3000 x 3000 nodes: beyond the 4e6 nodes in all
  expect_error(local_poly(x2, y, bandwidth = 0.2, method = "binned", verbose = FALSE,
                          control = local_control(gridsize = 3000)),
               class = "localmean_error", regexp = "binning grid nodes")
  # 300 x 300 nodes, but a whole-grid window at each (a kernel that does not factor into row
  # and column passes): too much work
  expect_error(local_poly(x2, y, bandwidth = 1, kernel = "epanechnikov", method = "binned",
                          verbose = FALSE, control = local_control(gridsize = 300)),
               class = "localmean_error", regexp = "multiply-adds")
  expect_s3_class(local_poly(x2, y, bandwidth = 0.2, method = "binned", verbose = FALSE),
                  "local_poly")
})

test_that("the tiled exact sweep equals a plain sum for every kernel, d = 1..5, with weights", {
  set.seed(61)
  # 2071 points: a partial block of 16 and a second cache block of 2048; 9 queries: a partial
  # tile of 4.
  n <- 2071
  for (d in 1:5) {
    x <- matrix(runif(n * d), ncol = d, dimnames = list(NULL, paste0("x", seq_len(d))))
    y <- sin(3 * x[, 1]) + rnorm(n, sd = 0.1)
    w <- runif(n, 0.5, 2)
    q <- matrix(runif(9 * d, -0.1, 1.1), ncol = d, dimnames = list(NULL, colnames(x)))
    h <- 0.3 * sqrt(d)
    for (kernel in kernel_names_ref) {
      got <- local_smooth(x, y, at = q, degree = 0, kernel = kernel, bandwidth = h,
                          weights = w, method = "exact", n_threads = 1,
                          verbose = FALSE)$estimate
      ref <- vapply(seq_len(nrow(q)), function(i) {
        r <- sqrt(colSums((t(x) - q[i, ])^2)) / h
        k <- w * kernel_weight_ref(r, kernel)
        sum(k * y) / sum(k)
      }, 1)
      expect_equal(got, ref, tolerance = 1e-12, info = paste(kernel, d))
      two <- local_smooth(x, y, at = q, degree = 0, kernel = kernel, bandwidth = h,
                          weights = w, method = "exact", n_threads = 2,
                          verbose = FALSE)$estimate
      expect_identical(two, got, info = paste(kernel, d))
      # a query's result does not depend on the queries beside it in its tile
      one <- local_smooth(x, y, at = q[3:4, , drop = FALSE], degree = 0, kernel = kernel,
                          bandwidth = h, weights = w, method = "exact", n_threads = 1,
                          verbose = FALSE)$estimate
      expect_identical(one, got[3:4], info = paste(kernel, d))
    }
  }
})

test_that("the tiled exact sweep keeps a point's own nn(1) window (a scale of double.xmin)", {
  set.seed(63)
  x <- matrix(runif(200), ncol = 2, dimnames = list(NULL, c("x1", "x2")))
  y <- rnorm(100)
  expect_no_warning(fit <- local_mean(x, y, kernel = "uniform", bandwidth = nn(1),
                                      method = "exact", verbose = FALSE))
  expect_equal(unname(fitted(fit)), y, tolerance = 1e-12)
})

# ---- The engine object and its one door -------------------------------------------------------

test_that("a fit builds its engine data once: the bandwidth search and predict() reuse them", {
  set.seed(3)
  d <- data.frame(x = runif(300))
  d$y <- sin(6 * d$x) + rnorm(300, sd = 0.2)
  before <- localmean:::engine_builds()
  fit <- local_poly(y ~ x, d, bandwidth = "cv")
  expect_identical(localmean:::engine_builds() - before, 1L)
  before <- localmean:::engine_builds()
  p <- predict(fit, data.frame(x = c(0.1, 0.5)), se.fit = TRUE)
  expect_identical(localmean:::engine_builds() - before, 0L)
  # the same fit at the chosen bandwidth, built afresh, gives the same numbers
  again <- local_poly(y ~ x, d, bandwidth = fit$bandwidth)
  expect_identical(fitted(again), fitted(fit))
})

test_that("a fit predicts the same after saveRDS() / readRDS(): the engine is rebuilt", {
  fit <- local_poly(dist ~ speed, cars, bandwidth = 3)
  new <- data.frame(speed = seq(4, 25, length.out = 7))
  p <- predict(fit, new, se.fit = TRUE)
  file <- tempfile(fileext = ".rds")
  on.exit(unlink(file), add = TRUE)
  saveRDS(fit, file)
  back <- readRDS(file)
  expect_false(localmean:::cpp_engine_alive(back$spec$engine$ptr))
  before <- localmean:::engine_builds()
  expect_identical(predict(back, new, se.fit = TRUE), p)
  expect_identical(localmean:::engine_builds() - before, 1L)
  expect_true(localmean:::cpp_engine_alive(back$spec$engine$ptr))
  # a classifier and a local likelihood fit too
  cls <- local_classify(Species ~ Petal.Length + Petal.Width, iris, bandwidth = 0.3)
  lik <- local_poly(am ~ wt, mtcars, family = "binomial", bandwidth = 1.5)
  expect_identical(predict(unserialize(serialize(cls, NULL)), iris[1:5, ]),
                   predict(cls, iris[1:5, ]))
  expect_identical(predict(unserialize(serialize(lik, NULL)), mtcars[1:5, ]),
                   predict(lik, mtcars[1:5, ]))
})

test_that("a serialized engine specification (as a future worker receives it) runs the same", {
  set.seed(4)
  x <- matrix(runif(400), ncol = 2)
  spec <- localmean:::engine_spec(x, "epanechnikov", c(0.2, 0.3), values = matrix(x[, 1]^2),
                                  degree = 1L)
  q <- matrix(runif(20), ncol = 2)
  res <- localmean:::engine_run(spec, q, want_var = TRUE)
  copy <- unserialize(serialize(spec, NULL))
  expect_identical(localmean:::engine_run(copy, q, want_var = TRUE), res)
  # other scales on the same engine object equal a fresh object's
  other <- localmean:::with_scale(spec, c(0.4, 0.1))
  fresh <- localmean:::engine_spec(x, "epanechnikov", c(0.4, 0.1), values = matrix(x[, 1]^2),
                                   degree = 1L)
  expect_identical(localmean:::engine_run(other, q), localmean:::engine_run(fresh, q))
  expect_identical(localmean:::engine_run(spec, q, want_var = TRUE), res)
  # without a handle the engine makes a one-off object
  spec$engine <- NULL
  expect_identical(localmean:::engine_run(spec, q, want_var = TRUE), res)
})

# The engine's C++ entry points: every cpp_ function of src/engine.cpp, src/binning.cpp and
# src/metric.cpp and the neighbour searches, but the kernel registry's readers and two checks of
# the data (see "The other engine entry points" in R/engine.R).
engine_entry_points <- c(
  "cpp_engine_new", "cpp_engine_alive", "cpp_engine_builds", "cpp_engine_fit",
  "cpp_shift_points", "cpp_merge_modes", "cpp_nearest_index", "cpp_knn_radius",
  "cpp_knn_distinct_radius", "cpp_basis_powers", "cpp_radial_constant", "cpp_binned_data_fit",
  "cpp_interpolate_nodes", "cpp_fit_sums", "cpp_linear_bin", "cpp_hermite_pair_sums",
  "cpp_metric_loss", "cpp_knn_graph", "cpp_engine_candidate_sums", "cpp_engine_windows",
  "cpp_local_axes", "cpp_engine_cdens_quantiles", "cpp_engine_scale_moments",
  "cpp_engine_set_values"
)
not_entry_points <- c("cpp_kernel_table", "cpp_kernel_value", "cpp_kernel_cdf",
                      "cpp_column_ranges", "cpp_all_finite")
# The functions of R/engine.R that call them.
engine_layer <- c(
  "engine_chunk", "engine_pointer", "engine_builds", "engine_data_fit", "fit_sums",
  "engine_shift", "nn_radius", "nearest_index", "knn_radius", "knn_graph", "radial_constant",
  "linear_bin", "hermite_pair_sums", "metric_loss", "group_within", "basis_powers",
  "engine_candidate_sums", "engine_windows", "local_axes", "engine_cdens_quantiles",
  "engine_scale_moments", "engine_set_values"
)
# the one-call fits at the data and plain predictions
engine_entry_points <- c(engine_entry_points, "cpp_engine_data_fit", "cpp_engine_values")
engine_layer <- c(engine_layer, "engine_fit_at_data", "engine_values")

# Names of every symbol in an object: function bodies and defaults, lists of functions.
symbols_in <- function(obj, depth = 0L) {
  if (depth > 4L) return(character(0))
  if (is.function(obj)) {
    return(unique(c(all.names(body(obj)),
                    unlist(lapply(formals(obj), function(f) if (!missing(f)) all.names(f))))))
  }
  if (is.list(obj) && !is.data.frame(obj)) {
    return(unique(unlist(lapply(obj, symbols_in, depth = depth + 1L))))
  }
  character(0)
}

test_that("only R/engine.R calls the engine's entry points", {
  ns <- asNamespace("localmean")
  exported <- grep("^cpp_", ls(ns, all.names = TRUE), value = TRUE)
  expect_true(all(c(engine_entry_points, not_entry_points) %in% exported))
  callers <- list()
  for (name in setdiff(ls(ns, all.names = TRUE), exported)) {
    used <- intersect(symbols_in(get(name, envir = ns)), engine_entry_points)
    if (length(used)) callers[[name]] <- used
  }
  outside <- setdiff(names(callers), engine_layer)
  expect_identical(outside, character(0),
                   info = paste("engine entry points called outside R/engine.R by:",
                                paste(outside, collapse = ", ")))
  # From the sources, when the tests run in the source tree: every file of R/ but engine.R and
  # RcppExports.R is free of entry points, and engine_layer lists functions of engine.R.
  src <- test_path("..", "..", "R")
  skip_if_not(dir.exists(src) && file.exists(file.path(src, "engine.R")))
  for (file in setdiff(list.files(src, "[.]R$"), c("engine.R", "RcppExports.R"))) {
    used <- intersect(all.names(parse(file.path(src, file), keep.source = FALSE)),
                      engine_entry_points)
    expect_identical(used, character(0), info = file)
  }
  defined <- vapply(Filter(function(e) is.call(e) && identical(e[[1L]], as.name("<-")),
                           as.list(parse(file.path(src, "engine.R"), keep.source = FALSE))),
                    function(e) as.character(e[[2L]]), "")
  expect_true(all(engine_layer %in% defined))
  # every export of the engine's source files is listed above
  cpp <- test_path("..", "..", "src")
  for (file in c("engine.cpp", "binning.cpp", "metric.cpp")) {
    lines <- readLines(file.path(cpp, file))
    at <- grep("Rcpp::export", lines) + 1L
    names <- sub("^.*\\b(cpp_[A-Za-z0-9_]+)\\(.*$", "\\1", lines[at])
    expect_true(all(names %in% c(engine_entry_points, not_entry_points)), info = file)
  }
})
