# Tests with local models: the bootstrap foundation, the specification test and the two-sample
# density test, against plain-R computations and ks.

spec_data <- function(n = 80, seed = 1, curve = FALSE) {
  set.seed(seed)
  x <- runif(n)
  mean <- if (curve) sin(2 * pi * x) else 1 + 2 * x
  data.frame(x = x, y = mean + rnorm(n, sd = 0.3))
}

# ---- The bootstrap foundation ----------------------------------------------------------------

test_that("wild multipliers have mean 0 and variance 1 and follow set.seed()", {
  set.seed(1)
  v <- localmean:::wild_multipliers(2000, 5)
  expect_equal(dim(v), c(2000L, 5L))
  expect_equal(mean(v), 0, tolerance = 0.03)
  expect_equal(mean(v^2), 1, tolerance = 0.03)
  expect_equal(mean(v^3), 1, tolerance = 0.1)  # Mammen's law
  expect_setequal(unique(as.vector(v)), c((1 - sqrt(5)) / 2, (1 + sqrt(5)) / 2))
  expect_setequal(unique(as.vector(localmean:::wild_multipliers(50, 4, "rademacher"))), c(-1, 1))
  set.seed(1)
  expect_identical(localmean:::wild_multipliers(2000, 5), v)
})

test_that("replicate responses are smoothed by the fit's engine object, as fits one by one", {
  d <- spec_data(60)
  fit <- local_poly(y ~ x, d, bandwidth = 0.15)
  set.seed(2)
  Y <- matrix(rnorm(60 * 7), 60, 7)
  before <- localmean:::engine_builds()
  # blocks of 3 columns: three engine calls, one build of the engine's data; the next blocks
  # swap their values in
  F <- localmean:::smooth_replicates(fit$spec, Y, cells = 180)
  expect_identical(localmean:::engine_builds() - before, 1L)
  # the fit's own engine object is left as it was
  before <- localmean:::engine_builds()
  predict(fit, data.frame(x = 0.5))
  expect_identical(localmean:::engine_builds() - before, 0L)
  L <- smoother_matrix_ref(d$x, d$y, 0.15, "gaussian", 1)
  expect_equal(F, L %*% Y, tolerance = 1e-10)
  expect_identical(localmean:::smooth_replicates(fit$spec, Y), F)
  expect_identical(localmean:::smooth_replicates(fit$spec, Y, n_threads = 2L), F)
})

test_that("swapping the values of an engine object gives the fits of a rebuilt one", {
  set.seed(3)
  n <- 70
  d <- data.frame(x1 = runif(n), x2 = runif(n), g = factor(sample(c("a", "b", "c"), n, TRUE)),
                  w = runif(n, 0.5, 2))
  d$y <- d$x1 + as.integer(d$g) / 3 + rnorm(n, sd = 0.2)
  fit <- local_poly(y ~ x1 + x2 + g, d, bandwidth = c(0.3, 0.4, 0.3), weights = w,
                    verbose = FALSE)
  Y <- matrix(rnorm(n * 5), n, 5)
  # blocks of 2 columns (the last of 1), each with an engine object built for it
  rebuilt <- do.call(cbind, lapply(list(1:2, 3:4, 5), function(cols) {
    spec <- fit$spec
    spec$engine <- localmean:::engine_handle()
    spec$values <- Y[, cols, drop = FALSE]
    localmean:::fit_at_data(spec)$fitted
  }))
  before <- localmean:::engine_builds()
  swapped <- localmean:::smooth_replicates(fit$spec, Y, cells = 2 * n)
  expect_identical(localmean:::engine_builds() - before, 1L)
  expect_identical(swapped, rebuilt)
  # an object without data, or with other data, is not swapped into
  spec <- fit$spec
  spec$engine <- localmean:::engine_handle()
  spec$values <- Y[, 1:2]
  expect_false(localmean:::engine_set_values(spec))
  localmean:::fit_at_data(spec)
  spec$values <- Y[, 3:5]
  expect_true(localmean:::engine_set_values(spec))
  spec$prior <- rep(1, n)
  expect_false(localmean:::engine_set_values(spec))
})

test_that("the bootstrap p-value counts the replicates at least as large", {
  expect_equal(localmean:::bootstrap_p_value(2, c(1, 2, 3, NA)), 3 / 4)
  expect_equal(localmean:::bootstrap_p_value(20, 1:19), 1 / 20)
})

# ---- The specification test ------------------------------------------------------------------

# The standard deviations of the null responses in plain R: a Nadaraya-Watson mean of the
# linear model's squared residuals over 1 - h_ii (weighted by w), at the CV bandwidth of that
# regression (the selector's choice, taken from local_poly()).
# The approximate F of a linear model of 2 coefficients against a smoother of trace tr
approx_f_ref <- function(r0, r1, tr, n) ((r0 - r1) / (tr - 2)) / (r1 / (n - tr))

null_scale_ref <- function(x, lin, w = rep(1, length(x))) {
  r2 <- w * residuals(lin)^2 / (1 - hatvalues(lin))
  h <- local_poly(x, r2, degree = 0, bandwidth = "cv", verbose = FALSE)$bandwidth[[1]]
  sqrt(local_poly_ref(x, r2, x, h, "gaussian", 0)$coef[, 1] / w)
}

test_that("the specification statistic is the approximate F of plain-R fits", {
  d <- spec_data(60, curve = TRUE)
  fit <- local_poly(y ~ x, d, bandwidth = 0.1)
  lin <- lm(y ~ x, d)
  set.seed(1)
  res <- spec_test(fit, lin, B = 19, verbose = FALSE)
  L <- smoother_matrix_ref(d$x, d$y, 0.1, "gaussian", 1)
  rss1 <- sum((d$y - local_poly_ref(d$x, d$y, d$x, 0.1, "gaussian", 1)$coef[, 1])^2)
  rss0 <- sum(residuals(lin)^2)
  expect_equal(unname(res$statistic), approx_f_ref(rss0, rss1, sum(diag(L)), 60),
               tolerance = 1e-10)
  expect_equal(res$models$Res.Df, c(58, 60 - sum(diag(L))), tolerance = 1e-10)
  expect_equal(res$models$RSS, c(rss0, rss1), tolerance = 1e-10)
  # the replicates: responses under the null (normal multipliers of the pilot's standard
  # deviations), refitted by both models
  set.seed(1)
  v <- matrix(rnorm(60 * 19), 60, 19)
  Y <- fitted(lin) + null_scale_ref(d$x, lin) * v
  r0 <- colSums((Y - qr.fitted(lin$qr, Y))^2)
  r1 <- colSums((Y - L %*% Y)^2)
  expect_equal(res$replicates, approx_f_ref(r0, r1, sum(diag(L)), 60), tolerance = 1e-8)
  expect_equal(res$p.value, (1 + sum(res$replicates >= res$statistic)) / 20)
})

