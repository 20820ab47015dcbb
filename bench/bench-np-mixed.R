# Mixed-data LOO-CV bandwidth search (issue 15): local linear, Gaussian kernel for three numeric
# predictors and the Aitchison-Aitken kernel for one unordered factor, every bandwidth searched
# jointly, against np::npregbw(regtype = "ll", bwmethod = "cv.ls") with the same kernels.
# np's criterion is the same leave-one-out mean squared error, so both bandwidth vectors are
# scored by our exact LOO-CV (`local_poly(bandwidth = fixed)$cv`) and compared.
#
#   Rscript bench/bench-np-mixed.R
# Environment: BENCH_SIZES ("2000,5000"), BENCH_REPS (3), BENCH_THREADS ("1,2"),
# BENCH_NP_MULTI (np's nmulti, its number of starts; unset: np's default, min(5, predictors) = 4;
# 1 times one search, which favours np).

suppressPackageStartupMessages(library(localmean))
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])
source(file.path(dirname(script), "common.R"))
sizes <- as.integer(strsplit(Sys.getenv("BENCH_SIZES", "2000,5000"), ",")[[1]])
reps <- env_num("BENCH_REPS", 3)
threads <- env_threads()
np_multi <- env_num("BENCH_NP_MULTI", 4)  # np's default for 4 predictors
if (!requireNamespace("np", quietly = TRUE)) stop("bench-np-mixed.R needs np (install.packages(\"np\")).")
options(np.messages = FALSE)

mixed_data <- function(n) {
  set.seed(1)
  g <- factor(sample(c("a", "b", "c"), n, replace = TRUE))
  d <- data.frame(x1 = runif(n), x2 = rnorm(n), x3 = runif(n), g = g)  # x3 is irrelevant
  d$y <- sin(2 * pi * d$x1) + d$x2^2 / 2 + c(a = 0, b = 0.5, c = 1)[as.integer(g)] +
    rnorm(n, sd = 0.3)
  d
}

for (n in sizes) {
  d <- mixed_data(n)
  cat(sprintf("\nn = %d: y ~ x1 + x2 + x3 + g (g a 3-level factor, x3 irrelevant), local linear\n", n))
  fits <- list()
  times <- list()
  for (th in threads) {
    times[[as.character(th)]] <- time_it(function() {
      fits[[as.character(th)]] <<- local_poly(y ~ x1 + x2 + x3 + g, d, bandwidth = "cv",
                                              n_threads = th, verbose = FALSE)
    }, reps)
    fit <- fits[[as.character(th)]]
    cat(sprintf("  localmean, %d thread(s): %s\n    bandwidth = %s, cv = %.6f\n", th,
                fmt_times(times[[as.character(th)]], 2),
                paste(format(signif(fit$bandwidth, 4)), collapse = ", "), fit$cv))
  }
  t_np <- system.time(bw <- np::npregbw(y ~ x1 + x2 + x3 + g, data = d, regtype = "ll",
                                        bwmethod = "cv.ls", ckertype = "gaussian",
                                        ukertype = "aitchisonaitken",
                                        nmulti = np_multi))[["elapsed"]]
  np_cv <- local_poly(y ~ x1 + x2 + x3 + g, d, bandwidth = bw$bw, verbose = FALSE)$cv
  best <- fits[[length(fits)]]
  cat(sprintf("  np::npregbw (nmulti = %d, 1 thread): %.1f s\n    bandwidth = %s, np's cv = %.6f, our cv at np's bandwidth = %.6f\n",
              np_multi, t_np, paste(format(signif(bw$bw, 4)), collapse = ", "), bw$fval, np_cv))
  for (th in names(times)) {
    ratio <- t_np / times[[th]]$median
    cat(sprintf("  %s thread(s): %.0fx faster than np (target >= 100x: %s); cv ours / np %.5f (target <= 1.005: %s)\n",
                th, ratio, if (ratio >= 100) "met" else "MISSED", fits[[th]]$cv / np_cv,
                if (fits[[th]]$cv <= 1.005 * np_cv) "met" else "MISSED"))
  }
}
