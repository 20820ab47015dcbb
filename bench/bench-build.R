# The hot paths whose objects src/Makevars compiles at -O3, timed on one thread for comparing two
# builds of localmean (bench-build.sh runs it once per build and round, each in its own process).
# Prints one line per path: its name and the median CPU seconds (user + system, of the whole
# process) of BENCH_REPS runs (default 5) after an untimed warm-up: every path runs on one thread,
# so its CPU time is its work even on a shared machine, where elapsed time includes waiting for
# a core. The build is the first localmean on .libPaths().
suppressPackageStartupMessages(library(localmean))
reps <- as.integer(Sys.getenv("BENCH_REPS", "5"))
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])),
                 "common.R"))
time_median <- function(f) stats::median(cpu_seconds(f, reps))
set.seed(1)
n <- 5e4
x <- matrix(runif(2 * n), ncol = 2)
y <- sin(6 * x[, 1]) + rnorm(n, sd = 0.3)
q <- matrix(runif(2 * 1000), ncol = 2)
x1 <- runif(1e6)
y1 <- sin(2 * pi * x1) + rnorm(1e6, sd = 0.3)
m2 <- data.frame(a = runif(600), b = runif(600))
m2$y <- sin(4 * m2$a) + m2$b^2 + rnorm(600, sd = 0.2)
imgs <- fashion_mnist_subset$x[1:300, ] / 255
miss <- imgs
miss[sample(length(miss), length(miss) * 0.3)] <- NA
img <- matrix(runif(96 * 96), 96)
s <- matrix(rnorm(1500 * 32), ncol = 32)
toks <- sample(sprintf("w%d", 1:1000), 8000, replace = TRUE)
paths <- list(
  # engine.o: the exact Gaussian sweep (local mean and local linear) and the kd-tree
  exact_nw_gaussian = function() local_smooth(x, y, at = q, degree = 0, bandwidth = 0.1,
                                              method = "exact", n_threads = 1, verbose = FALSE),
  exact_ll_gaussian = function() local_smooth(x, y, at = q[1:500, ], degree = 1, bandwidth = 0.1,
                                              method = "exact", n_threads = 1, verbose = FALSE),
  tree_ll_epanechnikov = function() local_smooth(x, y, at = q, degree = 1, bandwidth = 0.05,
                                                 kernel = "epanechnikov", method = "tree",
                                                 n_threads = 1, verbose = FALSE),
  # engine.o: the binned fit with its fits at the data points (1e6 points)
  binned_fit_1e6 = function() local_poly(x1, y1, bandwidth = 0.02, method = "binned",
                                         n_threads = 1, verbose = FALSE),
  # metric.o: the leave-one-out loss of the joint search (two predictors)
  metric_cv_2d = function() local_poly(y ~ a + b, m2, bandwidth = "cv", n_threads = 1,
                                       verbose = FALSE),
  # impute.o: two-layer imputation and non-local means
  impute_300_images = function() local_impute(miss, image_dim = c(28, 28), n_threads = 1,
                                              verbose = FALSE),
  denoise_96 = function() local_denoise(img, sigma = 0.1, n_threads = 1, verbose = FALSE),
  # sequence.o: attention and the QKV trainer
  attention_softmax = function() temporal_local_mean(s, n_threads = 1),
  qkv_fit_8000 = function() qkv_fit(toks, dim = 16, window = 8, n_iter = 1, n_threads = 1,
                                    verbose = FALSE)
)
only <- Sys.getenv("BENCH_PATHS")
if (nzchar(only)) paths <- paths[strsplit(only, ",")[[1]]]
for (name in names(paths)) cat(sprintf("%-22s %9.4f\n", name, time_median(paths[[name]])))
