rmse_at <- function(estimate, truth, where) sqrt(mean((estimate - truth)[where]^2))

fashion_images <- function(n, seed = 1) {
  set.seed(seed)
  fashion_mnist_subset$x[sample(nrow(fashion_mnist_subset$x), n), ] / 255
}

# Whole 10 x 10 blocks removed at a random place in every 28 x 28 image.
remove_blocks <- function(x) {
  for (i in seq_len(nrow(x))) {
    r <- sample(0:18, 1)
    c <- sample(0:18, 1)
    x[i, outer((r + 1):(r + 10), (c + 1):(c + 10), function(a, b) (a - 1) * 28 + b)] <- NA
  }
  x
}

test_that("local_impute() keeps observed entries and beats column means and kNN on low rank", {
  set.seed(2)
  truth <- tcrossprod(matrix(rnorm(300 * 3), 300), matrix(rnorm(20 * 3), 20)) +
    matrix(rnorm(300 * 20, sd = 0.3), 300)
  x <- truth
  x[sample(length(x), 0.2 * length(x))] <- NA
  miss <- is.na(x)
  fit <- local_impute(x, n_threads = 2, verbose = FALSE)
  out <- as.matrix(fit)
  expect_s3_class(fit, "local_imputation")
  expect_identical(out[!miss], x[!miss])
  expect_false(anyNA(out))
  ours <- rmse_at(out, truth, miss)
  expect_lt(ours, 0.6 * rmse_at(mean_impute_ref(x), truth, miss))
  expect_lt(ours, rmse_at(knn_impute_ref(x, 10), truth, miss))
  expect_true(fit$converged)
  expect_length(fit$change, fit$iterations)
})

test_that("local_impute() restores Fashion-MNIST pixels removed at random and in blocks", {
  truth <- fashion_images(500)
  set.seed(3)
  random <- truth
  random[sample(length(truth), length(truth) / 2)] <- NA
  blocks <- remove_blocks(truth)
  for (x in list(random, blocks)) {
    miss <- is.na(x)
    fit <- local_impute(x, image_dim = c(28, 28), n_threads = 2, verbose = FALSE)
    out <- as.matrix(fit)
    expect_identical(out[!miss], x[!miss])
    ours <- rmse_at(out, truth, miss)
    expect_lt(ours, 0.6 * rmse_at(mean_impute_ref(x), truth, miss))
    expect_lt(ours, rmse_at(knn_impute_ref(x, 10), truth, miss))
  }
})

test_that("the sample layer is the kernel-weighted mean of the nearest rows", {
  set.seed(4)
  x <- matrix(rnorm(40 * 6), 40)
  x[sample(length(x), 50)] <- NA
  x[, 1] <- rnorm(40)  # every row keeps an observed entry
  k <- 6
  fit <- local_impute(x, layers = "sample", k = k, imputed_weight = 0, max_iter = 1,
                      n_threads = 1, verbose = FALSE)
  obs <- !is.na(x)
  mu <- colMeans(x, na.rm = TRUE)
  s <- apply(x, 2, sd, na.rm = TRUE)
  z <- sweep(sweep(x, 2, mu), 2, s, "/")  # tables are imputed on standardised columns
  x0 <- z
  x0[!obs] <- 0
  ref <- z
  for (i in which(rowSums(!obs) > 0)) {
    shared <- sweep(obs, 2, obs[i, ], "&")
    d2 <- ncol(x) * rowSums(shared * sweep(x0, 2, x0[i, ])^2) / rowSums(shared)
    d2[i] <- Inf
    nb <- order(d2)[seq_len(k)]
    w <- exp(-0.5 * d2[nb] / sort(d2[nb])[ceiling(k / 2)])
    for (c in which(!obs[i, ])) {
      ok <- obs[nb, c]
      ref[i, c] <- sum(w[ok] * z[nb[ok], c]) / sum(w[ok])
    }
  }
  ref[is.na(ref)] <- 0  # no neighbour observes it: the start value, the column mean
  ref <- sweep(sweep(ref, 2, s, "*"), 2, mu, "+")
  ref[obs] <- x[obs]
  expect_equal(as.matrix(fit), ref, tolerance = 1e-10)
})

test_that("local_impute() gives the same result on one and two threads", {
  x <- fashion_images(150, seed = 5)
  x[sample(length(x), length(x) / 3)] <- NA
  set.seed(6)
  a <- local_impute(x, image_dim = c(28, 28), max_iter = 5, n_threads = 1, verbose = FALSE)
  set.seed(6)
  b <- local_impute(x, image_dim = c(28, 28), max_iter = 5, n_threads = 2, verbose = FALSE)
  expect_identical(as.matrix(a), as.matrix(b))
  expect_identical(a$change, b$change)
  expect_identical(a$mix, b$mix)
})

