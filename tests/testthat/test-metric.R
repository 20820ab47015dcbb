# The learned metric of bandwidth = "metric" (R/metric.R, inst/include/localmean/metric.hpp).

# Plain-R leave-one-out squared error of the Gaussian-kernel fit of `degree` under the metric A:
# weights p_j exp(-|A (x_i - x_j)|^2 / 2) times the categorical kernel (Aitchison-Aitken, one
# factor `g` with smoothing `lambda`), zero beyond 8 sd, every j != i; weighted mean of the
# squared residuals.
metric_loss_ref <- function(x, y, A, degree, prior = rep(1, length(y)), g = NULL, lambda = 0) {
  n <- nrow(x)
  z <- x %*% t(A)
  r <- numeric(n)
  for (i in seq_len(n)) {
    d2 <- colSums((t(z) - z[i, ])^2)
    w <- prior * exp(-d2 / 2) * (d2 <= 64)
    if (!is.null(g)) {
      c <- length(unique(g))
      w <- w * ifelse(g == g[i], 1 - lambda, lambda / (c - 1))
    }
    w[i] <- 0
    fit <- if (degree == 0) {
      sum(w * y) / sum(w)
    } else {
      design <- cbind(1, sweep(z, 2L, z[i, ]))
      keep <- w > 0
      stats::lm.wfit(design[keep, , drop = FALSE], y[keep], w[keep])$coefficients[[1L]]
    }
    r[i] <- y[i] - fit
  }
  sum(prior * r^2) / sum(prior)
}

metric_loss <- function(x, y, A, degree, prior = numeric(0), categorical = list(),
                        n_threads = 1L) {
  localmean:::cpp_metric_loss(x, y, prior, A, degree, categorical, 0, 0, n_threads, FALSE)
}

rotated_data <- function(n, d = 3, sd = 0.1) {
  x <- matrix(rnorm(n * d), n, d, dimnames = list(NULL, paste0("x", seq_len(d))))
  truth <- sin(2 * (x[, 1] + x[, 2]) / sqrt(2))
  list(x = x, y = truth + rnorm(n, sd = sd), truth = truth)
}

test_that("the C++ loss equals a plain-R LOO loss, and its gradient central differences", {
  set.seed(1)
  n <- 60
  x <- cbind(rnorm(n), runif(n))
  y <- sin(x[, 1] + 2 * x[, 2]) + rnorm(n, sd = 0.2)
  prior <- runif(n, 0.5, 2)
  g <- rep(c("a", "b", "c"), length.out = n)
  categorical <- list(codes = matrix(match(g, c("a", "b", "c"))), levels = 3L, ordered = FALSE,
                      lambda = 0.3, unit_mass = FALSE)
  A <- matrix(c(1.3, 0.4, -0.5, 1.6), 2)
  for (degree in 0:1) {
    plain <- metric_loss(x, y, A, degree)
    expect_equal(plain$loss, metric_loss_ref(x, y, A, degree), tolerance = 1e-10)
    full <- metric_loss(x, y, A, degree, prior, categorical)
    expect_equal(full$loss, metric_loss_ref(x, y, A, degree, prior, g, 0.3), tolerance = 1e-10)
    fd <- vapply(seq_len(4), function(k) {
      e <- replace(numeric(4), k, 1e-6)
      (metric_loss(x, y, A + e, degree, prior, categorical)$loss -
         metric_loss(x, y, A - e, degree, prior, categorical)$loss) / 2e-6
    }, 1)
    expect_equal(as.vector(full$gradient), fd, tolerance = 1e-6, info = paste("degree", degree))
  }
})

test_that("at A = diag(1 / h) the loss is the fit's leave-one-out CV score", {
  set.seed(2)
  d <- rotated_data(150, d = 2)
  h <- c(0.4, 0.7)
  for (degree in 0:1) {
    fit <- local_poly(d$x, d$y, degree = degree, bandwidth = h, verbose = FALSE)
    expect_equal(metric_loss(d$x, d$y, diag(1 / h), degree)$loss, fit$cv, tolerance = 1e-8)
  }
})

test_that("the loss does not depend on the number of threads", {
  set.seed(3)
  d <- rotated_data(300)
  A <- matrix(c(2, 0.3, -0.2, 0.5, 1.5, 0.1, 0, 0.2, 1), 3)
  for (degree in 0:1) {
    expect_identical(metric_loss(d$x, d$y, A, degree, n_threads = 1L),
                     metric_loss(d$x, d$y, A, degree, n_threads = 2L))
  }
})