test_that("the specification test has the weights of both fits", {
  d <- spec_data(60)
  d$w <- rep(c(1, 2), 30)
  fit <- local_poly(y ~ x, d, bandwidth = 0.2, weights = w)
  lin <- lm(y ~ x, d, weights = w)
  set.seed(1)
  res <- spec_test(fit, lin, B = 19, verbose = FALSE)
  rss0 <- sum(d$w * residuals(lin)^2)
  rss1 <- sum(d$w * (d$y - fitted(fit))^2)
  expect_equal(unname(res$statistic), approx_f_ref(rss0, rss1, fit$df, 60), tolerance = 1e-10)
  # the weighted QR refits the linear model
  set.seed(1)
  v <- matrix(rnorm(60 * 19), 60, 19)
  Y <- fitted(lin) + null_scale_ref(d$x, lin, d$w) * v
  refit <- lm.wfit(cbind(1, d$x), Y[, 3], d$w)
  expect_equal(res$replicates[3] > -Inf, TRUE)
  r0 <- sum(d$w * refit$residuals^2)
  F1 <- localmean:::smooth_replicates(fit$spec, Y[, 3, drop = FALSE])
  r1 <- sum(d$w * (Y[, 3] - F1)^2)
  expect_equal(res$replicates[3], approx_f_ref(r0, r1, fit$df, 60), tolerance = 1e-8)
  expect_error(spec_test(fit, lm(y ~ x, d), B = 19, verbose = FALSE),
               class = "localmean_error_mismatch")
})

test_that("the specification test is reproducible for any thread count and either order", {
  d <- spec_data(80)
  fit <- local_poly(y ~ x, d, bandwidth = 0.2, n_threads = 1)
  lin <- lm(y ~ x, d)
  set.seed(5)
  one <- spec_test(fit, lin, B = 49, n_threads = 1, verbose = FALSE)
  set.seed(5)
  two <- spec_test(fit, lin, B = 49, n_threads = 2, verbose = FALSE)
  expect_identical(two$replicates, one$replicates)
  expect_identical(two$p.value, one$p.value)
  set.seed(5)
  swapped <- spec_test(lin, fit, B = 49, verbose = FALSE)
  expect_identical(swapped$p.value, one$p.value)
  set.seed(5)
  via_anova <- anova(fit, lin, B = 49, verbose = FALSE)
  expect_identical(via_anova$p.value, one$p.value)
  expect_s3_class(via_anova, "htest")
  expect_match(via_anova$data.name, "lin vs fit")
  # the other order is stats' anova.lm(): an F table without a bootstrap (documented)
  expect_s3_class(anova(lin, fit), "anova")
})

test_that("the specification test accepts a true model and rejects a wrong one", {
  null <- spec_data(100, seed = 3)
  set.seed(11)
  res <- spec_test(local_poly(y ~ x, null, bandwidth = 0.2), lm(y ~ x, null), B = 99,
                   verbose = FALSE)
  expect_gt(res$p.value, 0.05)
  alt <- spec_data(100, seed = 3, curve = TRUE)
  set.seed(11)
  res <- spec_test(local_poly(y ~ x, alt, bandwidth = 0.1), lm(y ~ x, alt), B = 99,
                   verbose = FALSE)
  expect_equal(res$p.value, 0.01)
})

test_that("the specification test reselects a selected bandwidth in every replicate", {
  d <- spec_data(60, seed = 2)
  fit <- local_poly(y ~ x, d, bandwidth = "cv", verbose = FALSE)
  lin <- lm(y ~ x, d)
  set.seed(1)
  res <- spec_test(fit, lin, B = 19, verbose = FALSE)
  expect_match(res$method, "reselected")
  # the candidates: the fit's search, extended by factors of 1.5 to its upper bound
  grid <- localmean:::reselection_grid(fit)[, 1]
  expect_identical(grid[seq_along(fit$cv_curve$x)], fit$cv_curve$x)
  expect_equal(grid[length(grid)], 10 * diff(range(d$x)))
  expect_true(all(diff(grid) > 0))
  set.seed(1)
  v <- matrix(rnorm(60 * 19), 60, 19)
  Y <- cbind(d$y, fitted(lin) + null_scale_ref(d$x, lin) * v)
  # each response's F at the candidate of least leave-one-out error, in plain R
  smoothers <- lapply(grid, function(h) smoother_matrix_ref(d$x, d$y, h, "gaussian", 1))
  F_ref <- vapply(c(1, 2, 8), function(b) {
    cv <- vapply(smoothers, function(L) mean(((Y[, b] - L %*% Y[, b]) / (1 - diag(L)))^2), 0)
    L <- smoothers[[which.min(cv)]]
    r0 <- sum((Y[, b] - qr.fitted(lin$qr, Y[, b]))^2)
    r1 <- sum((Y[, b] - L %*% Y[, b])^2)
    approx_f_ref(r0, r1, sum(diag(L)), 60)
  }, 0)
  expect_equal(c(res$statistic, res$replicates[c(1, 7)]), F_ref, tolerance = 1e-8,
               ignore_attr = TRUE)
  set.seed(1)
  kept <- spec_test(fit, lin, B = 19, reselect = FALSE, verbose = FALSE)
  r1 <- sum((d$y - fitted(fit))^2)
  expect_equal(unname(kept$statistic), approx_f_ref(sum(residuals(lin)^2), r1, fit$df, 60),
               tolerance = 1e-10)
  expect_false(grepl("reselected", kept$method))
  set.seed(1)
  two <- spec_test(fit, lin, B = 19, n_threads = 2, verbose = FALSE)
  expect_identical(two$replicates, res$replicates)
  # other selectors refit each replicate: the rule of thumb, which depends on x alone, chooses
  # the same bandwidth every time, so the test equals the one at that bandwidth kept fixed
  rot <- local_poly(y ~ x, d, bandwidth = "rot", verbose = FALSE)
  set.seed(3)
  refitted <- spec_test(rot, lin, B = 19, verbose = FALSE)
  set.seed(3)
  expect_equal(refitted$replicates,
               spec_test(rot, lin, B = 19, reselect = FALSE, verbose = FALSE)$replicates)
  fixed <- local_poly(y ~ x, d, bandwidth = 0.2, verbose = FALSE)
  expect_error(spec_test(fixed, lin, B = 19, reselect = TRUE), "selector",
               class = "localmean_error")
  expect_error(spec_test(fit, lin, B = 19, reselect = NA), "reselect", class = "localmean_error")
})

