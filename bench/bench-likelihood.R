# Local logistic regression (the local likelihood, family = "binomial"), n = 1e5, one and two
# predictors, 400 query points, a fixed bandwidth, against locfit(family = "binomial") where
# installed (Debian r-cran-locfit).
#
# Run by hand, one R process, nothing else heavy on the machine:
#   Rscript bench/bench-likelihood.R
# Environment: BENCH_N (1e5), BENCH_REPS (3), BENCH_THREADS ("1,2").
#
# Ours: local_smooth(x, y, at, family = "binomial", degree = 1, bandwidth = h): Newton steps at
# each of the 400 queries, exact to the convergence rule (relative deviance change 1e-8).
# locfit: locfit(y ~ lp(x, h = 2.5 h, nn = 0, deg = 1), family = "binomial", kern = "gauss",
# ev = the 400 queries) — locfit's "gauss" kernel is exp(-(2.5 u)^2 / 2), so its h is 2.5 times
# our Gaussian standard deviation; ev = lfgrid() fits exactly at the grid's vertices (no
# interpolation). Agreement: the largest absolute difference of the fitted probabilities.

suppressPackageStartupMessages(library(localmean))
have_locfit <- requireNamespace("locfit", quietly = TRUE)
if (!have_locfit) message("locfit is not installed: only our own timings are reported.")
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])),
                 "common.R"))
n <- env_num("BENCH_N", 1e5)
reps <- env_num("BENCH_REPS", 3)
threads <- env_threads()
set.seed(1)
x1 <- runif(n)
x2 <- runif(n)
p1 <- plogis(2 * sin(2 * pi * x1))
p2 <- plogis(2 * sin(2 * pi * x1) + 2 * (x2 - 0.5))
y1 <- rbinom(n, 1, p1)
y2 <- rbinom(n, 1, p2)
cat(sprintf("Local logistic regression, n = %d, 400 queries, fixed bandwidth\n", n))

report <- function(label, ours, ref_time, agreement) {
  cat(sprintf("  %-28s ours %s\n", label, fmt_times(ours)))
  if (!is.null(ref_time)) {
    cat(sprintf("  %-28s locfit %.4f s (one run); speed-up %.1fx; max |p_ours - p_locfit| %.2e\n",
                "", ref_time, ref_time / ours$median, agreement))
  }
}

# One predictor: h = 0.02.
h <- 0.02
at1 <- seq(0.01, 0.99, length.out = 400)
for (t in threads) {
  f <- function() local_smooth(x1, y1, at = at1, bandwidth = h, family = "binomial",
                               n_threads = t, verbose = FALSE)
  ours <- time_it(f, reps)
  ref_time <- agreement <- NULL
  if (have_locfit) {
    g <- function() {
      locfit::locfit(y1 ~ locfit::lp(x1, h = 2.5 * h, nn = 0, deg = 1), family = "binomial",
                     kern = "gauss", ev = locfit::lfgrid(mg = 400, ll = 0.01, ur = 0.99))
    }
    ref_time <- system.time(lf <- g())[["elapsed"]]
    agreement <- max(abs(f()$estimate - predict(lf, data.frame(x1 = at1))))
  }
  report(sprintf("1 predictor, %d thread%s", t, if (t > 1) "s" else ""), ours, ref_time,
         agreement)
}

# Two predictors: h = (0.05, 0.05), a 20 x 20 grid of queries.
h2 <- c(0.05, 0.05)
axis <- seq(0.05, 0.95, length.out = 20)
at2 <- expand.grid(x1 = axis, x2 = axis)
X <- cbind(x1 = x1, x2 = x2)
for (t in threads) {
  f <- function() local_smooth(X, y2, at = as.matrix(at2), bandwidth = h2,
                               family = "binomial", n_threads = t, verbose = FALSE)
  ours <- time_it(f, reps)
  ref_time <- agreement <- NULL
  if (have_locfit) {
    g <- function() {
      locfit::locfit(y2 ~ locfit::lp(x1, x2, h = 2.5 * h2[1], nn = 0, deg = 1, scale = FALSE),
                     family = "binomial", kern = "gauss",
                     ev = locfit::lfgrid(mg = c(20, 20), ll = c(0.05, 0.05), ur = c(0.95, 0.95)))
    }
    ref_time <- system.time(lf <- g())[["elapsed"]]
    agreement <- max(abs(f()$estimate - predict(lf, at2)))
  }
  report(sprintf("2 predictors, %d thread%s", t, if (t > 1) "s" else ""), ours, ref_time,
         agreement)
}
