# Kernels of the user's own against the built-in kernel of the same profile, in one process:
# the tabulated triweight and Gaussian profiles against "triweight" and "gaussian" in 2-D local
# means (tree at n = 2e4, exact at n = 4e3), median of 5 single-threaded runs, and the time to
# tabulate a profile. The fits agree to 1e-10 (tests/testthat/test-regression.R).
#
#   Rscript bench/bench-user-kernel.R

suppressPackageStartupMessages(library(localmean))
set.seed(1)
timed <- function(x, y, kernel, method) {
  median(vapply(1:5, function(i) {
    system.time(local_mean(x, y, kernel = kernel, bandwidth = 0.05, method = method,
                           n_threads = 1, verbose = FALSE))[["elapsed"]]
  }, numeric(1)))
}
triweight <- user_kernel(function(u) (1 - u^2)^3 * (abs(u) < 1), name = "my_triweight")
gaussian <- user_kernel(function(u) exp(-u^2 / 2), name = "my_gaussian")
for (case in list(list(n = 2e4, method = "tree"), list(n = 4e3, method = "exact"))) {
  x <- matrix(runif(2 * case$n), case$n)
  y <- x[, 1] + rnorm(case$n)
  for (pair in list(list("triweight", triweight), list("gaussian", gaussian))) {
    cat(sprintf("%-5s n = %5d %-9s built-in %.3f s, user %.3f s\n", case$method, case$n,
                pair[[1]], timed(x, y, pair[[1]], case$method),
                timed(x, y, pair[[2]], case$method)))
  }
}
cat(sprintf("tabulating a profile: %.3f s\n", system.time(
  user_kernel(function(u) (1 - u^2)^3 * (abs(u) < 1), name = "again"))[["elapsed"]]))