test_that("the specification test prints as a test and tidies to one row", {
  fit <- local_poly(dist ~ speed, cars, bandwidth = 5)
  set.seed(1)
  res <- spec_test(fit, lm(dist ~ speed, cars), B = 19, verbose = FALSE)
  out <- capture.output(print(res))
  expect_true(any(grepl("Specification test", out)))
  expect_true(any(grepl("F = .*, B = 19, p-value", out)))
  expect_true(any(grepl("parametric", out)))
  row <- tidy(res)
  expect_identical(nrow(row), 1L)
  expect_identical(row$B, 19L)
  expect_equal(row$p.value, res$p.value)
  expect_equal(glance(res), row)
})

test_that("the specification test refuses bad input with classed errors", {
  d <- spec_data(40)
  fit <- local_poly(y ~ x, d, bandwidth = 0.2)
  lin <- lm(y ~ x, d)
  for (B in list(18, 99.5, -1, NA, "99", c(99, 199))) {
    expect_error(spec_test(fit, lin, B = B), "B", class = "localmean_error")
  }
  expect_error(spec_test(fit, lm(y ~ x, d[-1, ]), B = 19), "different rows",
               class = "localmean_error_mismatch")
  expect_error(spec_test(fit, lm(I(2 * y) ~ x, d), B = 19), "different responses",
               class = "localmean_error_mismatch")
  expect_error(spec_test(fit, glm(y ~ x, data = d), B = 19), "parametric",
               class = "localmean_error")
  expect_error(spec_test(fit, fit, B = 19), "parametric", class = "localmean_error")
  expect_error(spec_test(lin, lin, B = 19), "local", class = "localmean_error")
  expect_error(anova(fit, lin, lin), "one parametric model", class = "localmean_error")
  expect_error(spec_test(fit, lin, B = 19, multipliers = "gaussian"), "multipliers",
               class = "localmean_error")
  d$k <- rbinom(40, 1, 0.5)
  logit <- local_poly(k ~ x, d, bandwidth = 0.3, family = "binomial")
  expect_error(spec_test(logit, lm(k ~ x, d), B = 19), "least-squares", class = "localmean_error")
})

test_that("the bootstrap gives the same p-value under a future plan", {
  skip_on_cran()
  skip_if_not_installed("future")
  skip_if_not_installed("future.apply")
  d <- spec_data(60)
  fit <- local_poly(y ~ x, d, bandwidth = 0.2)
  set.seed(1)
  Y <- matrix(rnorm(60 * 6), 60, 6)
  serial <- localmean:::smooth_replicates(fit$spec, Y, cells = 120)
  old <- future::plan(future::multisession, workers = 2)
  on.exit(future::plan(old), add = TRUE)
  expect_identical(localmean:::smooth_replicates(fit$spec, Y, cells = 120), serial)
  # the specification test with its bandwidth reselected on the selector's grid
  selected <- local_poly(y ~ x, d, verbose = FALSE)
  lin <- lm(y ~ x, d)
  future::plan(future::sequential)
  set.seed(2)
  alone <- spec_test(selected, lin, B = 99, verbose = FALSE)
  future::plan(future::multisession, workers = 2)
  set.seed(2)
  expect_identical(spec_test(selected, lin, B = 99, verbose = FALSE)$replicates,
                   alone$replicates)
})

# ---- The kernel statistic of the specification test ----------------------------------------

# The kernel statistic of residuals e at Gaussian kernel weights K (n x n, any scale), by the
# double loop over pairs i != j: sum e_i e_j K_ij / sqrt(2 sum e_i^2 e_j^2 K_ij^2), K in units
# of K_ii.
zheng_ref <- function(e, K) {
  e <- unname(e)
  K <- K / K[1, 1]
  s <- 0
  v <- 0
  for (i in seq_along(e)) {
    for (j in seq_along(e)) {
      if (j == i) next
      s <- s + e[i] * e[j] * K[i, j]
      v <- v + e[i]^2 * e[j]^2 * K[i, j]^2
    }
  }
  c(S = s, J = s / sqrt(2 * v))
}

gauss_ref <- function(x, h) exp(-outer(x, x, "-")^2 / (2 * h^2))

mammen_ref <- function(n, B) {
  root5 <- sqrt(5)
  low <- runif(n * B) < (root5 + 1) / (2 * root5)
  matrix(ifelse(low, (1 - root5) / 2, (1 + root5) / 2), n, B)
}

test_that("the kernel statistic is Zheng's of plain-R double loops, its replicates too", {
  d <- spec_data(60, curve = TRUE)
  fit <- local_poly(y ~ x, d, bandwidth = 0.1)
  lin <- lm(y ~ x, d)
  set.seed(1)
  res <- spec_test(fit, lin, B = 19, statistic = "kernel", verbose = FALSE)
  K <- gauss_ref(d$x, 0.1)
  ref <- zheng_ref(residuals(lin), K)
  expect_equal(unname(res$statistic), unname(ref["J"]), tolerance = 1e-10)
  expect_identical(names(res$statistic), "J")
  expect_identical(res$bandwidth, fit$bandwidth)
  # replicates: Mammen's multipliers of the residuals, the lm refitted, J of each
  set.seed(1)
  E <- qr.resid(lin$qr, residuals(lin) * mammen_ref(60, 19))
  expect_equal(res$replicates, unname(apply(E, 2L, function(e) zheng_ref(e, K)["J"])),
               tolerance = 1e-10)
  expect_equal(res$p.value, (1 + sum(res$replicates >= res$statistic)) / 20)
  # a departure from the line gives a large statistic
  expect_gt(res$statistic, 3)
  # other multipliers on request
  set.seed(1)
  rad <- spec_test(fit, lin, B = 19, statistic = "kernel", multipliers = "rademacher",
                   verbose = FALSE)
  expect_identical(rad$statistic, res$statistic)
  expect_false(identical(rad$replicates, res$replicates))
})

