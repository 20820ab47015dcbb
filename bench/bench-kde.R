# Benchmark: kernel density estimation on a grid, n = 1e6, binned (the default for this size).
#   1-D: kde(x, bandwidth = h) (512-point grid) vs stats::density(x, bw = h, n = 512,
#        from/to = the ends of our grid).
#   2-D: kde(X, bandwidth = c(h1, h2), gridsize = 101) vs KernSmooth::bkde2D(X, bandwidth =
#        c(h1, h2), gridsize = c(101, 101), range.x = our grid's ranges).
# Both peers are single-threaded; ours runs with n_threads = 1 and 2.
#
#   Issue 16: kde(B, bandwidth = c(0.1, 0.1)) as a user types it (B = 1e6 x 2 N(0, 1), default
#        51 x 51 grid, method = "auto") vs bkde2D(B, c(0.1, 0.1), gridsize = c(101, 101)).
# Targets: our time <= 0.5 x the peer's, in 1-D and 2-D; for the issue 16 row also an error
# against exact evaluation no larger than bkde2D's.
# Also reported: accuracy of the binned grid estimate (ours and the peer's) against an exact
# evaluation, localmean:::kde_at(fit, grid points, "exact"), on the whole 1-D grid and on a random
# subset of the 2-D grid (BENCH_KDE_SUB points). Relative differences are given two ways:
# max |a - b| / max(b) ("of peak") and max |a - b| / b over the grid points where b >= 1e-3 of
# the peak ("pointwise"; in the far tails the pointwise error of any binned estimate grows).
#
# Run by hand from the package root, localmean installed, nothing else heavy on the machine:
#   Rscript bench/bench-kde.R
# Environment: BENCH_N (1e6), BENCH_REPS (5 interleaved rounds), BENCH_THREADS ("1,2"),
# BENCH_KDE_SUB (400 grid points checked exactly in 2-D).

suppressPackageStartupMessages(library(localmean))
have_ks <- requireNamespace("KernSmooth", quietly = TRUE)
if (!have_ks) message("KernSmooth is not installed: the 2-D peer is skipped.")

source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])),
                 "common.R"))
n <- env_num("BENCH_N", 1e6)
reps <- env_num("BENCH_REPS", 5)
n_sub <- env_num("BENCH_KDE_SUB", 400)
threads <- env_threads()
kde_at <- localmean:::kde_at

cat("== bench-kde: KDE on a grid, Gaussian, n =", format(n, big.mark = ","),
    "; 1-D 512 points vs stats::density, 2-D 101 x 101 vs KernSmooth::bkde2D ==\n")
session_header()

# a vs reference b: max relative difference of the peak, and pointwise where b >= 1e-3 peak.
rel_diff <- function(a, b) {
  keep <- b >= 1e-3 * max(b)
  c(of_peak = max(abs(a - b)) / max(b), pointwise = max(abs(a - b)[keep] / b[keep]))
}
fmt_rel <- function(r) sprintf("%.2e of peak, %.2e pointwise", r[["of_peak"]], r[["pointwise"]])
verdict <- function(ratio) if (ratio <= 0.5) "met" else "MISSED"
summary_rows <- list()

# ---------------------------------------------------------------------------------------- 1-D
set.seed(20260201)
x <- c(rnorm(n / 2), rnorm(n / 2, mean = 3, sd = 0.5))
h <- stats::bw.nrd0(x)  # chosen once, untimed; the same number is passed to both
fit1 <- kde(x, bandwidth = h, n_threads = 1, verbose = FALSE)
g1 <- fit1$grid[[1]]
cat(sprintf("\n-- 1-D: h = %.5f (bw.nrd0), our grid %d points on [%.4f, %.4f], step %.5f (h/step %.2f), method chosen: %s --\n",
            h, length(g1), g1[1], g1[length(g1)], g1[2] - g1[1], h / (g1[2] - g1[1]), fit1$method))
dens_fun <- function() stats::density(x, bw = h, n = 512, from = g1[1], to = g1[length(g1)])
fns <- list(density = dens_fun)
for (nt in threads) {
  local({
    nt <- nt
    fns[[paste0("kde_", nt)]] <<- function() kde(x, bandwidth = h, n_threads = nt, verbose = FALSE)
  })
}
res1 <- time_rounds(fns, reps)
cat(sprintf("(other processes used %.0f%% of the machine during the 1-D timings)\n",
            100 * res1[[1]]$other))
cat(sprintf("stats::density(n = 512)         : %s\n", fmt_rounds(res1$density)))
for (nt in threads) {
  r <- res1[[paste0("kde_", nt)]]
  cat(sprintf("kde(), n_threads = %d            : %s\n", nt, fmt_rounds(r)))
  ratio <- r$median / res1$density$median
  cat(sprintf("   ratio ours / density: %.2fx (target <= 0.5x: %s)\n", ratio, verdict(ratio)))
  summary_rows[[length(summary_rows) + 1L]] <- data.frame(
    case = "1-D kde vs density", threads = nt, peer_s = res1$density$median, ours_s = r$median,
    ratio = ratio, target = verdict(ratio), peer_faults = res1$density$faults, ours_faults = r$faults)
}
d1 <- dens_fun()
stopifnot(max(abs(d1$x - g1)) <= 1e-12 * max(abs(g1)))
t0 <- now()
exact1 <- kde_at(fit1, matrix(g1), "exact", n_threads = max(threads))
cat(sprintf("exact evaluation at the 512 grid points (kde_at, \"exact\", %d threads): %.2f s\n",
            max(threads), now() - t0))