test_that("the learned metric beats the diagonal cv bandwidths on a rotated direction", {
  set.seed(4)
  train <- rotated_data(300)
  test <- rotated_data(1000)
  for (degree in 0:1) {
    cv <- local_poly(train$x, train$y, degree = degree, n_threads = 2, verbose = FALSE)
    me <- local_poly(train$x, train$y, degree = degree, bandwidth = "metric", n_threads = 2,
                     verbose = FALSE)
    expect_identical(me$bandwidth_method, "metric")
    expect_lt(me$metric$loss, me$metric$start_loss)
    # equal up to rounding in the leave-one-out residuals of nearly singular local designs
    expect_equal(me$metric$start_loss, cv$cv, tolerance = 1e-2)
    expect_true(all(is.finite(fitted(me))))
    err <- function(fit) mean((suppressWarnings(predict(fit, test$x)) - test$truth)^2,
                              na.rm = TRUE)
    expect_lt(err(me), 0.5 * err(cv))
  }
})

test_that("a metric fit predicts as a unit-bandwidth fit on A x, derivatives by the chain rule", {
  set.seed(5)
  train <- rotated_data(200, d = 2)
  fit <- local_poly(train$x, train$y, bandwidth = "metric", verbose = FALSE)
  A <- fit$metric$A
  z <- train$x %*% t(A)
  ref <- local_poly(z, train$y, bandwidth = 1, verbose = FALSE)
  expect_equal(fitted(fit), fitted(ref))
  expect_equal(predict(fit, train$x), fitted(fit))
  nd <- matrix(c(-0.5, 0, 0.5, 0.2, -0.1, 0.3), 3, dimnames = list(NULL, c("x1", "x2")))
  expect_equal(predict(fit, nd), predict(ref, nd %*% t(A)))
  expect_equal(predict(fit, nd, se.fit = TRUE)$se.fit,
               predict(ref, nd %*% t(A), se.fit = TRUE)$se.fit)
  slope <- predict(fit, nd, deriv = 1)
  expect_equal(unname(slope), unname(predict(ref, nd %*% t(A), deriv = 1) %*% A))
  expect_identical(colnames(slope), c("x1", "x2"))
  expect_output(print(fit), "metric A, singular values")
  expect_output(print(summary(fit)), "Learned metric A")
})

test_that("categorical predictors keep the cv lambdas; the formula interface works", {
  set.seed(6)
  d <- rotated_data(200, d = 2)
  df <- data.frame(d$x, g = factor(sample(c("a", "b"), 200, TRUE)))
  df$y <- d$y + (df$g == "b")
  cv <- local_poly(y ~ x1 + x2 + g, df, degree = 0, verbose = FALSE)
  me <- local_mean(y ~ x1 + x2 + g, df, bandwidth = "metric", verbose = TRUE)
  expect_equal(me$bandwidth[3], cv$bandwidth[3])
  expect_lt(me$metric$loss, me$metric$start_loss)
  expect_equal(predict(me, df[1:5, ]), unname(fitted(me)[1:5]))
  expect_output(print(me), "g =")
})

test_that("metric input that does not apply is refused clearly", {
  set.seed(7)
  d <- rotated_data(60, d = 2)
  fit_with <- function(...) local_poly(d$x, d$y, bandwidth = "metric", verbose = FALSE, ...)
  expect_error(fit_with(kernel = "uniform"), "step", class = "localmean_error")
  expect_error(fit_with(degree = 2), "degree 0 or 1", class = "localmean_error")
  expect_error(local_poly(d$x, d$y > 0, bandwidth = "metric", family = "binomial",
                          verbose = FALSE), "Gaussian family", class = "localmean_error")
  expect_error(local_classify(d$x, factor(d$y > 0), bandwidth = "metric", verbose = FALSE),
               "classification", class = "localmean_error")
  fit <- fit_with()
  expect_error(predict(fit, d$x[1:3, ], deriv = 1, se.fit = TRUE), "derivatives",
               class = "localmean_error")
  expect_error(predict(fit, d$x[1:3, ], interval = "confidence", variance = "local"),
               "metric", class = "localmean_error")
})

# ---- Every registry kernel --------------------------------------------------------------------

