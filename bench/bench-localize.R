# Issue 32, localize(): side by side in one process, processor time (user + system) of each
# contender, interleaved, median of BENCH_REPS rounds (the load average is printed).
#   (a) the fast path of lm() (the engine's moment sums) against the generic path (lm() refitted
#       in R in every window) on the same varying-coefficient model: target >= 50x;
#   (b) robust local linear fits, local_poly(n_robust = 3), against loess(family = "symmetric",
#       surface = "direct") at the same span, kernel and degree: target no slower;
#   (c) the engine's fast path of a local logistic glm() and of quantreg::rq() (localized over
#       their covariate), and of a varying-coefficient logistic glm() (localized over another
#       variable), against the generic path: target >= 50x;
#   (d) local linear quantile regression, local_poly(family = "quantile"), against
#       quantreg::lprq() at n = 2000 and 100 points, the same Gaussian kernel: target >= 50x.
# Run: BENCH_REPS=3 R_LIBS=/work/lib/peers:<lib> Rscript bench/bench-localize.R (BENCH_PARTS="b"
# runs part b alone; the fast contenders are timed over 10 or 20 calls in a row)
suppressPackageStartupMessages(library(localmean))
reps <- as.integer(Sys.getenv("BENCH_REPS", "3"))
parts <- strsplit(Sys.getenv("BENCH_PARTS", "abcd"), "")[[1L]]
cat("load average at start:", readLines("/proc/loadavg")[1L], "\n")
# the processor time of one call, from `times` calls in a row (the fast contenders take a few
# milliseconds, near the 1 ms resolution of system.time())
cpu <- function(expr_fun, times = 1L) {
  st <- system.time(for (i in seq_len(times)) expr_fun())
  (st[["user.self"]] + st[["sys.self"]]) / times
}
interleaved <- function(funs, times = rep(1L, length(funs))) {
  out <- matrix(NA_real_, reps, length(funs), dimnames = list(NULL, names(funs)))
  for (r in seq_len(reps)) for (k in seq_along(funs)) out[r, k] <- cpu(funs[[k]], times[k])
  apply(out, 2L, stats::median)
}

# (a) n = 2000, 100 points: y = b0(z) + b1(z) x1 + b2(z) x2 + noise, localized over z
if ("a" %in% parts) {
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
a <- interleaved(list(fast = run(TRUE), generic = run(FALSE)), times = c(20L, 1L))
cat(sprintf("(a) localize(lm) n = %d, %d points: fast %.3f s, generic %.3f s, ratio %.0fx: %s\n",
            n, length(at), a[["fast"]], a[["generic"]], a[["generic"]] / a[["fast"]],
            if (a[["generic"]] / a[["fast"]] >= 50) "met" else "NOT met"))
}

# (b) robust local linear, n = 1e4, span 0.3
if ("b" %in% parts) {
set.seed(2)
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
}

# (c) n = 2000, 100 points: local logistic and local quartile regression over the covariate
if ("c" %in% parts) {
set.seed(3)
n <- 2000
d <- data.frame(x = runif(n, 0, 3))
d$hit <- rbinom(n, 1, plogis(2 * cos(2 * d$x)))
d$y <- sin(2 * d$x) + rnorm(n, sd = 0.3)
at <- seq(0.05, 2.95, length.out = 100)
# (glm_vc: the varying-coefficient model, hit ~ x localized over another variable z, scaled to
# the same range)
d$z <- runif(n, 0, 3)
d$hit_vc <- rbinom(n, 1, plogis(1 - d$x + cos(2 * d$z) * d$x))
models <- list(glm = glm(hit ~ x, family = binomial, data = d),
               rq = quantreg::rq(y ~ x, tau = 0.25, data = d),
               glm_vc = glm(hit_vc ~ x, family = binomial, data = d))
over <- list(glm = ~x, rq = ~x, glm_vc = ~z)
for (name in names(models)) {
  run <- function(fast) {
    function() localize(models[[name]], over = over[[name]], kernel = "epanechnikov",
                        bandwidth = 0.3, at = at, fast = fast, verbose = FALSE)
  }
  fast_fit <- run(TRUE)()
  slow_fit <- run(FALSE)()
  cat(sprintf(paste("(c) %s: max |fast - generic| coefficients %.2g, standard errors %.2g",
                    "(all points by the engine: %s)\n"),
              name, max(abs(fast_fit$coefficients - slow_fit$coefficients)),
              max(abs(fast_fit$std.error - slow_fit$std.error)), all(fast_fit$engine_fitted)))
  ct <- interleaved(list(fast = run(TRUE), generic = run(FALSE)), times = c(20L, 1L))
  cat(sprintf("(c) localize(%s) n = %d, %d points: fast %.3f s, generic %.3f s, ratio %.0fx: %s\n",
              name, n, length(at), ct[["fast"]], ct[["generic"]], ct[["generic"]] / ct[["fast"]],
              if (ct[["generic"]] / ct[["fast"]] >= 50) "met" else "NOT met"))
}
}

# (d) local linear quantile regression, n = 2000, 100 points, Gaussian kernel, h = 0.2
if ("d" %in% parts) {
set.seed(4)
n <- 2000
x <- runif(n, 0, 3)
y <- sin(2 * x) + rnorm(n, sd = 0.3)
at <- seq(0.05, 2.95, length.out = 100)
h <- 0.2
d <- data.frame(x = x, y = y)
ref <- quantreg::lprq(x, y, h = h, tau = 0.25, m = 100)
# at lprq's 100 points: localize() of rq() runs the engine's quantile fit there alone;
# local_poly() fits every data point, then predicts the 100
ours <- function() {
  localize(quantreg::rq(y ~ x, tau = 0.25, data = d), over = ~x, bandwidth = h, at = ref$xx,
           verbose = FALSE)
}
poly <- function() {
  predict(local_poly(x, y, family = "quantile", tau = 0.25, bandwidth = h, verbose = FALSE),
          ref$xx)
}
theirs <- function() quantreg::lprq(x, y, h = h, tau = 0.25, m = 100)
loc <- ours()
cat(sprintf(paste("(d) max |localize(rq) - lprq| at lprq's points %.2g (all by the engine: %s),",
                  "|local_poly - lprq| %.2g\n"),
            max(abs(loc$coefficients[, 1] + loc$coefficients[, 2] * ref$xx - ref$fv)),
            all(loc$engine_fitted), max(abs(poly() - ref$fv))))
dt <- interleaved(list(localize = ours, local_poly = poly, lprq = theirs), times = c(10L, 1L, 1L))
for (who in c("localize", "local_poly")) {
  cat(sprintf(paste("(d) local linear quantile n = %d, %d points: %s %.3f s, lprq %.3f s,",
                    "ratio %.0fx: %s\n"),
              n, length(ref$xx), who, dt[[who]], dt[["lprq"]], dt[["lprq"]] / dt[[who]],
              if (dt[["lprq"]] / dt[[who]] >= 50) "met" else "NOT met"))
}
}
cat("load average at end:", readLines("/proc/loadavg")[1L], "\n")
