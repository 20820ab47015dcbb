# Benchmark 4: memory of Nadaraya-Watson with n = 1e6 data points and m = 1e6 queries in 2-D.
#
# Target: peak resident set size (RSS) under 300 MB for the whole R process, as reported by
#   /usr/bin/time -v Rscript bench/bench-memory.R [binned|tree]   ("Maximum resident set size")
# or all cases at once with   sh bench/bench-memory.sh
#
# Cases (first argument):
#   binned  local_mean(x, y, bandwidth = h), Gaussian, method = "auto" (which should pick "binned"
#           in 2-D for large n; the script checks this, and if "auto" fails it says so and
#           measures method = "binned" given explicitly), then predict(fit, q)      [default]
#   tree    local_mean(x, y, bandwidth = h, kernel = "epanechnikov", method = "tree"), then
#           predict(fit, q)
#   full    the full 1-D model of bench-binned.R: local_poly(x, y, degree = 1, bandwidth = 0.02,
#           method = "binned", control = local_control(cutoff = 4, gridsize = 401)), x uniform
#           on [0, 1], then predict() at the 401 grid points (m is 401 here)
# Environment: BENCH_N (1e6), BENCH_M (1e6), BENCH_H (0.02; Gaussian sd or Epanechnikov
#   half-width, on data uniform on the unit square), BENCH_THREADS (2).
#
# The script also prints the process's own peak RSS (VmHWM from /proc/self/status) after each
# stage, and R's own heap high-water mark (gc() "max used"), which excludes C++ allocations.

suppressPackageStartupMessages(library(localmean))

args <- commandArgs(trailingOnly = TRUE)
case <- if (length(args)) args[[1]] else "binned"
stopifnot(case %in% c("binned", "tree", "full"))
# Shared helpers (env_num, time_it, fmt_times, ...), next to this script.
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])),
                 "common.R"))
n <- env_num("BENCH_N", 1e6)
m <- env_num("BENCH_M", 1e6)
h <- env_num("BENCH_H", 0.02)
nt <- as.integer(env_num("BENCH_THREADS", 2))

peak_rss_mb <- function() {
  s <- tryCatch(readLines("/proc/self/status"), error = function(e) character(0))
  v <- grep("^VmHWM:", s, value = TRUE)
  if (!length(v)) return(NA_real_)
  as.numeric(gsub("[^0-9]", "", v)) / 1024
}
r_heap_max_mb <- function() {
  g <- gc(verbose = FALSE)
  # "max used" columns: Ncells (56 bytes each on 64-bit) and Vcells (8 bytes each), in Mb.
  sum(g[, which(colnames(g) == "max used") + 1L])
}
stage <- function(label, seconds = NA) {
  cat(sprintf("%-34s peak RSS so far %7.1f MB | R heap max used %7.1f MB%s\n", label,
              peak_rss_mb(), r_heap_max_mb(),
              if (is.na(seconds)) "" else sprintf(" | %.2f s", seconds)))
}

cat(sprintf("== bench-memory (%s): %s, n = %s data, m = %s queries, h = %g, n_threads = %d ==\n",
            case, if (case == "full") "local linear, 1-D" else "Nadaraya-Watson, 2-D",
            format(n, big.mark = ","), format(if (case == "full") 401 else m, big.mark = ","),
            if (case == "full") 0.02 else h, nt))
cat(sprintf("R %s, localmean %s, load average at start: %s\n", getRversion(),
            utils::packageVersion("localmean"),
            tryCatch(paste(readLines("/proc/loadavg", warn = FALSE), collapse = " "),
                     error = function(e) "unknown")))
stage("R + localmean loaded")

set.seed(20260104)
if (case == "full") {
  x <- runif(n)
  y <- sin(2 * pi * x) + 0.5 * x + rnorm(n, sd = 0.3)
  q <- seq(min(x), max(x), length.out = 401)
  m <- length(q)
  h <- 0.02
} else {
  x <- matrix(runif(2 * n), ncol = 2, dimnames = list(NULL, c("x1", "x2")))
  y <- sin(2 * pi * x[, 1]) * cos(2 * pi * x[, 2]) + rnorm(n, sd = 0.3)
  q <- matrix(runif(2 * m), ncol = 2, dimnames = list(NULL, c("x1", "x2")))
}
invisible(gc(reset = TRUE, verbose = FALSE))
stage("data generated (x, y, q)")
data_mb <- (object.size(x) + object.size(y) + object.size(q)) / 2^20
cat(sprintf("  (x, y and q take %.1f MB)\n", as.numeric(data_mb)))

fit_once <- function(method) {
  if (case == "full") {
    local_poly(x, y, degree = 1, bandwidth = h, method = "binned", n_threads = nt,
               control = local_control(cutoff = 4, gridsize = 401), verbose = FALSE)
  } else if (case == "binned") {
    local_mean(x, y, bandwidth = h, method = method, n_threads = nt, verbose = FALSE)
  } else {
    local_mean(x, y, bandwidth = h, kernel = "epanechnikov", method = "tree", n_threads = nt,
               verbose = FALSE)
  }
}
fit <- NULL
t_fit <- system.time(fit <- tryCatch(fit_once("auto"), error = function(e) e))[["elapsed"]]
if (inherits(fit, "error")) {
  # Reported, then measured with the strategy "auto" should have picked.
  cat("  ERROR with method = \"auto\":", conditionMessage(fit), "\n")
  cat("  -> falling back to method = \"binned\" given explicitly (the numbers below are for that)\n")
  t_fit <- system.time(fit <- fit_once("binned"))[["elapsed"]]
}
cat(sprintf("  strategy used: %s; fitted values NA: %d; model object %.1f MB\n", fit$spec$method,
            sum(is.na(fit$fitted)), as.numeric(object.size(fit)) / 2^20))
if (case != "tree" && fit$spec$method != "binned") {
  cat("  NOTE: method = \"auto\" did not pick \"binned\" here\n")
}
stage("after fit (at the n data points)", t_fit)

t_pred <- system.time(p <- predict(fit, q, n_threads = nt))[["elapsed"]]
stage("after predict (m queries)", t_pred)
cat(sprintf("  predictions NA: %d, mean %.4f\n", sum(is.na(p)), mean(p, na.rm = TRUE)))

peak <- peak_rss_mb()
cat(sprintf("\nRESULT %s: peak RSS %.1f MB (target < 300 MB: %s); fit %.2f s + predict %.2f s = %.2f s\n",
            case, peak, if (is.na(peak)) "unknown" else if (peak < 300) "met" else "MISSED",
            t_fit, t_pred, t_fit + t_pred))
