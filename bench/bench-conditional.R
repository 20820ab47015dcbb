# Conditional densities (issue 31): likelihood cross-validation of the bandwidths of f(y | x)
# (kde(y ~ x, bandwidth = "mlcv")) and conditional quantiles at 100 points, against
# np::npcdensbw(bwmethod = "cv.ml") and np::npqreg() with the same Gaussian kernels when np is
# installed (np runs once per size; the quantiles' ratio per tau from 3 tau in one call, and that
# of one tau alone). CPU time (user + sys) of this process, so that other load on
# the machine counts less; the load average is printed. Then the scores of cross-validation
# (cv.ml and cv.ls) with one numeric predictor and with a numeric and a factor predictor against
# np::npcdensbw() on the same data (n = BENCH_SCORE_N): both bandwidth sets scored by one
# function, ours at fixed bandwidths.
#
#   BENCH_SIZES=500,1000,2000 BENCH_REPS=2 R_LIBS=<np's library>:<localmean's> \
#     Rscript bench/bench-conditional.R
# Environment: BENCH_SIZES ("500,1000,2000"), BENCH_REPS (3), BENCH_SCORE_N (200; 0: no score
# section).

suppressPackageStartupMessages(library(localmean))
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])
source(file.path(dirname(script), "common.R"))
sizes <- as.integer(strsplit(Sys.getenv("BENCH_SIZES", "500,1000,2000"), ",")[[1]])
reps <- env_num("BENCH_REPS", 3)
has_np <- requireNamespace("np", quietly = TRUE)
if (has_np) options(np.messages = FALSE)

cpu_of <- function(f) {
  p0 <- own_cpu()
  value <- f()
  list(cpu = own_cpu() - p0, value = value)
}

cond_data <- function(n) {
  set.seed(1)
  x <- runif(n)
  data.frame(x = x, y = sin(2 * pi * x) + rnorm(n, sd = 0.2 + 0.4 * x))
}

# One small untimed run first: R compiles the package's functions to byte code on their first
# calls (the package is installed without byte compilation), a one-off cost per session.
# (twice: the compiler takes some functions only at their second call)
for (warm_up in 1:2) {
  warm <- kde(y ~ x, cond_data(100), bandwidth = "mlcv", n_threads = 1, verbose = FALSE)
  invisible(predict(warm, data.frame(x = 0.5), type = "quantile", tau = 0.5, n_threads = 1))
}

cat(sprintf("load average: %s\n", paste(readLines("/proc/loadavg"), collapse = " ")))
for (n in sizes) {
  d <- cond_data(n)
  at <- data.frame(x = seq(0.01, 0.99, length.out = 100))
  cat(sprintf("\nn = %d: y ~ x, Gaussian kernels, 1 thread\n", n))
  bw <- qs <- q1 <- numeric(reps)
  for (r in seq_len(reps)) {  # interleaved: selection, then quantiles
    sel <- cpu_of(function() {
      kde(y ~ x, d, bandwidth = "mlcv", n_threads = 1, verbose = FALSE)
    })
    bw[r] <- sel$cpu
    fit <- sel$value
    # (10 calls a run: one call takes a few ms, near the clock's resolution)
    qs[r] <- cpu_of(function() {
      for (k in 1:10) predict(fit, at, type = "quantile", tau = c(0.1, 0.5, 0.9), n_threads = 1)
    })$cpu / 10
    q1[r] <- cpu_of(function() {
      for (k in 1:10) predict(fit, at, type = "quantile", tau = 0.5, n_threads = 1)
    })$cpu / 10
  }
  cat(sprintf("  localmean mlcv: %.3f s CPU (runs %s); h = %s, cv log-lik %.5f per obs\n",
              median(bw), paste(sprintf("%.3f", bw), collapse = ", "),
              paste(signif(c(fit$bandwidth$h, fit$bandwidth$y), 4), collapse = ", "),
              fit$cv_loglik))
  cat(sprintf("  localmean quantiles (100 points, 3 tau): %.4f s CPU (runs %s); 1 tau: %.4f s\n",
              median(qs), paste(sprintf("%.4f", qs), collapse = ", "), median(q1)))
  if (!has_np) {
    cat("  np is not installed: no comparison (install.packages(\"np\"))\n")
    next
  }
  npbw <- cpu_of(function() {
    np::npcdensbw(y ~ x, data = d, bwmethod = "cv.ml", cxkertype = "gaussian",
                  cykertype = "gaussian")
  })
  ours_at_np <- kde(y ~ x, d, bandwidth = c(npbw$value$xbw, npbw$value$ybw))
  np_score <- asNamespace("localmean")$cdens_at_data(
    ours_at_np, ours_at_np$bandwidth, asNamespace("localmean")$cdens_search_specs(ours_at_np, 1L),
    leave_out = TRUE)
  np_score <- mean(log(pmax(np_score, .Machine$double.xmin)))
  npq <- cpu_of(function() {
    np::npqreg(bws = np::npcdistbw(y ~ x, data = d, bws = c(npbw$value$ybw, npbw$value$xbw),
                                   bandwidth.compute = FALSE), tau = 0.5, exdat = at)
  })
  cat(sprintf("  np::npcdensbw: %.1f s CPU; h = %s; cv log-lik at np's h (ours) %.5f\n",
              npbw$cpu, paste(signif(c(npbw$value$xbw, npbw$value$ybw), 4), collapse = ", "),
              np_score))
  cat(sprintf("  selection %.0fx faster (target >= 100x: %s); score ours - np's %.2e (target >= 0: %s)\n",
              npbw$cpu / median(bw), if (npbw$cpu / median(bw) >= 100) "met" else "MISSED",
              fit$cv_loglik - np_score, if (fit$cv_loglik >= np_score - 1e-8) "met" else "MISSED"))
  cat(sprintf(paste0("  np::npqreg (one tau): %.2f s CPU; quantiles %.0fx faster per tau ",
                     "(target >= 50x: %s); one tau alone %.0fx\n"),
              npq$cpu, 3 * npq$cpu / median(qs),
              if (3 * npq$cpu / median(qs) >= 50) "met" else "MISSED", npq$cpu / median(q1)))
}

