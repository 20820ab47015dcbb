# Helpers shared by the benchmark scripts: sizes from the environment, and timing with a check
# of how busy the rest of the machine was.

env_num <- function(name, default) {
  v <- Sys.getenv(name)
  if (nzchar(v)) as.numeric(v) else default
}

# Thread counts to time, from BENCH_THREADS ("1,2" by default).
env_threads <- function() as.integer(strsplit(Sys.getenv("BENCH_THREADS", "1,2"), ",")[[1]])

# Median over `reps` runs of the elapsed seconds of f(), after one untimed warm-up run; a gc()
# precedes every run and is not timed. Wall time from bench::hires_time() when bench is
# installed (proc.time() resolves only milliseconds).
# Noise check: `other` is the share of the machine's CPU time (all cores) that OTHER processes
# used while the runs went on (from /proc/stat minus this process's CPU time), and `cpu` this
# process's CPU time over the elapsed time of the runs (about 2 when two threads are busy;
# not shown for runs too short to tell).
now <- if (requireNamespace("bench", quietly = TRUE)) {
  function() as.numeric(bench::hires_time())
} else {
  function() proc.time()[["elapsed"]]
}
cpu_jiffies <- function() {
  v <- tryCatch(as.numeric(strsplit(trimws(sub("^cpu", "", readLines("/proc/stat", n = 1L))),
                                    " +")[[1]]), error = function(e) rep(NA_real_, 8))
  c(busy = sum(v[c(1, 2, 3, 6, 7, 8)]), total = sum(v[1:8])) / 100  # USER_HZ = 100
}
own_cpu <- function() sum(proc.time()[c("user.self", "sys.self")])
# The CPU seconds (user + system) of `reps` runs of f after an untimed warm-up: on one thread its
# work even on a shared machine, where elapsed time includes waiting for a core.
cpu_seconds <- function(f, reps) {
  f()
  replicate(reps, {
    t <- system.time(f())
    t[["user.self"]] + t[["sys.self"]]
  })
}
time_it <- function(f, reps, warm_up = TRUE) {
  if (warm_up) f()
  j0 <- cpu_jiffies()
  c0 <- own_cpu()
  el <- cpu <- numeric(reps)
  for (i in seq_len(reps)) {
    invisible(gc(verbose = FALSE))
    p0 <- own_cpu()
    t0 <- now()
    f()
    el[i] <- now() - t0
    cpu[i] <- own_cpu() - p0
  }
  j1 <- cpu_jiffies()
  window <- j1[["total"]] - j0[["total"]]
  list(median = stats::median(el), times = el,
       cpu = if (sum(el) >= 0.3) sum(cpu) / sum(el) else NA_real_,
       other = if (window > 0) max(0, (j1[["busy"]] - j0[["busy"]]) - (own_cpu() - c0)) / window
               else NA_real_)
}
fmt_times <- function(tt, digits = 4) {
  f <- paste0("%.", digits, "f")
  sprintf(paste0(f, " s (runs: %s; cpu/elapsed %s; other processes %s of the machine)"),
          tt$median, paste(sprintf(f, tt$times), collapse = ", "),
          if (is.na(tt$cpu)) "n/a" else sprintf("%.2f", tt$cpu),
          if (is.na(tt$other)) "n/a" else sprintf("%.0f%%", 100 * tt$other))
}


# Minor page faults of this process so far (memory touched for the first time; costly on the VM
# used here, see the README).
minor_faults <- function() {
  s <- tryCatch(readLines("/proc/self/stat"), error = function(e) "")
  v <- strsplit(sub("^.*\\) ", "", s), " ")[[1]]
  if (length(v) >= 8) as.numeric(v[8]) else NA_real_  # field 10 of /proc/self/stat
}

