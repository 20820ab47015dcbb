# Benchmark: coverage of confidence bands by simulation, and the tube formula against
# locfit::kappa0() / locfit::crit() (Sun and Loader 1994 in both).
#
# 1. Coverage on curves without bias: a linear truth fitted by local linear regression (which
#    reproduces linear functions exactly, so fit - truth = l(x)'e is exactly Gaussian).
#    - 1-D: n = 200 equally spaced x in [0, 1], sd 0.5, bandwidths 0.03, 0.06 and 0.12;
#    - 2-D: n = 400 uniform points in the unit square (one fixed design), sd 0.5, h = 0.15;
#    - heteroscedastic 1-D: sd(x) = 0.1 + x, pointwise and simultaneous bands with
#      variance = "constant" and "local".
#    Pointwise coverage: the share of (replication, grid point) pairs with the truth inside the
#    band; simultaneous: the share of replications with the truth inside the band at every point
#    of a fine grid (401 points in 1-D, 41 x 41 in 2-D). The design and the bandwidth are fixed,
#    so the critical value of the constant-variance band (which depends on x, h and
#    df = n - tr L only) is computed by predict() once per setting; each replication then needs
#    only predict(se.fit = TRUE). With variance = "local" the whole predict() runs every time.
#    Target: coverage within 2 Monte Carlo standard errors of 0.95 (or above it: the tube formula
#    is slightly conservative), for pointwise and simultaneous bands. The heteroscedastic row
#    with variance = "constant" is the misspecified control: it is expected to miss.
# 2. Critical values side by side with locfit for the same data and bandwidth: locfit's "gauss"
#    kernel is exp(-(2.5 u)^2 / 2) on its bandwidth (alpha = c(0, h)), so ours uses h / 2.5.
#    locfit's crit() uses the normal (rdf = 0) by default; ours uses Student t with
#    df = n - tr L for variance = "constant", so both are shown (ours normal: band_critical(df =
#    Inf)). locfit evaluates kappa0 on its lfgrid(20) structure with its own derivative
#    formulas; ours by finite differences of engine weights on a fine grid.
#
# Run by hand from the package root, localmean installed:
#   Rscript bench/bench-bands.R
# Environment: BENCH_REPS (2000 replications in 1-D, a quarter of them in 2-D and with local
# variance).

suppressPackageStartupMessages(library(localmean))
source("bench/common.R")
reps <- env_num("BENCH_REPS", 2000)
set.seed(20240615)

mc_se <- function(p, r) sqrt(p * (1 - p) / r)
verdict <- function(cover, r) {
  if (cover >= 0.95 - 2 * mc_se(0.95, r)) "met" else "MISSED"
}

# Coverage of pointwise and simultaneous bands over replications of y = truth(x) + noise.
coverage <- function(x, truth, noise, h, grid, r, variance = "constant") {
  fit_of <- function() {
    local_poly(x, truth(x) + noise(), bandwidth = h, verbose = FALSE)
  }
  first <- predict(fit_of(), grid, interval = "confidence", simultaneous = TRUE,
                   se.fit = TRUE, variance = variance)
  pointwise <- simultaneous <- numeric(r)
  t0 <- now()
  for (i in seq_len(r)) {
    fit <- fit_of()
    band <- if (variance == "constant") {
      p <- predict(fit, grid, se.fit = TRUE)
      list(fit = p$fit, se = p$se.fit, crit = first$critical, q = qt(0.975, p$df))
    } else {
      p <- predict(fit, grid, interval = "confidence", simultaneous = TRUE, se.fit = TRUE,
                   variance = "local")
      list(fit = p$fit[, "fit"], se = p$se.fit, crit = p$critical, q = qt(0.975, p$df))
    }
    z <- abs(band$fit - truth(grid)) / band$se
    pointwise[i] <- mean(z <= band$q)
    simultaneous[i] <- all(z <= band$crit)
  }
  c(critical = first$critical, pointwise = mean(pointwise), simultaneous = mean(simultaneous),
    seconds_per_rep = (now() - t0) / r)
}

report <- function(label, res, r) {
  cat(sprintf("%-44s c = %.3f  pointwise %.4f (%s)  simultaneous %.4f (%s)  [MC se %.4f; %.3f s/rep]\n",
              label, res[["critical"]], res[["pointwise"]], verdict(res[["pointwise"]], r),
              res[["simultaneous"]], verdict(res[["simultaneous"]], r), mc_se(0.95, r),
              res[["seconds_per_rep"]]))
}

