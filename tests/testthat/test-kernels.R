# The kernel registry (R/kernels.R): kernels() and kernel_value().

test_that("kernels() lists the ten kernels with the documented columns", {
  tab <- kernels()
  expect_s3_class(tab, "data.frame")
  expect_identical(tab$kernel, kernel_names_ref)
  expect_named(tab, c("kernel", "compact", "cutoff", "constant", "mu2", "roughness",
                      "canonical", "shadow"))
  expect_identical(tab$compact, unname(compact_ref[tab$kernel]))
  # compact kernels live on [-1, 1]; the Gaussian is cut at 8 sd, the Laplace at 32 scales,
  # the Cauchy never
  expect_equal(tab$cutoff[tab$compact], rep(1, sum(tab$compact)))
  expect_equal(tab$cutoff[tab$kernel == "gaussian"], 8)
  expect_equal(tab$cutoff[tab$kernel == "laplace"], 32)
  expect_identical(tab$cutoff[tab$kernel == "cauchy"], Inf)
})

test_that("kernel_value() is the standard density of every kernel", {
  u <- c(-3, -1.2, -1, -0.999, -0.7, -0.31, 0, 0.2, 0.5, 0.93, 1, 1.0001, 2.5, 40)
  for (k in kernel_names_ref) {
    expected <- kernel_density_ref(u, k)
    if (k == "uniform") expected <- 0.5 * (abs(u) <= 1)
    expect_equal(kernel_value(u, k), expected, tolerance = 1e-12, info = k)
  }
  # the default kernel is the Gaussian
  expect_equal(kernel_value(c(0, 1)), dnorm(c(0, 1)), tolerance = 1e-14)
})

test_that("kernel_value() is symmetric, non-negative and zero outside a compact support", {
  u <- seq(0, 3, by = 0.01)
  for (k in kernel_names_ref) {
    v <- kernel_value(u, k)
    expect_identical(kernel_value(-u, k), v, info = k)
    expect_true(all(v >= 0), info = k)
    expect_true(all(diff(v) <= 0), info = k)  # non-increasing in |u|
    if (compact_ref[[k]]) expect_true(all(v[u > 1] == 0), info = k)
    if (!compact_ref[[k]]) expect_true(all(v > 0), info = k)
  }
})

test_that("every kernel integrates to 1", {
  for (k in kernel_names_ref) {
    f <- function(u) kernel_value(u, k)
    total <- if (compact_ref[[k]]) {
      integrate(f, -1, 1, rel.tol = 1e-12)$value
    } else {
      integrate(f, -Inf, Inf, rel.tol = 1e-12)$value
    }
    expect_equal(total, 1, tolerance = 1e-8, info = k)
  }
})

test_that("constant, mu2, roughness and canonical bandwidth match numerical integrals", {
  tab <- kernels()
  for (i in seq_len(nrow(tab))) {
    k <- tab$kernel[i]
    lim <- if (tab$compact[i]) c(-1, 1) else c(-Inf, Inf)
    f <- function(u) kernel_value(u, k)
    # the constant is the density at 0 (every shape is 1 there)
    expect_equal(tab$constant[i], kernel_value(0, k), tolerance = 1e-12, info = k)
    rough <- integrate(function(u) f(u)^2, lim[1], lim[2], rel.tol = 1e-12)$value
    expect_equal(tab$roughness[i], rough, tolerance = 1e-8, info = k)
    if (k == "cauchy") {
      expect_identical(tab$mu2[i], Inf)
      next
    }
    mu2 <- integrate(function(u) u^2 * f(u), lim[1], lim[2], rel.tol = 1e-12)$value
    expect_equal(tab$mu2[i], mu2, tolerance = 1e-8, info = k)
    expect_equal(tab$canonical[i], (rough / mu2^2)^(1 / 5), tolerance = 1e-8, info = k)
  }
})

test_that("kernel_value() refuses unknown kernels and non-numeric input", {
  expect_error(kernel_value(0, "gauss"), class = "localmean_error", regexp = "kernel")
  expect_error(kernel_value(0, c("gaussian", "uniform")), class = "localmean_error")
  expect_error(kernel_value("a", "gaussian"), class = "localmean_error", regexp = "u")
  expect_identical(kernel_value(numeric(0), "cosine"), numeric(0))
})

