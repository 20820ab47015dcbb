# Plain-R local PCA at one point: the kernel-weighted mean and covariance, and its eigenvectors.
local_pca_ref <- function(x, p, weight_of) {
  w <- weight_of(sweep(x, 2L, p))
  m <- colSums(w * x) / sum(w)
  e <- eigen(crossprod(sweep(x, 2L, m) * sqrt(w)) / sum(w), symmetric = TRUE)
  list(center = m, variances = e$values, axes = e$vectors)
}

# Axes agree up to their sign.
expect_same_axes <- function(a, b, tolerance) {
  expect_equal(unname(abs(colSums(a * b))), rep(1, ncol(a)), tolerance = tolerance)
}

test_that("local_pca() equals the plain-R weighted covariance and its axes", {
  set.seed(1)
  x <- cbind(a = rnorm(150), b = rnorm(150), c = rnorm(150))
  x[, 2] <- x[, 2] + 0.8 * x[, 1]
  h <- c(0.9, 1.2, 1)
  prior <- runif(150)
  gaussian <- function(u) exp(-0.5 * rowSums(sweep(u, 2L, h, `/`)^2))
  epanechnikov <- function(u) pmax(1 - rowSums(sweep(u, 2L, h, `/`)^2), 0)
  at <- x[c(3, 40, 99), ]
  cases <- list(list(kernel = "gaussian", weight_of = gaussian, prior = NULL),
                list(kernel = "epanechnikov", weight_of = function(u) prior * epanechnikov(u),
                     prior = prior))
  for (case in cases) {
    fit <- local_pca(x, at = at, kernel = case$kernel, bandwidth = h, weights = case$prior,
                     variance_share = 0.8, verbose = FALSE)
    for (i in seq_len(nrow(at))) {
      ref <- local_pca_ref(x, at[i, ], case$weight_of)
      expect_equal(fit$center[i, ], ref$center, tolerance = 1e-10, ignore_attr = TRUE)
      expect_equal(fit$variances[i, ], ref$variances, tolerance = 1e-10, ignore_attr = TRUE)
      expect_same_axes(fit$axes[, , i], ref$axes, 1e-10)
      shares <- cumsum(ref$variances) / sum(ref$variances)
      expect_identical(fit$dimension[i], which(shares >= 0.8)[1L], info = case$kernel)
    }
  }
})

test_that("local_pca() finds one dimension on a curve, two on a plane", {
  set.seed(2)
  t <- runif(300, 0, pi)
  curve <- cbind(cos(t), sin(t)) + matrix(rnorm(600, sd = 0.02), ncol = 2)
  expect_true(all(local_pca(curve, bandwidth = 0.2, verbose = FALSE)$dimension == 1L))
  plane <- matrix(runif(600), ncol = 2)
  inside <- local_pca(plane, at = rbind(c(0.5, 0.5), c(0.4, 0.6)), bandwidth = 0.1,
                      verbose = FALSE)
  expect_identical(inside$dimension, c(2L, 2L))
  # an axis is a unit vector with its largest component positive
  fit <- local_pca(curve, bandwidth = 0.2, verbose = FALSE)
  norms <- apply(fit$axes, c(2L, 3L), function(v) sum(v^2))
  expect_equal(as.vector(norms), rep(1, length(norms)), tolerance = 1e-12)
  top <- apply(fit$axes, c(2L, 3L), function(v) v[which.max(abs(v))])
  expect_true(all(top > 0))
})

test_that("local_pca() gives NA where a compact kernel sees no data, any thread count", {
  x <- cbind(u = c(0, 1, 0, 1, 0.5), v = c(0, 0, 1, 1, 0.5))
  fit <- local_pca(x, at = rbind(c(0.5, 0.5), c(9, 9)), kernel = "epanechnikov",
                   bandwidth = 1, verbose = FALSE)
  expect_false(anyNA(fit$variances[1, ]))
  expect_true(all(is.na(fit$variances[2, ])) && is.na(fit$dimension[2]))
  expect_output(print(fit), "No data +: 1 point$")
  set.seed(3)
  big <- matrix(rnorm(3000), ncol = 3)
  expect_identical(local_pca(big, bandwidth = 0.5, n_threads = 1, verbose = FALSE)[1:4],
                   local_pca(big, bandwidth = 0.5, n_threads = 2, verbose = FALSE)[1:4])
})

test_that("local_pca() has the usual methods and refuses bad input", {
  fit <- local_pca(faithful, bandwidth = c(0.4, 6), verbose = FALSE)
  td <- tidy(fit)
  expect_identical(nrow(td), 2L * nrow(faithful))
  expect_named(td, c(".row", "axis", "variance", "share", "eruptions", "waiting"))
  expect_equal(td$variance[1:2], unname(fit$variances[1, ]))
  expect_identical(glance(fit)$points, nrow(faithful))
  expect_output(print(summary(fit)), "Share of the local variance")
  expect_error(local_pca(faithful, variance_share = 0), "variance_share",
               class = "localmean_error")
  expect_error(local_pca(faithful, at = c(1, 2, 3)), "`at` must have 2 columns",
               class = "localmean_error")
  expect_error(local_pca(faithful, kernel = "gauss"), "kernel", class = "localmean_error")
  expect_error(local_pca(faithful, bandwith = 1), "bandwidth", class = "localmean_error")
})