test_that("the kernel statistic and its replicates are np::npcmstest's on cars", {
  skip_on_cran()
  skip_if_not_installed("np")
  options(np.messages = FALSE)
  model <- lm(dist ~ speed, cars, x = TRUE, y = TRUE)
  peer <- np_fun("npcmstest")(model = model, xdat = cars["speed"], ydat = cars$dist, B = 49,
                              boot.method = "wild", random.seed = 3, bws = 1.5,
                              bandwidth.compute = FALSE)
  fit <- local_poly(dist ~ speed, cars, degree = 0, bandwidth = 1.5)
  set.seed(3)
  res <- spec_test(fit, model, B = 49, statistic = "kernel", verbose = FALSE)
  expect_equal(unname(res$statistic), peer$Jn, tolerance = 1e-8)
  # the same multipliers from the same seed: the same replicates (np sorts them)
  expect_equal(sort(res$replicates), peer$Jn.bootstrap, tolerance = 1e-8)
})

test_that("the kernel statistic takes np's bandwidth rule, weights and categorical predictors", {
  d <- spec_data(60)
  lin <- lm(y ~ x, d)
  # a selected bandwidth: a local constant fit's by cross-validation of the response
  selected <- local_poly(y ~ x, d, verbose = FALSE)
  res <- spec_test(selected, lin, B = 19, statistic = "kernel", verbose = FALSE)
  constant <- local_poly(y ~ x, d, degree = 0, bandwidth = "cv", verbose = FALSE)
  expect_equal(unname(res$bandwidth), unname(constant$bandwidth))
  expect_equal(unname(res$statistic),
               unname(zheng_ref(residuals(lin), gauss_ref(d$x, constant$bandwidth[[1]]))["J"]),
               tolerance = 1e-10)
  # prior weights: the residuals times the square roots of the weights
  d$w <- rep(c(1, 3), 30)
  wfit <- local_poly(y ~ x, d, bandwidth = 0.15, weights = w)
  wlin <- lm(y ~ x, d, weights = w)
  res <- spec_test(wfit, wlin, B = 19, statistic = "kernel", verbose = FALSE)
  expect_equal(unname(res$statistic),
               unname(zheng_ref(sqrt(d$w) * residuals(wlin), gauss_ref(d$x, 0.15))["J"]),
               tolerance = 1e-10)
  # a factor: the product of the Gaussian and Aitchison-Aitken weights
  set.seed(3)
  d$g <- factor(sample(c("a", "b", "c"), 60, TRUE))
  mixed <- local_poly(y ~ x + g, d, bandwidth = c(0.15, 0.3), verbose = FALSE)
  mlin <- lm(y ~ x + g, d)
  res <- spec_test(mixed, mlin, B = 19, statistic = "kernel", verbose = FALSE)
  K <- gauss_ref(d$x, 0.15) * ifelse(outer(d$g, d$g, "=="), 1 - 0.3, 0.3 / 2)
  expect_equal(unname(res$statistic), unname(zheng_ref(residuals(mlin), K)["J"]),
               tolerance = 1e-10)
  # two predictors, the (radial) Epanechnikov kernel
  d$x2 <- runif(60)
  two <- local_poly(y ~ x + x2, d, bandwidth = c(0.3, 0.4), kernel = "epanechnikov")
  lin2 <- lm(y ~ x + x2, d)
  res <- spec_test(two, lin2, B = 19, statistic = "kernel", verbose = FALSE)
  K <- pmax(1 - outer(d$x, d$x, "-")^2 / 0.3^2 - outer(d$x2, d$x2, "-")^2 / 0.4^2, 0)
  expect_equal(unname(res$statistic), unname(zheng_ref(residuals(lin2), K)["J"]),
               tolerance = 1e-10)
})

test_that("the kernel statistic is reproducible for threads, order, anova() and a plan", {
  d <- spec_data(60)
  fit <- local_poly(y ~ x, d, bandwidth = 0.15)
  lin <- lm(y ~ x, d)
  set.seed(5)
  one <- spec_test(fit, lin, B = 49, statistic = "kernel", n_threads = 1, verbose = FALSE)
  set.seed(5)
  two <- spec_test(fit, lin, B = 49, statistic = "kernel", n_threads = 2, verbose = FALSE)
  expect_identical(two$replicates, one$replicates)
  expect_identical(two$p.value, one$p.value)
  set.seed(5)
  expect_identical(spec_test(lin, fit, B = 49, statistic = "kernel", verbose = FALSE)$p.value,
                   one$p.value)
  set.seed(5)
  via_anova <- anova(fit, lin, B = 49, statistic = "kernel", verbose = FALSE)
  expect_identical(via_anova$replicates, one$replicates)
  expect_match(via_anova$method, "kernel statistic")
  row <- tidy(one)
  expect_identical(row$B, 49L)
  expect_equal(row$statistic, unname(one$statistic))
  expect_equal(glance(one), row)
  expect_true(any(grepl("J = .*, B = 49, p-value", capture.output(print(one)))))
  # the Epanechnikov kernel, whose square the statistic's variance tabulates
  epa <- local_poly(y ~ x, d, bandwidth = 0.3, kernel = "epanechnikov")
  res <- spec_test(epa, lin, B = 19, statistic = "kernel", verbose = FALSE)
  K <- pmax(1 - outer(d$x, d$x, "-")^2 / 0.3^2, 0)
  expect_equal(unname(res$statistic), unname(zheng_ref(residuals(lin), K)["J"]),
               tolerance = 1e-10)
  skip_on_cran()
  skip_if_not_installed("future")
  skip_if_not_installed("future.apply")
  old <- future::plan(future::multisession, workers = 2)
  on.exit(future::plan(old), add = TRUE)
  set.seed(5)
  planned <- spec_test(fit, lin, B = 49, statistic = "kernel", verbose = FALSE)
  expect_identical(planned$replicates, one$replicates)
})

test_that("the kernel statistic refuses bad input with classed errors", {
  d <- spec_data(40)
  fit <- local_poly(y ~ x, d, bandwidth = 0.2)
  lin <- lm(y ~ x, d)
  expect_error(spec_test(fit, lin, B = 19, statistic = "zheng"), "statistic",
               class = "localmean_error")
  expect_error(anova(fit, lin, B = 19, statistic = "zheng"), "statistic",
               class = "localmean_error")
  expect_error(anova(fit, B = 19, statistic = "kernel"), "statistic", class = "localmean_error")
  expect_error(spec_test(fit, lin, B = 18, statistic = "kernel"), "B", class = "localmean_error")
  expect_error(spec_test(fit, lin, B = 19, statistic = "kernel", reselect = TRUE), "reselect",
               class = "localmean_error")
  expect_error(spec_test(fit, lin, B = 19, statistic = "kernel", multipliers = "gaussian"),
               "multipliers", class = "localmean_error")
  expect_error(spec_test(fit, lm(y ~ x, d[-1, ]), B = 19, statistic = "kernel"),
               "different rows", class = "localmean_error_mismatch")
})

