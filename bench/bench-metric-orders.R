# The learned metric (bandwidth = "metric", Gaussian, one thread) on the data of test-metric.R
# (rotated, 300 x 3 and 200 x 2) and of the local-likelihood vignette (400 x 3), on the original
# order and BENCH_NPERM (5) row permutations: the loss reached (original order, smallest,
# median, largest), the mean number of loss evaluations and the CPU seconds of all the fits. The
# spread is the descent's own sensitivity to rounding. Rerun:
#
#   for lib in main5 metric2; do R_LIBS=/work/lib/$lib Rscript bench/bench-metric-orders.R; done
suppressPackageStartupMessages(library(localmean))
rotated_data <- function(n, d = 3, sd = 0.1) {
  x <- matrix(rnorm(n * d), n, d, dimnames = list(NULL, paste0("x", seq_len(d))))
  truth <- sin(2 * (x[, 1] + x[, 2]) / sqrt(2))
  list(x = x, y = truth + rnorm(n, sd = sd), truth = truth)
}
set.seed(4); t4 <- rotated_data(300)
set.seed(5); t5 <- rotated_data(200, d = 2)
set.seed(3); n <- 400
sim <- data.frame(x1 = runif(n), x2 = runif(n), x3 = runif(n))
sim$y <- sin(3 * (sim$x1 + sim$x2 - sim$x3)) + rnorm(n, sd = 0.2)
vig <- list(x = as.matrix(sim[, 1:3]), y = sim$y)
cases <- list(list("rot300x3", t4, 0), list("rot300x3", t4, 1), list("rot200x2", t5, 1),
              list("vignette400x3", vig, 1))
np <- as.integer(Sys.getenv("BENCH_NPERM", "5"))
out <- NULL
for (cs in cases) {
  dd <- cs[[2]]; m <- nrow(dd$x)
  perms <- c(list(seq_len(m)), lapply(seq_len(np), function(s) { set.seed(100 + s); sample(m) }))
  cpu <- 0; ev <- 0
  sc <- vapply(perms, function(p) {
    t <- system.time(fit <- local_poly(dd$x[p, ], dd$y[p], degree = cs[[3]], bandwidth = "metric",
                                       n_threads = 1, verbose = FALSE))
    cpu <<- cpu + sum(t[1:2]); ev <<- ev + fit$metric$evaluations
    fit$metric$loss
  }, 1)
  out <- rbind(out, data.frame(case = cs[[1]], degree = cs[[3]], orig = sc[1], min = min(sc),
                               median = median(sc), max = max(sc), evals = ev / length(perms),
                               cpu = cpu))
}
print(out, digits = 5)
