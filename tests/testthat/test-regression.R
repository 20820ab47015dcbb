# The regression family (R/regression.R): local_mean(), local_poly() and their methods.

# ---- numbers against the brute-force reference -------------------------------------------------

d1 <- make_data_1d(150)
d2 <- make_data_2d(200)
q1 <- seq(-0.05, 1.05, length.out = 23)
q2 <- cbind(x1 = c(-0.05, 0.1, 0.5, 0.9, 1.02, 0.33, 0.71),
            x2 = c(0.5, 0.95, 0.5, 0.05, 1.03, 0.71, 0.2))

test_that("every kernel, degree 0-2, 1-D and 2-D, exact and tree, matches the reference", {
  for (k in kernel_names_ref) {
    for (d in 1:2) {
      dat <- if (d == 1) d1 else d2
      q <- if (d == 1) q1 else q2
      h <- ref_bandwidth(k, d)
      for (deg in 0:2) {
        ref_q <- local_poly_ref(dat$x, dat$y, q, h, k, deg)
        ref_x <- local_poly_ref(dat$x, dat$y, dat$x, h, k, deg)
        for (meth in c("exact", "tree")) {
          info <- sprintf("kernel %s, d = %d, degree %d, method %s", k, d, deg, meth)
          fit <- local_poly(dat$x, dat$y, degree = deg, kernel = k, bandwidth = h,
                            method = meth, verbose = FALSE)
          expect_equal(unname(fitted(fit)), ref_x$coef[, 1], tolerance = 1e-10, info = info)
          expect_equal(predict_beyond(fit, q), ref_q$coef[, 1], tolerance = 1e-10, info = info)
          if (deg >= 1) {
            expect_equal(unname(predict_beyond(fit, q, deriv = 1)), drop(deriv_ref(ref_q, 1)),
                         tolerance = 1e-10, info = info)
          }
          if (deg >= 2) {
            expect_equal(unname(predict_beyond(fit, q, deriv = 2)), drop(deriv_ref(ref_q, 2)),
                         tolerance = 1e-10, info = info)
          }
        }
      }
    }
  }
})

test_that("degree 3 matches the reference in 1-D, derivatives included", {
  for (k in c("gaussian", "epanechnikov", "tricube")) {
    h <- if (k == "gaussian") 0.15 else 0.4
    ref <- local_poly_ref(d1$x, d1$y, q1, h, k, 3)
    fit <- local_poly(d1$x, d1$y, degree = 3, kernel = k, bandwidth = h, method = "tree",
                      verbose = FALSE)
    expect_equal(predict_beyond(fit, q1), ref$coef[, 1], tolerance = 1e-10, info = k)
    expect_equal(predict_beyond(fit, q1, deriv = 1), ref$coef[, 2], tolerance = 1e-10, info = k)
    expect_equal(predict_beyond(fit, q1, deriv = 2), 2 * ref$coef[, 3], tolerance = 1e-10, info = k)
  }
})

test_that("local_mean() is the Nadaraya-Watson local mean and equals local_poly(degree = 0)", {
  h <- 0.07
  nw <- local_mean(d1$x, d1$y, kernel = "gaussian", bandwidth = h, verbose = FALSE)
  # written out: sum_i K(q, x_i) y_i / sum_i K(q, x_i)
  expected <- vapply(q1, function(q) {
    w <- dnorm((d1$x - q) / h)
    sum(w * d1$y) / sum(w)
  }, numeric(1))
  expect_equal(predict_beyond(nw, q1), expected, tolerance = 1e-10)
  lp <- local_poly(d1$x, d1$y, degree = 0, kernel = "gaussian", bandwidth = h, verbose = FALSE)
  expect_identical(predict_beyond(nw, q1), predict_beyond(lp, q1))
  expect_s3_class(nw, c("local_mean", "local_poly", "local_model"), exact = TRUE)
  expect_s3_class(lp, c("local_poly", "local_model"), exact = TRUE)
  expect_identical(nw$degree, 0L)
  expect_error(local_mean(d1$x, d1$y, degree = 1, bandwidth = h, verbose = FALSE),
               class = "localmean_error", regexp = "degree")
})

test_that("leverages, sigma and se.fit match the reference equivalent kernel", {
  for (k in c("gaussian", "tricube", "cauchy")) {
    h <- ref_bandwidth(k, 1)
    for (deg in 0:2) {
      info <- sprintf("kernel %s, degree %d", k, deg)
      fit <- local_poly(d1$x, d1$y, degree = deg, kernel = k, bandwidth = h, method = "exact",
                        verbose = FALSE)
      L <- smoother_matrix_ref(d1$x, d1$y, h, k, deg)
      n <- length(d1$y)
      expect_equal(fit$leverage, diag(L), tolerance = 1e-10, info = info)
      expect_equal(fit$df, sum(diag(L)), tolerance = 1e-10, info = info)
      rss <- sum((d1$y - L %*% d1$y)^2)
      sigma <- sqrt(rss / (n - sum(diag(L))))
      expect_equal(fit$sigma, sigma, tolerance = 1e-10, info = info)

      ref <- local_poly_ref(d1$x, d1$y, q1, h, k, deg)
      l2 <- function(row) vapply(ref$ops, function(A) sum(A[row, ]^2), numeric(1))
      p <- predict_beyond(fit, q1, se.fit = TRUE)
      expect_named(p, c("fit", "se.fit", "df", "residual.scale"))
      expect_equal(p$fit, ref$coef[, 1], tolerance = 1e-10, info = info)
      expect_equal(p$se.fit, sigma * sqrt(l2(1)), tolerance = 1e-10, info = info)
      expect_equal(p$residual.scale, sigma, tolerance = 1e-10, info = info)
      expect_equal(p$df, n - sum(diag(L)), tolerance = 1e-10, info = info)
      if (deg >= 1) {
        p1 <- predict_beyond(fit, q1, se.fit = TRUE, deriv = 1)
        expect_equal(p1$fit, ref$coef[, 2], tolerance = 1e-10, info = info)
        expect_equal(p1$se.fit, sigma * sqrt(l2(2)), tolerance = 1e-10, info = info)
      }
      if (deg >= 2) {
        p2 <- predict_beyond(fit, q1, se.fit = TRUE, deriv = 2)
        expect_equal(p2$fit, 2 * ref$coef[, 3], tolerance = 1e-10, info = info)
        expect_equal(p2$se.fit, 2 * sigma * sqrt(l2(3)), tolerance = 1e-10, info = info)
      }
    }
  }
})

test_that("se.fit and derivatives in 2-D match the reference", {
  h <- c(0.2, 0.25)
  fit <- local_poly(d2$x, d2$y, degree = 2, kernel = "biweight", bandwidth = h * 2,
                    method = "tree", verbose = FALSE)
  ref <- local_poly_ref(d2$x, d2$y, q2, h * 2, "biweight", 2)
  L <- smoother_matrix_ref(d2$x, d2$y, h * 2, "biweight", 2)
  sigma <- sqrt(sum((d2$y - L %*% d2$y)^2) / (nrow(d2$x) - sum(diag(L))))
  l2 <- function(row) vapply(ref$ops, function(A) sum(A[row, ]^2), numeric(1))
  p <- predict_beyond(fit, q2, se.fit = TRUE)
  expect_equal(p$se.fit, sigma * sqrt(l2(1)), tolerance = 1e-10)
  g <- predict_beyond(fit, q2, deriv = 1, se.fit = TRUE)
  expect_identical(colnames(g$fit), c("x1", "x2"))
  expect_equal(unname(g$fit), deriv_ref(ref, 1), tolerance = 1e-10)
  j1 <- term_ref(ref$powers, 1, 1)
  j2 <- term_ref(ref$powers, 2, 1)
  expect_equal(unname(g$se.fit), sigma * sqrt(cbind(l2(j1), l2(j2))), tolerance = 1e-10)
  h2 <- predict_beyond(fit, q2, deriv = 2, se.fit = TRUE)
  expect_equal(unname(h2$fit), deriv_ref(ref, 2), tolerance = 1e-10)
  k1 <- term_ref(ref$powers, 1, 2)
  k2 <- term_ref(ref$powers, 2, 2)
  expect_equal(unname(h2$se.fit), 2 * sigma * sqrt(cbind(l2(k1), l2(k2))), tolerance = 1e-10)
})