# ---- The relevance tests ---------------------------------------------------------------------

relevance_data <- function(n = 40, seed = 7) {
  set.seed(seed)
  d <- data.frame(x = runif(n), g = factor(sample(c("a", "b", "c"), n, TRUE)))
  d$y <- sin(2 * pi * d$x) + 0.5 * (d$g == "b") + rnorm(n, sd = 0.3)
  d
}

# Local linear fits in x at the data points with the Aitchison-Aitken weights of g (lambda) at
# level `level` of every query (NULL: each point's own level): the fit operators (n x n) of the
# intercept and the slope.
mixed_operators_ref <- function(d, h, lambda, level = NULL) {
  c <- nlevels(d$g)
  rows <- lapply(seq_len(nrow(d)), function(i) {
    at <- if (is.null(level)) d$g[i] else level
    prior <- ifelse(d$g == at, 1 - lambda, lambda / (c - 1))
    local_poly_ref(d$x, d$y, d$x[i], h, "gaussian", 1, prior = prior)$ops[[1]]
  })
  list(fit = t(sapply(rows, function(A) A[1, ])), slope = t(sapply(rows, function(A) A[2, ])))
}

test_that("the relevance statistics and replicates are those of plain-R fits", {
  d <- relevance_data()
  fit <- local_poly(y ~ x + g, d, bandwidth = c(0.15, 0.3), verbose = FALSE)
  set.seed(4)
  res <- relevance_test(fit, B = 19, verbose = FALSE)
  own <- mixed_operators_ref(d, 0.15, 0.3)
  at <- lapply(levels(d$g), function(l) mixed_operators_ref(d, 0.15, 0.3, l)$fit)
  slope_effect <- function(Y) colMeans((own$slope %*% Y)^2)
  level_effect <- function(Y) colMeans((at[[2]] %*% Y - at[[1]] %*% Y)^2 +
                                         (at[[3]] %*% Y - at[[1]] %*% Y)^2)
  expect_equal(res$Effect, c(slope_effect(d$y), level_effect(d$y)), tolerance = 1e-10)
  # T: the effect over the residual variance RSS / (n - tr L), for every response
  variance <- function(Y) colSums((Y - own$fit %*% Y)^2) / (40 - sum(diag(own$fit)))
  slope_stat <- function(Y) slope_effect(Y) / variance(Y)
  level_stat <- function(Y) level_effect(Y) / variance(Y)
  expect_equal(res$T, c(slope_stat(d$y), level_stat(d$y)), tolerance = 1e-10)
  # the null models: x held at its median, g at its most frequent level; residuals rescaled
  set.seed(4)
  v <- list(localmean:::wild_multipliers(40, 19, "rademacher"),
            localmean:::wild_multipliers(40, 19, "rademacher"))
  held_x <- sapply(seq_len(40), function(i) {
    prior <- ifelse(d$g == d$g[i], 0.7, 0.15)
    local_poly_ref(d$x, d$y, median(d$x), 0.15, "gaussian", 1, prior = prior)$coef[1, 1]
  })
  mode <- names(which.max(table(d$g)))
  held_g <- drop(mixed_operators_ref(d, 0.15, 0.3, mode)$fit %*% d$y)
  star <- function(held, v) {
    e <- d$y - held
    sigma <- sqrt(sum((d$y - fitted(fit))^2) / (40 - sum(diag(own$fit))))
    held + (e - mean(e)) / sd(e) * sigma * v
  }
  tests <- attr(res, "tests")
  expect_equal(tests$x$replicates, slope_stat(star(held_x, v[[1]])), tolerance = 1e-8)
  expect_equal(tests$g$replicates, level_stat(star(held_g, v[[2]])), tolerance = 1e-8)
  expect_equal(res[["Pr(>T)"]][1], (1 + sum(tests$x$replicates >= res$T[1])) / 20)
})

test_that("the relevance test agrees with np::npsigtest on mtcars", {
  skip_on_cran()  # np's test takes seconds
  skip_if_not_installed("np")
  options(np.messages = FALSE)
  xdat <- mtcars[c("wt", "drat")]
  bw <- np_fun("npregbw")(xdat = xdat, ydat = mtcars$mpg, bws = c(1, 0.5),
                          bandwidth.compute = FALSE, regtype = "ll")
  peer <- np_fun("npsigtest")(bw, xdat = xdat, ydat = mtcars$mpg, B = 399,
                              boot.method = "wild", pivot = FALSE, random.seed = 1)
  fit <- local_poly(mpg ~ wt + drat, mtcars, bandwidth = c(1, 0.5), verbose = FALSE)
  set.seed(1)
  res <- relevance_test(fit, B = 399, verbose = FALSE)
  # the same effects (np's local linear gradients are the local slopes); wt relevant, drat
  # not (np: p = 0 and 0.57)
  expect_equal(res$Effect, peer$In, tolerance = 1e-8)
  # T divides the effect by the residual variance (np's unstudentised statistic is liberal),
  # so the p-values differ by more than Monte Carlo error (drat: about 0.7 against np's 0.6,
  # bench/README.md); the conclusions agree
  expect_true(res[["Pr(>T)"]][1] < 0.01 && peer$P[1] < 0.01)
  expect_true(res[["Pr(>T)"]][2] > 0.3 && peer$P[2] > 0.3)
})

test_that("the relevance test finds the relevant predictor, for any threads and via anova()", {
  set.seed(2)
  n <- 80
  d <- data.frame(x1 = runif(n), x2 = runif(n))
  d$y <- 2 * d$x1 + rnorm(n, sd = 0.3)
  fit <- local_poly(y ~ x1 + x2, d, bandwidth = c(0.3, 0.3), verbose = FALSE)
  set.seed(1)
  one <- relevance_test(fit, B = 49, n_threads = 1, verbose = FALSE)
  expect_equal(one[["Pr(>T)"]][1], 0.02)
  expect_gt(one[["Pr(>T)"]][2], 0.05)
  set.seed(1)
  two <- relevance_test(fit, B = 49, n_threads = 2, verbose = FALSE)
  expect_identical(two, one)
  set.seed(1)
  via_anova <- anova(fit, B = 49, verbose = FALSE)
  expect_identical(unclass(via_anova), unclass(one))
  set.seed(1)
  second <- relevance_test(fit, which = 2, B = 49, verbose = FALSE)
  expect_identical(rownames(second), "x2")
  out <- capture.output(print(one))
  expect_true(any(grepl("Relevance tests", out)))
  expect_true(any(grepl("B = 49", out)))
  row <- tidy(one)
  expect_identical(row$term, c("x1", "x2"))
  expect_equal(row$p.value, one[["Pr(>T)"]])
  expect_s3_class(attr(one, "tests")$x1, "htest")
})

