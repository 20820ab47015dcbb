# Bandwidths (R/bandwidth.R): nn(), the rule of thumb, the plug-in, and the CV, GCV and AICc
# selectors, each against a brute-force computation in plain R.

test_that("nn() builds an local_nn and prints it", {
  b <- nn(7)
  expect_s3_class(b, "local_nn")
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
        expect_equal(predict_beyond(fit_m, q), expected, tolerance = 1e-12,
                     info = sprintf("scale = %s, k = %d, method %s", sc, k, meth))
      }
    }
  }
  # scale = TRUE and FALSE differ on these data
  a <- predict_beyond(local_mean(x, dat$y, kernel = "uniform",
                                 bandwidth = nn(5, scale = TRUE), verbose = FALSE), q)
  b <- predict_beyond(local_mean(x, dat$y, kernel = "uniform",
                                 bandwidth = nn(5, scale = FALSE), verbose = FALSE), q)
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

# ---- Issue 15: per-variable search, self-extending grid, nn windows on tied data, nn("cv") ----

# The cv/gcv/aicc selector result (bandwidth, curve, score, smoothed_out) for plain data.
select_for <- function(x, y, criterion = "cv", kernel = "gaussian", degree = 1L, n_threads = 1L,
                       control = local_control()) {
  x <- as.matrix(x)
  spec <- localmean:::engine_spec(x, kernel, localmean:::bw_rot(x, kernel), values = matrix(y),
                                  degree = degree, n_threads = n_threads)
  problem <- list(x = x, values = matrix(y), weights = NULL, kernel = kernel, degree = degree,
                  spec = spec, control = control, n_threads = n_threads, verbose = FALSE)
  localmean:::run_selector(criterion, "regression", problem)
}

test_that("the joint cv search is within 1% of a brute-force LOO minimised by optim()", {
  set.seed(15)
  n <- 60
  x <- cbind(x1 = runif(n), x2 = runif(n), x3 = runif(n))  # x3 is irrelevant
  y <- sin(2 * pi * x[, 1]) + 2 * x[, 2]^2 + rnorm(n, sd = 0.2)
  # leave point i out, fit a Gaussian local linear at x_i, for every i
  loo <- function(log_h) {
    h <- exp(log_h)
    err <- vapply(seq_len(n), function(i) {
      u <- sweep(sweep(x[-i, ], 2, x[i, ]), 2, h, "/")
      w <- exp(-0.5 * rowSums(u^2))
      X <- cbind(1, u)
      b <- tryCatch(solve(crossprod(X, w * X), crossprod(X, w * y[-i])), error = function(e) NA)
      y[i] - b[1]
    }, 1)
    if (anyNA(err)) 1e10 else mean(err^2)
  }
  starts <- list(log(c(0.1, 0.1, 0.1)), log(c(0.3, 0.3, 0.3)))
  brute <- min(vapply(starts, function(s) {
    stats::optim(s, loo, control = list(maxit = 400, reltol = 1e-9))$value
  }, 1))
  fit <- local_poly(x, y, bandwidth = "cv", verbose = FALSE)
  expect_lte(fit$cv, 1.01 * brute)
  expect_equal(fit$cv, loo(log(fit$bandwidth)), tolerance = 1e-8)
  # the irrelevant predictor is smoothed out, the others are not
  sel <- select_for(x, y)
  expect_equal(unname(sel$bandwidth), fit$bandwidth)
  # (x2 enters as 2 x2^2 on [0, 1]: at n = 60 its LOO score is lowest, within 0.1%, for a
  # bandwidth of 1 or more, where the local linear fit is nearly global in x2, so the search may
  # smooth it out as well; x1 is never smoothed out)
  expect_identical(sel$smoothed_out[c("x1", "x3")], c(x1 = FALSE, x3 = TRUE))
  expect_gt(sel$bandwidth[["x3"]], 3 * diff(range(x[, 3])))
  # the curve is still the common-multiplier grid, and the joint search beats its best
  # (7 candidates: the grid only starts the gradient search, see default_candidates())
  expect_identical(nrow(fit$cv_curve), 7L)
  expect_lte(fit$cv, min(fit$cv_curve$score))
})

