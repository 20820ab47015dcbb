# The engine's sweeps with kernels other than the Gaussian (swept as one run-time kernel since
# branch slim: sweep.hpp's with_sweep_kernel()), with Gaussian rows as controls, on one thread,
# for comparing two builds (run it once per build, alternating). Prints one line per path: the
# minimum CPU seconds (user + sys) of BENCH_REPS runs (default 5) after an untimed warm-up.
# The build is the first localmean on .libPaths().
suppressPackageStartupMessages(library(localmean))
reps <- as.integer(Sys.getenv("BENCH_REPS", "5"))
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])),
                 "common.R"))
time_min <- function(f) min(cpu_seconds(f, reps))
set.seed(1)
n <- 5e4
x <- matrix(runif(2 * n), ncol = 2)
y <- sin(6 * x[, 1]) + rnorm(n, sd = 0.3)
q <- matrix(runif(2 * 1000), ncol = 2)
x3 <- matrix(rnorm(3 * 2e4), ncol = 3)
kde3 <- kde(x3, bandwidth = 0.3, kernel = "epanechnikov", verbose = FALSE)
blobs <- matrix(rnorm(3 * 2000, sd = 0.3), ncol = 3) + rep(c(0, 2, 4, 6), each = 500)
lg <- data.frame(x = runif(3000))
lg$y <- rbinom(3000, 1, plogis(3 * sin(6 * lg$x)))
cd <- data.frame(x = runif(2000))
cd$y <- sin(2 * pi * cd$x) + rnorm(2000, sd = 0.2 + 0.4 * cd$x)
cdens <- kde(y ~ x, cd, bandwidth = c(0.3, 0.1), kernel = "epanechnikov", verbose = FALSE)
cd_at <- data.frame(x = seq(0, 1, length.out = 100))
m2 <- data.frame(a = runif(600), b = runif(600))
m2$y <- sin(4 * m2$a) + m2$b^2 + rnorm(600, sd = 0.2)
smooth <- function(kernel, degree, method, bandwidth, at = q)
  function() local_smooth(x, y, at = at, degree = degree, kernel = kernel, bandwidth = bandwidth,
                          method = method, n_threads = 1, verbose = FALSE)
paths <- list(
  exact_nw_gaussian = smooth("gaussian", 0, "exact", 0.1),
  exact_nw_epanechnikov = smooth("epanechnikov", 0, "exact", 0.3),
  exact_nw_laplace = smooth("laplace", 0, "exact", 0.1),
  exact_ll_tricube = smooth("tricube", 1, "exact", 0.3, q[1:300, ]),
  tree_ll_epanechnikov = smooth("epanechnikov", 1, "tree", 0.05),
  tree_ll_biweight = smooth("biweight", 1, "tree", 0.05),
  tree_ll_cauchy = smooth("cauchy", 1, "tree", 0.02, q[1:300, ]),
  kde_tree_3d_epanechnikov = function() predict(kde3, x3[1:4000, ], method = "tree",
                                                n_threads = 1),
  mean_shift_gaussian = function() mean_shift(blobs, bandwidth = 0.5, n_threads = 1,
                                              verbose = FALSE),
  mean_shift_epanechnikov = function() mean_shift(blobs, bandwidth = 0.8,
                                                  kernel = "epanechnikov", n_threads = 1,
                                                  verbose = FALSE),
  logistic_tricube = function() local_poly(y ~ x, lg, family = "binomial", kernel = "tricube",
                                           bandwidth = 0.1, n_threads = 1, verbose = FALSE),
  cdens_quantiles_epanechnikov = function() predict(cdens, cd_at, type = "quantile",
                                                    tau = c(0.1, 0.5, 0.9), n_threads = 1),
  metric_cv_2d_gaussian = function() local_poly(y ~ a + b, m2, bandwidth = "cv", n_threads = 1,
                                                verbose = FALSE),
  metric_cv_2d_epanechnikov = function() local_poly(y ~ a + b, m2, bandwidth = "cv",
                                                    kernel = "epanechnikov", n_threads = 1,
                                                    verbose = FALSE)
)
only <- Sys.getenv("BENCH_PATHS")
if (nzchar(only)) paths <- paths[strsplit(only, ",")[[1]]]
for (name in names(paths)) cat(sprintf("%-26s %9.4f\n", name, time_min(paths[[name]])))