test_that("the relevance test gives the same p-values under a future plan", {
  skip_on_cran()
  skip_if_not_installed("future")
  skip_if_not_installed("future.apply")
  d <- relevance_data(50)
  fit <- local_poly(y ~ x + g, d, bandwidth = c(0.15, 0.3), verbose = FALSE)
  set.seed(1)
  Y <- matrix(rnorm(50 * 4), 50, 4)
  contrast <- localmean:::predictor_contrast(fit, "g")
  serial <- localmean:::replicate_blocks(fit$spec, Y, contrast$statistic, cells = 100)
  old <- future::plan(future::multisession, workers = 2)
  on.exit(future::plan(old), add = TRUE)
  expect_identical(localmean:::replicate_blocks(fit$spec, Y, contrast$statistic, cells = 100),
                   serial)
})

test_that("the relevance test refuses bad input with classed errors", {
  d <- relevance_data()
  fit <- local_poly(y ~ x + g, d, bandwidth = c(0.15, 0.3), verbose = FALSE)
  for (B in list(18, 99.5, NA, "99")) {
    expect_error(relevance_test(fit, B = B), "B", class = "localmean_error")
  }
  expect_error(relevance_test(fit, which = "z"), "which", class = "localmean_error")
  expect_error(relevance_test(fit, which = 3), "which", class = "localmean_error")
  expect_error(relevance_test(fit, which = c("x", "x")), "which", class = "localmean_error")
  expect_error(relevance_test(lm(y ~ x, d)), "fit", class = "localmean_error")
  flat <- local_mean(y ~ x + g, d, bandwidth = c(0.15, 0.3), verbose = FALSE)
  expect_error(relevance_test(flat, B = 19), "degree 1", class = "localmean_error")
  set.seed(1)
  expect_identical(rownames(relevance_test(flat, which = "g", B = 19, verbose = FALSE)), "g")
  d$k <- rbinom(40, 1, 0.5)
  logit <- local_poly(k ~ x, d, bandwidth = 0.3, family = "binomial", verbose = FALSE)
  expect_error(relevance_test(logit, B = 19), "least-squares", class = "localmean_error")
  knn <- local_poly(y ~ x, d, bandwidth = nn(15), verbose = FALSE)
  expect_error(relevance_test(knn, B = 19), "nn", class = "localmean_error")
  expect_error(relevance_test(fit, B = 19, reps = 3), class = "localmean_error")
})

# ---- The two-sample density test -------------------------------------------------------------

# The statistic in plain R: Gaussian kernel sums over every pair, scale bandwidths.
kde_test_ref <- function(x1, x2, h1, h2) {
  x1 <- as.matrix(x1)
  x2 <- as.matrix(x2)
  psi <- function(a, b, h) {
    total <- 0
    for (i in seq_len(nrow(a))) {
      u <- sweep(b, 2, a[i, ]) / rep(h, each = nrow(b))
      total <- total + sum(apply(dnorm(u), 1, prod)) / prod(h)
    }
    total / (nrow(a) * nrow(b))
  }
  psi(x1, x1, h1) + psi(x2, x2, h2) - psi(x1, x2, h1) - psi(x2, x1, h2)
}

test_that("the two-sample statistic is the plain-R sum of kernel pairs", {
  set.seed(4)
  x1 <- cbind(rnorm(40), rnorm(40))
  x2 <- cbind(rnorm(30, 0.3), rnorm(30))
  res <- kde_test(x1, x2, bandwidth = c(0.4, 0.5))
  expect_equal(unname(res$estimate), kde_test_ref(x1, x2, c(0.4, 0.5), c(0.4, 0.5)),
               tolerance = 1e-10)
  x1 <- rnorm(50)
  x2 <- rexp(40)
  res <- kde_test(x1, x2, bandwidth = 0.3)
  expect_equal(unname(res$estimate), kde_test_ref(x1, x2, 0.3, 0.3), tolerance = 1e-10)
  # the null mean K(0) (1 / (n1 h) + 1 / (n2 h)) and the z statistic
  expect_equal(res$p.value, pnorm(unname(res$statistic), lower.tail = FALSE))
})

test_that("the two-sample test agrees with ks::kde.test at the same bandwidths", {
  skip_on_cran()  # loading ks takes seconds
  skip_if_not_installed("ks")
  set.seed(6)
  x1 <- rnorm(60)
  x2 <- rnorm(50, 0.4, 1.2)
  res <- kde_test(x1, x2)
  h <- c(res$bandwidths[[1]]$h, res$bandwidths[[2]]$h)
  peer <- ks::kde.test(x1, x2, h1 = h[1], h2 = h[2])
  expect_equal(unname(res$estimate), peer$Tstat, tolerance = 1e-8)
  # ks estimates the variance's density gradient on a grid (binned), here exactly: z agrees to
  # about 1e-3
  expect_equal(unname(res$statistic), peer$zstat, tolerance = 1e-3)
  expect_equal(res$p.value, peer$pvalue, tolerance = 1e-3)
  x1 <- cbind(rnorm(50), rnorm(50))
  x2 <- cbind(rnorm(40), rnorm(40, 0.5))
  H <- matrix(c(0.3, 0.1, 0.1, 0.4), 2)
  res <- kde_test(x1, x2, bandwidth = H)
  peer <- ks::kde.test(x1, x2, H1 = H, H2 = H)
  expect_equal(unname(res$estimate), peer$Tstat, tolerance = 1e-8)
  expect_equal(unname(res$statistic), peer$zstat, tolerance = 1e-3)
})

test_that("the two-sample test accepts equal densities and rejects different ones", {
  set.seed(8)
  expect_gt(kde_test(rnorm(150), rnorm(120))$p.value, 0.05)
  expect_lt(kde_test(rnorm(150), rnorm(120, 0.7))$p.value, 0.001)
  res <- kde_test(rnorm(100), rnorm(100))
  expect_identical(tidy(res)$B, NA_integer_)
  expect_true(any(grepl("z = .*, p-value", capture.output(print(res)))))
})