test_that("gcv and aicc search every bandwidth jointly within the bounds", {
  dat <- make_data_2d(120)
  for (crit in c("gcv", "aicc")) {
    grid <- select_for(dat$x, dat$y, crit, control = local_control(refine = FALSE))
    joint <- select_for(dat$x, dat$y, crit)
    expect_lte(joint$score, min(grid$curve$score), label = crit)
    expect_false(isTRUE(all.equal(joint$bandwidth[1] / joint$bandwidth[2],
                                  grid$bandwidth[1] / grid$bandwidth[2])), label = crit)
    # the score reported is the score of the bandwidths returned
    fit <- local_poly(dat$x, dat$y, bandwidth = joint$bandwidth, verbose = FALSE)
    L <- fit$leverage
    rss <- sum(residuals(fit)^2)
    expected <- if (crit == "gcv") 120 * rss / (120 - sum(L))^2 else
      log(rss / 120) + 1 + 2 * (sum(L) + 1) / (120 - sum(L) - 2)
    expect_equal(joint$score, expected, tolerance = 1e-10, label = crit)
    expect_true(all(joint$bandwidth <= 10 * apply(dat$x, 2, function(v) diff(range(v)))))
  }
})

test_that("selected bandwidths do not depend on the thread count", {
  dat <- make_data_2d(150)
  x <- cbind(dat$x, x3 = runif(150))
  a <- select_for(x, dat$y, n_threads = 1L)
  b <- select_for(x, dat$y, n_threads = 2L)
  expect_identical(a$bandwidth, b$bandwidth)
  expect_identical(a$curve, b$curve)
  fa <- local_poly(dist ~ speed, cars, kernel = "tricube", bandwidth = nn("cv"), n_threads = 1,
                   verbose = FALSE)
  fb <- local_poly(dist ~ speed, cars, kernel = "tricube", bandwidth = nn("cv"), n_threads = 2,
                   verbose = FALSE)
  expect_identical(fa$nn$k, fb$nn$k)
  expect_identical(fa$cv_curve, fb$cv_curve)
})

test_that("the search extends itself on a skewed predictor (Boston crim)", {
  boston <- MASS::Boston
  rot <- localmean:::bw_rot(cbind(crim = boston$crim), "gaussian")  # the formula, before widening
  # the formulas are widened until every window has enough points
  for (formula_bw in c("rot", "plugin")) {
    fit <- local_poly(medv ~ crim, boston, bandwidth = formula_bw, verbose = FALSE)
    expect_true(all(is.finite(fitted(fit))), label = formula_bw)
    expect_gt(fit$bandwidth, rot)
  }
  for (crit in c("cv", "gcv", "aicc")) {
    fit <- local_poly(medv ~ crim, boston, bandwidth = crit, verbose = FALSE)
    expect_true(is.finite(fit$bandwidth) && all(is.finite(fitted(fit))), label = crit)
    # the best lies beyond the default grid (3 x the rule of thumb), inside the curve
    expect_gt(fit$bandwidth, 3 * rot)
    expect_gt(max(fit$cv_curve$crim), fit$bandwidth)
  }
  fit <- local_poly(medv ~ lstat + rm + crim, boston, bandwidth = "cv", verbose = FALSE)
  expect_true(all(is.finite(fit$bandwidth)) && all(is.finite(fitted(fit))))
  # user candidates are searched as given: no extension
  expect_error(local_poly(medv ~ crim, boston, bandwidth = "cv", verbose = FALSE,
                          control = local_control(candidates = c(0.5, 1), refine = FALSE)),
               class = "localmean_error", regexp = "candidate")
})