test_that("prior weights enter the local least squares as W_i = prior_i k_i", {
  set.seed(5)
  pw <- runif(length(d1$y), 0.2, 3)
  for (meth in c("exact", "tree")) {
    fit <- local_poly(d1$x, d1$y, degree = 1, kernel = "biweight", bandwidth = 0.3,
                      weights = pw, method = meth, verbose = FALSE)
    ref <- local_poly_ref(d1$x, d1$y, q1, 0.3, "biweight", 1, prior = pw)
    ref_x <- local_poly_ref(d1$x, d1$y, d1$x, 0.3, "biweight", 1, prior = pw)
    expect_equal(predict_beyond(fit, q1), ref$coef[, 1], tolerance = 1e-10, info = meth)
    expect_equal(unname(fitted(fit)), ref_x$coef[, 1], tolerance = 1e-10, info = meth)
    lev <- vapply(seq_along(ref_x$ops), function(i) ref_x$ops[[i]][1, i], numeric(1))
    expect_equal(fit$leverage, lev, tolerance = 1e-10, info = meth)
    # var(y_i) = sigma^2 / prior_i
    se <- fit$sigma * sqrt(vapply(ref$ops, function(A) sum(A[1, ]^2 / pw), numeric(1)))
    expect_equal(predict_beyond(fit, q1, se.fit = TRUE)$se.fit, se, tolerance = 1e-10, info = meth)
  }
  # 2-D, with zero weights: those points are ignored
  pw2 <- rep(c(1, 0, 2), length.out = nrow(d2$x))
  fit <- local_poly(d2$x, d2$y, degree = 1, kernel = "gaussian", bandwidth = c(0.15, 0.2),
                    weights = pw2, verbose = FALSE)
  ref <- local_poly_ref(d2$x, d2$y, q2, c(0.15, 0.2), "gaussian", 1, prior = pw2)
  expect_equal(predict_beyond(fit, q2), ref$coef[, 1], tolerance = 1e-10)
  keep <- pw2 > 0
  sub <- local_poly(d2$x[keep, ], d2$y[keep], degree = 1, kernel = "gaussian",
                    bandwidth = c(0.15, 0.2), weights = pw2[keep], verbose = FALSE)
  expect_equal(predict_beyond(fit, q2), predict_beyond(sub, q2), tolerance = 1e-12)
})

test_that("adaptive nn(k) bandwidths with a smooth kernel match the reference", {
  k <- 25
  for (sc in c(FALSE, TRUE)) {
    x <- d2$x
    x[, 2] <- 5 * x[, 2]
    q <- q2
    q[, 2] <- 5 * q[, 2]
    s <- if (sc) apply(x, 2, sd) else c(1, 1)
    radius <- knn_radius_ref(sweep(x, 2, s, "/"), sweep(q, 2, s, "/"), k)
    hq <- outer(radius, s)
    for (deg in 0:1) {
      fit <- local_poly(x, d2$y, degree = deg, kernel = "epanechnikov",
                        bandwidth = nn(k, scale = sc), verbose = FALSE)
      # the k-th neighbour sits on the boundary with weight 0, so widen as the engine does
      ref <- local_poly_ref(x, d2$y, q, hq * (1 + 1e-12), "epanechnikov", deg)
      expect_equal(predict_beyond(fit, q), ref$coef[, 1], tolerance = 1e-9,
                   info = paste("scale", sc, "degree", deg))
    }
    fit <- local_poly(x, d2$y, degree = 1, kernel = "gaussian", bandwidth = nn(k, scale = sc),
                      verbose = FALSE)
    ref <- local_poly_ref(x, d2$y, q, hq * (1 + 1e-12), "gaussian", 1)
    expect_equal(predict_beyond(fit, q), ref$coef[, 1], tolerance = 1e-9)
    expect_equal(unname(predict_beyond(fit, q, deriv = 1)), deriv_ref(ref, 1), tolerance = 1e-9)
    se <- fit$sigma * sqrt(vapply(ref$ops, function(A) sum(A[1, ]^2), numeric(1)))
    expect_equal(predict_beyond(fit, q, se.fit = TRUE)$se.fit, se, tolerance = 1e-9)
  }
})

# The binned strategy's fits at the data come from one C++ pass over the grid's fits
# (engine_data_fit()); they must equal the engine's interpolation at the data points, and the
# summaries a plain-R computation (sums in another order: 1e-12 relative).
test_that("binned fits at the data and their statistics match the engine and plain R", {
  set.seed(31)
  n <- 12000L
  x1 <- runif(n)
  x2 <- cbind(a = runif(n), b = runif(n))
  y <- sin(2 * pi * x1) + x2[, 2] + rnorm(n, sd = 0.3)
  w <- runif(n)
  w[1:20] <- 0
  cases <- list(list(x = x1, h = 0.03, degree = 1), list(x = x2, h = c(0.08, 0.1), degree = 2))
  for (case in cases) for (wts in list(NULL, w)) {
    info <- sprintf("d = %d, weights: %s", NCOL(case$x), !is.null(wts))
    fit <- local_poly(case$x, y, degree = case$degree, bandwidth = case$h, weights = wts,
                      method = "binned", n_threads = 1, verbose = FALSE)
    spec <- fit$spec
    ref <- localmean:::engine_run(spec, as.matrix(case$x), n_threads = 1L)
    expect_identical(unname(fitted(fit)), ref$coef[, 1L, 1L], info = info)
    expect_identical(fit$leverage, (wts %||% 1) * ref$s00, info = info)
    expect_identical(residuals(fit), y - fitted(fit), info = info)
    p <- wts %||% rep(1, n)
    r <- y - ref$coef[, 1L, 1L]
    lev <- p * ref$s00
    expect_equal(fit$df, sum(lev), tolerance = 1e-12, info = info)
    expect_equal(fit$sigma, sqrt(sum(p * r^2) / (sum(p > 0) - sum(lev))), tolerance = 1e-12,
                 info = info)
    ybar <- sum(p * y) / sum(p)
    expect_equal(fit$r.squared, 1 - sum(p * r^2) / sum(p * (y - ybar)^2), tolerance = 1e-12,
                 info = info)
    expect_equal(fit$cv, sum(p * (r / (1 - lev))^2) / sum(p), tolerance = 1e-12, info = info)
    for (criterion in c("cv", "gcv", "aicc")) {
      expect_equal(localmean:::spec_score(criterion, spec, 1L),
                   localmean:::smoother_score(criterion, localmean:::fit_sums(y, y - r, lev, wts)),
                   tolerance = 1e-12, info = paste(info, criterion))
    }
    two <- local_poly(case$x, y, degree = case$degree, bandwidth = case$h, weights = wts,
                      method = "binned", n_threads = 2, verbose = FALSE)
    for (field in c("fitted", "leverage", "residuals", "df", "sigma", "r.squared", "cv")) {
      expect_identical(two[[field]], fit[[field]], info = paste(info, field))
    }
  }
  # the one-pass summaries equal plain R's sums of given fits, missing fits left out
  f <- y - rnorm(n, sd = 0.1)
  lev <- runif(n, 0, 0.01)
  f[5] <- NA
  s <- localmean:::fit_sums(y, f, lev, w)
  ok <- is.finite(f)
  expect_equal(s$rss, sum((w * (y - f)^2)[ok]), tolerance = 1e-12)
  expect_equal(s$trace, sum(lev[ok]), tolerance = 1e-12)
  expect_equal(s$count, sum(ok & w > 0))
  expect_equal(s$spread, sum((w * (y - sum((w * y)[ok]) / sum(w[ok]))^2)[ok]), tolerance = 1e-12)
  expect_identical(s$status, c(n - 1L, 0L, 1L, 0L) + 0L)
  expect_identical(localmean:::smoother_score("cv", s), Inf)
})

