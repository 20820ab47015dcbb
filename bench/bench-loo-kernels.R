# The joint "cv" search of every registry kernel (issue 29, item 3): two numeric predictors (one
# skewed) and a three-level factor, n = 200, degrees 0 and 1, one thread. Prints per kernel the
# leave-one-out score reached, the bandwidths and lambda, and the CPU seconds of the whole fit.
# Run it with two libraries to compare searches (the derivative-free search of main against the
# gradient search of every kernel with a slope), e.g.
#
#   for lib in main loosearch; do R_LIBS=/work/lib/$lib Rscript bench/bench-loo-kernels.R; done
# Environment: BENCH_N (200).

suppressPackageStartupMessages(library(localmean))
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])
source(file.path(dirname(script), "common.R"))
session_header()
n <- env_num("BENCH_N", 200)
set.seed(5)
d <- data.frame(x1 = rexp(n), x2 = runif(n), g = factor(sample(letters[1:3], n, TRUE)))
d$y <- log1p(d$x1) + sin(4 * d$x2) + as.integer(d$g) / 3 + rnorm(n, sd = 0.2)
cat(sprintf("%-12s %6s %9s %9s  %s\n", "kernel", "degree", "cv", "cpu (s)", "h1 h2 lambda"))
for (kernel in kernels()$kernel) for (degree in 0:1) {
  cpu <- sum(system.time(fit <- local_poly(y ~ x1 + x2 + g, d, kernel = kernel, degree = degree,
                                           bandwidth = "cv", n_threads = 1,
                                           verbose = FALSE))[c("user.self", "sys.self")])
  cat(sprintf("%-12s %6d %9.5f %9.2f  %s\n", kernel, degree, fit$cv, cpu,
              paste(signif(fit$bandwidth, 3), collapse = " ")))
}
