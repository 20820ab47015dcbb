# Kernels of the user's own against the built-in kernel of the same profile, side by side in one
# process: the tabulated triweight and Gaussian profiles against "triweight" and "gaussian" on
# five paths (the exact sweep, the kd-tree, a density, a fit at a fixed bandwidth and the cv
# search), and the time to tabulate a profile. Processor time (user + system) per call, one
# thread, the median of BENCH_ROUNDS interleaved rounds (time_batches() in common.R: the two
# contenders take turns, each round a batch of calls). The fits agree to 1e-10
# (tests/testthat/test-kernels.R).
#
#   R_LIBS=<lib> BENCH_ROUNDS=5 Rscript bench/bench-user-kernel.R

source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])),
                 "common.R"))
suppressPackageStartupMessages(library(localmean))
session_header()
rounds <- env_num("BENCH_ROUNDS", 5)
set.seed(1)

x2_small <- matrix(runif(2 * 4e3), ncol = 2)
y2_small <- x2_small[, 1] + rnorm(4e3)
x2_large <- matrix(runif(2 * 2e4), ncol = 2)
y2_large <- x2_large[, 1] + rnorm(2e4)
x1 <- runif(800)
y1 <- sin(6 * x1) + rnorm(800, sd = 0.3)
paths <- list(
  "exact sweep, 2-D local mean, n = 4000" = function(k) {
    local_mean(x2_small, y2_small, kernel = k, bandwidth = 0.05, method = "exact",
               n_threads = 1, verbose = FALSE)
  },
  "kd-tree, 2-D local mean, n = 20000" = function(k) {
    local_mean(x2_large, y2_large, kernel = k, bandwidth = 0.05, method = "tree",
               n_threads = 1, verbose = FALSE)
  },
  "density, 2-D kde on its grid (tree), n = 20000" = function(k) {
    kde(x2_large, kernel = k, bandwidth = 0.05, method = "tree", n_threads = 1, verbose = FALSE)
  },
  "fixed bandwidth, 2-D local linear, n = 4000" = function(k) {
    local_poly(x2_small, y2_small, kernel = k, bandwidth = 0.1, degree = 1, n_threads = 1,
               verbose = FALSE)
  },
  "cv search, 1-D local linear, n = 800" = function(k) {
    local_poly(x1, y1, kernel = k, bandwidth = "cv", degree = 1, n_threads = 1, verbose = FALSE)
  }
)
user <- list(triweight = user_kernel(function(u) (1 - u^2)^3 * (abs(u) < 1), name = "my_triweight"),
             gaussian = user_kernel(function(u) exp(-u^2 / 2), name = "my_gaussian"))

cat(sprintf("%-48s %-9s %10s %10s %6s\n", "path", "kernel", "built-in", "user", "ratio"))
for (path in names(paths)) {
  run <- paths[[path]]
  for (kernel in names(user)) {
    fns <- list(builtin = function() run(kernel), user = function() run(user[[kernel]]))
    t1 <- system.time(fns$builtin())[["elapsed"]]
    batch <- max(1L, ceiling(0.2 / max(t1, 1e-3)))
    tt <- time_batches(fns, rounds, batch)
    cat(sprintf("%-48s %-9s %8.2f ms %8.2f ms %6.2f\n", path, kernel, 1e3 * tt$builtin$cpu_median,
                1e3 * tt$user$cpu_median, tt$user$cpu_median / tt$builtin$cpu_median))
  }
}
cat(sprintf("tabulating a profile: %.3f s\n", system.time(
  user_kernel(function(u) (1 - u^2)^3 * (abs(u) < 1), name = "again"))[["elapsed"]]))
cat(sprintf("load average at the end: %s\n", paste(readLines("/proc/loadavg"), collapse = " ")))