# A binned fit keeps its grid's node fits; predictions on that grid interpolate them instead of
# binning the data again, and must equal the engine's binned predictions; a query beyond the
# data widens the grid, and then the data are binned again.
test_that("predictions from a binned fit's stored node fits equal the engine's", {
  set.seed(32)
  n <- 12000L
  x1 <- runif(n)
  x2 <- cbind(a = runif(n), b = runif(n))
  y <- sin(2 * pi * x1) + x2[, 2] + rnorm(n, sd = 0.3)
  w <- runif(n)
  cases <- list(list(x = x1, h = 0.03, degree = 1, q = matrix(seq(min(x1), max(x1), length.out = 57))),
                list(x = x2, h = c(0.08, 0.1), degree = 2,
                     q = cbind(a = runif(40, 0.1, 0.9), b = runif(40, 0.1, 0.9))))
  for (case in cases) for (wts in list(NULL, w)) {
    info <- sprintf("d = %d, weights: %s", NCOL(case$x), !is.null(wts))
    fit <- local_poly(case$x, y, degree = case$degree, bandwidth = case$h, weights = wts,
                      method = "binned", n_threads = 1, verbose = FALSE)
    spec <- fit$spec
    expect_true(localmean:::stored_nodes_apply(fit$nodes, spec, spec$range), info = info)
    q <- case$q
    ref <- localmean:::engine_run(spec, q, n_threads = 1L)  # bins again
    stored <- localmean:::engine_run(spec, q, n_threads = 1L, nodes = fit$nodes)
    expect_identical(stored, ref, info = info)
    newdata <- if (is.matrix(case$x)) as.data.frame(q) else q[, 1L]
    expect_identical(predict(fit, newdata), ref$coef[, 1L, 1L], info = info)
    expect_identical(unname(predict(fit, newdata, deriv = 1)),
                     unname(drop(localmean:::engine_run(spec, q)$coef[, 1L + seq_len(NCOL(q)), 1L])),
                     info = info)
    # beyond the data: a wider grid, not the stored one
    far <- q
    far[1L, ] <- -0.5
    grid_range <- rbind(pmin(spec$range[1L, ], -0.5), spec$range[2L, ])
    expect_false(localmean:::stored_nodes_apply(fit$nodes, spec, grid_range), info = info)
    expect_identical(suppressWarnings(predict(fit, if (is.matrix(case$x)) as.data.frame(far) else far[, 1L])),
                     suppressWarnings(localmean:::engine_run(spec, far)$coef[, 1L, 1L]), info = info)
    # other values, weights or degree (as local_variance() sets them) do not use the stored fits
    other <- spec
    other$degree <- 0L
    expect_false(localmean:::stored_nodes_apply(fit$nodes, other, spec$range), info = info)
    two <- local_poly(case$x, y, degree = case$degree, bandwidth = case$h, weights = wts,
                      method = "binned", n_threads = 2, verbose = FALSE)
    expect_identical(two$nodes, fit$nodes, info = info)
  }
})

test_that("duplicated x values work and give finite fits", {
  set.seed(11)
  x <- rep(round(runif(30), 2), each = 4)
  y <- sin(2 * pi * x) + rnorm(length(x), sd = 0.1)
  for (meth in c("exact", "tree", "binned")) {
    fit <- local_poly(x, y, degree = 1, bandwidth = 0.1, method = meth, verbose = FALSE)
    expect_true(all(is.finite(fitted(fit))), info = meth)
    expect_true(all(is.finite(predict(fit, c(0.1, 0.5)))), info = meth)
  }
  fit <- local_poly(x, y, degree = 2, kernel = "epanechnikov", bandwidth = 0.25,
                    method = "exact", verbose = FALSE)
  ref <- local_poly_ref(x, y, unique(x), 0.25, "epanechnikov", 2)
  expect_equal(predict(fit, unique(x)), ref$coef[, 1], tolerance = 1e-10)
  cv <- local_poly(x, y, bandwidth = "cv", verbose = FALSE)
  expect_true(is.finite(cv$bandwidth))
  expect_true(all(is.finite(fitted(cv))))
  # two predictors with exact duplicate rows
  x2 <- cbind(a = rep(1:10, 6), b = rep(c(0.5, 1.5, 2.5), 20))
  y2 <- x2[, 1] + x2[, 2]
  fit2 <- local_poly(x2, y2, degree = 1, bandwidth = c(2, 1), verbose = FALSE)
  expect_true(all(is.finite(fitted(fit2))))
  expect_equal(unname(fitted(fit2)), x2[, 1] + x2[, 2], tolerance = 1e-8)
})

test_that("nn(k) works when k or more points share the query's location", {
  # kNN with ties at distance 0: the k-th neighbour distance is 0, and the tied points must
  # still be averaged (here every value appears 8 times, so the 6-NN mean is the mean of the 8
  # copies); the same for 1-NN at the training points, which is the point itself.
  set.seed(12)
  u <- runif(30)
  x <- rep(u, each = 8)
  y <- sin(6 * x) + rnorm(length(x))
  knn <- local_mean(x, y, kernel = "uniform", bandwidth = nn(6), verbose = FALSE)
  expect_equal(unname(fitted(knn)), ave(y, x), tolerance = 1e-12)
  expect_equal(predict(knn, u[1:3]), vapply(u[1:3], function(v) mean(y[x == v]), 1),
               tolerance = 1e-12)
  one <- local_mean(d1$x, d1$y, kernel = "uniform", bandwidth = nn(1), verbose = FALSE)
  expect_equal(unname(fitted(one)), d1$y)
  expect_equal(predict(one, d1$x[1:5]), d1$y[1:5])
})

test_that("local linear fits reproduce a linear function exactly", {
  x <- d2$x
  y <- 1 + 2 * x[, 1] - 3 * x[, 2]
  for (k in c("gaussian", "uniform", "cauchy")) {
    fit <- local_poly(x, y, degree = 1, kernel = k, bandwidth = ref_bandwidth(k, 2),
                      verbose = FALSE)
    expect_equal(predict_beyond(fit, q2), 1 + 2 * q2[, 1] - 3 * q2[, 2], tolerance = 1e-10,
                 info = k)
    g <- predict_beyond(fit, q2, deriv = 1)
    expect_equal(unname(g), cbind(rep(2, nrow(q2)), rep(-3, nrow(q2))), tolerance = 1e-8,
                 info = k)
  }
})

# ---- formula interface -------------------------------------------------------------------------

