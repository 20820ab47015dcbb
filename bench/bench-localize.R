# Issue 32, localize(): side by side in one process, processor time (user + system) of each
# contender, interleaved, median of BENCH_REPS rounds (the load average is printed).
#   (a) the fast path of lm() (the engine's moment sums) against the generic path (lm() refitted
#       in R in every window) on the same varying-coefficient model: target >= 50x;
#   (b) robust local linear fits, local_poly(n_robust = 3), against loess(family = "symmetric",
#       surface = "direct") at the same span, kernel and degree: target no slower.
# Run: R_LIBS=<lib> Rscript bench/bench-localize.R
suppressPackageStartupMessages(library(localmean))
reps <- as.integer(Sys.getenv("BENCH_REPS", "3"))
cat("load average at start:", readLines("/proc/loadavg")[1L], "\n")
cpu <- function(expr_fun) {
  st <- system.time(expr_fun())
  st[["user.self"]] + st[["sys.self"]]
}
interleaved <- function(funs) {
  times <- matrix(NA_real_, reps, length(funs), dimnames = list(NULL, names(funs)))
  for (r in seq_len(reps)) for (k in seq_along(funs)) times[r, k] <- cpu(funs[[k]])
  apply(times, 2L, stats::median)
}

# (a) n = 2000, 100 points: y = b0(z) + b1(z) x1 + b2(z) x2 + noise, localized over z
set.seed(1)
n <- 2000
d <- data.frame(z = runif(n), x1 = rnorm(n), x2 = rnorm(n))
d$y <- sin(2 * pi * d$z) + (1 + d$z) * d$x1 - d$z^2 * d$x2 + rnorm(n, sd = 0.5)
model <- lm(y ~ x1 + x2, data = d)
at <- seq(0.02, 0.98, length.out = 100)
run <- function(fast) {
  function() localize(model, over = ~z, kernel = "epanechnikov", bandwidth = 0.15, at = at,
                      fast = fast, verbose = FALSE)
}
fast_fit <- run(TRUE)()
slow_fit <- run(FALSE)()
cat(sprintf("(a) max |fast - generic| coefficients %.2g, standard errors %.2g\n",
            max(abs(fast_fit$coefficients - slow_fit$coefficients)),
            max(abs(fast_fit$std.error - slow_fit$std.error))))
a <- interleaved(list(fast = run(TRUE), generic = run(FALSE)))
cat(sprintf("(a) localize(lm) n = %d, %d points: fast %.3f s, generic %.3f s, ratio %.0fx: %s\n",
            n, length(at), a[["fast"]], a[["generic"]], a[["generic"]] / a[["fast"]],
            if (a[["generic"]] / a[["fast"]] >= 50) "met" else "NOT met"))

# (b) robust local linear, n = 1e4, span 0.3
n <- 1e4
x <- runif(n, 0, 10)
y <- sin(x) + rnorm(n, sd = 0.3)
y[sample(n, n / 50)] <- y[sample(n, n / 50)] + 10
span <- 0.3
b <- interleaved(list(
  localmean = function() local_poly(x, y, kernel = "tricube", bandwidth = nn(floor(span * n)),
                                    degree = 1, n_robust = 3, verbose = FALSE),
  loess = function() stats::loess(y ~ x, span = span, degree = 1, family = "symmetric",
                                  surface = "direct")))
cat(sprintf("(b) robust local linear n = %d: localmean %.2f s, loess %.2f s, ratio %.2f: %s\n",
            n, b[["localmean"]], b[["loess"]], b[["localmean"]] / b[["loess"]],
            if (b[["localmean"]] <= b[["loess"]]) "met" else "NOT met"))
cat("load average at end:", readLines("/proc/loadavg")[1L], "\n")
