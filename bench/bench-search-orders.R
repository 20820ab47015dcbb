# The joint "cv" search of every kernel, degrees 0 and 1, on the data of bench-loo-kernels.R and
# on BENCH_NPERM (5) row permutations of them: the same statistical problem, other last bits
# along the search's path. Prints per kernel and degree the score on the original order and the
# smallest, median and largest over all orders, and the CPU seconds of all the fits: the spread
# is the search's own sensitivity to rounding, the yardstick for comparing two builds:
#
#   for lib in main5 metric2; do R_LIBS=/work/lib/$lib Rscript bench/bench-search-orders.R; done
# Environment: BENCH_NPERM (5), BENCH_KERNELS (every registry kernel, comma-separated).
suppressPackageStartupMessages(library(localmean))
n <- 200
set.seed(5)
d <- data.frame(x1 = rexp(n), x2 = runif(n), g = factor(sample(letters[1:3], n, TRUE)))
d$y <- log1p(d$x1) + sin(4 * d$x2) + as.integer(d$g) / 3 + rnorm(n, sd = 0.2)
n_perm <- as.integer(Sys.getenv("BENCH_NPERM", "5"))
perms <- c(list(seq_len(n)), lapply(seq_len(n_perm), function(s) {
  set.seed(100 + s)
  sample(n)
}))
kern <- strsplit(Sys.getenv("BENCH_KERNELS", paste(kernels()$kernel, collapse = ",")), ",")[[1]]
out <- NULL
for (kernel in kern) for (degree in 0:1) {
  cpu <- 0
  sc <- vapply(perms, function(p) {
    t <- system.time(fit <- local_poly(y ~ x1 + x2 + g, d[p, ], kernel = kernel, degree = degree,
                                       bandwidth = "cv", n_threads = 1, verbose = FALSE))
    cpu <<- cpu + sum(t[1:2])
    fit$cv
  }, 1)
  out <- rbind(out, data.frame(kernel, degree, orig = sc[1], min = min(sc), median = median(sc),
                               max = max(sc), cpu = cpu))
}
print(out, digits = 5)