test_that("the search extends downwards when the best candidate is the smallest", {
  set.seed(4)
  x <- sort(runif(300))
  y <- sin(40 * x) + rnorm(300, sd = 0.05)  # wiggly: the best is far below the rule of thumb
  fit <- local_poly(x, y, bandwidth = "cv", verbose = FALSE,
                    control = local_control(n_candidates = 10))
  rot <- local_poly(x, y, bandwidth = "rot", verbose = FALSE)$bandwidth
  expect_lt(min(fit$cv_curve$x), 0.05 * rot)
  expect_gt(fit$bandwidth, min(fit$cv_curve$x))
  expect_lt(fit$bandwidth, 0.05 * rot)
})

# Radius of the nn window by brute force: the k-th distance, or the `distinct`-th different
# distance (ties up to a relative 1e-9) when farther, times 1 + slack (twice the farthest
# distance when there are fewer), widened by 1e-12.
nn_radius_ref <- function(x, query, k, distinct, slack = 0) {
  vapply(seq_len(nrow(query)), function(q) {
    dist <- sort(sqrt(colSums((t(x) - query[q, ])^2)))
    levels <- dist[1]
    for (v in dist) if (v > levels[length(levels)] * (1 + 1e-9)) levels <- c(levels, v)
    reach <- if (distinct > length(levels)) 2 * max(dist) else
      if (levels[distinct] > dist[k]) levels[distinct] * (1 + slack) else dist[k]
    reach * (1 + 1e-12)
  }, 1)
}

test_that("nn(k) windows reach the k-th distinct distance on tied data (cars)", {
  fit <- local_poly(dist ~ speed, cars, kernel = "tricube", bandwidth = nn(10), verbose = FALSE)
  expect_true(all(is.finite(fitted(fit))))
  z <- cbind(cars$speed / sd(cars$speed))
  res <- localmean:::engine_run(fit$spec, fit$x)
  expect_equal(res$radius, nn_radius_ref(z, z, 10, 3), tolerance = 1e-14)
  # the fit is the weighted least squares fit with those windows
  h <- sd(cars$speed) * res$radius
  ref <- local_poly_ref(cars$speed, cars$dist, cbind(cars$speed), cbind(h), "tricube", 1)
  expect_equal(unname(fitted(fit)), ref$coef[, 1], tolerance = 1e-10)
  # the k nearest all have positive weight at speed 12 (4 ties, 6 points at distance 1)
  expect_equal(res$radius[cars$speed == 12], rep(2 / sd(cars$speed) * (1 + 1e-12), 4))
  # quadratic fits need three distances inside; 2-D windows as many as coefficients
  fit2 <- local_poly(dist ~ speed, cars, degree = 2, kernel = "epanechnikov", bandwidth = nn(4),
                     verbose = FALSE)
  expect_true(all(is.finite(fitted(fit2))))
  r2 <- localmean:::engine_run(fit2$spec, fit2$x)$radius
  expect_equal(r2, nn_radius_ref(z, z, 4, 4), tolerance = 1e-14)
  set.seed(7)
  xy <- cbind(round(runif(80) * 4), round(runif(80) * 4))
  y <- rnorm(80)
  fit3 <- local_poly(xy, y, kernel = "biweight", bandwidth = nn(5, scale = FALSE),
                     verbose = FALSE)
  r3 <- localmean:::engine_run(fit3$spec, xy)$radius
  expect_equal(r3, nn_radius_ref(xy, xy, 5, 4), tolerance = 1e-14)
})

test_that("uniform nn(k) stays exact k-NN on tied data, extending only degenerate windows", {
  fit <- local_mean(dist ~ speed, cars, kernel = "uniform", bandwidth = nn(10), verbose = FALSE)
  sets <- knn_sets_ref(cars$speed, cars$speed, 10)
  expect_equal(unname(fitted(fit)), vapply(sets, function(i) mean(cars$dist[i]), 1),
               tolerance = 1e-12)
  lin <- local_poly(dist ~ speed, cars, kernel = "uniform", bandwidth = nn(3), verbose = FALSE)
  expect_true(all(is.finite(fitted(lin))))
  z <- cbind(cars$speed / sd(cars$speed))
  expect_equal(localmean:::engine_run(lin$spec, lin$x)$radius,
               nn_radius_ref(z, z, 3, 2, 1e-9), tolerance = 1e-14)
})