# Plain-R leave-one-out "cv" score at bandwidths h and the Aitchison-Aitken lambda of one factor
# g: each point's fit without it (a weighted mean, or weighted least squares on (1, x - x_i)),
# predicted at it; the weighted mean of the squared residuals.
loo_score_ref <- function(x, y, g, h, lambda, kernel, degree, prior = rep(1, length(y))) {
  n <- nrow(x)
  levels_g <- length(unique(g))
  r <- vapply(seq_len(n), function(i) {
    u <- sweep(x, 2L, x[i, ]) / rep(h, each = n)
    w <- prior * kernel_weight_ref(sqrt(rowSums(u^2)), kernel) *
      ifelse(g == g[i], 1 - lambda, lambda / (levels_g - 1))
    keep <- seq_len(n) != i & w > 0
    fit <- if (degree == 0) {
      sum(w[keep] * y[keep]) / sum(w[keep])
    } else {
      design <- cbind(1, sweep(x, 2L, x[i, ]))
      stats::lm.wfit(design[keep, , drop = FALSE], y[keep], w[keep])$coefficients[[1L]]
    }
    y[i] - fit
  }, 1)
  sum(prior * r^2) / sum(prior)
}

kernel_search_data <- function(n = 60) {
  set.seed(21)
  x <- cbind(x1 = runif(n), x2 = runif(n))
  g <- sample(c("a", "b", "c"), n, replace = TRUE)
  y <- sin(3 * x[, 1]) + x[, 2]^2 + match(g, c("a", "b", "c")) / 3 + rnorm(n, sd = 0.1)
  list(x = x, g = g, y = y, prior = runif(n, 0.5, 2),
       categorical = list(codes = matrix(match(g, c("a", "b", "c"))),
                          levels = list(c("a", "b", "c")), ordered = FALSE))
}

# One test per kernel, each with degrees 0 and 1.
for (kernel in kernel_names_ref) {
  test_that(paste("the", kernel, "cv score equals a plain-R LOO loop, its gradient central",
                  "differences"), {
    d <- kernel_search_data()
    h <- c(0.45, 0.6)
    lambda <- 0.3
    for (degree in 0:1) {
      info <- paste(kernel, "degree", degree)
      spec <- localmean:::engine_spec(d$x, kernel, h, values = matrix(d$y), prior = d$prior,
                                      degree = degree, categorical = d$categorical,
                                      lambda = lambda)
      expect_identical(localmean:::gradient_search_applies("cv", spec), kernel != "uniform",
                       info = info)
      layout <- localmean:::theta_layout(spec, localmean:::bandwidth_bounds(spec))
      loss_of <- localmean:::loo_gradient_scorer(spec)
      theta <- c(log(h), qlogis(lambda / layout$lambda_upper))
      res <- loss_of(theta, layout)
      expect_equal(res$value, loo_score_ref(d$x, d$y, d$g, h, lambda, kernel, degree, d$prior),
                   tolerance = 1e-10, info = info)
      expect_equal(res$value, localmean:::spec_score("cv", spec), tolerance = 1e-10, info = info)
      fd <- vapply(seq_along(theta), function(k) {
        e <- replace(numeric(length(theta)), k, 1e-6)
        (loss_of(theta + e, layout)$value - loss_of(theta - e, layout)$value) / 2e-6
      }, 1)
      expect_equal(res$gradient, fd, tolerance = 1e-5, info = info)
      # a step: no slope in the bandwidths (the lambda's gradient is still exact)
      if (kernel == "uniform") expect_identical(res$gradient[1:2], c(0, 0))
    }
  })
}

test_that("the joint cv search descends for every kernel, with a categorical predictor", {
  d <- kernel_search_data()
  data <- data.frame(d$x, g = factor(d$g), y = d$y)
  for (kernel in c("epanechnikov", "laplace", "cauchy")) {
    fit <- local_poly(y ~ x1 + x2 + g, data, kernel = kernel, bandwidth = "cv", verbose = FALSE)
    expect_true(is.finite(fit$cv), info = kernel)
    # the search ends at least as low as the best of its starting grid
    expect_lte(fit$cv, min(fit$cv_curve$score, na.rm = TRUE) * (1 + 1e-8))
  }
  # the uniform kernel's score is a step function: its search stays derivative-free
  fit <- local_poly(y ~ x1 + x2, data, kernel = "uniform", bandwidth = "cv", verbose = FALSE)
  expect_true(is.finite(fit$cv))
})

