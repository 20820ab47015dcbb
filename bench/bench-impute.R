# Imputation of Fashion-MNIST training images with half of the pixels missing, against a plain-R
# kNN imputation and Bioconductor's impute::impute.knn().
#
# Data: the first BENCH_N (10,000) training images, grey levels scaled to [0, 1], 50% of all
# pixels removed at random (fixed seed); RMSE over the removed pixels.
# Methods:
#   * localmean::local_impute(x, image_dim = c(28, 28)): both layers, k = 10, mix = "auto",
#     default tolerance, on each of BENCH_THREADS;
#   * plain-R kNN (k = 10): the mean of the observed values of the 10 nearest images, squared
#     distance over shared pixels rescaled by p / (number shared), all pairs by matrix products
#     in blocks of 1,000 images (R's reference BLAS, one thread);
#   * impute::impute.knn(x, k = 10, rowmax = 0.9, colmax = 0.9, maxp = nrow(x)) when installed
#     (Debian: r-bioc-impute): the same kNN rule (Euclidean distance over shared coordinates,
#     averaged), all images in one block (maxp = n, no two-means splitting), Fortran, one thread;
#   * column means.
# Every method runs once (BENCH_REPS, default 1; they take minutes), and the n = 2000 run
# (BENCH_N_SMALL) repeats all of it on the first 2,000 images.
#
#   Rscript bench/bench-impute.R
# Environment: BENCH_N (1e4), BENCH_N_SMALL (2000), BENCH_REPS (1), BENCH_THREADS ("1,2").

suppressPackageStartupMessages(library(localmean))
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])),
                 "common.R"))
n_big <- env_num("BENCH_N", 1e4)
n_small <- env_num("BENCH_N_SMALL", 2000)
reps <- env_num("BENCH_REPS", 1)
threads <- env_threads()
k <- 10

knn_plain <- function(x, k, block = 1000) {
  obs <- !is.na(x)
  o <- obs + 0
  x0 <- x
  x0[!obs] <- 0
  p <- ncol(x)
  out <- x
  col_mean <- colMeans(x, na.rm = TRUE)
  sq <- x0^2
  for (start in seq(1, nrow(x), by = block)) {
    rows <- start:min(nrow(x), start + block - 1)
    num <- tcrossprod(sq[rows, , drop = FALSE], o) + tcrossprod(o[rows, , drop = FALSE], sq) -
      2 * tcrossprod(x0[rows, , drop = FALSE], x0)
    den <- tcrossprod(o[rows, , drop = FALSE], o)
    d <- ifelse(den > 0, p * num / den, Inf)
    d[cbind(seq_along(rows), rows)] <- Inf
    for (a in seq_along(rows)) {
      i <- rows[a]
      if (all(obs[i, ])) next
      nb <- order(d[a, ])[seq_len(k)]
      miss <- which(!obs[i, ])
      v <- x[nb, miss, drop = FALSE]
      est <- colMeans(v, na.rm = TRUE)
      est[is.nan(est)] <- col_mean[miss][is.nan(est)]
      out[i, miss] <- est
    }
  }
  out
}
col_means <- function(x) {
  m <- colMeans(x, na.rm = TRUE)
  x[is.na(x)] <- m[col(x)[is.na(x)]]
  x
}

session_header()
train <- fashion_mnist("train")
has_impute <- requireNamespace("impute", quietly = TRUE)
for (n in unique(c(n_small, n_big))) {
  truth <- train$x[seq_len(n), ] / 255
  set.seed(20260601)
  x <- truth
  x[sample(length(x), length(x) / 2)] <- NA
  miss <- is.na(x)
  rmse <- function(est) sqrt(mean((est - truth)[miss]^2))
  cat(sprintf("\n== n = %d images x 784 pixels, %.0f%% missing ==\n", n, 100 * mean(miss)))
  cat(sprintf("column means: RMSE %.4f\n", rmse(col_means(x))))
  for (th in threads) {
    fit <- NULL
    tt <- time_it(function() {
      set.seed(1)
      fit <<- local_impute(x, image_dim = c(28, 28), k = k, n_threads = th, verbose = FALSE)
    }, reps, warm_up = FALSE)
    cat(sprintf("local_impute (both layers, k = %d, mix %.2f, %d iterations), %d thread%s: RMSE %.4f, %s\n",
                k, fit$mix, fit$iterations, th, if (th > 1) "s" else "", rmse(as.matrix(fit)),
                fmt_times(tt, 2)))
  }
  est <- NULL
  tt <- time_it(function() est <<- knn_plain(x, k), reps, warm_up = FALSE)
  cat(sprintf("plain-R kNN (k = %d): RMSE %.4f, %s\n", k, rmse(est), fmt_times(tt, 2)))
  if (has_impute) {
    tt <- time_it(function() {
      est <<- utils::capture.output(res <- impute::impute.knn(x, k = k, rowmax = 0.9,
                                                              colmax = 0.9, maxp = nrow(x)))
      est <<- res$data
    }, reps, warm_up = FALSE)
    cat(sprintf("impute::impute.knn (k = %d, maxp = n) %s: RMSE %.4f, %s\n", k,
                utils::packageVersion("impute"), rmse(est), fmt_times(tt, 2)))
  } else {
    cat("impute::impute.knn: not installed (Debian: apt-get install r-bioc-impute)\n")
  }
}