test_that("the formula method equals the default method and keeps terms for predict()", {
  df <- data.frame(y = d2$y, a = d2$x[, 1], b = d2$x[, 2])
  f <- local_poly(y ~ a + b, data = df, degree = 1, bandwidth = c(0.15, 0.2), verbose = FALSE)
  m <- local_poly(as.matrix(df[c("a", "b")]), df$y, degree = 1, bandwidth = c(0.15, 0.2),
                  verbose = FALSE)
  expect_equal(fitted(f), fitted(m), ignore_attr = TRUE)
  nd <- data.frame(b = q2[, 2], a = q2[, 1], junk = "z")  # order and extra columns do not matter
  expect_identical(predict_beyond(f, nd), predict_beyond(m, cbind(a = q2[, 1], b = q2[, 2])))
  expect_identical(formula(f), y ~ a + b)
  expect_identical(nobs(f), nrow(df))
  # transformations of the predictors
  df$z <- exp(df$a)
  g <- local_poly(y ~ log(z) + b, data = df, degree = 1, bandwidth = c(0.15, 0.2),
                  verbose = FALSE)
  expect_equal(predict_beyond(g, data.frame(z = exp(q2[, 1]), b = q2[, 2])),
               predict_beyond(m, cbind(a = q2[, 1], b = q2[, 2])), tolerance = 1e-12)
  # local_mean formula
  nw <- local_mean(y ~ a, data = df, bandwidth = 0.1, verbose = FALSE)
  expect_s3_class(nw, "local_mean")
  expect_equal(predict(nw, data.frame(a = 0.5)),
               predict(local_mean(df$a, df$y, bandwidth = 0.1, verbose = FALSE), 0.5))
  # subset and weights
  w <- rep(c(1, 2), length.out = nrow(df))
  s <- local_poly(y ~ a, data = df, subset = a < 0.8, weights = w, bandwidth = 0.1,
                  verbose = FALSE)
  keep <- df$a < 0.8
  s2 <- local_poly(df$a[keep], df$y[keep], weights = w[keep], bandwidth = 0.1, verbose = FALSE)
  expect_identical(nobs(s), sum(keep))
  expect_equal(predict(s, data.frame(a = 0.4)), predict(s2, 0.4))
  # local_mean() passes them on as expressions too (they failed there: "..1 used in an
  # incorrect context"), from a function's own variables as well
  s0 <- local_poly(y ~ a, data = df, subset = a < 0.8, weights = w, bandwidth = 0.1,
                   degree = 0, verbose = FALSE)
  in_function <- function(cut) {
    local_mean(y ~ a, data = df, subset = a < cut, weights = w, bandwidth = 0.1,
               verbose = FALSE)
  }
  m0 <- in_function(0.8)
  expect_s3_class(m0, "local_mean")
  expect_equal(fitted(m0), fitted(s0))
  expect_identical(m0$call[[1L]], as.name("local_mean"))
})

test_that("formula rows with NA are dropped by na.omit", {
  df <- data.frame(y = d1$y, x = d1$x)
  df$y[c(3, 10)] <- NA
  df$x[20] <- NA
  fit <- local_poly(y ~ x, data = df, bandwidth = 0.1, verbose = FALSE)
  expect_identical(nobs(fit), nrow(df) - 3L)
  ok <- complete.cases(df)
  ref <- local_poly(df$x[ok], df$y[ok], bandwidth = 0.1, verbose = FALSE)
  expect_equal(unname(fitted(fit)), unname(fitted(ref)))
  expect_length(fitted(fit), nrow(df) - 3L)
  expect_length(residuals(fit), nrow(df) - 3L)
  # na.exclude pads with NA
  ex <- local_poly(y ~ x, data = df, bandwidth = 0.1, na.action = na.exclude, verbose = FALSE)
  expect_length(fitted(ex), nrow(df))
  expect_identical(which(is.na(fitted(ex))), c(3L, 10L, 20L))
  expect_identical(nobs(ex), nrow(df) - 3L)
  expect_length(residuals(ex), nrow(df))
  expect_identical(which(is.na(residuals(ex))), c(3L, 10L, 20L))
  expect_identical(predict(ex), fitted(ex))
})

# ---- bad input ---------------------------------------------------------------------------------

test_that("missing or non-finite values in x or y are clear errors", {
  x <- d1$x
  y <- d1$y
  for (bad in c(NA, NaN, Inf, -Inf)) {
    xb <- x
    xb[7] <- bad
    yb <- y
    yb[9] <- bad
    expect_error(local_poly(xb, y, bandwidth = 0.1, verbose = FALSE), class = "localmean_error",
                 regexp = "non-finite")
    expect_error(local_poly(x, yb, bandwidth = 0.1, verbose = FALSE), class = "localmean_error",
                 regexp = "non-finite")
    expect_error(local_mean(xb, y, bandwidth = 0.1, verbose = FALSE), class = "localmean_error")
  }
  xm <- d2$x
  xm[4, 2] <- NA
  expect_error(local_poly(xm, d2$y, bandwidth = 0.2, verbose = FALSE),
               class = "localmean_error", regexp = "x2")
  expect_error(local_poly(x, y[-1], bandwidth = 0.1, verbose = FALSE),
               class = "localmean_error", regexp = "length")
  expect_error(local_poly(x, as.character(y), bandwidth = 0.1, verbose = FALSE),
               class = "localmean_error", regexp = "numeric")
})

test_that("input errors name the argument", {
  x <- d1$x
  y <- d1$y
  xb <- replace(x, 7, NA)
  yb <- replace(y, 9, Inf)
  expect_error(local_poly(xb, y, bandwidth = 0.1, verbose = FALSE), class = "localmean_error",
               regexp = "`x` has missing or non-finite values")
  expect_error(local_poly(x, yb, bandwidth = 0.1, verbose = FALSE), class = "localmean_error",
               regexp = "`y` has missing or non-finite values")
  expect_error(local_poly(x, y[-1], bandwidth = 0.1, verbose = FALSE),
               class = "localmean_error", regexp = "`y` has length 149")
  expect_error(local_poly(numeric(0), numeric(0), bandwidth = 1, verbose = FALSE),
               class = "localmean_error", regexp = "`x` has no rows")
  expect_error(local_classify(xb, factor(y > 0), bandwidth = 0.1, verbose = FALSE),
               class = "localmean_error", regexp = "`x` has missing")
})

test_that("empty data and too few rows are clear errors", {
  expect_error(local_poly(numeric(0), numeric(0), bandwidth = 1, verbose = FALSE),
               class = "localmean_error", regexp = "no rows")
  expect_error(local_poly(matrix(numeric(0), 0, 2), numeric(0), bandwidth = 1,
                          verbose = FALSE), class = "localmean_error")
  expect_error(local_poly(y ~ x, data = data.frame(x = numeric(0), y = numeric(0)),
                          bandwidth = 1, verbose = FALSE), class = "localmean_error")
  expect_error(local_poly(y ~ x, data = data.frame(x = c(1, NA), y = c(NA, 2)),
                          bandwidth = 1, verbose = FALSE), class = "localmean_error")
  # degree 2 in 1-D needs 3 points, degree 1 in 2-D needs 3, degree 2 in 2-D needs 6
  expect_error(local_poly(c(1, 2), c(1, 2), degree = 2, bandwidth = 1, verbose = FALSE),
               class = "localmean_error", regexp = "3")
  expect_error(local_poly(cbind(c(1, 2), c(3, 5)), c(1, 2), degree = 1, bandwidth = 1,
                          verbose = FALSE), class = "localmean_error")
  expect_error(local_poly(d2$x[1:5, ], d2$y[1:5], degree = 2, bandwidth = 1, verbose = FALSE),
               class = "localmean_error", regexp = "6")
  expect_error(local_mean(1, 1, bandwidth = 1, verbose = FALSE), class = "localmean_error")
  expect_error(local_poly(y ~ 1, data = data.frame(y = 1:5), bandwidth = 1, verbose = FALSE),
               class = "localmean_error", regexp = "predictor")
})

