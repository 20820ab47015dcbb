# Benchmark 3: leave-one-out cross-validated bandwidth, 1-D, n = 1e4, 50 candidates, against
# np::npregbw(xdat = x, ydat = y, bwmethod = "cv.ls", regtype = "lc" / "ll").
#
# Targets: >= 100x faster than np; bandwidth within 5% of np's (np's Gaussian bandwidth is the
# standard deviation, the same convention as ours).
#
# Run by hand, one R process, nothing else heavy on the machine:
#   Rscript bench/bench-cv.R
# Environment: BENCH_N (1e4), BENCH_REPS (3, our timings), BENCH_TREE_REPS (1, our timings with
#   method = "tree", which take minutes), BENCH_THREADS (1),
#   BENCH_NP ("auto": time np at n = 2000 and 5000, extrapolate O(n^2) to n, and also run np at
#   n itself when the extrapolation says it takes under BENCH_NP_MAX seconds (default 600);
#   "full": always run np at n; "small": only n = 2000 and 5000; "no": skip np).
#
# Ours: local_mean()/local_poly(degree = 1) with bandwidth = "cv" and
# control = local_control(n_candidates = 50); the timing includes the final fit at the data.
# method = "auto" (the default) scores large candidates with the binned strategy when n >= 1e4;
# method = "tree" (every candidate scored exactly) is reported as well. np is timed once per
# size (it is slow); ours is the median of BENCH_REPS runs (BENCH_TREE_REPS for "tree"; one run
# at the smaller sizes). Time of one R call each, so the first includes loading the future
# namespace etc.

suppressPackageStartupMessages(library(localmean))
have_np <- requireNamespace("np", quietly = TRUE)
if (!have_np) message("np is not installed: only our own timings are reported.")

# Shared helpers (env_num, time_it, fmt_times, ...), next to this script.
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])),
                 "common.R"))
n <- env_num("BENCH_N", 1e4)
reps <- env_num("BENCH_REPS", 3)
tree_reps <- env_num("BENCH_TREE_REPS", 1)  # method = "tree" takes minutes at n = 1e4
nt <- as.integer(env_num("BENCH_THREADS", 1))
np_mode <- Sys.getenv("BENCH_NP", "auto")
np_max <- env_num("BENCH_NP_MAX", 600)


cat("== bench-cv: leave-one-out CV bandwidth, 1-D, n =", format(n, big.mark = ","),
    ", 50 candidates ==\n")
cat(sprintf("R %s, localmean %s%s, %d cores, n_threads = %d, load average at start: %s\n",
            getRversion(), utils::packageVersion("localmean"),
            if (have_np) paste0(", np ", utils::packageVersion("np")) else "",
            parallel::detectCores(), nt,
            tryCatch(paste(readLines("/proc/loadavg", warn = FALSE), collapse = " "),
                     error = function(e) "unknown")))

set.seed(20260103)
x_all <- runif(n)
y_all <- sin(2 * pi * x_all) + 2 * x_all^2 + rnorm(n, sd = 0.5)
ctrl <- local_control(n_candidates = 50)

ours <- function(k, degree, method) {
  xs <- x_all[seq_len(k)]
  ys <- y_all[seq_len(k)]
  f <- function() {
    local_poly(xs, ys, degree = degree, bandwidth = "cv", method = method, control = ctrl,
               n_threads = nt, verbose = FALSE)
  }
  r <- if (k == n) (if (method == "tree") tree_reps else reps) else 1
  fit <- NULL
  tt <- time_it(function() fit <<- f(), r, warm_up = r > 1)  # single runs are not warmed up
  list(bw = fit$bandwidth, time = tt, method = fit$spec$method)
}

run_np <- function(k, regtype) {
  xs <- x_all[seq_len(k)]
  ys <- y_all[seq_len(k)]
  bw <- NULL
  t <- system.time(
    bw <- suppressMessages(np::npregbw(xdat = xs, ydat = ys, bwmethod = "cv.ls", regtype = regtype))
  )[["elapsed"]]
  list(bw = bw$bw, time = t, fval = bw$fval)
}

