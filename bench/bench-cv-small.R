# Issue 16, LOO-CV row: leave-one-out cross-validated bandwidths below the binning threshold,
# n = 2,000 and 5,000, one and two predictors, local constant and local linear, against
# np::npregbw(bwmethod = "cv.ls") with its defaults (np optimises every bandwidth, as we do).
#
# Target: >= 30x faster than np. Accuracy: the exact leave-one-out score (method = "tree") at
# our bandwidths against the same score at np's, and the bandwidths' ratio.
#
# Run by hand, one R process, nothing else heavy on the machine:
#   Rscript bench/bench-cv-small.R
# Environment: BENCH_SIZES ("2000,5000"), BENCH_DIMS ("1,2"), BENCH_REPS (5, our timings),
#   BENCH_THREADS (1), BENCH_NP ("yes"; "no" skips np, which takes minutes at n = 5000 in 2-D).
#
# Ours: local_poly(x, y, degree, bandwidth = "cv") with the defaults: the search scores its
# candidates binned (from 1,000 points, see ?local_control), the chosen bandwidth's fit and
# score are exact (the kd-tree). The time includes that final fit at every data point.

suppressPackageStartupMessages(library(localmean))
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])
source(file.path(dirname(script), "common.R"))
sizes <- as.integer(strsplit(Sys.getenv("BENCH_SIZES", "2000,5000"), ",")[[1]])
dims <- as.integer(strsplit(Sys.getenv("BENCH_DIMS", "1,2"), ",")[[1]])
reps <- env_num("BENCH_REPS", 5)
nt <- as.integer(env_num("BENCH_THREADS", 1))
run_np <- Sys.getenv("BENCH_NP", "yes") == "yes" && requireNamespace("np", quietly = TRUE)
if (!run_np) message("np is not run (not installed, or BENCH_NP = \"no\"): our timings only.")
if (run_np) options(np.messages = FALSE)

cat(sprintf("== bench-cv-small: LOO-CV bandwidths, n = %s, d = %s, n_threads = %d ==\n",
            paste(sizes, collapse = "/"), paste(dims, collapse = "/"), nt))
cat(sprintf("R %s, localmean %s%s, load average at start: %s\n", getRversion(),
            utils::packageVersion("localmean"),
            if (run_np) paste0(", np ", utils::packageVersion("np")) else "",
            paste(readLines("/proc/loadavg", warn = FALSE), collapse = " ")))

# The test functions of bench-cv.R (1-D) and bench-selectors-mixed.R (2-D, without x3).
make_data <- function(n, d) {
  set.seed(20261205 + n + d)
  x <- matrix(runif(n * d), n, dimnames = list(NULL, paste0("x", seq_len(d))))
  y <- sin(2 * pi * x[, 1]) + if (d == 2) (2 * x[, 2] - 1)^2 else 2 * x[, 1]^2
  list(x = x, y = y + rnorm(n, sd = 0.5))
}
exact_cv <- function(dat, degree, h) {
  local_poly(dat$x, dat$y, degree = degree, bandwidth = h, method = "tree", verbose = FALSE)$cv
}

rows <- list()
for (n in sizes) for (d in dims) for (degree in 0:1) {
  dat <- make_data(n, d)
  fit <- NULL
  tt <- time_it(function() {
    fit <<- local_poly(dat$x, dat$y, degree = degree, bandwidth = "cv", n_threads = nt,
                       verbose = FALSE)
  }, reps)
  row <- data.frame(n = n, d = d, degree = degree, ours_s = tt$median,
                    other = round(100 * tt$other), h_ours = paste(signif(fit$bandwidth, 4),
                                                                  collapse = " "),
                    cv_ours = exact_cv(dat, degree, fit$bandwidth))
  cat(sprintf("\nn = %d, d = %d, degree %d: ours %s\n  h = %s, exact CV %.6f\n", n, d, degree,
              fmt_times(tt), row$h_ours, row$cv_ours))
  if (run_np) {
    bw <- NULL
    t_np <- system.time(bw <- np::npregbw(xdat = as.data.frame(dat$x), ydat = dat$y,
                                         regtype = if (degree == 0) "lc" else "ll",
                                         bwmethod = "cv.ls"))[["elapsed"]]
    row$np_s <- t_np
    row$h_np <- paste(signif(bw$bw, 4), collapse = " ")
    row$cv_np <- exact_cv(dat, degree, bw$bw)
    row$speedup <- t_np / tt$median
    cat(sprintf("  np %.2f s, h = %s, exact CV %.6f (np's own fval %.6f)\n", t_np, row$h_np,
                row$cv_np, bw$fval))
    cat(sprintf("  %.0fx faster than np (target >= 30x: %s); CV ours / np %.5f; h ours / np %s\n",
                row$speedup, if (row$speedup >= 30) "met" else "MISSED", row$cv_ours / row$cv_np,
                paste(sprintf("%.3f", fit$bandwidth / bw$bw), collapse = " ")))
  }
  rows[[length(rows) + 1L]] <- row
}
cat("\nSummary (ours: median of", reps, "runs; np: one run; other: % of the machine used by",
    "other processes during our runs):\n")
print(do.call(rbind, rows), digits = 4, row.names = FALSE)
