# The leave-one-out loss and gradients of metric.hpp at FIXED parameters, for comparing two
# builds: every registry kernel, degrees 0 and 1, 1 to 5 numeric variables (diagonal metric:
# the fused passes up to 4, the general pass at 5; full metrics: the general pass), none, one
# or two categorical variables (with the lambda gradient), with and without prior weights,
# three bandwidth scales; n = 300 with a skewed and a tied variable. Run it once per build with
# BENCH_OUT set, then once with BENCH_COMPARE="a.rds b.rds" to print the largest differences:
#
#   R_LIBS=/work/lib/main5 BENCH_OUT=/tmp/a.rds Rscript bench/bench-metric-agreement.R
#   R_LIBS=/work/lib/metric2 BENCH_OUT=/tmp/b.rds Rscript bench/bench-metric-agreement.R
#   BENCH_COMPARE="/tmp/a.rds /tmp/b.rds" Rscript bench/bench-metric-agreement.R

compare <- strsplit(Sys.getenv("BENCH_COMPARE"), " ")[[1]]
if (length(compare) == 2L) {
  a <- readRDS(compare[1]); b <- readRDS(compare[2])
  stopifnot(identical(names(a), names(b)))
  rel <- function(u, v) { s <- max(abs(u), abs(v)); if (s == 0) 0 else max(abs(u - v)) / s }
  r <- do.call(rbind, lapply(names(a), function(k) {
    p <- a[[k]]; q <- b[[k]]
    data.frame(key = k, kernel = sub(" .*", "", k), finite = is.finite(p$loss),
               same_failed = p$failed == q$failed, identical = identical(p, q),
               loss = if (is.finite(p$loss)) abs(p$loss - q$loss) / abs(p$loss) else 0,
               gradient = rel(p$gradient, q$gradient),  # relative to the largest entry
               lambda = if (length(p$lambda_gradient)) {
                 rel(p$lambda_gradient, q$lambda_gradient)
               } else 0,
               gap = p$gap)
  }))
  cat(sprintf("%d cases, %d with a finite loss, %d bit-identical, failed counts equal in %d\n",
              nrow(r), sum(r$finite), sum(r$identical), sum(r$same_failed)))
  f <- r[r$finite, ]
  cat("Largest relative differences per kernel (finite losses):\n")
  print(aggregate(cbind(loss, gradient, lambda) ~ kernel, f, max), digits = 3)
  cat("Largest five (gap: the smallest 1 - L_ii of the case):\n")
  print(utils::head(f[order(-f$gradient), c("key", "loss", "gradient", "lambda", "gap")], 5),
        digits = 3)
  quit(save = "no")
}
suppressPackageStartupMessages(library(localmean))
out_file <- Sys.getenv("BENCH_OUT", tempfile(fileext = ".rds"))
kernels <- setdiff(localmean:::kernel_names(), character(0))
ml <- function(...) tryCatch(localmean:::metric_loss(...), error = function(e) NULL)
set.seed(11)
n <- 300
x5 <- matrix(rnorm(n * 5), n, 5)
x5[, 2] <- exp(x5[, 2])            # skewed
x5[, 3] <- round(x5[, 3], 1)       # ties
y <- sin(2 * x5[, 1]) + 0.3 * x5[, 2] + rnorm(n, sd = 0.2)
prior <- runif(n, 0.5, 2)
g1 <- sample(1:3, n, TRUE); g2 <- sample(1:4, n, TRUE)
cat1 <- list(codes = matrix(g1), levels = 3L, ordered = FALSE, lambda = 0.2, unit_mass = FALSE)
cat2 <- list(codes = cbind(g1, g2), levels = c(3L, 4L), ordered = c(FALSE, TRUE),
             lambda = c(0.2, 0.35), unit_mass = FALSE)
res <- list()
for (kernel in kernels) for (degree in 0:1) for (scale in c(0.6, 1.5, 4)) {
  for (d in 1:5) for (cat in c("none", "one", "two")) for (pr in c(FALSE, TRUE)) {
    if (cat != "none" && d > 2) next
    x <- x5[, seq_len(d), drop = FALSE]
    h <- scale * apply(x, 2, sd) * n^(-1 / (4 + d))
    categorical <- switch(cat, none = list(), one = cat1, two = cat2)
    for (full in c(FALSE, TRUE)) {
      if (full && (d == 1 || cat != "none")) next
      A <- diag(1 / h, d)
      if (full) A <- A + 0.15 * matrix(sin(seq_len(d * d)), d) / mean(h)
      key <- paste(kernel, degree, scale, d, cat, pr, if (full) "full" else "diag")
      r <- ml(x, y, if (pr) prior else numeric(0), A, degree, categorical, 0, 1e-10, 1L, FALSE,
              !full, length(categorical) > 0, kernel)
      if (!is.null(r)) res[[key]] <- r
    }
  }
}
saveRDS(res, out_file)
cat(length(res), "cases\n")