# Interleaved timing (as in bench-binned.R): every function of `fns` runs once per round, in
# turn, for `reps` rounds after one untimed warm-up round; an untimed gc() precedes every call,
# so that peers and ours see the same allocator state. Per function: median elapsed seconds, all
# runs, median minor page faults per call, CPU time over elapsed time, and `other` (share of the
# machine's CPU used by other processes during all the rounds).
time_rounds <- function(fns, reps) {
  for (f in fns) f()
  j0 <- cpu_jiffies()
  c0 <- own_cpu()
  el <- cpu <- pf <- matrix(NA_real_, reps, length(fns), dimnames = list(NULL, names(fns)))
  for (i in seq_len(reps)) {
    for (k in names(fns)) {
      invisible(gc(verbose = FALSE))
      p0 <- own_cpu()
      f0 <- minor_faults()
      t0 <- now()
      fns[[k]]()
      el[i, k] <- now() - t0
      pf[i, k] <- minor_faults() - f0
      cpu[i, k] <- own_cpu() - p0
    }
  }
  j1 <- cpu_jiffies()
  window <- j1[["total"]] - j0[["total"]]
  other <- if (window > 0) max(0, (j1[["busy"]] - j0[["busy"]]) - (own_cpu() - c0)) / window else NA
  lapply(stats::setNames(names(fns), names(fns)), function(k) {
    list(median = stats::median(el[, k]), times = el[, k], faults = stats::median(pf[, k]),
         cpu = if (sum(el[, k]) >= 0.3) sum(cpu[, k]) / sum(el[, k]) else NA_real_, other = other)
  })
}
fmt_rounds <- function(tt) {
  sprintf("%.4f s (runs: %s; %.0f minor page faults = %.1f MB first touched; cpu/elapsed %s)",
          tt$median, paste(sprintf("%.4f", tt$times), collapse = ", "), tt$faults,
          tt$faults * 4096 / 2^20, if (is.na(tt$cpu)) "n/a" else sprintf("%.2f", tt$cpu))
}
session_header <- function() {
  cat(sprintf("R %s, localmean %s, %d cores, load average at start: %s\n",
              getRversion(), utils::packageVersion("localmean"), parallel::detectCores(),
              tryCatch(paste(readLines("/proc/loadavg", warn = FALSE), collapse = " "),
                       error = function(e) "unknown")))
}

# Batched interleaved timing, for calls of a few milliseconds: in each of `rounds` rounds every
# function of `fns` runs `batch` times in a row (one batch), the functions taking turns in an
# order that rotates from round to round, after one untimed warm-up call each and an untimed
# gc() before every batch. Per function: per-call wall seconds of each batch (`times`, from the
# high-resolution clock when bench is installed), their median, the per-call CPU seconds of
# each batch (`cpu`, from proc.time(), all threads) and their median; `other` is the share of
# the machine's CPU used by other processes during all the rounds.
time_batches <- function(fns, rounds, batch) {
  for (f in fns) f()
  j0 <- cpu_jiffies()
  c0 <- own_cpu()
  k <- length(fns)
  el <- cpu <- matrix(NA_real_, rounds, k, dimnames = list(NULL, names(fns)))
  for (r in seq_len(rounds)) {
    order <- ((seq_len(k) - 1L + (r - 1L)) %% k) + 1L
    for (j in order) {
      f <- fns[[j]]
      invisible(gc(verbose = FALSE))
      p0 <- own_cpu()
      t0 <- now()
      for (i in seq_len(batch)) f()
      el[r, j] <- (now() - t0) / batch
      cpu[r, j] <- (own_cpu() - p0) / batch
    }
  }
  j1 <- cpu_jiffies()
  window <- j1[["total"]] - j0[["total"]]
  other <- if (window > 0) max(0, (j1[["busy"]] - j0[["busy"]]) - (own_cpu() - c0)) / window else NA
  out <- lapply(stats::setNames(names(fns), names(fns)), function(k) {
    list(median = stats::median(el[, k]), times = el[, k], cpu_median = stats::median(cpu[, k]),
         cpu = cpu[, k])
  })
  out$other <- other
  out
}
fmt_batches <- function(tt) {
  sprintf("wall %.2f ms per call (batches %.2f-%.2f), CPU %.2f ms (%.2f-%.2f)",
          1e3 * tt$median, 1e3 * min(tt$times), 1e3 * max(tt$times), 1e3 * tt$cpu_median,
          1e3 * min(tt$cpu), 1e3 * max(tt$cpu))
}