test_that("nn(\"cv\") chooses k by leave-one-out and reports the curve", {
  fit <- local_poly(dist ~ speed, cars, kernel = "tricube", bandwidth = nn("cv"), verbose = FALSE)
  k <- fit$nn$k
  expect_identical(fit$bandwidth_method, "cv")
  expect_output(print(fit), sprintf("nn\\(%d\\) \\(cv\\)", k))
  curve <- fit$cv_curve
  expect_named(curve, c("k", "score"))
  expect_identical(k, curve$k[which.min(curve$score)])
  # every score is the cv of the fixed-k fit; k beats every k from 3 to 49
  each <- vapply(3:49, function(j) {
    quiet_fit(local_poly(dist ~ speed, cars, kernel = "tricube", bandwidth = nn(j),
                         verbose = FALSE))$cv
  }, 1)
  expect_equal(curve$score, each[curve$k - 2L], tolerance = 1e-12)
  expect_equal(min(curve$score), min(each), tolerance = 1e-12)
  expect_equal(fitted(fit), fitted(local_poly(dist ~ speed, cars, kernel = "tricube",
                                              bandwidth = nn(k), verbose = FALSE)))
  # k-NN classification by cv
  cls <- local_classify(Species ~ Petal.Length, iris, kernel = "uniform", bandwidth = nn("cv"),
                        verbose = FALSE)
  expect_true(cls$nn$k >= 2 && cls$nn$k < 150)
})

test_that("nn() refuses strings other than \"cv\" and bad counts", {
  expect_error(nn("aicc"), class = "localmean_error", regexp = "cv")
  expect_error(nn(0), class = "localmean_error", regexp = "k")
  expect_error(nn(c(2, 3)), class = "localmean_error", regexp = "k")
  expect_output(print(nn("cv")), "k = cv")
  expect_error(local_poly(1:4, c(1, 3, 2, 4), degree = 2, bandwidth = nn("cv"), verbose = FALSE),
               class = "localmean_error", regexp = "observations")
})

test_that("the gradient of the cv score in theta equals central differences", {
  set.seed(11)
  n <- 120
  x <- cbind(x1 = runif(n), x2 = rnorm(n))
  g <- factor(sample(c("a", "b", "c"), n, replace = TRUE))
  o <- factor(sample(c("lo", "mid", "hi"), n, replace = TRUE), levels = c("lo", "mid", "hi"),
              ordered = TRUE)
  y <- sin(3 * x[, 1]) + x[, 2] + as.integer(g) / 2 - as.integer(o) / 3 + rnorm(n, sd = 0.2)
  prior <- runif(n, 0.5, 2)
  categorical <- list(codes = cbind(as.integer(g), as.integer(o)),
                      levels = list(levels(g), levels(o)), ordered = c(FALSE, TRUE))
  for (degree in 0:1) {
    spec <- localmean:::engine_spec(x, "gaussian", c(0.2, 0.5), values = matrix(y),
                                    prior = prior, degree = degree, categorical = categorical,
                                    lambda = c(0.2, 0.4))
    expect_true(localmean:::gradient_search_applies("cv", spec))
    layout <- localmean:::theta_layout(spec, localmean:::bandwidth_bounds(spec))
    loss_of <- localmean:::loo_gradient_scorer(spec)
    theta <- c(log(c(0.2, 0.5)), qlogis(0.3), qlogis(0.6))
    res <- loss_of(theta, layout)
    # the value is the engine's cv score at these bandwidths and lambdas
    s <- localmean:::theta_scales(theta, layout)
    engine <- localmean:::spec_score("cv", localmean:::with_scale(spec, s$h, lambda = s$lambda))
    expect_equal(res$value, engine, tolerance = 1e-10)
    fd <- vapply(seq_along(theta), function(k) {
      e <- replace(numeric(length(theta)), k, 1e-5)
      (loss_of(theta + e, layout)$value - loss_of(theta - e, layout)$value) / 2e-5
    }, 1)
    expect_equal(res$gradient, fd, tolerance = 1e-6, info = paste("degree", degree))
    expect_true(all(abs(res$gradient) > 1e-8))  # every parameter moves the score
  }
  # the gradient search is not used where it does not apply (the uniform kernel: a step)
  spec <- localmean:::engine_spec(x, "uniform", c(0.2, 0.5), values = matrix(y), degree = 1)
  expect_false(localmean:::gradient_search_applies("cv", spec))
  expect_false(localmean:::gradient_search_applies("gcv", spec))
})