test_that("zero, negative, non-finite and wrong-length bandwidths are clear errors", {
  for (bad in list(0, -0.1, Inf, NA_real_, NaN, c(0.1, 0.2), numeric(0), TRUE, "wide",
                   list(0.1), c("cv", "gcv"))) {
    expect_error(local_poly(d1$x, d1$y, bandwidth = bad, verbose = FALSE),
                 class = "localmean_error", regexp = "bandwidth")
  }
  expect_error(local_poly(d2$x, d2$y, bandwidth = c(0.1, 0.2, 0.3), verbose = FALSE),
               class = "localmean_error", regexp = "bandwidth")
  expect_error(local_poly(d2$x, d2$y, bandwidth = c(0.1, -0.2), verbose = FALSE),
               class = "localmean_error", regexp = "bandwidth")
  # one value for several predictors is fine
  fit <- local_poly(d2$x, d2$y, bandwidth = 0.2, verbose = FALSE)
  expect_identical(fit$bandwidth, c(0.2, 0.2))
})

test_that("nn(k) needs k < n and a whole positive k", {
  x <- d1$x[1:20]
  y <- d1$y[1:20]
  expect_error(local_mean(x, y, bandwidth = nn(20), verbose = FALSE),
               class = "localmean_error", regexp = "k")
  expect_error(local_mean(x, y, bandwidth = nn(25), verbose = FALSE),
               class = "localmean_error", regexp = "k")
  expect_error(nn(0), class = "localmean_error", regexp = "k")
  expect_error(nn(2.5), class = "localmean_error", regexp = "k")
  expect_error(nn(NA), class = "localmean_error", regexp = "k")
  expect_error(nn(3, scale = NA), class = "localmean_error", regexp = "scale")
  fit <- local_mean(x, y, kernel = "uniform", bandwidth = nn(19), verbose = FALSE)
  expect_true(all(is.finite(fitted(fit))))
})

test_that("a constant predictor is a clear error", {
  expect_error(local_poly(rep(1, 20), rnorm(20), bandwidth = 1, verbose = FALSE),
               class = "localmean_error", regexp = "constant")
  x <- cbind(a = runif(20), b = 3)
  expect_error(local_poly(x, rnorm(20), bandwidth = 1, verbose = FALSE),
               class = "localmean_error", regexp = "b")
})

test_that("character and factor predictors are categorical; interactions are refused", {
  # Factors and character columns were refused before issue 15; they are categorical now
  # (test-predictors.R checks their fits against a brute-force product kernel).
  df <- data.frame(y = d1$y, x = d1$x, f = factor(rep(c("a", "b"), 75)),
                   s = rep(c("u", "v", "w"), 50))
  fit <- local_poly(y ~ x + f, data = df, bandwidth = c(0.1, 0.2), verbose = FALSE)
  expect_identical(fit$predictors$kind, c("numeric", "unordered"))
  expect_equal(fitted(fit), fitted(local_poly(df[c("x", "f")], df$y, bandwidth = c(0.1, 0.2),
                                              verbose = FALSE)))
  expect_length(fitted(local_mean(df$s, df$y, bandwidth = 0.5, verbose = FALSE)), 150)
  expect_error(local_poly(y ~ x + f, data = df, bandwidth = 0.1, verbose = FALSE),
               class = "localmean_error", regexp = "one value per predictor")
  df$z <- runif(150)
  expect_error(local_poly(y ~ x * z, data = df, bandwidth = 0.1, verbose = FALSE),
               class = "localmean_error", regexp = "Interaction")
})

test_that("negative, non-finite or wrong-length weights are refused", {
  for (bad in list(replace(rep(1, 150), 3, -1), replace(rep(1, 150), 3, NA),
                   replace(rep(1, 150), 3, Inf), rep(1, 149), rep(0, 150),
                   rep("1", 150))) {
    expect_error(local_poly(d1$x, d1$y, bandwidth = 0.1, weights = bad, verbose = FALSE),
                 class = "localmean_error", regexp = "weights")
  }
  df <- data.frame(y = d1$y, x = d1$x, w = -1)
  expect_error(local_poly(y ~ x, data = df, weights = w, bandwidth = 0.1, verbose = FALSE),
               class = "localmean_error", regexp = "weights")
})

test_that("unknown kernels, degree above 3 and deriv above the degree are refused", {
  expect_error(local_poly(d1$x, d1$y, kernel = "epanechnikow", bandwidth = 0.1,
                          verbose = FALSE), class = "localmean_error", regexp = "kernel")
  expect_error(local_poly(d1$x, d1$y, kernel = NA, bandwidth = 0.1, verbose = FALSE),
               class = "localmean_error", regexp = "kernel")
  expect_error(local_poly(d1$x, d1$y, degree = 4, bandwidth = 0.1, verbose = FALSE),
               class = "localmean_error", regexp = "degree")
  expect_error(local_poly(d1$x, d1$y, degree = -1, bandwidth = 0.1, verbose = FALSE),
               class = "localmean_error", regexp = "degree")
  expect_error(local_poly(d1$x, d1$y, degree = 1.5, bandwidth = 0.1, verbose = FALSE),
               class = "localmean_error", regexp = "degree")
  expect_error(local_poly(d1$x, d1$y, bandwidth = 0.1, method = "fast", verbose = FALSE),
               class = "localmean_error", regexp = "method")
  expect_error(local_poly(d1$x, d1$y, bandwidth = 0.1, verbose = NA),
               class = "localmean_error", regexp = "verbose")
  expect_error(local_poly(d1$x, d1$y, bandwidth = 0.1, control = list(cutoff = 4),
                          verbose = FALSE), class = "localmean_error", regexp = "control")
  fit1 <- local_poly(d1$x, d1$y, degree = 1, bandwidth = 0.1, verbose = FALSE)
  expect_error(predict(fit1, 0.5, deriv = 2), class = "localmean_error", regexp = "deriv")
  fit0 <- local_mean(d1$x, d1$y, bandwidth = 0.1, verbose = FALSE)
  expect_error(predict(fit0, 0.5, deriv = 1), class = "localmean_error", regexp = "deriv")
  fit3 <- local_poly(d1$x, d1$y, degree = 3, bandwidth = 0.15, verbose = FALSE)
  expect_error(predict(fit3, 0.5, deriv = 3), class = "localmean_error", regexp = "deriv")
  expect_error(predict(fit1, 0.5, deriv = -1), class = "localmean_error", regexp = "deriv")
  expect_error(predict(fit1, 0.5, se.fit = NA), class = "localmean_error", regexp = "se.fit")
})

test_that("newdata with missing or wrong columns is refused", {
  df <- data.frame(y = d2$y, a = d2$x[, 1], b = d2$x[, 2])
  f <- local_poly(y ~ a + b, data = df, bandwidth = c(0.15, 0.2), verbose = FALSE)
  expect_error(predict(f, data.frame(a = 0.5)), class = "localmean_error", regexp = "b")
  expect_error(predict(f, data.frame(a = 0.5, b = "x")), class = "localmean_error",
               regexp = "b")
  expect_error(predict(f, data.frame(a = 0.5, b = NA)), class = "localmean_error",
               regexp = "newdata")
  m <- local_poly(d2$x, d2$y, bandwidth = c(0.15, 0.2), verbose = FALSE)
  expect_error(predict(m, cbind(x1 = 0.5, x2 = Inf)), class = "localmean_error",
               regexp = "newdata")
  expect_error(predict(m, data.frame(x1 = 0.5, x2 = "a")), class = "localmean_error",
               regexp = "newdata")
  # a matrix with the right columns in another order is matched by name
  expect_identical(predict_beyond(m, q2[, c("x2", "x1")]), predict_beyond(m, q2))
})

