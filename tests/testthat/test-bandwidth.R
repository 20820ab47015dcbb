# Bandwidths (R/bandwidth.R): nn(), the rule of thumb, the plug-in, and the CV, GCV and AICc
# selectors, each against a brute-force computation in plain R.

test_that("nn() builds an nn_bandwidth and prints it", {
  b <- nn(7)
  expect_s3_class(b, "nn_bandwidth")
  expect_identical(b$k, 7L)
  expect_true(b$scale)
  expect_false(nn(3, scale = FALSE)$scale)
  expect_output(print(b), "k = 7, standardised")
  expect_output(print(nn(3, scale = FALSE)), "^<nn bandwidth: k = 3>$")
})

test_that("uniform kernel + nn(k) is the mean of the k nearest neighbours at new points", {
  dat <- make_data_2d(300)
  x <- dat$x
  x[, 2] <- 10 * x[, 2]  # unequal scales, so that standardising matters
  set.seed(9)
  q <- cbind(x1 = runif(40), x2 = 10 * runif(40))
  for (sc in c(FALSE, TRUE)) {
    s <- if (sc) apply(x, 2, sd) else c(1, 1)
    for (k in c(1, 5, 12)) {
      sets <- knn_sets_ref(sweep(x, 2, s, "/"), sweep(q, 2, s, "/"), k)
      expect_true(all(lengths(sets) == k))
      expected <- vapply(sets, function(i) mean(dat$y[i]), numeric(1))
      for (meth in c("auto", "exact", "tree")) {
        fit_m <- local_mean(x, dat$y, kernel = "uniform", bandwidth = nn(k, scale = sc),
                            method = meth, verbose = FALSE)
        expect_equal(predict(fit_m, q), expected, tolerance = 1e-12,
                     info = sprintf("scale = %s, k = %d, method %s", sc, k, meth))
      }
    }
  }
  # scale = TRUE and FALSE differ on these data
  a <- predict(local_mean(x, dat$y, kernel = "uniform", bandwidth = nn(5, scale = TRUE),
                          verbose = FALSE), q)
  b <- predict(local_mean(x, dat$y, kernel = "uniform", bandwidth = nn(5, scale = FALSE),
                          verbose = FALSE), q)
  expect_false(isTRUE(all.equal(a, b)))
})

test_that("uniform + nn(k) fitted values at the data are k-NN means (the point included)", {
  dat <- make_data_1d(120, seed = 4)
  k <- 9
  fit <- local_mean(dat$x, dat$y, kernel = "uniform", bandwidth = nn(k), verbose = FALSE)
  sets <- knn_sets_ref(dat$x, dat$x, k)
  expect_equal(unname(fitted(fit)), vapply(sets, function(i) mean(dat$y[i]), 1),
               tolerance = 1e-12)
  # the leverage of a k-NN mean is 1/k
  expect_equal(fit$leverage, rep(1 / k, 120), tolerance = 1e-12)
  expect_identical(fit$bandwidth_method, "nn")
  expect_null(fit$bandwidth)
})

test_that("the rule of thumb is 1.06 min(sd, IQR/1.349) n^(-1/(4+d)), converted to the kernel", {
  dat <- make_data_2d(200)
  tab <- kernels()
  for (k in c("gaussian", "epanechnikov", "tricube", "cauchy")) {
    fit <- local_poly(dat$x, dat$y, kernel = k, bandwidth = "rot", verbose = FALSE)
    spread <- apply(dat$x, 2, function(v) min(sd(v), IQR(v) / 1.349))
    factor <- if (k == "cauchy") qnorm(0.75) else
      tab$canonical[tab$kernel == k] / tab$canonical[tab$kernel == "gaussian"]
    expect_equal(unname(fit$bandwidth), unname(1.06 * spread * 200^(-1 / 6) * factor),
                 tolerance = 1e-12, info = k)
    expect_identical(fit$bandwidth_method, "rot")
  }
  fit1 <- local_poly(dat$x[, 1], dat$y, bandwidth = "rot", verbose = FALSE)
  s <- min(sd(dat$x[, 1]), IQR(dat$x[, 1]) / 1.349)
  expect_equal(unname(fit1$bandwidth), 1.06 * s * 200^(-1 / 5), tolerance = 1e-12)
})

