# The package's hot paths on one thread, for comparing two builds of localmean (see
# compare-builds.sh): prints one line per path, the minimum elapsed time of BENCH_REPS runs
# (default 5) after an untimed warm-up, or with BENCH_CLOCK=cpu the minimum CPU time (user +
# sys). The build is the first localmean on .libPaths().
suppressPackageStartupMessages(library(localmean))
reps <- as.integer(Sys.getenv("BENCH_REPS", "5"))
cpu_clock <- identical(Sys.getenv("BENCH_CLOCK"), "cpu")
seconds <- function(t) if (cpu_clock) sum(t[c("user.self", "sys.self")]) else t[["elapsed"]]
time_min <- function(f) {
  f()
  min(replicate(reps, seconds(system.time(f()))))
}
set.seed(1)
n <- 1e5
m <- 2000
x <- matrix(runif(2 * n), ncol = 2)
y <- sin(6 * x[, 1]) + rnorm(n, sd = 0.3)
q <- matrix(runif(2 * m), ncol = 2)
x1 <- runif(1e6)
y1 <- sin(2 * pi * x1) + rnorm(1e6, sd = 0.3)
b2 <- matrix(rnorm(2e6), ncol = 2)
x3 <- matrix(rnorm(3 * 2e4), ncol = 3)
kde3 <- kde(x3, bandwidth = 0.3, verbose = FALSE)
blobs <- matrix(rnorm(3 * 4000, sd = 0.3), ncol = 3) + rep(c(0, 2, 4, 6), each = 1000)
cv_x <- runif(2000)
cv_y <- sin(4 * cv_x) + rnorm(2000, sd = 0.2)
z <- matrix(rnorm(5000 * 100), ncol = 100)
imgs <- fashion_mnist_subset$x[1:600, ] / 255
miss <- imgs
miss[sample(length(miss), length(miss) * 0.3)] <- NA
img <- matrix(runif(128 * 128), 128)
s <- matrix(rnorm(2000 * 32), ncol = 32)
toks <- sample(sprintf("w%d", 1:2000), 20000, replace = TRUE)
paths <- list(
  exact_nw_gaussian = function() local_smooth(x, y, at = q, degree = 0, bandwidth = 0.1,
                                              method = "exact", n_threads = 1, verbose = FALSE),
  exact_ll_gaussian = function() local_smooth(x, y, at = q[1:1000, ], degree = 1,
                                              bandwidth = 0.1, method = "exact", n_threads = 1,
                                              verbose = FALSE),
  exact_nw_epanechnikov = function() local_smooth(x, y, at = q, degree = 0,
                                                  kernel = "epanechnikov", bandwidth = 0.3,
                                                  method = "exact", n_threads = 1,
                                                  verbose = FALSE),
  binned_ll_1e6 = function() local_smooth(x1, y1, degree = 1, bandwidth = 0.02,
                                          method = "binned", n_threads = 1, verbose = FALSE),
  kde_binned_1e6x2 = function() kde(b2, bandwidth = c(0.1, 0.1), method = "binned",
                                    n_threads = 1, verbose = FALSE),
  kde_exact_3d = function() predict(kde3, x3[1:2000, ], method = "exact", n_threads = 1),
  kde_plugin_3d = function() kde_bandwidth(x3[1:2000, ], bandwidth = "plugin"),
  cv_local_linear_2000 = function() local_poly(cv_x, cv_y, bandwidth = "cv", n_threads = 1,
                                               verbose = FALSE),
  mean_shift_4000x3 = function() mean_shift(blobs, bandwidth = 0.5, n_threads = 1,
                                            verbose = FALSE),
  knn_radius_100d = function() localmean:::cpp_knn_radius(z, rep(1, 100), z[1:1000, ], 13L,
                                                          1L, FALSE),
  impute_600_images = function() local_impute(miss, image_dim = c(28, 28), n_threads = 1,
                                              verbose = FALSE),
  denoise_128 = function() local_denoise(img, sigma = 0.1, n_threads = 1, verbose = FALSE),
  attention_softmax = function() temporal_local_mean(s, n_threads = 1),
  attention_gaussian = function() temporal_local_mean(s, kernel = "gaussian", bandwidth = 3,
                                                      n_threads = 1),
  qkv_fit_20000 = function() qkv_fit(toks, dim = 16, window = 8, n_iter = 1, n_threads = 1,
                                     verbose = FALSE)
)
for (name in names(paths)) cat(sprintf("%-22s %9.4f\n", name, time_min(paths[[name]])))