test_that("every fitting function accepts every kernel and refuses unknown ones", {
  d <- make_data_1d(60)
  for (k in kernel_names_ref) {
    fit <- local_mean(d$x, d$y, kernel = k, bandwidth = 0.4, verbose = FALSE)
    expect_identical(fit$kernel, k)
    expect_true(all(is.finite(fitted(fit))), info = k)
  }
  expect_error(local_poly(d$x, d$y, kernel = "normal", bandwidth = 0.2, verbose = FALSE),
               class = "localmean_error", regexp = "kernel")
  expect_error(local_classify(d$x, factor(d$x > 0.5), kernel = "box", bandwidth = 0.2,
                              verbose = FALSE), class = "localmean_error")
})

test_that("the registry's extra facts are true of every kernel", {
  tab <- localmean:::registry_table()
  expect_identical(tab$kernel, kernel_names_ref)
  for (k in tab$kernel) {
    row <- tab[tab$kernel == k, ]
    # the upper quartile: a quarter of the mass lies between 0 and it
    mass <- integrate(function(u) kernel_density_ref(u, k), 0, row$quartile, rel.tol = 1e-10)
    expect_equal(mass$value, 0.25, tolerance = 1e-8, info = k)
    # a radial density exists beyond 1-D exactly when shape(r^2) r decays faster than 1/r
    expect_identical(row$multivariate, k != "cauchy", info = k)
    expect_identical(row$truncated, is.finite(row$cutoff), info = k)
    expect_equal(row$reach, if (row$compact) 1 else c(gaussian = 3, laplace = 8, cauchy = 3)[[k]],
                 info = k)
  }
  # bandwidths match the Gaussian's by canonical bandwidths, the Cauchy's by quartiles
  expect_equal(tab$equivalent[tab$kernel == "cauchy"], qnorm(0.75), tolerance = 1e-12)
  expect_equal(tab$equivalent[tab$kernel == "epanechnikov"],
               tab$canonical[2] / tab$canonical[1], tolerance = 1e-12)
})

test_that("every method that takes a kernel accepts every registry kernel that fits", {
  set.seed(11)
  x <- runif(60)
  y <- sin(4 * x) + rnorm(60, sd = 0.1)
  x2 <- matrix(rnorm(120), ncol = 2)
  img <- matrix(runif(64), 8)
  img[3, 4] <- NA
  for (k in localmean:::registry_table()$kernel) {
    expect_length(fitted(local_poly(x, y, kernel = k, bandwidth = 0.3, verbose = FALSE)), 60)
    expect_length(fitted(local_classify(x, factor(y > 0.5), kernel = k, bandwidth = 0.3,
                                        verbose = FALSE)), 60)
    expect_true(all(is.finite(kde(x, bandwidth = 0.3, kernel = k, verbose = FALSE)$estimate)))
    if (k %in% localmean:::kernel_names("multivariate")) {
      expect_true(all(is.finite(kde(x2, bandwidth = 1, kernel = k, verbose = FALSE)$estimate)))
    } else {
      expect_error(kde(x2, bandwidth = 1, kernel = k), k, class = "localmean_error")
    }
    expect_s3_class(mean_shift(x2, bandwidth = 1, kernel = k, verbose = FALSE), "local_modes")
    expect_equal(dim(temporal_local_mean(x2, kernel = k, bandwidth = 1)), dim(x2))
    expect_false(anyNA(as.matrix(local_impute(img, kernel = k, n_threads = 1, verbose = FALSE))))
  }
})

# ---- Kernels of the user's own ------------------------------------------------------------------

triweight_profile <- function(u) (1 - u^2)^3 * (abs(u) < 1)

test_that("a user kernel's registry row matches the built-in kernel with the same profile", {
  tw <- user_kernel(triweight_profile, name = "test_triweight")
  expect_s3_class(tw, "local_kernel")
  row <- kernels(tw)
  expect_identical(row$kernel, "test_triweight")
  ref <- kernels()[kernels()$kernel == "triweight", ]
  expect_true(row$compact)
  for (col in c("cutoff", "constant", "mu2", "roughness", "canonical")) {
    expect_equal(row[[col]], ref[[col]], tolerance = 1e-12, info = col)
  }
  expect_identical(row$shadow, NA_character_)
  # a bare function works too (named "user"), and so does the registered name
  expect_equal(kernels(triweight_profile)$constant, ref$constant, tolerance = 1e-12)
  expect_identical(kernels("test_triweight")$kernel, "test_triweight")
  # the table reproduces the function between its nodes (not only at them)
  u <- c(0, 0.0123, 0.31, 0.5 + 1e-7, 0.999, 1, 1.5, -0.4)
  expect_equal(kernel_value(u, tw), kernel_value(u, "triweight"), tolerance = 1e-12)
  expect_output(print(tw), "compact support 1")
})