test_that("newdata with the wrong number of columns is refused for default-method fits", {
  m <- local_poly(d2$x, d2$y, bandwidth = c(0.15, 0.2), verbose = FALSE)
  expect_error(predict(m, cbind(x1 = 0.5)), class = "localmean_error", regexp = "newdata")
  expect_error(predict(m, c(0.5, 0.5, 0.5)), class = "localmean_error", regexp = "newdata")
  expect_error(predict(m, cbind(0.1, 0.2, 0.3)), class = "localmean_error", regexp = "newdata")
  m1 <- local_poly(d1$x, d1$y, bandwidth = 0.1, verbose = FALSE)
  expect_error(predict(m1, cbind(0.1, 0.2)), class = "localmean_error", regexp = "newdata")
})

test_that("a query with no data in the kernel window gives NA with a warning", {
  fit <- local_poly(d1$x, d1$y, kernel = "epanechnikov", bandwidth = 0.1, verbose = FALSE)
  expect_warning(p <- predict_beyond(fit, c(0.5, 3)), class = "localmean_warning")
  expect_true(is.finite(p[1]))
  expect_true(is.na(p[2]))
  expect_false(is.nan(p[2]))  # NA, not NaN
  expect_warning(s <- predict_beyond(fit, c(0.5, 3), se.fit = TRUE),
                 class = "localmean_warning")
  expect_true(is.na(s$fit[2]) && !is.nan(s$fit[2]))
  expect_true(is.na(s$se.fit[2]) && !is.nan(s$se.fit[2]))
  expect_true(is.finite(s$se.fit[1]))
  # too few points for the degree, in 2-D
  fit2 <- local_poly(d2$x, d2$y, degree = 2, kernel = "uniform", bandwidth = 0.3,
                     verbose = FALSE)
  expect_warning(p2 <- predict_beyond(fit2, cbind(x1 = 1.25, x2 = 0.5)),
                 class = "localmean_warning")
  expect_true(is.na(p2))
  expect_false(is.nan(p2))
  # fitted values: a too-small compact bandwidth warns at fit time and never returns NaN silently
  expect_warning(tiny <- local_poly(d1$x, d1$y, degree = 2, kernel = "uniform",
                                    bandwidth = 0.004, verbose = FALSE),
                 class = "localmean_warning")
  expect_true(anyNA(fitted(tiny)))
  expect_false(any(is.nan(fitted(tiny))))
  # no warning when every window has data
  expect_no_warning(predict(fit, c(0.2, 0.8)))
})

# ---- S3 methods --------------------------------------------------------------------------------

test_that("print() and summary() show the model", {
  fit <- local_poly(dist ~ speed, data = cars, bandwidth = 3, verbose = FALSE)
  expect_output(print(fit), "local_poly.*gaussian kernel, degree 1, n = 50")
  expect_output(print(fit), "Bandwidth +: speed = 3 \\(user\\)")
  expect_output(expect_invisible(print(fit)))
  s <- summary(fit)
  expect_s3_class(s, "summary.local_model")
  expect_equal(s$sigma, fit$sigma)
  expect_equal(s$df, fit$df)
  expect_output(print(s), "Residual std. error")
  expect_output(print(s), "Strategy +: exact")
  expect_output(print(local_mean(dist ~ speed, cars, bandwidth = nn(7), kernel = "uniform",
                                 verbose = FALSE)), "nn\\(7\\)")
  cv <- local_poly(dist ~ speed, data = cars, verbose = FALSE)
  expect_output(print(cv), "\\(cv\\)")
  expect_output(print(summary(cv)), "LOO CV score")
})

test_that("fitted, residuals, nobs, formula and logLik are consistent", {
  fit <- local_poly(dist ~ speed, data = cars, bandwidth = 3, verbose = FALSE)
  expect_equal(unname(fitted(fit) + residuals(fit)), cars$dist)
  expect_identical(predict(fit), fitted(fit))
  expect_equal(predict(fit, se.fit = TRUE), predict(fit, cars, se.fit = TRUE), tolerance = 1e-12)
  expect_equal(predict(fit, deriv = 1), predict(fit, cars, deriv = 1), tolerance = 1e-12)
  expect_equal(predict(fit, cars), unname(fitted(fit)), tolerance = 1e-12)
  expect_identical(nobs(fit), 50L)
  expect_identical(formula(fit), dist ~ speed)
  rss <- sum(residuals(fit)^2)
  n <- 50
  ll <- logLik(fit)
  expect_s3_class(ll, "logLik")
  expect_equal(as.numeric(ll), -n / 2 * (log(2 * pi) + 1 + log(rss / n)), tolerance = 1e-12)
  expect_equal(attr(ll, "df"), fit$df + 1)
  expect_identical(attr(ll, "nobs"), 50L)
  expect_equal(AIC(fit), -2 * as.numeric(ll) + 2 * (fit$df + 1))
  expect_equal(fit$r.squared, 1 - rss / sum((cars$dist - mean(cars$dist))^2))
  # leave-one-out score from the identity
  expect_equal(fit$cv, mean((residuals(fit) / (1 - fit$leverage))^2))
  # the default method has no formula
  m <- local_poly(cars$speed, cars$dist, bandwidth = 3, verbose = FALSE)
  expect_error(formula(m), class = "localmean_error")
  expect_equal(unname(fitted(m)), unname(fitted(fit)))
})

test_that("logLik with prior weights matches a weighted Gaussian likelihood", {
  w <- rep(c(1, 2, 0.5), length.out = 50)
  fit <- local_poly(cars$speed, cars$dist, bandwidth = 3, weights = w, verbose = FALSE)
  r <- residuals(fit)
  s2 <- sum(w * r^2) / 50
  expected <- sum(dnorm(r, sd = sqrt(s2 / w), log = TRUE))
  expect_equal(as.numeric(logLik(fit)), expected, tolerance = 1e-10)
})

test_that("plot() draws fits in 1-D and 2-D and the bandwidth curve", {
  pdf(NULL)
  on.exit(dev.off(), add = TRUE)
  fit <- local_poly(dist ~ speed, data = cars, verbose = FALSE)
  expect_invisible(plot(fit))
  expect_invisible(plot(fit, which = "bandwidth"))
  fit2 <- local_poly(d2$x, d2$y, bandwidth = c(0.15, 0.2), verbose = FALSE)
  expect_no_error(plot(fit2, n_grid = 20))
  expect_error(plot(fit2, which = "bandwidth"), class = "localmean_error", regexp = "selector")
  fixed <- local_poly(dist ~ speed, data = cars, bandwidth = 3, verbose = FALSE)
  expect_no_error(plot(fixed))
  expect_error(plot(fixed, which = "bandwidth"), class = "localmean_error")
  x3 <- cbind(d2$x, x3 = d2$y)
  fit3 <- local_poly(x3, d2$y, bandwidth = 0.5, verbose = FALSE)
  expect_s3_class(plot(fit3, n_grid = 20), "data.frame") # conditional panels (test-plots.R)
})

test_that("a huge bandwidth makes its predictor enter globally instead of failing the fit", {
  # np reports irrelevant predictors with bandwidths such as 3e5; the scaled column is then tiny,
  # and the rank check must judge it against its own scale.
  set.seed(11)
  n <- 150
  x <- cbind(a = runif(n), b = runif(n, 0, 50))
  y <- sin(5 * x[, 1]) + 0.1 * x[, 2] + rnorm(n, sd = 0.1)
  fit <- local_poly(x, y, bandwidth = c(0.2, 3e8), verbose = FALSE)
  brute <- vapply(seq_len(n), function(i) {
    w <- exp(-0.5 * ((x[, 1] - x[i, 1]) / 0.2)^2)  # constant in b
    X <- cbind(1, x[, 1] - x[i, 1], x[, 2] - x[i, 2])
    solve(crossprod(X, w * X), crossprod(X, w * y))[1]
  }, 1)
  expect_false(anyNA(fitted(fit)))
  expect_equal(unname(fitted(fit)), brute, tolerance = 1e-9)
})