test_that("the mixed-data cv search is within 1% of a brute-force LOO minimised by optim()", {
  set.seed(12)
  n <- 80
  x <- cbind(x1 = runif(n), x2 = runif(n))
  g <- factor(sample(c("a", "b", "c"), n, replace = TRUE))
  y <- sin(4 * x[, 1]) + c(0, 0.5, 1)[as.integer(g)] + rnorm(n, sd = 0.2)
  # plain R: local linear LOO with the Gaussian product kernel and Aitchison-Aitken weights
  loo <- function(par) {
    h <- exp(par[1:2])
    lambda <- 2 / 3 * plogis(par[3])
    err <- vapply(seq_len(n), function(i) {
      u <- sweep(sweep(x[-i, ], 2, x[i, ]), 2, h, "/")
      w <- exp(-0.5 * rowSums(u^2)) * ifelse(g[-i] == g[i], 1 - lambda, lambda / 2)
      X <- cbind(1, u)
      b <- tryCatch(solve(crossprod(X, w * X), crossprod(X, w * y[-i])), error = function(e) NA)
      y[i] - b[1]
    }, 1)
    if (anyNA(err)) 1e10 else mean(err^2)
  }
  starts <- list(c(log(0.1), log(0.1), 0), c(log(0.3), log(0.3), -2))
  brute <- min(vapply(starts, function(s) {
    stats::optim(s, loo, control = list(maxit = 600, reltol = 1e-10))$value
  }, 1))
  d <- data.frame(x, g = g, y = y)
  fit <- local_poly(y ~ x1 + x2 + g, d, bandwidth = "cv", verbose = FALSE)
  expect_lte(fit$cv, 1.01 * brute)
  fit2 <- local_poly(y ~ x1 + x2 + g, d, bandwidth = "cv", verbose = FALSE, n_threads = 2)
  expect_identical(fit$bandwidth, fit2$bandwidth)
})

test_that("categorical predictors alone get a lambda-only search for every selector", {
  # (on main the candidate grid of zero bandwidths extended itself forever)
  upper <- 2 / 3  # three levels
  cyl <- factor(mtcars$cyl)
  # plain R: the leave-one-out local mean with Aitchison-Aitken weights
  loo <- function(lambda) {
    err <- vapply(seq_along(cyl), function(i) {
      w <- ifelse(cyl[-i] == cyl[i], 1 - lambda, lambda / 2)
      mtcars$mpg[i] - sum(w * mtcars$mpg[-i]) / sum(w)
    }, 1)
    mean(err^2)
  }
  brute <- stats::optimize(loo, c(0, upper), tol = 1e-10)
  for (sel in c("cv", "gcv", "aicc")) {
    fit <- local_poly(mpg ~ factor(cyl), data = mtcars, bandwidth = sel, verbose = FALSE)
    expect_length(fit$bandwidth, 1L)
    expect_true(fit$bandwidth >= 0 && fit$bandwidth <= upper, info = sel)
    expect_identical(fit$bandwidth_method, sel)
  }
  fit <- local_poly(mpg ~ factor(cyl), data = mtcars, bandwidth = "cv", verbose = FALSE)
  expect_lte(fit$cv, brute$objective * (1 + 1e-6))
  expect_equal(fit$cv, loo(fit$bandwidth[[1L]]), tolerance = 1e-8)
  # the other families and inputs that hung: every fit returns a lambda within its bounds
  fits <- list(
    local_classify(Species ~ I(Petal.Length > 4), data = iris, verbose = FALSE),
    local_poly(low ~ factor(race), data = MASS::birthwt, family = "binomial", verbose = FALSE),
    local_mean(matrix(as.character(mtcars$cyl)), mtcars$mpg, bandwidth = "cv", verbose = FALSE),
    local_poly(cbind(am = mtcars$am == 1, vs = mtcars$vs == 1), mtcars$mpg, bandwidth = "gcv",
               verbose = FALSE),
    local_poly(mpg ~ factor(cyl) + factor(gear), data = mtcars, bandwidth = "aicc",
               verbose = FALSE)
  )
  for (f in fits) {
    expect_true(all(is.finite(f$bandwidth) & f$bandwidth >= 0 & f$bandwidth <= 1))
  }
})