test_that("local_impute() handles empty rows and columns, complete tables and methods", {
  set.seed(7)
  x <- matrix(rnorm(30 * 5), 30)
  x[sample(length(x), 20)] <- NA
  x[4, ] <- NA
  expect_warning(fit <- local_impute(x, n_threads = 1, verbose = FALSE), "no observed value")
  expect_equal(as.matrix(fit)[4, ], colMeans(x, na.rm = TRUE))
  y <- x
  y[4, ] <- 1
  y[, 2] <- NA
  expect_warning(fit2 <- local_impute(y, n_threads = 1, verbose = FALSE), "Column")
  expect_false(anyNA(as.matrix(fit2)))
  only_empty <- matrix(rnorm(30), 10)
  only_empty[2, ] <- NA
  expect_warning(fit3 <- local_impute(only_empty, verbose = FALSE), "no observed value")
  expect_equal(as.matrix(fit3)[2, ], colMeans(only_empty, na.rm = TRUE))
  complete <- matrix(rnorm(20), 10)
  expect_message(none <- local_impute(complete, verbose = FALSE), "no missing")
  expect_identical(as.matrix(none), complete)
  expect_output(print(fit), "<local_imputation> 25 missing entries")
  pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_invisible(plot(fit))
  df <- as.data.frame(x[-4, ])
  expect_s3_class(local_impute(df, n_threads = 1, verbose = FALSE), "local_imputation")
})

test_that("local_impute() refuses bad input", {
  x <- matrix(c(1, NA, 3, 4, 5, NA), 3)
  expect_error(local_impute(x, image_dim = c(2, 2)), "image_dim", class = "localmean_error")
  expect_error(local_impute(x, image_dim = 2), "image_dim", class = "localmean_error")
  expect_error(local_impute(data.frame(a = c(1, NA), b = c("u", "v"))), "b",
               class = "localmean_error")
  expect_error(local_impute("a"), "x", class = "localmean_error")
  expect_error(local_impute(x, layers = "pixel"), "layers", class = "localmean_error")
  expect_error(local_impute(x, mix = 2), "mix", class = "localmean_error")
  expect_error(local_impute(x, kernel = "box"), "kernel", class = "localmean_error")
  expect_error(local_impute(matrix(NA_real_, 2, 2)), "no observed", class = "localmean_error")
  expect_error(local_impute(rbind(x, Inf)), "infinite", class = "localmean_error")
})

test_that("local_denoise() equals plain-R non-local means and raises the PSNR", {
  set.seed(8)
  tiny <- matrix(runif(7 * 6), 7)
  ours <- local_denoise(tiny, patch = 3, search = 5, bandwidth = 0.3, sigma = 0.1, n_threads = 1)
  expect_equal(as.vector(ours), as.vector(nl_means_ref(tiny, 3, 5, 0.3, 0.1)),
               tolerance = 1e-10)
  # Four Fashion-MNIST images tiled into a 56 x 56 image, Gaussian noise of sd 0.1 (20 dB).
  imgs <- lapply(1:4, function(i) matrix(fashion_mnist_subset$x[i * 100, ] / 255, 28,
                                         byrow = TRUE))
  clean <- rbind(cbind(imgs[[1]], imgs[[2]]), cbind(imgs[[3]], imgs[[4]]))
  noisy <- clean + matrix(rnorm(length(clean), sd = 0.1), nrow(clean))
  one <- local_denoise(noisy, n_threads = 1)
  two <- local_denoise(noisy, n_threads = 2)
  expect_identical(one, two)
  expect_equal(attr(one, "sigma"), 0.1, tolerance = 0.25)
  # The documented margin: at least 3 dB on this image.
  expect_gt(psnr_ref(one, clean) - psnr_ref(noisy, clean), 3)
  expect_error(local_denoise(noisy, patch = 4), "patch", class = "localmean_error")
  expect_error(local_denoise(noisy[1:3], n_threads = 1), "img", class = "localmean_error")
  expect_error(local_denoise(replace(noisy, 1, NA)), "img", class = "localmean_error")
})

test_that("plot_images() draws rows or lists of images and checks their shape", {
  pdf(NULL)
  on.exit(grDevices::dev.off())
  x <- fashion_mnist_subset$x[1:4, ]
  x[1, 1:100] <- NA
  expect_null(plot_images(x, c(28, 28), main = 1:4))
  expect_null(plot_images(list(matrix(1:6, 2), matrix(6:1, 2))))
  expect_error(plot_images(x, c(27, 28)), "image_dim", class = "localmean_error")
  expect_error(plot_images(matrix(1:10, 1)), "image_dim", class = "localmean_error")
})

