# One evaluation of the leave-one-out loss with its gradient (metric.hpp), n = 2000, one thread:
# the general pass (a full 5 x 5 metric) and the fused diagonal passes (2 and 4 variables, the
# "cv" search's), degrees 0 and 1. Prints CPU seconds per evaluation. Run it with two
# libraries, interleaved, to compare builds:
#
#   for r in 1 2; do for lib in main loosearch; do
#     R_LIBS=/work/lib/$lib Rscript bench/bench-metric-loss.R; done; done

suppressPackageStartupMessages(library(localmean))
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])
source(file.path(dirname(script), "common.R"))
session_header()
set.seed(1)
n <- 2000
x <- matrix(rnorm(n * 5), n, 5)
y <- sin(2 * (x[, 1] + x[, 2] - x[, 3]) / sqrt(3)) + rnorm(n, sd = 0.1)
loss <- function(x, A, degree, diagonal) {
  localmean:::metric_loss(x, y, numeric(0), A, degree, list(), 0, 1e-10, 1L, FALSE, diagonal)
}
per_evaluation <- function(f, reps) {
  f()
  t0 <- own_cpu()
  for (i in seq_len(reps)) f()
  (own_cpu() - t0) / reps
}
for (degree in 0:1) {
  cat(sprintf("degree %d: full 5 x 5 %.4f s, diagonal 2 %.4f s, diagonal 4 %.4f s\n", degree,
              per_evaluation(function() loss(x, diag(5) * 2 + 0.1, degree, FALSE), 6),
              per_evaluation(function() loss(x[, 1:2], diag(c(3, 3)), degree, TRUE), 30),
              per_evaluation(function() loss(x[, 1:4], diag(rep(2, 4)), degree, TRUE), 10)))
}