cat(sprintf("accuracy: ours vs exact     : %s\n", fmt_rel(rel_diff(fit1$estimate, exact1))))
cat(sprintf("          ours vs density   : %s\n", fmt_rel(rel_diff(fit1$estimate, d1$y))))
cat(sprintf("          density vs exact  : %s\n", fmt_rel(rel_diff(d1$y, exact1))))
cat(sprintf("          threads agree     : max |kde(1 thread) - kde(%d threads)| = %.2g\n",
            max(threads), max(abs(fit1$estimate -
                                  kde(x, bandwidth = h, n_threads = max(threads),
                                      verbose = FALSE)$estimate))))
rm(fns, res1)

# ---------------------------------------------------------------------------------------- 2-D
set.seed(20260202)
half <- n / 2
X <- rbind(matrix(rnorm(2 * half), ncol = 2) %*% chol(matrix(c(1, 0.5, 0.5, 1), 2)),
           cbind(rnorm(half, 2.5, 0.6), rnorm(half, 1, 0.6)))
colnames(X) <- c("x1", "x2")
hh <- c(0.3, 0.3)
fit2 <- kde(X, bandwidth = hh, gridsize = 101, n_threads = 1, verbose = FALSE)
gx <- fit2$grid[[1]]
gy <- fit2$grid[[2]]
rx <- list(range(gx), range(gy))
cat(sprintf("\n-- 2-D: h = (%.3f, %.3f), grid 101 x 101 on [%.3f, %.3f] x [%.3f, %.3f], steps (%.4f, %.4f), method chosen: %s --\n",
            hh[1], hh[2], rx[[1]][1], rx[[1]][2], rx[[2]][1], rx[[2]][2], gx[2] - gx[1],
            gy[2] - gy[1], fit2$method))
if (fit2$method != "binned") cat("NOTE: method = \"auto\" did not bin; the timings below are not of the binned path.\n")
fns <- list()
bk_fun <- function() KernSmooth::bkde2D(X, bandwidth = hh, gridsize = c(101L, 101L), range.x = rx)
if (have_ks) fns$bkde2D <- bk_fun
for (nt in threads) {
  local({
    nt <- nt
    fns[[paste0("kde_", nt)]] <<- function() {
      kde(X, bandwidth = hh, gridsize = 101, n_threads = nt, verbose = FALSE)
    }
  })
}
res2 <- time_rounds(fns, reps)
cat(sprintf("(other processes used %.0f%% of the machine during the 2-D timings)\n",
            100 * res2[[1]]$other))
if (have_ks) cat(sprintf("KernSmooth::bkde2D(101 x 101)   : %s\n", fmt_rounds(res2$bkde2D)))
for (nt in threads) {
  r <- res2[[paste0("kde_", nt)]]
  cat(sprintf("kde(), n_threads = %d            : %s\n", nt, fmt_rounds(r)))
  if (have_ks) {
    ratio <- r$median / res2$bkde2D$median
    cat(sprintf("   ratio ours / bkde2D: %.2fx (target <= 0.5x: %s)\n", ratio, verdict(ratio)))
    summary_rows[[length(summary_rows) + 1L]] <- data.frame(
      case = "2-D kde vs bkde2D", threads = nt, peer_s = res2$bkde2D$median, ours_s = r$median,
      ratio = ratio, target = verdict(ratio), peer_faults = res2$bkde2D$faults,
      ours_faults = r$faults)
  }
}
set.seed(20260203)
pick <- sort(sample.int(length(gx) * length(gy), n_sub))
pts <- as.matrix(expand.grid(gx, gy))[pick, , drop = FALSE]
t0 <- now()
exact2 <- kde_at(fit2, pts, "exact", n_threads = max(threads))
cat(sprintf("exact evaluation at %d random grid points (kde_at, \"exact\", %d threads): %.2f s\n",
            n_sub, max(threads), now() - t0))
cat(sprintf("accuracy: ours vs exact     : %s\n", fmt_rel(rel_diff(c(fit2$estimate)[pick], exact2))))
if (have_ks) {
  bk <- bk_fun()
  stopifnot(max(abs(bk$x1 - gx)) <= 1e-12 * max(abs(gx)), max(abs(bk$x2 - gy)) <= 1e-12 * max(abs(gy)))
  cat(sprintf("          bkde2D vs exact   : %s\n", fmt_rel(rel_diff(c(bk$fhat)[pick], exact2))))
  cat(sprintf("          ours vs bkde2D    : %s (whole grid)\n",
              fmt_rel(rel_diff(c(fit2$estimate), c(bk$fhat)))))
}
cat(sprintf("          threads agree     : max |kde(1 thread) - kde(%d threads)| = %.2g\n",
            max(threads), max(abs(fit2$estimate -
                                  kde(X, bandwidth = hh, gridsize = 101, n_threads = max(threads),
                                      verbose = FALSE)$estimate))))