# ---- Scores of the cross-validated bandwidths against np's, on the same objective ----
score_n <- env_num("BENCH_SCORE_N", 200)
if (has_np && score_n > 0) {
  ns <- asNamespace("localmean")
  set.seed(11)
  sd <- data.frame(x = runif(score_n), g = factor(sample(c("a", "b", "c"), score_n, TRUE)))
  sd$y <- sin(2 * pi * sd$x) + as.integer(sd$g) / 2 + rnorm(score_n, sd = 0.2 + 0.4 * sd$x)
  # mean leave-one-out log-likelihood (higher is better) and the LSCV criterion (lower is better)
  mlcv_of <- function(fit) {
    loo <- ns$cdens_at_data(fit, fit$bandwidth, ns$cdens_search_specs(fit, 1L), leave_out = TRUE)
    mean(log(pmax(loo, .Machine$double.xmin)))
  }
  lscv_of <- function(fit) ns$cdens_lscv_score(fit, fit$bandwidth)
  cat(sprintf("\nscores, n = %d, Gaussian kernels (np: default nmulti), load average %s\n", score_n,
              readLines("/proc/loadavg")))
  cases <- list(list("y ~ x", "mlcv", "cv.ml", mlcv_of, 1),
                list("y ~ x + g", "mlcv", "cv.ml", mlcv_of, 1),
                list("y ~ x", "lscv", "cv.ls", lscv_of, -1),
                list("y ~ x + g", "lscv", "cv.ls", lscv_of, -1))
  for (case in cases) {
    form <- stats::as.formula(case[[1]])
    ours <- cpu_of(function() kde(form, sd, bandwidth = case[[2]], n_threads = 1, verbose = FALSE))
    theirs <- cpu_of(function() np::npcdensbw(form, data = sd, bwmethod = case[[3]]))
    at_np <- kde(form, sd, bandwidth = c(theirs$value$xbw, theirs$value$ybw))
    a <- case[[4]](ours$value)
    b <- case[[4]](at_np)
    better <- case[[5]] * (a - b)  # > 0: ours better
    cat(sprintf("  %-10s %s: ours %.8f (%.2f s), np's %.8f (%.1f s); ours %s by %.2e: %s\n",
                case[[1]], case[[3]], a, ours$cpu, b, theirs$cpu,
                if (better >= 0) "better" else "worse", abs(a - b),
                if (better >= -1e-8) "met" else "MISSED"))
    cat(sprintf("             bandwidths ours %s; np's %s\n",
                paste(signif(unlist(ours$value$bandwidth), 4), collapse = ", "),
                paste(signif(c(theirs$value$xbw, theirs$value$ybw), 4), collapse = ", ")))
  }
}
