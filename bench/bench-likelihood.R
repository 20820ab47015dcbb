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

# ---- The local multinomial logit (local_classify(degree = 1), three classes) -----------------
# Engine time of the 400 query fits alone: the engine layer (engine_spec() + engine_run(), what
# predict() calls), n = BENCH_N, one predictor, h = 0.02, classes with probabilities a softmax
# of (0, 2 sin(2 pi x), 2 cos(2 pi x)). A local_classify() fit would also fit at all n data
# points. Agreement: nnet::multinom(weights = kernel weights, reltol = 1e-12) at 10 of the
# queries (one multinom() fit per query, the per-query peer), as the largest absolute
# difference of the class probabilities, and its time per query.
eta3 <- cbind(0, 2 * sin(2 * pi * x1), 2 * cos(2 * pi * x1))
p3 <- exp(eta3) / rowSums(exp(eta3))
y3 <- factor(apply(p3, 1, function(p) sample.int(3, 1, prob = p)), labels = c("a", "b", "c"))
onehot3 <- outer(as.integer(y3), 1:3, `==`) + 0
cat(sprintf("Local multinomial logit, 3 classes, n = %d, 400 queries, h = %g\n", n, h))
spec3 <- localmean:::engine_spec(matrix(x1), "gaussian", h, values = onehot3, degree = 1L,
                                 family = "multinomial")
probs3 <- function(res) {
  e <- exp(res$coef[, 1L, ] - apply(res$coef[, 1L, ], 1, max))
  e / rowSums(e)
}
for (t in threads) {
  f <- function() localmean:::engine_run(spec3, matrix(at1), n_threads = t, verbose = FALSE)
  ours <- time_it(f, reps)
  cat(sprintf("  %-28s ours %s\n", sprintf("1 predictor, %d thread%s", t, if (t > 1) "s" else ""),
              fmt_times(ours)))
}
if (requireNamespace("nnet", quietly = TRUE)) {
  pick <- round(seq(1, 400, length.out = 10))
  ours3 <- probs3(localmean:::engine_run(spec3, matrix(at1[pick]), n_threads = 1L))
  elapsed <- system.time(theirs3 <- t(vapply(at1[pick], function(q) {
    w <- exp(-0.5 * ((x1 - q) / h)^2)
    keep <- w > 1e-14  # the 8 sd cut-off of our tree strategy drops weights below exp(-32)
    df <- data.frame(y = y3[keep], u = x1[keep] - q)
    mn <- nnet::multinom(y ~ u, data = df, weights = w[keep], trace = FALSE, reltol = 1e-12,
                         maxit = 1000)
    predict(mn, data.frame(u = 0), type = "probs")
  }, numeric(3))))[["elapsed"]]
  cat(sprintf("  nnet::multinom per query: %.4f s per query; max |p_ours - p_nnet| %.2e\n",
              elapsed / length(pick), max(abs(ours3 - theirs3))))
}
# The whole local_classify() fit (fits at every data point) at n = 1e4, for scale.
n4 <- min(n, 1e4)
for (t in threads) {
  f <- function() local_classify(x1[1:n4], y3[1:n4], degree = 1, bandwidth = h,
                                 n_threads = t, verbose = FALSE)
  cat(sprintf("  %-28s ours %s\n", sprintf("fit at n = %d, %d thread%s", n4, t,
                                           if (t > 1) "s" else ""), fmt_times(time_it(f, 1))))
}
