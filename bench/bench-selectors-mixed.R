# Per-variable bandwidth search (issue 15, part 3): local linear LOO-CV, n = 2000, three numeric
# predictors (x3 irrelevant), the joint search of every bandwidth against the grid of one common
# multiplier (refine = FALSE), and np::npregbw(regtype = "ll", bwmethod = "cv.ls") when np is
# installed (BENCH_NP = "yes"; np takes minutes).
#
#   Rscript bench/bench-selectors-mixed.R
# Environment: BENCH_N (2000), BENCH_REPS (3), BENCH_THREADS ("1,2"), BENCH_NP ("no").

suppressPackageStartupMessages(library(localmean))
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])
source(file.path(dirname(script), "common.R"))
n <- env_num("BENCH_N", 2000)
reps <- env_num("BENCH_REPS", 3)
threads <- env_threads()
run_np <- Sys.getenv("BENCH_NP", "no") == "yes" && requireNamespace("np", quietly = TRUE)

set.seed(1)
x <- cbind(x1 = runif(n), x2 = rnorm(n), x3 = runif(n))
y <- sin(2 * pi * x[, 1]) + x[, 2]^2 / 2 + rnorm(n, sd = 0.3)
cat(sprintf("n = %d, d = 3 (x3 irrelevant), local linear, Gaussian kernel, LOO-CV\n", n))
for (th in threads) {
  fit <- NULL
  joint <- time_it(function() {
    fit <<- local_poly(x, y, bandwidth = "cv", n_threads = th, verbose = FALSE)
  }, reps)
  grid <- NULL
  common <- time_it(function() {
    grid <<- local_poly(x, y, bandwidth = "cv", n_threads = th, verbose = FALSE,
                        control = local_control(refine = FALSE))
  }, reps)
  cat(sprintf("threads %d\n  joint search: %s\n    h = %s, cv = %.6f\n", th, fmt_times(joint, 2),
              paste(format(signif(fit$bandwidth, 4)), collapse = ", "), fit$cv))
  cat(sprintf("  common multiplier only: %s\n    h = %s, cv = %.6f (joint / common: %.4f)\n",
              fmt_times(common, 2), paste(format(signif(grid$bandwidth, 4)), collapse = ", "),
              grid$cv, fit$cv / grid$cv))
}
if (run_np) {
  t_np <- system.time(bw <- np::npregbw(xdat = as.data.frame(x), ydat = y, regtype = "ll",
                                        bwmethod = "cv.ls"))[["elapsed"]]
  np_cv <- local_poly(x, y, bandwidth = bw$bw, verbose = FALSE)$cv
  cat(sprintf("np::npregbw: %.1f s, h = %s, cv = %.6f; ours / np: time %.4f, cv %.4f (%s)\n",
              t_np, paste(format(signif(bw$bw, 4)), collapse = ", "), np_cv,
              joint$median / t_np, fit$cv / np_cv,
              if (fit$cv <= 1.005 * np_cv) "met" else "MISSED"))
}