test_that("coef() gives the local coefficients at the points, confint() their intervals", {
  fit <- local_poly(dist ~ speed, data = cars, bandwidth = 5, degree = 2, verbose = FALSE)
  co <- coef(fit)
  expect_identical(dim(co), c(50L, 3L))
  expect_identical(colnames(co), c("(Intercept)", "speed", "speed^2"))
  expect_equal(co[, "(Intercept)"], fitted(fit))
  # plain-R reference: weighted least squares in (speed - x0) at x0 = 15
  w <- dnorm((cars$speed - 15) / 5)
  ref <- coef(lm(dist ~ I(speed - 15) + I((speed - 15)^2), data = cars, weights = w))
  at <- coef(fit, newdata = data.frame(speed = 15))
  expect_equal(as.vector(at), unname(ref), tolerance = 1e-8)
  expect_equal(unname(at[, "speed"]), predict(fit, data.frame(speed = 15), deriv = 1))
  ci <- confint(fit, newdata = data.frame(speed = c(10, 15)))
  expect_identical(colnames(ci)[1:2], c("(Intercept) 2.5 %", "(Intercept) 97.5 %"))
  band <- predict(fit, data.frame(speed = c(10, 15)), interval = "confidence")
  expect_equal(unname(ci[, 1:2]), unname(band[, c("lwr", "upr")]))
  slope <- confint(fit, "speed", level = 0.9, newdata = data.frame(speed = 15))
  se <- predict(fit, data.frame(speed = 15), deriv = 1, se.fit = TRUE)
  expect_equal(as.vector(slope), se$fit + c(-1, 1) * qt(0.95, se$df) * se$se.fit)
  expect_error(confint(fit, "nope"), "parm", class = "localmean_error")
  # categorical predictors have no coefficient; local likelihood on the link scale
  mixed <- local_poly(mpg ~ wt + factor(cyl), data = mtcars, bandwidth = c(1, 0.1),
                      verbose = FALSE)
  expect_identical(colnames(coef(mixed)), c("(Intercept)", "wt"))
  logistic <- local_poly(am ~ wt, data = mtcars, family = "binomial", bandwidth = 1.5,
                         verbose = FALSE)
  expect_equal(coef(logistic)[, 1L], predict(logistic, type = "link", newdata = mtcars["wt"]))
  expect_identical(dim(confint(logistic)), c(32L, 4L))
})

test_that("predict(interval = \"prediction\") adds the residual variance, as predict.lm()", {
  fit <- local_poly(dist ~ speed, data = cars, bandwidth = 5, verbose = FALSE)
  nd <- data.frame(speed = c(10, 20))
  pr <- predict(fit, nd, interval = "prediction", se.fit = TRUE)
  half <- qt(0.975, pr$df) * sqrt(pr$se.fit^2 + pr$residual.scale^2)
  expect_equal(pr$fit[, "upr"] - pr$fit[, "fit"], half)
  expect_equal(pr$fit[, "fit"] - pr$fit[, "lwr"], half)
  conf <- predict(fit, nd, interval = "confidence")
  expect_true(all(pr$fit[, "upr"] > conf[, "upr"]))
  # a huge bandwidth makes a global line: the interval of lm()
  line <- local_poly(dist ~ speed, data = cars, bandwidth = 1e4, verbose = FALSE)
  expect_equal(predict(line, nd, interval = "prediction"),
               predict(lm(dist ~ speed, cars), nd, interval = "prediction"),
               tolerance = 1e-4, ignore_attr = TRUE)
  logistic <- local_poly(am ~ wt, data = mtcars, family = "binomial", bandwidth = 1.5,
                         verbose = FALSE)
  expect_error(predict(logistic, mtcars, interval = "prediction"), "Gaussian",
               class = "localmean_error")
  expect_error(predict(fit, nd, interval = "prediction", simultaneous = TRUE), "confidence")
})

test_that("predictions beyond the range of the data warn once, keeping the values", {
  fit <- local_poly(dist ~ speed, data = cars, bandwidth = 3, verbose = FALSE)
  inside <- data.frame(speed = c(4, 15, 25))
  expect_no_warning(predict(fit, inside))
  out <- data.frame(speed = c(2, 15, 30, 40))
  expect_warning(p <- predict(fit, out), "3 of the 4 prediction points are outside",
                 class = "localmean_warning")
  expect_true(all(is.finite(p)))
  expect_warning(predict(fit, out[3, , drop = FALSE]), "1 of the 1 prediction point is")
  # one predictor out of range is enough; categorical predictors do not count
  mixed <- local_poly(mpg ~ wt + factor(cyl), data = mtcars, bandwidth = c(1, 0.1),
                      verbose = FALSE)
  expect_warning(predict(mixed, data.frame(wt = c(3, 6), cyl = 4)), "Out of range: wt")
  expect_no_warning(predict(mixed, data.frame(wt = 3, cyl = c(4, 8))))
})

# ---- Kernels of the user's own (see also test-kernels.R) ---------------------------------------

test_that("a kernel given as a function gives the triweight's fits", {
  triweight_profile <- function(u) (1 - u^2)^3 * (abs(u) < 1)
  set.seed(41)
  n <- 200
  x <- cbind(a = runif(n), b = runif(n))
  y <- sin(4 * x[, 1]) + x[, 2]^2 + rnorm(n, sd = 0.2)
  at <- data.frame(x = seq(0.05, 0.95, by = 0.05))
  for (degree in 0:2) {
    user <- local_poly(x[, 1], y, kernel = triweight_profile, bandwidth = 0.2, degree = degree)
    built <- local_poly(x[, 1], y, kernel = "triweight", bandwidth = 0.2, degree = degree)
    expect_equal(fitted(user), fitted(built), tolerance = 1e-10, info = degree)
    expect_equal(user$leverage, built$leverage, tolerance = 1e-10, info = degree)
    expect_equal(predict(user, at$x), predict(built, at$x), tolerance = 1e-10, info = degree)
  }
  # two predictors, the local mean and the default cross-validated bandwidth
  expect_equal(fitted(local_mean(x, y, kernel = triweight_profile, bandwidth = c(0.3, 0.4))),
               fitted(local_mean(x, y, kernel = "triweight", bandwidth = c(0.3, 0.4))),
               tolerance = 1e-10)
  user <- local_poly(x[, 1], y, kernel = triweight_profile)
  built <- local_poly(x[, 1], y, kernel = "triweight")
  expect_equal(user$bandwidth, built$bandwidth, tolerance = 1e-8)
  # local likelihood and classification
  z <- rbinom(n, 1, plogis(4 * x[, 1] - 2))
  expect_equal(fitted(local_poly(x[, 1], z, kernel = triweight_profile, bandwidth = 0.3,
                                 family = "binomial")),
               fitted(local_poly(x[, 1], z, kernel = "triweight", bandwidth = 0.3,
                                 family = "binomial")), tolerance = 1e-10)
  cls <- factor(ifelse(z == 1, "yes", "no"))
  expect_equal(predict(local_classify(x, cls, kernel = triweight_profile, bandwidth = 0.3),
                       type = "prob"),
               predict(local_classify(x, cls, kernel = "triweight", bandwidth = 0.3),
                       type = "prob"), tolerance = 1e-10)
})