cat("== Coverage on curves without bias (nominal 0.95) ==\n")
linear <- function(u) 1 + 2 * u
x1 <- seq(0, 1, length.out = 200)
grid1 <- seq(0, 1, length.out = 401)
for (h in c(0.03, 0.06, 0.12)) {
  res <- coverage(x1, linear, function() rnorm(200, sd = 0.5), h, grid1, reps)
  report(sprintf("1-D n = 200, h = %.2f, %d reps", h, reps), res, reps)
}

x2 <- matrix(runif(800), ncol = 2)
plane <- function(u) 1 + 2 * u[, 1] - u[, 2]
g <- seq(0, 1, length.out = 41)
grid2 <- as.matrix(expand.grid(g, g))
box <- apply(x2, 2, range)
inside <- grid2[, 1] >= box[1, 1] & grid2[, 1] <= box[2, 1] &
  grid2[, 2] >= box[1, 2] & grid2[, 2] <= box[2, 2]
grid2 <- grid2[inside, ]
r2 <- reps %/% 4
res <- coverage(x2, plane, function() rnorm(400, sd = 0.5), 0.15, grid2, r2)
report(sprintf("2-D n = 400, h = 0.15, %d reps", r2), res, r2)

hetero_sd <- function(u) 0.1 + u
noise_h <- function() rnorm(200, sd = hetero_sd(x1))
for (variance in c("constant", "local")) {
  res <- coverage(x1, linear, noise_h, 0.06, grid1, r2, variance)
  report(sprintf("1-D sd = 0.1 + x, h = 0.06, %s, %d reps", variance, r2), res, r2)
}

cat("\n== Tube formula: localmean vs locfit::kappa0() (level 0.95) ==\n")
if (requireNamespace("locfit", quietly = TRUE)) {
  suppressPackageStartupMessages(library(locfit))
  compare <- function(label, formula, data, h, lower, upper) {
    fit <- local_poly(formula, data, bandwidth = h, verbose = FALSE)
    t0 <- now()
    ours <- localmean:::tube_constants(fit, lower, upper)
    t_ours <- now() - t0
    d <- length(lower)
    t0 <- now()
    theirs <- locfit::kappa0(formula, data = data, alpha = c(0, 2.5 * h[1]), deg = 1,
                             kern = "gauss")
    t_theirs <- now() - t0
    crit_lf <- locfit::crit(const = theirs$const, d = d, cov = 0.95)$crit.val
    ours_normal <- localmean:::band_critical(0.95, Inf, ours, d)
    ours_t <- localmean:::band_critical(0.95, nobs(fit) - fit$df, ours, d)
    cat(sprintf(paste0("%-28s kappa0 ours %.4f locfit %.4f | zeta0 ours %.4f locfit %s | ",
                       "c normal ours %.4f locfit %.4f | c t(%.1f) ours %.4f | %.2f s vs %.2f s\n"),
                label, ours$kappa0, theirs$const[1], ours$zeta0,
                if (d == 2) sprintf("%.4f", 2 * theirs$const[2]) else "-",
                ours_normal, crit_lf, nobs(fit) - fit$df, ours_t, t_ours, t_theirs))
  }
  compare("cars, h = 4", dist ~ speed, cars, 4, 4, 25)
  cv <- local_poly(dist ~ speed, cars, verbose = FALSE)$bandwidth
  compare(sprintf("cars, h = %.2f (cv)", cv), dist ~ speed, cars, cv, 4, 25)
  sim <- data.frame(x = runif(500))
  sim$y <- sin(2 * pi * sim$x) + rnorm(500, sd = 0.3)
  compare("sin, n = 500, h = 0.05", y ~ x, sim, 0.05, min(sim$x), max(sim$x))
  sim2 <- data.frame(a = runif(300), b = runif(300))
  sim2$y <- sim2$a * sim2$b + rnorm(300, sd = 0.1)
  compare("2-D, n = 300, h = 0.2", y ~ a + b, sim2, 0.2, c(min(sim2$a), min(sim2$b)),
          c(max(sim2$a), max(sim2$b)))
} else {
  cat("locfit not installed: skipped\n")
}