test_that("the permutation p-value permutes the labels of the pooled sample", {
  set.seed(9)
  x1 <- cbind(rnorm(30), rnorm(30))
  x2 <- cbind(rnorm(25, 0.5), rnorm(25))
  set.seed(1)
  res <- kde_test(x1, x2, bandwidth = c(0.5, 0.6), B = 19, verbose = FALSE)
  expect_identical(res$parameter, c(B = 19L))
  expect_equal(res$p.value, (1 + sum(res$replicates >= res$estimate)) / 20)
  # the same permutations, drawn as kde_test() draws them, in plain R
  set.seed(1)
  pooled <- rbind(x1, x2)
  for (b in 1:3) {
    in1 <- sample.int(55, 30)
    expect_equal(res$replicates[b],
                 kde_test_ref(pooled[in1, ], pooled[-in1, ], c(0.5, 0.6), c(0.5, 0.6)),
                 tolerance = 1e-10)
  }
  set.seed(1)
  two <- kde_test(x1, x2, bandwidth = c(0.5, 0.6), B = 19, n_threads = 2, verbose = FALSE)
  expect_identical(two$replicates, res$replicates)
  expect_error(kde_test(x1, x2, bandwidth = diag(2) / 4, B = 19), "per-variable",
               class = "localmean_error")
  expect_error(kde_test(x1, x2, B = 5), "B", class = "localmean_error")
})

test_that("the two-sample test refuses bad input with classed errors", {
  expect_error(kde_test(rnorm(20), cbind(rnorm(20), rnorm(20))), "same number of columns",
               class = "localmean_error_mismatch")
  expect_error(kde_test(letters, rnorm(20)), "x1", class = "localmean_error")
  expect_error(kde_test(rnorm(20), 1), "x2", class = "localmean_error")
  expect_error(kde_test(rnorm(20), rnorm(20), bandwidth = nn(5)), "bandwidth",
               class = "localmean_error")
})

test_that("spec_test() refits an lm with an offset around the offset, and names the data", {
  d <- cars
  d$off <- d$speed^2 / 10
  lo <- lm(dist ~ speed + offset(off), d)
  fit <- local_poly(dist ~ speed, d, bandwidth = 5, verbose = FALSE)
  set.seed(3)
  a <- spec_test(fit, lo, B = 19, verbose = FALSE)
  # the null model's own fitted values are a fixed point of its refit
  expect_equal(unname(lo$offset + qr.fitted(lo$qr, fitted(lo) - lo$offset)), unname(fitted(lo)))
  set.seed(3)
  b <- spec_test(lo, fit, B = 19, verbose = FALSE)
  expect_identical(b$p.value, a$p.value)
  expect_identical(b$data.name, "lo vs fit")
  expect_error(kde_test(c(rnorm(9), NA), rnorm(10)), "x1", class = "localmean_error")
})

test_that("augment(), plot() and autoplot() draw the bootstrap bands of predict()", {
  fit <- local_poly(dist ~ speed, cars, bandwidth = 5, verbose = FALSE)
  set.seed(4)
  a <- augment(fit, interval = "bootstrap", B = 19)
  set.seed(4)
  band <- predict(fit, interval = "bootstrap", B = 19, verbose = FALSE)
  expect_identical(a$.lower, unname(band[, "lwr"]))
  expect_identical(a$.upper, unname(band[, "upr"]))
  set.seed(4)
  curves <- regression_curves(fit, 5, 0.95, "bootstrap", 19)
  grid <- data.frame(speed = seq(4, 25, length.out = 5))
  set.seed(4)
  expect_equal(curves$.lower, unname(predict(fit, grid, interval = "bootstrap", B = 19,
                                             verbose = FALSE)[, "lwr"]))
  pdf(NULL)
  on.exit(grDevices::dev.off())
  set.seed(4)
  expect_no_error(plot(fit, interval = "bootstrap", B = 19, simultaneous = TRUE))
  expect_error(plot(fit, interval = "tube"), "interval", class = "localmean_error")
  k <- kde(faithful$eruptions, gridsize = 64)
  set.seed(5)
  ak <- augment(k, interval = "bootstrap", B = 19)
  expect_true(all(ak$.lower <= ak$.density & ak$.density <= ak$.upper))
  set.seed(5)
  expect_no_error(plot(k, interval = "bootstrap", B = 19))
  expect_error(plot(kde(as.matrix(faithful)), interval = "bootstrap"), "one-dimensional",
               class = "localmean_error")
  skip_if_not_installed("ggplot2")
  set.seed(5)
  expect_s3_class(autoplot.local_kde(k, interval = "bootstrap", B = 19), "ggplot")
  expect_s3_class(autoplot.local_poly(fit, interval = "bootstrap", B = 19), "ggplot")
})

test_that("a density band at one point is the band of that point, without warnings", {
  k <- kde(faithful$waiting)
  set.seed(3)
  expect_no_warning(one <- predict(k, 55, interval = "bootstrap", B = 27, verbose = FALSE))
  set.seed(3)
  two <- predict(k, c(55, 70), interval = "bootstrap", B = 27, verbose = FALSE)
  expect_equal(one, two[1, , drop = FALSE])
})

# ---- A glm against a local likelihood fit ----------------------------------------------------

glm_data <- function(n = 60, seed = 1, curve = FALSE) {
  set.seed(seed)
  x <- runif(n)
  eta <- if (curve) 2 - 12 * (x - 0.5)^2 else -0.5 + 1.5 * x
  trials <- sample(1:4, n, replace = TRUE)
  data.frame(x = x, y = rbinom(n, 1, plogis(eta)), k = rpois(n, exp(eta)), trials = trials,
             s = rbinom(n, trials, plogis(eta)))
}

# The deviance of the local linear likelihood fit at the data points, by glm.fit() with Gaussian
# kernel weights at each point (prior weights times the kernel) in plain R.
local_deviance_ref <- function(x, y, h, family, prior = rep(1, length(x))) {
  mu <- vapply(x, function(q) {
    g <- suppressWarnings(glm.fit(cbind(1, x - q), y, weights = prior * dnorm((x - q) / h),
                                  family = family,
                                  control = glm.control(epsilon = 1e-14, maxit = 100)))
    family$linkinv(g$coefficients[[1]])
  }, 0)
  sum(family$dev.resids(y, mu, prior))
}