# ------------------------------------------------------------------- issue 16: default grid
# What a user types: kde(B, bandwidth = c(0.1, 0.1)), B = 1e6 x 2 standard normal, the default
# 51 x 51 output grid and method = "auto" (which bins on its own grid, the output grid refined to
# a step of at most h / 4), vs KernSmooth::bkde2D(B, c(0.1, 0.1), gridsize = c(101, 101)) with
# its default range. Accuracy: max |estimate - exact| over BENCH_KDE_SUB random points of each
# one's own grid, relative to that estimate's peak; met when ours is no larger than bkde2D's.
set.seed(20260216)
B <- matrix(rnorm(2 * n), ncol = 2)
hb <- c(0.1, 0.1)
fitb <- kde(B, bandwidth = hb, n_threads = 1, verbose = FALSE)
specb <- localmean:::kde_frame(fitb, "auto")$spec
cat(sprintf("\n-- issue 16: kde(B, bandwidth = c(0.1, 0.1)), B = %s x 2 N(0, 1), default %s grid, method chosen: %s; binning grid %s nodes, steps (%.4f, %.4f) = h / (%.1f, %.1f) --\n",
            format(n, big.mark = ","), paste(lengths(fitb$grid), collapse = " x "), fitb$method,
            paste(specb$gridsize, collapse = " x "),
            diff(specb$grid_range[, 1]) / (specb$gridsize[1] - 1),
            diff(specb$grid_range[, 2]) / (specb$gridsize[2] - 1),
            hb[1] / (diff(specb$grid_range[, 1]) / (specb$gridsize[1] - 1)),
            hb[2] / (diff(specb$grid_range[, 2]) / (specb$gridsize[2] - 1))))
fns <- list()
bkb_fun <- function() KernSmooth::bkde2D(B, bandwidth = hb, gridsize = c(101L, 101L))
if (have_ks) fns$bkde2D <- bkb_fun
for (nt in threads) {
  local({
    nt <- nt
    fns[[paste0("kde_", nt)]] <<- function() kde(B, bandwidth = hb, n_threads = nt, verbose = FALSE)
  })
}
resb <- time_rounds(fns, reps)
cat(sprintf("(other processes used %.0f%% of the machine during these timings)\n",
            100 * resb[[1]]$other))
if (have_ks) cat(sprintf("KernSmooth::bkde2D(101 x 101)   : %s\n", fmt_rounds(resb$bkde2D)))
# max |a - exact| / max(a) over a random sample of the grid `axes`, a the estimate on it
grid_error <- function(est, axes) {
  pts <- as.matrix(expand.grid(axes))
  pick <- sort(sample.int(nrow(pts), n_sub))
  exact <- kde_at(fitb, pts[pick, , drop = FALSE], "exact", n_threads = max(threads))
  max(abs(c(est)[pick] - exact)) / max(est)
}
set.seed(20260217)
err_ours <- grid_error(fitb$estimate, fitb$grid)
cat(sprintf("accuracy vs exact at %d random points of its grid, of its peak: ours %.2e", n_sub,
            err_ours))
err_bk <- NA_real_
if (have_ks) {
  bkb <- bkb_fun()
  err_bk <- grid_error(bkb$fhat, list(bkb$x1, bkb$x2))
  cat(sprintf(", bkde2D %.2e (ours no worse: %s)", err_bk,
              if (err_ours <= err_bk) "met" else "MISSED"))
}
cat("\n")
for (nt in threads) {
  r <- resb[[paste0("kde_", nt)]]
  cat(sprintf("kde(), n_threads = %d            : %s\n", nt, fmt_rounds(r)))
  if (have_ks) {
    ratio <- r$median / resb$bkde2D$median
    cat(sprintf("   ratio ours / bkde2D: %.2fx (target <= 0.5x with accuracy no worse: %s)\n",
                ratio, verdict(if (err_ours <= err_bk) ratio else Inf)))
    summary_rows[[length(summary_rows) + 1L]] <- data.frame(
      case = "2-D default grid vs bkde2D", threads = nt, peer_s = resb$bkde2D$median,
      ours_s = r$median, ratio = ratio, target = verdict(if (err_ours <= err_bk) ratio else Inf),
      peer_faults = resb$bkde2D$faults, ours_faults = r$faults)
  }
}
cat(sprintf("          threads agree     : max |kde(1 thread) - kde(%d threads)| = %.2g\n",
            max(threads), max(abs(fitb$estimate -
                                  kde(B, bandwidth = hb, n_threads = max(threads),
                                      verbose = FALSE)$estimate))))

if (length(summary_rows)) {
  cat("\nSummary (seconds and minor page faults are medians per call):\n")
  print(do.call(rbind, summary_rows), digits = 3, row.names = FALSE)
}