test_that("the cv bandwidth is the argmin of a brute-force leave-one-out CV", {
  dat <- make_data_1d(100, seed = 3)
  cands <- c(0.012, 0.018, 0.027, 0.04, 0.06, 0.09, 0.135, 0.2)
  ctrl <- local_control(candidates = cands, refine = FALSE)
  for (deg in 0:2) {
    fit <- local_poly(dat$x, dat$y, degree = deg, bandwidth = "cv", control = ctrl,
                      verbose = FALSE)
    # refit without point i, predict at x_i, for every i and candidate
    score <- vapply(cands, function(h) loo_cv_ref(dat$x, dat$y, h, "gaussian", deg), 1)
    expect_equal(fit$cv_curve$x, cands)
    expect_equal(fit$cv_curve$score, score, tolerance = 1e-8, info = deg)
    expect_equal(fit$bandwidth, cands[which.min(score)], info = deg)
    expect_identical(fit$bandwidth_method, "cv")
    # the fit uses the chosen bandwidth
    fixed <- local_poly(dat$x, dat$y, degree = deg, bandwidth = cands[which.min(score)],
                        verbose = FALSE)
    expect_equal(fitted(fit), fitted(fixed))
    expect_equal(fit$cv, min(score), tolerance = 1e-8)
  }
  # a compact kernel
  cands_e <- c(0.06, 0.09, 0.13, 0.2, 0.3, 0.45)
  fit <- local_poly(dat$x, dat$y, degree = 1, kernel = "epanechnikov", bandwidth = "cv",
                    control = local_control(candidates = cands_e, refine = FALSE),
                    verbose = FALSE)
  score <- vapply(cands_e, function(h) loo_cv_ref(dat$x, dat$y, h, "epanechnikov", 1), 1)
  expect_equal(fit$cv_curve$score, score, tolerance = 1e-8)
  expect_equal(fit$bandwidth, cands_e[which.min(score)])
})

test_that("the cv bandwidth in 2-D (candidate matrix) matches brute-force LOO CV", {
  dat <- make_data_2d(80)
  cands <- cbind(c(0.05, 0.08, 0.12, 0.18, 0.27), c(0.1, 0.15, 0.22, 0.33, 0.5))
  fit <- local_poly(dat$x, dat$y, degree = 1, bandwidth = "cv",
                    control = local_control(candidates = cands, refine = FALSE),
                    verbose = FALSE)
  score <- vapply(seq_len(nrow(cands)),
                  function(i) loo_cv_ref(dat$x, dat$y, cands[i, ], "gaussian", 1), 1)
  expect_equal(fit$cv_curve$score, score, tolerance = 1e-8)
  expect_identical(names(fit$cv_curve), c("x1", "x2", "score"))
  expect_equal(fit$bandwidth, cands[which.min(score), ])
})

test_that("gcv and aicc match formulas from a brute-force smoother matrix", {
  dat <- make_data_1d(100, seed = 3)
  n <- 100
  cands <- c(0.012, 0.018, 0.027, 0.04, 0.06, 0.09, 0.135, 0.2)
  ctrl <- local_control(candidates = cands, refine = FALSE)
  for (deg in 0:1) {
    stats <- lapply(cands, function(h) {
      L <- smoother_matrix_ref(dat$x, dat$y, h, "gaussian", deg)
      c(rss = sum((dat$y - L %*% dat$y)^2), tr = sum(diag(L)))
    })
    rss <- vapply(stats, `[[`, 1, "rss")
    tr <- vapply(stats, `[[`, 1, "tr")
    gcv <- n * rss / (n - tr)^2
    aicc <- log(rss / n) + 1 + 2 * (tr + 1) / (n - tr - 2)
    fg <- local_poly(dat$x, dat$y, degree = deg, bandwidth = "gcv", control = ctrl,
                     verbose = FALSE)
    expect_equal(fg$cv_curve$score, gcv, tolerance = 1e-8, info = deg)
    expect_equal(fg$bandwidth, cands[which.min(gcv)], info = deg)
    expect_identical(fg$bandwidth_method, "gcv")
    fa <- local_poly(dat$x, dat$y, degree = deg, bandwidth = "aicc", control = ctrl,
                     verbose = FALSE)
    expect_equal(fa$cv_curve$score, aicc, tolerance = 1e-8, info = deg)
    expect_equal(fa$bandwidth, cands[which.min(aicc)], info = deg)
    expect_identical(fa$bandwidth_method, "aicc")
  }
})