test_that("an unbounded profile is truncated at exp(-32) of its peak", {
  row <- kernels(function(u) exp(-u^2 / 2))
  expect_false(row$compact)
  expect_equal(row$cutoff, 8, tolerance = 1e-9)
  gauss <- kernels()[1, ]
  for (col in c("constant", "mu2", "roughness")) {
    expect_equal(row[[col]], gauss[[col]], tolerance = 1e-10, info = col)
  }
  # a scaled profile is the same kernel: densities divide by its integral
  u <- seq(-3, 3, by = 0.25)
  expect_equal(kernel_value(u, function(u) 5 * exp(-u^2 / 2)), dnorm(u), tolerance = 1e-12)
  # a profile supported on [0, 2]: the constants follow its own scale
  wide <- kernels(function(u) pmax(0, 1 - (u / 2)^2))
  expect_equal(wide$cutoff, 2, tolerance = 1e-12)
  expect_equal(wide$constant, 0.75 / 2, tolerance = 1e-12)
  expect_equal(wide$mu2, 0.2 * 4, tolerance = 1e-12)
})

test_that("bad profiles are errors naming the argument", {
  expect_error(kernels(function(u) u), "`kernel` must be positive at distance 0",
               class = "localmean_error")
  expect_error(kernels(function(u) exp(u) * (u < 1)), "`kernel` must be non-increasing",
               class = "localmean_error")
  expect_error(kernels(function(u) rep(NA_real_, length(u))), "`kernel` must return finite",
               class = "localmean_error")
  expect_error(kernels(function(u) 1 - u), "`kernel` must return finite, non-negative",
               class = "localmean_error")
  expect_error(kernels(function(u) 1 / (1 + u^2)), "`kernel` must vanish",
               class = "localmean_error")
  expect_error(kernels(function(u) stop("boom")), "`kernel` failed",
               class = "localmean_error")
  expect_error(user_kernel("triweight"), "`profile` must be a function",
               class = "localmean_error")
  expect_error(user_kernel(triweight_profile, name = "gaussian"), "`name` must not be",
               class = "localmean_error")
  expect_error(user_kernel(triweight_profile, name = c("a", "b")), "`name` must be",
               class = "localmean_error")
  # a jump inside the support cannot be tabulated to 1e-12: a warning says how well it is
  expect_warning(kernels(function(u) (u < 0.5) + (u < 1)), "accurate to",
                 class = "localmean_warning")
  # a non-vectorised profile is evaluated point by point
  scalar <- function(u) if (abs(u) < 1) (1 - u^2)^3 else 0
  expect_equal(kernels(scalar)$constant, 35 / 32, tolerance = 1e-12)
})

test_that("methods that need built-in kernels refuse user kernels and weight matrices", {
  x <- matrix(c(1, NA, 3, 4, 5, 6, 7, 8, NA, 2, 4, 1), 4)
  expect_error(local_impute(x, kernel = triweight_profile), "`kernel` must be a built-in kernel",
               class = "localmean_error")
  expect_error(local_score(matrix(rnorm(20), 10), kernel = triweight_profile), "has no score",
               class = "localmean_error")
  expect_error(kde(rnorm(20), kernel = diag(20)), "cannot be a weight matrix",
               class = "localmean_error")
  expect_error(local_poly(matrix(runif(40), 20), runif(20), kernel = triweight_profile,
                          bandwidth = "metric"), "registry", class = "localmean_error")
})

test_that("a fit keeps its user kernel's table across saveRDS() and a new session", {
  skip_on_cran()
  skip_if_not_installed("callr")
  fit <- local_poly(dist ~ speed, cars, kernel = triweight_profile, bandwidth = 5)
  path <- tempfile(fileext = ".rds")
  saveRDS(fit, path)
  at <- data.frame(speed = c(7, 12.5, 21))
  there <- callr::r(function(path, at) {
    predict(readRDS(path), at)
  }, list(path, at), libpath = .libPaths())
  expect_equal(there, predict(fit, at), tolerance = 1e-14)
})
