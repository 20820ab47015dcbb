# One short call per family, for `R -d valgrind` (make valgrind): every C++ entry point the
# families reach, on data small enough for valgrind's ~50x slowdown, with one thread and two.
# Run: R -d "valgrind --error-exitcode=1" --vanilla -f tools/valgrind.R
suppressPackageStartupMessages(library(localmean))
options(localmean.threads = 2)
set.seed(1)
n <- 150
x1 <- sort(runif(n))
y1 <- sin(6 * x1) + rnorm(n, sd = 0.2)
X2 <- cbind(a = runif(n), b = runif(n))
X5 <- matrix(rnorm(n * 5), n)
cls <- factor(ifelse(X2[, 1] + rnorm(n, sd = 0.2) > 0.5, "p", "q"))
step <- function(label, expr) {
  started <- proc.time()[["elapsed"]]
  force(expr)
  cat(sprintf("%-28s %6.1f s\n", label, proc.time()[["elapsed"]] - started))
}

step("regression", {
  fit <- local_poly(X2, y1, bandwidth = 0.3, verbose = FALSE)
  predict(fit, X2[1:5, ], se = TRUE)
  local_poly(x1, y1, bandwidth = "cv", method = "binned", verbose = FALSE)
  local_poly(X5[, 1:3], y1, bandwidth = nn(20), kernel = "epanechnikov", method = "exact",
             verbose = FALSE)
  local_mean(x1, y1, bandwidth = 0.1, verbose = FALSE)
  local_smooth(x1, y1, bandwidth = 0.1)
  local_poly(x1, as.numeric(cls == "p"), bandwidth = 0.3, family = "binomial", verbose = FALSE)
})
step("classify", {
  fit <- local_classify(X2, cls, bandwidth = 0.2, verbose = FALSE)
  predict(fit, X2[1:5, ], type = "prob")
})
step("density", {
  kde(x1, verbose = FALSE)
  kde(X2, bandwidth = "plugin", verbose = FALSE)
  kde(X2, bandwidth = nn(10), verbose = FALSE)
  kde(x1, bounds = c(0, 1), verbose = FALSE)
  kde(data.frame(a = x1, g = cls), verbose = FALSE)
  simulate(kde(X2, verbose = FALSE), nsim = 10)
  kde_bandwidth(x1, bandwidth = "scv")
  kde_bandwidth(X2, bandwidth = "lscv")
})
step("modes", {
  mean_shift(X2, bandwidth = 0.2, verbose = FALSE)
  medoid_shift(X2, bandwidth = 0.2, verbose = FALSE)
  pc_shift(X5[, 1:3], ndim = 1, bandwidth = 1, max_iter = 20, verbose = FALSE)
  self_local_mean(X2, n_iter = 3, bandwidth = 0.2, verbose = FALSE)
})
step("embedding", {
  l <- lle(X5, ndim = 2, k = 8, verbose = FALSE)
  predict(l, X5[1:5, ])
  t <- trimap(X5, n_iter = 30, verbose = FALSE)
  embedding_quality(X5, t$layout, cls, k = 5, verbose = FALSE)
  tri <- matrix(sample(30L, 300, replace = TRUE), ncol = 3)
  tri <- tri[apply(tri, 1, function(r) length(unique(r)) == 3L), ]
  ordinal_embed(tri, n_iter = 30, verbose = FALSE)
  asym_mds(matrix(runif(100), 10) + diag(10), ndim = 2)
})
step("impute and denoise", {
  miss <- X5
  miss[sample(length(miss), 100)] <- NA
  local_impute(miss, max_iter = 3, verbose = FALSE)
  img <- fashion_mnist_subset$x[1:40, ] / 255
  img[sample(length(img), 2000)] <- NA
  local_impute(img, image_dim = c(28, 28), max_iter = 2, verbose = FALSE)
  local_denoise(matrix(runif(32 * 32), 32), patch = 3, search = 7, verbose = FALSE)
})
step("sequence", {
  temporal_local_mean(matrix(rnorm(40 * 4), 40))
  patterns <- sign(matrix(rnorm(4 * 32), 4))
  hopfield(patterns, patterns[2, ], beta = 0.5, n_iter = 2)
  tokens <- sample(c("the", "cat", "sat", "on", "mat"), 300, replace = TRUE)
  fit <- qkv_fit(tokens, dim = 2, window = 2, n_iter = 1, n_threads = 1, verbose = FALSE)
  attention_weights(fit, c("the", "cat", "sat"))
  predict(fit, c("the", "cat"), type = "token")
})
cat("valgrind script done\n")