test_that("data near the smallest doubles give the bandwidths of the data scaled up", {
  fit <- local_poly(mtcars$wt, mtcars$mpg, bandwidth = "cv", verbose = FALSE)
  tiny <- local_poly(mtcars$wt * 1e-300, mtcars$mpg, bandwidth = "cv", verbose = FALSE)
  expect_equal(tiny$bandwidth * 1e300, fit$bandwidth, tolerance = 1e-6)
  expect_equal(tiny$cv, fit$cv, tolerance = 1e-6)
  x <- cbind(wt = mtcars$wt, hp = mtcars$hp)
  two <- local_poly(x, mtcars$mpg, bandwidth = "cv", verbose = FALSE)
  tiny2 <- local_poly(x * 1e-300, mtcars$mpg, bandwidth = "cv", verbose = FALSE)
  expect_equal(tiny2$cv, two$cv, tolerance = 1e-6)
})

test_that("every search loop is bounded", {
  # a score that always prefers the smallest candidate, with no lower bound to stop at
  grid <- localmean:::extend_candidates(function(h) sum(h), matrix(1:3), 1:3, rbind(0, 10))
  expect_identical(nrow(grid$candidates), 3L + localmean:::search_limits$steps)
  expect_error(local_poly(mtcars$wt, mtcars$mpg, bandwidth = "cv", verbose = FALSE,
                          control = local_control(n_candidates = 1e5)),
               "n_candidates", class = "localmean_error")
  expect_error(local_poly(mtcars$wt, mtcars$mpg, bandwidth = "cv", verbose = FALSE,
                          control = local_control(candidates = seq(0.1, 5, length.out = 2e3))),
               "candidates", class = "localmean_error")
})

test_that("the joint cv search drives a binary predictor's lambda to its bound 0", {
  set.seed(21)
  n <- 80
  x <- runif(n)
  g <- factor(sample(c("a", "b"), n, replace = TRUE))
  y <- sin(2 * pi * x) + 3 * (g == "b") + rnorm(n, sd = 0.1)
  # the levels differ by 3: mixing them only adds bias. A search on the logit only approaches
  # lambda = 0; the polish at the bounds reaches it.
  fit <- local_mean(y ~ x + g, data.frame(x, g, y), bandwidth = "cv", kernel = "epanechnikov",
                    verbose = FALSE)
  expect_identical(fit$bandwidth[[2L]], 0)
  score <- function(lambda) {
    localmean:::spec_score("cv", localmean:::with_scale(fit$spec, fit$bandwidth[[1L]],
                                                        lambda = lambda))
  }
  expect_equal(fit$cv, score(0))
  expect_lt(score(0), score(1e-4))
})

