# Temporal local mean (causal self-attention) against the plain-R matrix version.
#
# Targets:
#   * T = 8192, d = 64, causal, softmax kernel: temporal_local_mean(x) >= 10x faster than the
#     plain-R softmax(X X' / sqrt(d) + mask) X, with the same result (max abs difference printed)
#     and peak memory O(T d): the plain-R version needs T x T matrices (512 MB each);
#   * T = 1e5, d = 64, a causal window of 256 steps (time_bandwidth = 256): time and memory.
# Memory: each case runs once more in a child Rscript, which reports the growth of its peak
# resident set size (VmHWM in /proc/self/status) over the run, after the data were generated.
#
#   Rscript bench/bench-attention.R
# Environment: BENCH_T (8192), BENCH_D (64), BENCH_T_LONG (1e5), BENCH_WINDOW (256),
# BENCH_REPS (3; the plain-R version runs once), BENCH_THREADS ("1,2").

suppressPackageStartupMessages(library(localmean))
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])
source(file.path(dirname(script), "common.R"))
n <- env_num("BENCH_T", 8192)
d <- env_num("BENCH_D", 64)
n_long <- env_num("BENCH_T_LONG", 1e5)
window <- env_num("BENCH_WINDOW", 256)
reps <- env_num("BENCH_REPS", 3)
threads <- env_threads()

peak_rss_mb <- function() {
  s <- tryCatch(readLines("/proc/self/status"), error = function(e) character(0))
  v <- grep("^VmHWM:", s, value = TRUE)
  if (length(v)) as.numeric(gsub("[^0-9]", "", v)) / 1024 else NA_real_
}
make_x <- function(n, d) {
  set.seed(1)
  matrix(stats::rnorm(n * d), n, d)
}
plain_attention <- function(x) {
  s <- tcrossprod(x) / sqrt(ncol(x))
  s[upper.tri(s)] <- -Inf
  s <- exp(s - apply(s, 1L, max))
  (s / rowSums(s)) %*% x
}
run_case <- function(case, x, nt) {
  switch(case,
    plain = plain_attention(x),
    causal = temporal_local_mean(x, scale = FALSE, n_threads = nt, verbose = FALSE),
    window = temporal_local_mean(x, time_bandwidth = window, scale = FALSE, n_threads = nt,
                                 verbose = FALSE))
}

# Child mode: Rscript bench-attention.R --child <case> <threads>
args <- commandArgs(trailingOnly = TRUE)
if (length(args) && args[[1]] == "--child") {
  case <- args[[2]]
  x <- make_x(if (case == "window") n_long else n, d)
  invisible(gc())
  before <- peak_rss_mb()
  y <- run_case(case, x, as.integer(args[[3]]))
  cat(sprintf("%.1f %.1f\n", before, peak_rss_mb()))
  quit(save = "no")
}
child_memory <- function(case, nt) {
  out <- system2(file.path(R.home("bin"), "Rscript"), c(script, "--child", case, nt),
                 stdout = TRUE)
  v <- as.numeric(strsplit(utils::tail(out, 1), " ")[[1]])
  sprintf("peak RSS %.0f MB, +%.0f MB over the %.0f MB before the call", v[2], v[2] - v[1], v[1])
}

session_header()
cat(sprintf("Causal self-attention, T = %d, d = %d (x: %.1f MB)\n", n, d, n * d * 8 / 2^20))
x <- make_x(n, d)
plain_time <- time_it(function() plain <<- plain_attention(x), 1, warm_up = FALSE)
cat("  plain R (T x T matrices):", fmt_times(plain_time), "\n")
cat("    memory:", child_memory("plain", 1), "\n")
speed <- numeric(0)
for (nt in threads) {
  tt <- time_it(function() ours <<- run_case("causal", x, nt), reps)
  speed[as.character(nt)] <- plain_time$median / tt$median
  cat(sprintf("  temporal_local_mean, %d thread%s: %s\n", nt, if (nt > 1) "s" else "",
              fmt_times(tt)))
  cat(sprintf("    speed-up over plain R %.1fx; max abs difference %.2e\n",
              speed[[as.character(nt)]], max(abs(ours - plain))))
  cat("    memory:", child_memory("causal", nt), "\n")
}
cat(sprintf("  target >= 10x faster: %s (best %.1fx)\n",
            if (max(speed) >= 10) "met" else "MISSED", max(speed)))
rm(x, plain, ours)
invisible(gc())

cat(sprintf("\nCausal window of %d steps, T = %d, d = %d (x: %.1f MB)\n", window, n_long, d,
            n_long * d * 8 / 2^20))
x <- make_x(n_long, d)
for (nt in threads) {
  tt <- time_it(function() run_case("window", x, nt), reps)
  cat(sprintf("  temporal_local_mean, %d thread%s: %s\n", nt, if (nt > 1) "s" else "",
              fmt_times(tt)))
  cat("    memory:", child_memory("window", nt), "\n")
}