test_that("local_denoise() takes every registry kernel, with the Gaussian's h", {
  set.seed(9)
  tiny <- matrix(runif(7 * 6), 7)
  # Plain-R non-local means with the weight w(excess), excess = max(d2 - 2 sigma^2, 0).
  nlm_kernel_ref <- function(img, patch, search, weight) {
    hp <- patch %/% 2
    hs <- search %/% 2
    mirror <- function(i, n) {
      while (i < 1 || i > n) i <- if (i < 1) 1 - i else 2 * n + 1 - i
      i
    }
    at <- function(r, c) img[mirror(r, nrow(img)), mirror(c, ncol(img))]
    patch_at <- function(r, c) outer(-hp:hp, -hp:hp, Vectorize(function(a, b) at(r + a, c + b)))
    out <- img
    for (r in seq_len(nrow(img))) for (c in seq_len(ncol(img))) {
      sw <- swx <- 0
      for (dy in -hs:hs) for (dx in -hs:hs) {
        w <- weight(mean((patch_at(r, c) - patch_at(r + dy, c + dx))^2))
        sw <- sw + w
        swx <- swx + w * at(r + dy, c + dx)
      }
      out[r, c] <- swx / sw
    }
    out
  }
  h <- 0.3
  sigma <- 0.1
  excess <- function(d2) max(d2 - 2 * sigma^2, 0)
  epan <- local_denoise(tiny, patch = 3, search = 5, bandwidth = h, sigma = sigma,
                        kernel = "epanechnikov", n_threads = 1)
  expect_equal(as.vector(epan),
               as.vector(nlm_kernel_ref(tiny, 3, 5, function(d2) {
                 max(0, 1 - 2 * excess(d2) / h^2)
               })), tolerance = 1e-10)
  cauchy <- local_denoise(tiny, patch = 3, search = 5, bandwidth = h, sigma = sigma,
                          kernel = "cauchy",
                          n_threads = 1)
  expect_equal(as.vector(cauchy),
               as.vector(nlm_kernel_ref(tiny, 3, 5, function(d2) 1 / (1 + 2 * excess(d2) / h^2))),
               tolerance = 1e-10)
  # The default is the Gaussian, unchanged; every registry kernel runs, the same on 1 and 2 threads.
  expect_identical(local_denoise(tiny, bandwidth = h, sigma = sigma, n_threads = 1),
                   local_denoise(tiny, bandwidth = h, sigma = sigma, kernel = "gaussian",
                                 n_threads = 1))
  noisy <- matrix(rep(c(0, 1), each = 20 * 10), 20) + matrix(rnorm(400, sd = 0.1), 20)
  for (kernel in kernels()$kernel) {
    one <- local_denoise(noisy, patch = 3, search = 7, kernel = kernel, n_threads = 1)
    expect_identical(one, local_denoise(noisy, patch = 3, search = 7, kernel = kernel,
                                        n_threads = 2))
    expect_true(all(is.finite(one)))
  }
  expect_error(local_denoise(tiny, kernel = "boxcar"), "kernel", class = "localmean_error")
})

test_that("local_denoise works at extreme scales and refuses empty images (issue 18)", {
  set.seed(1)
  img <- outer(1:16, 1:16, function(r, c) as.numeric((r - 8)^2 + (c - 8)^2 < 20))
  noisy <- img + matrix(rnorm(256, sd = 0.2), 16)
  base <- local_denoise(noisy, patch = 3, search = 5, n_threads = 1, verbose = FALSE)
  for (unit in c(1e-300, 1e300)) {
    scaled <- local_denoise(noisy * unit, patch = 3, search = 5, n_threads = 1, verbose = FALSE)
    expect_false(anyNA(scaled))
    expect_equal(as.vector(scaled) / unit, as.vector(base), tolerance = 1e-8)
  }
  expect_error(local_denoise(matrix(0, 0, 3), verbose = FALSE), class = "localmean_error",
               regexp = "img")
})

test_that("a wide feature bandwidth on images is bounded by the image (no endless offsets)", {
  # (on main: feature_bandwidth = 1e5 looped over (6e5)^2 pixel offsets per pixel)
  set.seed(4)
  x <- matrix(runif(40 * 36), 40)
  x[sample(length(x), 100)] <- NA
  time <- system.time(res <- local_impute(x, image_dim = c(6, 6), feature_bandwidth = 1e5,
                                          verbose = FALSE))[["elapsed"]]
  expect_lt(time, 10)
  expect_false(anyNA(res$completed))
  expect_error(local_impute(matrix(c(NA, rep(0, 2e4 - 1)), 2), image_dim = c(100, 100), feature_bandwidth = 1e5,
                            verbose = FALSE),
               "feature_bandwidth", class = "localmean_error")
})