test_that("a kernel given as a function gives the triweight's binned fits", {
  skip_on_cran()
  set.seed(42)
  x <- runif(2e4)
  y <- sin(6 * x) + rnorm(2e4)
  user <- local_poly(x, y, kernel = function(u) (1 - u^2)^3 * (abs(u) < 1), bandwidth = 0.05,
                     method = "binned")
  built <- local_poly(x, y, kernel = "triweight", bandwidth = 0.05, method = "binned")
  expect_equal(fitted(user), fitted(built), tolerance = 1e-10)
})

test_that("a weight matrix equal to a kernel's weights gives that kernel's fits", {
  set.seed(43)
  n <- 120
  x <- runif(n)
  y <- cos(5 * x) + rnorm(n, sd = 0.2)
  w <- runif(n)
  h <- 0.25
  weights_of <- function(q) outer(q, x, function(a, b) pmax(0, 1 - ((a - b) / h)^2)^3)
  W <- weights_of(x)
  for (degree in 0:2) {
    by_matrix <- local_poly(x, y, kernel = W, degree = degree, weights = w)
    by_kernel <- local_poly(x, y, kernel = "triweight", bandwidth = h, degree = degree,
                            weights = w)
    expect_equal(fitted(by_matrix), fitted(by_kernel), tolerance = 1e-10, info = degree)
    expect_equal(by_matrix$leverage, by_kernel$leverage, tolerance = 1e-10, info = degree)
    expect_equal(by_matrix$df, by_kernel$df, tolerance = 1e-10, info = degree)
  }
  expect_equal(fitted(local_mean(x, y, kernel = W)),
               fitted(local_mean(x, y, kernel = "triweight", bandwidth = h)), tolerance = 1e-10)
  # at given queries
  at <- seq(0, 1, by = 0.1)
  expect_equal(local_smooth(x, y, at = at, kernel = weights_of(at))$estimate,
               local_smooth(x, y, at = at, kernel = "triweight", bandwidth = h)$estimate,
               tolerance = 1e-10)
  # sparse, from the Matrix package
  skip_if_not_installed("Matrix")
  expect_equal(fitted(local_poly(x, y, kernel = Matrix::Matrix(W, sparse = TRUE))),
               fitted(local_poly(x, y, kernel = "triweight", bandwidth = h)), tolerance = 1e-10)
})

test_that("a weight matrix fit refuses what it cannot do, with errors naming the cause", {
  x <- seq(0, 1, length.out = 30)
  y <- x^2
  W <- exp(-outer(x, x, "-")^2 / 0.02)
  fit <- local_mean(x, y, kernel = W)
  expect_error(predict(fit, 0.5), "predicts only at its own data", class = "localmean_error")
  expect_error(local_mean(x, y, kernel = W[-1, ]), "must be 30 x 30",
               class = "localmean_error")
  expect_error(local_mean(x, y, kernel = -W), "non-negative", class = "localmean_error")
  expect_error(local_poly(x, rbinom(30, 1, 0.5), kernel = W, family = "binomial"),
               "least-squares", class = "localmean_error")
  expect_error(local_smooth(x, y, kernel = W), "needs `at`", class = "localmean_error")
})

test_that("a formula of plain numeric columns fits as through its model frame", {
  # an na.action in the call sends the fit through model.frame()
  strip <- function(fit) {
    fit$call <- NULL
    fit$spec$engine <- NULL
    fit
  }
  at <- data.frame(speed = c(5, 15.5, 25))
  plain <- local_poly(dist ~ speed, cars, bandwidth = 3)
  framed <- local_poly(dist ~ speed, cars, bandwidth = 3, na.action = stats::na.omit)
  expect_identical(strip(plain), strip(framed))
  expect_identical(predict(plain, at), predict(framed, at))
  counts <- data.frame(mpg = mtcars$mpg, wt = mtcars$wt, hp = as.integer(mtcars$hp))
  expect_identical(strip(local_poly(mpg ~ ., counts, bandwidth = c(1, 50))),
                   strip(local_poly(mpg ~ wt + hp, counts, bandwidth = c(1, 50),
                                    na.action = stats::na.omit)))
})

test_that("a plain formula's kept terms follow the data's columns and the formula's environment", {
  d <- data.frame(y = cos(1:30), a = sin(1:30), b = (1:30) / 7)
  wide <- local_poly(y ~ ., d, bandwidth = c(1, 1), verbose = FALSE)
  narrow <- local_poly(y ~ ., d[c("y", "a")], bandwidth = 1, verbose = FALSE)
  expect_identical(attr(wide$terms, "term.labels"), c("a", "b"))
  expect_identical(attr(narrow$terms, "term.labels"), "a")
  expect_identical(narrow$terms, attr(stats::model.frame(y ~ ., d[c("y", "a")]), "terms"))
  home <- new.env()
  f <- local(y ~ a, home)
  expect_identical(environment(local_poly(f, d, bandwidth = 1, verbose = FALSE)$terms), home)
  expect_identical(environment(local_poly(y ~ a, d, bandwidth = 1, verbose = FALSE)$terms),
                   environment())
})

test_that("fits and predictions in one engine call equal those of the chunked engine path", {
  # chunk_size below n sends fits at the data and predictions through engine_run()'s chunks
  parts <- local_control(chunk_size = 40)
  same_fit <- function(a, b) {
    for (field in c("fitted", "leverage", "residuals", "df", "sigma", "r.squared", "cv")) {
      expect_identical(a[[field]], b[[field]], label = field)
    }
  }
  d <- make_data_1d(90)
  w <- seq(0.5, 1.5, length.out = 90)
  q <- c(0.05, 0.5, 0.93)
  one <- local_poly(d$x, d$y, bandwidth = 0.08, weights = w, verbose = FALSE)
  many <- local_poly(d$x, d$y, bandwidth = 0.08, weights = w, control = parts, verbose = FALSE)
  same_fit(one, many)
  expect_identical(predict(one, q), predict(many, q))
  # windows too small for a fit: the same NA fits, leverages and warnings
  sparse <- function(control = local_control()) {
    local_poly(d$x, d$y, bandwidth = 0.004, kernel = "epanechnikov", control = control,
               verbose = FALSE)
  }
  with_warnings <- function(expr) {
    msgs <- character(0)
    value <- withCallingHandlers(expr, warning = function(w) {
      msgs <<- c(msgs, conditionMessage(w))
      invokeRestart("muffleWarning")
    })
    list(value = value, warnings = msgs)
  }
  a <- with_warnings(sparse())
  b <- with_warnings(sparse(parts))
  expect_true(anyNA(a$value$fitted))
  same_fit(a$value, b$value)
  expect_identical(a$warnings, b$warnings)
  expect_identical(with_warnings(predict(a$value, q)),
                   with_warnings(predict(b$value, q)))
  # 2-D, degree 2, the kd-tree
  d2 <- make_data_2d(80)
  q2 <- cbind(x1 = c(0.2, 0.7), x2 = c(0.4, 0.6))
  one <- local_poly(d2$x, d2$y, degree = 2, bandwidth = c(0.4, 0.5), kernel = "tricube",
                    method = "tree", verbose = FALSE)
  many <- local_poly(d2$x, d2$y, degree = 2, bandwidth = c(0.4, 0.5), kernel = "tricube",
                     method = "tree", control = parts, verbose = FALSE)
  same_fit(one, many)
  expect_identical(predict(one, q2), predict(many, q2))
})

test_that("print() names the predictors a selected bandwidth smooths out", {
  expect_output(print(local_poly(am ~ wt, mtcars, family = binomial)),
                "Smoothed out : wt \\(enters globally\\)")
  expect_false(any(grepl("Smoothed out", capture.output(print(local_poly(dist ~ speed, cars))))))
})