if (have_np) options(np.messages = FALSE)
rows <- list()
for (regtype in c("lc", "ll")) {
  degree <- if (regtype == "lc") 0 else 1
  cat(sprintf("\n-- regtype = \"%s\" (degree %d) --\n", regtype, degree))
  o_auto <- ours(n, degree, "auto")
  o_tree <- ours(n, degree, "tree")
  cat(sprintf("ours, method = \"auto\" (final strategy %s): h = %.5g, %s\n", o_auto$method,
              o_auto$bw, fmt_times(o_auto$time)))
  cat(sprintf("ours, method = \"tree\"                    : h = %.5g, %s\n", o_tree$bw,
              fmt_times(o_tree$time)))
  np_full <- NULL
  np_time_n <- NA_real_
  how <- "not run"
  if (have_np && np_mode != "no") {
    small <- list()
    if (np_mode != "full") {
      for (k in c(2000, 5000)) {
        if (k >= n) next
        s <- run_np(k, regtype)
        oa <- ours(k, degree, "auto")
        ot <- ours(k, degree, "tree")
        small[[as.character(k)]] <- s
        cat(sprintf("np at n = %5d: %.2f s, h = %.5g | ours at n = %d: auto h = %.5g (%.3f s), tree h = %.5g (%.3f s) | bw ratio auto/np %.4f, tree/np %.4f\n",
                    k, s$time, s$bw, k, oa$bw, oa$time$median, ot$bw, ot$time$median,
                    oa$bw / s$bw, ot$bw / s$bw))
      }
    }
    predicted <- NA_real_
    if (length(small) == 2L) {
      # O(n^2): scale the larger run; the exponent fitted to the two runs is shown as a check.
      expo <- log(small[["5000"]]$time / small[["2000"]]$time) / log(5000 / 2000)
      predicted <- small[["5000"]]$time * (n / 5000)^2
      cat(sprintf("np time extrapolated to n = %d as O(n^2) from n = 5000: %.1f s (exponent fitted to the two runs: %.2f)\n",
                  n, predicted, expo))
    }
    if (np_mode == "full" || (np_mode == "auto" && (is.na(predicted) || predicted <= np_max))) {
      np_full <- run_np(n, regtype)
      np_time_n <- np_full$time
      how <- "measured"
      cat(sprintf("np at n = %d (run once): %.2f s, h = %.5g\n", n, np_full$time, np_full$bw))
    } else if (!is.na(predicted)) {
      np_time_n <- predicted
      how <- "extrapolated O(n^2)"
      cat(sprintf("np at n = %d not run (predicted %.0f s > %g s); using the extrapolation\n", n,
                  predicted, np_max))
    }
  }
  if (!is.na(np_time_n)) {
    for (o in list(list(name = "auto", r = o_auto), list(name = "tree", r = o_tree))) {
      speed <- np_time_n / o$r$time$median
      bw_ratio <- if (!is.null(np_full)) o$r$bw / np_full$bw else NA_real_
      cat(sprintf("method = \"%s\": %.0fx faster than np (%s; target >= 100x: %s); bandwidth ours/np = %s (target within 5%%: %s)\n",
                  o$name, speed, how, if (speed >= 100) "met" else "MISSED",
                  if (is.na(bw_ratio)) "n/a at this n" else sprintf("%.4f", bw_ratio),
                  if (is.na(bw_ratio)) "see smaller n" else if (abs(bw_ratio - 1) <= 0.05) "met" else "MISSED"))
      rows[[length(rows) + 1L]] <- data.frame(
        regtype = regtype, method = o$name, ours_s = o$r$time$median, np_s = np_time_n,
        np_time = how, speedup = speed, h_ours = o$r$bw,
        h_np = if (is.null(np_full)) NA_real_ else np_full$bw, bw_ratio = bw_ratio)
    }
  }
}
if (length(rows)) {
  cat("\nSummary (ours: median seconds; np: one run):\n")
  print(do.call(rbind, rows), digits = 4, row.names = FALSE)
}