test_that("refinement never scores worse than the best candidate and stays between neighbours", {
  dat <- make_data_1d(100, seed = 3)
  cands <- c(0.01, 0.02, 0.04, 0.08, 0.16)
  grid <- local_poly(dat$x, dat$y, bandwidth = "cv",
                     control = local_control(candidates = cands, refine = FALSE),
                     verbose = FALSE)
  fine <- local_poly(dat$x, dat$y, bandwidth = "cv",
                     control = local_control(candidates = cands, refine = TRUE),
                     verbose = FALSE)
  best <- which.min(grid$cv_curve$score)
  expect_true(best > 1 && best < length(cands))
  expect_gte(fine$bandwidth, cands[best - 1])
  expect_lte(fine$bandwidth, cands[best + 1])
  expect_lte(loo_cv_ref(dat$x, dat$y, fine$bandwidth, "gaussian", 1),
             min(grid$cv_curve$score) + 1e-12)
  expect_equal(fine$cv_curve, grid$cv_curve)
})

test_that("default candidates span 0.05 to 3 times the rule of thumb", {
  dat <- make_data_1d(100, seed = 3)
  fit <- local_poly(dat$x, dat$y, bandwidth = "cv",
                    control = local_control(n_candidates = 12, refine = FALSE),
                    verbose = FALSE)
  rot <- local_poly(dat$x, dat$y, bandwidth = "rot", verbose = FALSE)$bandwidth
  expect_equal(fit$cv_curve$x, rot * exp(seq(log(0.05), log(3), length.out = 12)),
               tolerance = 1e-12)
  expect_true(fit$bandwidth %in% fit$cv_curve$x)
})

test_that("the plug-in bandwidth is within 10% of KernSmooth::dpill", {
  skip_if_not_installed("KernSmooth")
  for (n in c(500, 1000, 2000)) {
    set.seed(n)
    x <- runif(n)
    y <- sin(2 * pi * x) + rnorm(n, sd = 0.3)
    fit <- local_poly(x, y, bandwidth = "plugin", verbose = FALSE)
    ref <- KernSmooth::dpill(x, y)
    expect_lt(abs(fit$bandwidth / ref - 1), 0.1, label = paste("relative gap, n =", n))
    expect_identical(fit$bandwidth_method, "plugin")
  }
  # converted to other kernels by the ratio of canonical bandwidths
  set.seed(1)
  x <- runif(500)
  y <- sin(2 * pi * x) + rnorm(500, sd = 0.3)
  g <- local_poly(x, y, bandwidth = "plugin", verbose = FALSE)$bandwidth
  e <- local_poly(x, y, bandwidth = "plugin", kernel = "epanechnikov", verbose = FALSE)$bandwidth
  tab <- kernels()
  expect_equal(e / g, tab$canonical[2] / tab$canonical[1], tolerance = 1e-10)
})

test_that("the plug-in is for local linear regression on one predictor", {
  dat <- make_data_2d(100)
  expect_error(local_poly(dat$x, dat$y, bandwidth = "plugin", verbose = FALSE),
               class = "localmean_error", regexp = "plugin")
  expect_error(local_poly(dat$x[, 1], dat$y, degree = 2, bandwidth = "plugin",
                          verbose = FALSE), class = "localmean_error", regexp = "plugin")
})

test_that("selectors that find no usable candidate fail clearly", {
  dat <- make_data_1d(50)
  expect_error(local_poly(dat$x, dat$y, kernel = "uniform", degree = 2, bandwidth = "cv",
                          control = local_control(candidates = c(1e-5, 2e-5), refine = FALSE),
                          verbose = FALSE), class = "localmean_error", regexp = "candidate")
  expect_error(local_control(candidates = c(0.1, -1)), class = "localmean_error",
               regexp = "candidates")
  expect_error(local_control(candidates = c(0.1, NA)), class = "localmean_error",
               regexp = "candidates")
})
