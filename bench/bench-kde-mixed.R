# Mixed-data kernel density (issue 15, item 1): kde() with two numeric columns and one unordered
# factor. Times the joint least-squares cross-validation of every bandwidth (h1, h2, lambda) and
# the evaluation at the data points, against np::npudensbw(bwmethod = "cv.ls") and np::npudens()
# with the same Gaussian and Aitchison-Aitken kernels when np is installed (BENCH_NP = "yes";
# np's search takes about a minute). Both selections are scored by our LSCV criterion
# (lower is better) and np's own criterion value is printed too.
#
#   BENCH_NP=yes Rscript bench/bench-kde-mixed.R
# Environment: BENCH_N (2000), BENCH_REPS (3), BENCH_THREADS ("1,2"), BENCH_NP ("no").

suppressPackageStartupMessages(library(localmean))
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])
source(file.path(dirname(script), "common.R"))
n <- env_num("BENCH_N", 2000)
reps <- env_num("BENCH_REPS", 3)
threads <- env_threads()
run_np <- Sys.getenv("BENCH_NP", "no") == "yes" && requireNamespace("np", quietly = TRUE)

set.seed(1)
g <- factor(sample(c("a", "b", "c"), n, replace = TRUE, prob = c(0.5, 0.3, 0.2)))
shift <- c(a = 0, b = 1.5, c = -1)[as.character(g)]
data <- data.frame(x1 = rnorm(n, shift), x2 = rnorm(n, 0.5 * shift, 0.7), g = g)
predictors <- localmean:::split_predictors(data)
lscv <- localmean:::lscv_mixed_criterion(predictors$x, predictors$categorical, NULL, 2L)$criterion
score <- function(bw) lscv(bw[1:2], bw[3])

cat(sprintf("n = %d: x1, x2 numeric, g a factor of 3 levels; Gaussian and Aitchison-Aitken kernels\n", n))
for (th in threads) {
  bw <- NULL
  sel <- time_it(function() bw <<- kde_bandwidth(data, bandwidth = "lscv", n_threads = th), reps)
  fit <- kde(data, bandwidth = bw, n_threads = th, verbose = FALSE)
  grid <- time_it(function() kde(data, bandwidth = bw, n_threads = th, verbose = FALSE), reps)
  at_data <- time_it(function() predict(fit, data, n_threads = th), reps)
  cat(sprintf("threads %d\n  lscv search: %s\n    h = %s, lambda = %s, LSCV = %.8f\n", th,
              fmt_times(sel, 2), paste(format(signif(bw[1:2], 4)), collapse = ", "),
              format(signif(bw[3], 4)), score(bw)))
  cat(sprintf("  fit on the 51 x 51 x 3 grid: %s\n  density at the %d data points: %s\n",
              fmt_times(grid, 3), n, fmt_times(at_data, 3)))
}
if (run_np) {
  options(np.messages = FALSE)
  t_np <- system.time(nbw <- np::npudensbw(dat = data, bwmethod = "cv.ls",
                                            ckertype = "gaussian"))[["elapsed"]]
  t_eval <- system.time(dens <- stats::fitted(np::npudens(bws = nbw, tdat = data,
                                                           edat = data)))[["elapsed"]]
  ours <- predict(kde(data, bandwidth = nbw$bw, n_threads = 1, verbose = FALSE), data)
  cat(sprintf("np::npudensbw(cv.ls): %.1f s, h = %s, lambda = %s, LSCV (ours) = %.8f, np fval = %.8f\n",
              t_np, paste(format(signif(nbw$bw[1:2], 4)), collapse = ", "),
              format(signif(nbw$bw[3], 4)), score(nbw$bw), nbw$fval))
  cat(sprintf("  ours / np: search time %.4f, LSCV %.5f\n", sel$median / t_np,
              score(bw) / score(nbw$bw)))
  cat(sprintf("np::npudens at the %d data points: %.2f s (ours %.3f s); max relative difference %.2g\n",
              n, t_eval, at_data$median, max(abs(ours - dens) / dens)))
}