test_that("the glm test's statistic is the deviance difference, computed in plain R", {
  d <- glm_data()
  logit <- local_poly(y ~ x, d, family = "binomial", bandwidth = 0.25,
                      control = local_control(tol = 1e-13))
  g <- glm(y ~ x, binomial, d)
  res <- spec_test(logit, g, B = 19, verbose = FALSE)
  expect_equal(unname(res$statistic),
               deviance(g) - local_deviance_ref(d$x, d$y, 0.25, binomial()), tolerance = 1e-8)
  expect_equal(res$models$Resid.Dev, c(deviance(g), local_deviance_ref(d$x, d$y, 0.25, binomial())),
               tolerance = 1e-8)
  expect_equal(res$models$Resid.Df[1], df.residual(g))
  # Poisson, and binomial proportions with their trials as weights
  counts <- local_poly(k ~ x, d, family = "poisson", bandwidth = 0.3,
                       control = local_control(tol = 1e-13))
  gp <- glm(k ~ x, poisson, d)
  expect_equal(unname(spec_test(counts, gp, B = 19, verbose = FALSE)$statistic),
               deviance(gp) - local_deviance_ref(d$x, d$k, 0.3, poisson()), tolerance = 1e-8)
  props <- local_poly(s / trials ~ x, d, weights = trials, family = "binomial",
                      bandwidth = 0.3, control = local_control(tol = 1e-13))
  gt <- glm(cbind(s, trials - s) ~ x, binomial, d)
  expect_equal(unname(spec_test(props, gt, B = 19, verbose = FALSE)$statistic),
               deviance(gt) - local_deviance_ref(d$x, d$s / d$trials, 0.3, binomial(), d$trials),
               tolerance = 1e-8)
})

test_that("the glm test gives the same p-value for any thread count, order and via anova()", {
  d <- glm_data(80, seed = 2)
  logit <- local_poly(y ~ x, d, family = "binomial", bandwidth = 0.3)
  g <- glm(y ~ x, binomial, d)
  set.seed(5)
  one <- spec_test(logit, g, B = 39, n_threads = 1, verbose = FALSE)
  set.seed(5)
  two <- spec_test(logit, g, B = 39, n_threads = 2, verbose = FALSE)
  expect_identical(two$p.value, one$p.value)
  expect_identical(two$replicates, one$replicates)
  set.seed(5)
  expect_identical(spec_test(g, logit, B = 39, verbose = FALSE)$replicates, one$replicates)
  set.seed(5)
  via_anova <- anova(logit, g, B = 39, verbose = FALSE)
  expect_identical(via_anova$p.value, one$p.value)
  expect_match(via_anova$data.name, "g vs logit")
  expect_s3_class(one, c("local_test", "htest"))
  expect_match(one$method, "generalized linear model")
  expect_equal(unname(one$parameter), 39)
  expect_equal(one$p.value, (1 + sum(one$replicates >= one$statistic)) / 40)
  expect_output(print(one), "Resid.Dev")
  row <- tidy(one)
  expect_equal(row$p.value, one$p.value)
  expect_equal(row$B, 39L)
  expect_equal(glance(one), row)
})

test_that("the glm test accepts a true logistic model and rejects a wrong one", {
  null <- glm_data(150, seed = 3)
  set.seed(11)
  res <- spec_test(local_poly(y ~ x, null, family = "binomial", bandwidth = 0.2),
                   glm(y ~ x, binomial, null), B = 99, verbose = FALSE)
  expect_gt(res$p.value, 0.05)
  alt <- glm_data(150, seed = 3, curve = TRUE)
  set.seed(11)
  res <- spec_test(local_poly(y ~ x, alt, family = "binomial", bandwidth = 0.2),
                   glm(y ~ x, binomial, alt), B = 99, verbose = FALSE)
  expect_equal(res$p.value, 0.01)
})

test_that("the glm test refuses bad input with classed errors", {
  d <- glm_data(50)
  logit <- local_poly(y ~ x, d, family = "binomial", bandwidth = 0.3)
  g <- glm(y ~ x, binomial, d)
  expect_error(spec_test(logit, g, B = 18), "B", class = "localmean_error")
  expect_error(spec_test(logit, glm(y ~ x, binomial, d[-1, ]), B = 19), "different rows",
               class = "localmean_error_mismatch")
  expect_error(spec_test(logit, glm(I(1 - y) ~ x, binomial, d), B = 19),
               "different responses", class = "localmean_error_mismatch")
  expect_error(spec_test(logit, glm(y ~ x, poisson, d), B = 19), "parametric",
               class = "localmean_error_mismatch")
  expect_error(spec_test(logit, glm(y ~ x, binomial("probit"), d), B = 19), "link",
               class = "localmean_error_mismatch")
  expect_error(spec_test(logit, glm(y ~ x, binomial, d, weights = trials), B = 19),
               "weights", class = "localmean_error_mismatch")
  expect_error(spec_test(logit, glm(y ~ x + offset(x), binomial, d), B = 19), "offset",
               class = "localmean_error_mismatch")
  robust <- local_poly(k ~ x, d, family = "huber", bandwidth = 0.3)
  expect_error(spec_test(robust, glm(k ~ x, poisson, d), B = 19), "huber",
               class = "localmean_error_family")
  quasi <- local_poly(k ~ x, d, family = "quasipoisson", bandwidth = 0.3)
  expect_error(spec_test(quasi, glm(k ~ x, quasipoisson, d), B = 19), "local",
               class = "localmean_error_family")
  expect_error(spec_test(logit, g, B = 19, reselect = TRUE), "reselect",
               class = "localmean_error")
  expect_error(spec_test(logit, g, B = 19, statistic = "kernel"), "statistic",
               class = "localmean_error")
  expect_error(anova(logit, g, B = 19, multipliers = "mammen"), "multipliers",
               class = "localmean_error")
  # a selected bandwidth is kept, with a warning unless reselect = FALSE says so
  chosen <- local_poly(y ~ x, d, family = "binomial", verbose = FALSE)
  expect_warning(spec_test(chosen, g, B = 19, verbose = FALSE), "chosen by",
                 class = "localmean_warning_selected_bandwidth")
  expect_no_warning(spec_test(chosen, g, B = 19, reselect = FALSE, verbose = FALSE))
  expect_error(spec_test(logit, logit, B = 19), "parametric", class = "localmean_error")
})

test_that("the glm test gives the same p-value under a future plan", {
  skip_on_cran()
  skip_if_not_installed("future")
  skip_if_not_installed("future.apply")
  d <- glm_data(60, seed = 4)
  counts <- local_poly(k ~ x, d, family = "poisson", bandwidth = 0.3)
  g <- glm(k ~ x, poisson, d)
  set.seed(3)
  alone <- spec_test(counts, g, B = 39, verbose = FALSE)
  old <- future::plan(future::multisession, workers = 2)
  on.exit(future::plan(old), add = TRUE)
  set.seed(3)
  expect_identical(spec_test(counts, g, B = 39, verbose = FALSE)$replicates, alone$replicates)
})
