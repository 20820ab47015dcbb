# Learned metric (issue 15, part 3): bandwidth = "metric" against the diagonal "cv" bandwidths,
# n = 2000 training points, d = 5 Gaussian predictors, a response that depends on one rotated
# direction u = (x1 + x2 - x3) / sqrt(3) only: y = sin(2 u) + N(0, 0.1^2). Prints the elapsed
# time of each fit (the metric's includes the "cv" search it starts from) and of the learning
# alone (learn_metric() from the "cv" bandwidths), the test mean squared error against noisy
# test responses and against the true function on 5000 test points, how many
# test predictions are NA (beyond the kernel's cut-off from every data point), the learned
# metric's singular values and its optimiser's evaluations. Target: metric test error below
# the diagonal "cv" fit's, at degree 0 and 1.
#
#   Rscript bench/bench-metric.R
# Environment: BENCH_N (2000), BENCH_THREADS ("2"; the first entry is used), BENCH_DEGREES
# ("0,1").

suppressPackageStartupMessages(library(localmean))
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])
source(file.path(dirname(script), "common.R"))
n <- env_num("BENCH_N", 2000)
threads <- as.integer(strsplit(Sys.getenv("BENCH_THREADS", "2"), ",")[[1]])[1]
degrees <- as.integer(strsplit(Sys.getenv("BENCH_DEGREES", "0,1"), ",")[[1]])

simulate <- function(n, d = 5) {
  x <- matrix(rnorm(n * d), n, d, dimnames = list(NULL, paste0("x", seq_len(d))))
  truth <- sin(2 * (x[, 1] + x[, 2] - x[, 3]) / sqrt(3))
  list(x = x, truth = truth, y = truth + rnorm(n, sd = 0.1))
}
set.seed(1)
train <- simulate(n)
test <- simulate(5000)
cat(sprintf("n = %d, d = 5, y = sin(2 u) + N(0, 0.01), u = (x1 + x2 - x3) / sqrt(3); %d test
points; Gaussian kernel, %d thread(s); one timed run per fit\n", n, nrow(test$x), threads))
for (degree in degrees) {
  fits <- list()
  for (bw in c("cv", "metric")) {
    secs <- system.time(fits[[bw]] <- local_poly(train$x, train$y, degree = degree,
                                                 bandwidth = bw, n_threads = threads,
                                                 verbose = FALSE))[["elapsed"]]
    pred <- suppressWarnings(predict(fits[[bw]], test$x))
    ok <- is.finite(pred)
    fits[[bw]]$bench <- c(secs = secs, mse = mean((pred - test$y)[ok]^2),
                          mse_true = mean((pred - test$truth)[ok]^2), na = sum(!ok))
  }
  cv <- fits$cv$bench
  me <- fits$metric$bench
  learn <- system.time(learned <- localmean:::learn_metric(
    train$x, train$y, NULL, degree, fits$cv$bandwidth, n_threads = threads))[["elapsed"]]
  cat(sprintf("degree %d\n", degree))
  for (bw in names(fits)) {
    b <- fits[[bw]]$bench
    cat(sprintf("  %-6s %6.1f s  test MSE %.5f (vs truth %.5f), NA predictions %d, LOO CV %.5f\n",
                bw, b[["secs"]], b[["mse"]], b[["mse_true"]], b[["na"]], fits[[bw]]$cv))
  }
  m <- fits$metric$metric
  cat(sprintf("  metric / cv: test MSE %.3f, vs truth %.3f
  learning alone (from the cv bandwidths, as inside the metric fit): %.1f s, %d loss
  evaluations (%.3f s each), same A as the fit: %s; singular values of A: %s\n",
              me[["mse"]] / cv[["mse"]], me[["mse_true"]] / cv[["mse_true"]], learn,
              learned$evaluations, learn / learned$evaluations,
              isTRUE(all.equal(unname(learned$A), unname(m$A))),
              paste(signif(svd(m$A)$d, 3), collapse = ", ")))
  cat(sprintf("  target (metric test MSE below cv's): %s\n",
              if (me[["mse"]] < cv[["mse"]]) "met" else "MISSED"))
}