test_that("the mixed cv search on birthwt is within 1e-4 of a brute-force optimum", {
  skip_on_cran()
  b <- MASS::birthwt
  x <- b$lwt
  g <- b$ht
  y <- b$bwt
  n <- length(y)
  # plain R: Gaussian local linear leave-one-out with Aitchison-Aitken weights (two levels)
  loo <- function(par) {
    h <- exp(par[1L])
    lambda <- par[2L]
    err <- vapply(seq_len(n), function(i) {
      u <- (x[-i] - x[i]) / h
      w <- exp(-0.5 * u^2) * ifelse(g[-i] == g[i], 1 - lambda, lambda)
      X <- cbind(1, u)
      b <- tryCatch(solve(crossprod(X, w * X), crossprod(X, w * y[-i])), error = function(e) NA)
      y[i] - b[1]
    }, 1)
    if (anyNA(err)) 1e300 else mean(err^2)
  }
  fit <- local_poly(bwt ~ lwt + factor(ht), b, bandwidth = "cv", verbose = FALSE)
  ours <- c(log(fit$bandwidth[[1L]]), fit$bandwidth[[2L]])
  expect_equal(fit$cv, loo(ours), tolerance = 1e-8)
  starts <- list(ours, c(log(10), 0.25), c(log(40), 0.01))
  brute <- min(vapply(starts, function(s) {
    stats::optim(s, loo, method = "L-BFGS-B", lower = c(log(1), 0), upper = c(log(1e3), 0.5),
                 control = list(factr = 10))$value
  }, 1))
  expect_lte(fit$cv, brute * (1 + 1e-4))
})

test_that("R's time limits stop engine work within about a second", {
  skip_on_cran()
  set.seed(1)
  x <- matrix(rnorm(1.6e6), ncol = 2)  # an exact kde of these takes far longer than a second
  start <- proc.time()[["elapsed"]]
  expect_error({
    setTimeLimit(elapsed = 1, transient = TRUE)
    kde(x, method = "exact", verbose = FALSE)
  }, "time limit")
  setTimeLimit()
  expect_lt(proc.time()[["elapsed"]] - start, 4)
  # the threads have joined: the engine runs again
  expect_length(kde(x[1:100, ], verbose = FALSE)$bandwidth, 2L)
  # a cv search of many engine calls stops too
  set.seed(2)
  m <- matrix(runif(4e3 * 5), ncol = 5)
  start <- proc.time()[["elapsed"]]
  expect_error({
    setTimeLimit(elapsed = 1, transient = TRUE)
    local_poly(m, sin(6 * m[, 1]), bandwidth = "cv", verbose = FALSE)
  }, "time limit")
  setTimeLimit()
  expect_lt(proc.time()[["elapsed"]] - start, 4)
})

test_that("the 1-D search's one-pass scores equal fits at each candidate bandwidth", {
  set.seed(3)
  x <- runif(100)
  y <- sin(2 * pi * x) + rnorm(100, sd = 0.3)
  # leave-one-out score of a plain fit at bandwidth h: mean of (r / (1 - L))^2, Inf where a
  # fit is missing or a leverage is within 1e-10 of 1 (no leave-one-out identity)
  loo <- function(h, kernel) {
    f <- suppressWarnings(local_poly(x, y, kernel = kernel, bandwidth = h, verbose = FALSE))
    score <- mean(((y - f$fitted) / (1 - f$leverage))^2)
    if (is.na(score) || max(f$leverage) >= 1 - 1e-10) Inf else score
  }
  for (kernel in c("gaussian", "epanechnikov")) {
    fit <- local_poly(x, y, kernel = kernel, bandwidth = "cv", verbose = FALSE)
    h <- fit$cv_curve[[1L]]
    plain <- vapply(h, loo, 1, kernel = kernel)
    expect_equal(fit$cv_curve$score, plain, tolerance = 1e-10)
    # the golden-section search between the best candidate's neighbours, on plain fits (the
    # compact kernel's score jumps as points enter windows: its search can stop elsewhere)
    if (kernel != "gaussian") next
    best <- which.min(plain)
    opt <- stats::optimize(function(lr) loo(h[best] * exp(lr), kernel),
                           log(h[c(best - 1L, best + 1L)] / h[best]), tol = 1e-3)
    expect_equal(fit$bandwidth, h[best] * exp(opt$minimum), tolerance = 1e-3)
  }
  # one thread or two: the same scores
  two <- local_poly(x, y, bandwidth = "cv", n_threads = 2L, verbose = FALSE)
  one <- local_poly(x, y, bandwidth = "cv", n_threads = 1L, verbose = FALSE)
  expect_identical(two$cv_curve, one$cv_curve)
})