test_that("a metric is learned for a compact kernel, and refused for a kernel of the user's own", {
  set.seed(22)
  train <- rotated_data(150, d = 2)
  fit <- local_poly(train$x, train$y, kernel = "epanechnikov", degree = 0, bandwidth = "metric",
                    verbose = FALSE)
  expect_lte(fit$metric$loss, fit$metric$start_loss)
  z <- train$x %*% t(fit$metric$A)
  expect_equal(fit$metric$loss, loo_score_ref(z, train$y, rep("a", 150), c(1, 1), 0,
                                              "epanechnikov", 0), tolerance = 1e-10)
  expect_error(local_poly(train$x, train$y, kernel = function(u) (1 - u^2)^3 * (abs(u) < 1),
                          bandwidth = "metric", verbose = FALSE),
               class = "localmean_error", regexp = "registry")
})

# ---- Rounding, not the path: the searches pinned by scores ------------------------------------
#
# The loss at fixed parameters is a sum over points whose order (the data's, the passes' lanes)
# changes only the last bits; the searches amplify such changes along their path on flat or
# kinked scores, so their results are pinned by plain-R scores and by the data's order, not by
# one path's exact optimum.

test_that("at fixed parameters, the data's order and the pass change the loss by rounding only", {
  d <- kernel_search_data(80)
  h <- c(0.45, 0.6)
  shuffle <- c(41:80, 40:1)
  categorical <- list(codes = d$categorical$codes, levels = 3L, ordered = FALSE, lambda = 0.3,
                      unit_mass = FALSE)
  moved <- replace(categorical, "codes", list(d$categorical$codes[shuffle, , drop = FALSE]))
  for (kernel in c("gaussian", "epanechnikov", "tricube")) for (degree in 0:1) {
    info <- paste(kernel, "degree", degree)
    loss <- function(x, y, prior, cat, diagonal) {
      localmean:::metric_loss(x, y, prior, diag(1 / h), degree, cat, 0, 1e-10, 1L, FALSE,
                              diagonal, TRUE, kernel)
    }
    fused <- loss(d$x, d$y, d$prior, categorical, TRUE)
    general <- loss(d$x, d$y, d$prior, categorical, FALSE)
    reordered <- loss(d$x[shuffle, ], d$y[shuffle], d$prior[shuffle], moved, TRUE)
    expect_true(is.finite(fused$loss), info = info)
    for (other in list(general, reordered)) {
      expect_equal(other$loss, fused$loss, tolerance = 1e-12, info = info)
      expect_equal(diag(other$gradient), diag(fused$gradient), tolerance = 1e-10, info = info)
      expect_equal(other$lambda_gradient, fused$lambda_gradient, tolerance = 1e-9, info = info)
    }
  }
})

test_that("a joint cv search ends at a minimum of the plain-R score, in any order of the data", {
  d <- kernel_search_data()
  data <- data.frame(d$x, g = factor(d$g), y = d$y)
  shuffle <- c(31:60, 30:1)
  fits <- lapply(list(data, data[shuffle, ]), function(df) {
    local_poly(y ~ x1 + x2 + g, df, degree = 1, bandwidth = "cv", verbose = FALSE)
  })
  ref <- function(h, lambda) loo_score_ref(d$x, d$y, d$g, h, lambda, "gaussian", 1)
  for (fit in fits) {
    h <- unname(fit$bandwidth[1:2])
    lambda <- unname(fit$bandwidth[3])
    best <- ref(h, lambda)
    expect_equal(fit$cv, best, tolerance = 1e-10)
    # no bandwidth moved by 2% improves the score beyond the search's tolerance
    for (k in 1:2) for (f in c(0.98, 1.02)) {
      expect_gte(ref(replace(h, k, h[k] * f), lambda), best * (1 - 1e-5))
    }
  }
  # the smooth score's minimum does not depend on the order of the data
  expect_equal(fits[[2]]$cv, fits[[1]]$cv, tolerance = 1e-6)
})

test_that("a learned metric's loss is the plain-R loss at its A, in any order of the data", {
  set.seed(23)
  train <- rotated_data(100, d = 2)
  shuffle <- c(51:100, 50:1)
  for (order in list(seq_len(100), shuffle)) {
    fit <- local_poly(train$x[order, ], train$y[order], degree = 1, bandwidth = "metric",
                      verbose = FALSE)
    m <- fit$metric
    expect_lt(m$loss, m$start_loss)
    expect_equal(m$loss, metric_loss_ref(train$x, train$y, m$A, 1), tolerance = 1e-10)
  }
})
