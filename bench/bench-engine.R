# Issue 29, the engine object: three timings side by side, each the median of repeated calls,
# the two contenders interleaved (the machine may be shared: the load average is printed).
#   (a) local_poly(dist ~ speed, cars, bandwidth = 3) + predict() at 50 points, against loess()
#       + predict(): <= 1 ms per call and <= 0.5x loess; also its floor, the fit's model frame
#       and the two engine calls, and those engine calls alone (a plain formula's fit makes no
#       model frame);
#   (b) a local logistic fit (degree 1, tricube, fixed bandwidth) on MASS::Pima.tr (type ~ glu)
#       with fitted values at the data, against locfit() at the same kernel and radius: <= 2x;
#   (c) 1-D bandwidth = "cv" at n = 800 against an install of main 63c023d (LOCALMEAN_MAINREF,
#       a library path; skipped without it), each in its own process, interleaved: >= 3x faster.
# Run: R_LIBS=<lib> LOCALMEAN_MAINREF=/work/lib/mainref Rscript bench/bench-engine.R
suppressPackageStartupMessages(library(localmean))
reps <- as.integer(Sys.getenv("BENCH_REPS", "5"))
load_now <- function() tryCatch(readLines("/proc/loadavg")[1L], error = function(e) NA)
cat("load average at start:", load_now(), "\n")

# Median seconds per call of each expression, interleaved over `rounds` of `inner` calls: the
# processor time (user + system, what the call costs whatever the machine's load) and, in
# attribute "elapsed", the wall-clock time (which a shared machine inflates).
timing <- Sys.getenv("BENCH_TIMING", "cpu")
seconds <- function(st) {
  if (timing == "elapsed") st[["elapsed"]] else st[["user.self"]] + st[["sys.self"]]
}
interleaved <- function(exprs, rounds = reps, inner = 50L) {
  times <- matrix(NA_real_, rounds, length(exprs), dimnames = list(NULL, names(exprs)))
  for (r in seq_len(rounds)) {
    for (k in seq_along(exprs)) {
      f <- exprs[[k]]
      times[r, k] <- seconds(system.time(for (i in seq_len(inner)) f())) / inner
    }
  }
  apply(times, 2L, stats::median)
}
cat("times:", timing, "(BENCH_TIMING=elapsed for wall-clock)\n")
verdict <- function(ok) if (ok) "met" else "NOT met"

# (a) cars
at <- data.frame(speed = seq(4, 25, length.out = 50))
ours_a <- function() predict(local_poly(dist ~ speed, cars, bandwidth = 3), at)
loess_a <- function() predict(stats::loess(dist ~ speed, cars), at)
# The floor of (a): the fit's model frame and the two engine calls (fits at the data, then at
# the 50 points) on an engine object built anew, as every fit builds one; the rest is R's work.
ns <- asNamespace("localmean")
spec_a <- local_poly(dist ~ speed, cars, bandwidth = 3)$spec
# (the fit and the predictions each in one engine call, as a fixed-bandwidth fit makes them)
engine_calls <- function() {
  spec_a$engine <- ns$engine_handle()
  ns$engine_fit_at_data(spec_a, 1L, FALSE)
  ns$engine_values(spec_a, as.matrix(at), 1L, FALSE)
}
floor_a <- function() {
  stats::model.frame(dist ~ speed, cars)
  engine_calls()
}
# A plain formula's fit builds no model frame (only its terms): the engine calls alone.
engine_a <- engine_calls
invisible(ours_a()); invisible(loess_a()); invisible(floor_a()); invisible(engine_a())
a <- interleaved(list(localmean = ours_a, loess = loess_a, floor = floor_a, engine = engine_a))
cat(sprintf("(a) cars fit + predict(50): localmean %.3f ms, loess %.3f ms, ratio %.2f: %s\n",
            1e3 * a[[1]], 1e3 * a[[2]], a[[1]] / a[[2]],
            verdict(a[[1]] <= 1e-3 && a[[1]] <= 0.5 * a[[2]])))
cat(sprintf("    floor (model frame + two engine calls) %.3f ms, %.2f of loess; the engine calls alone %.3f ms, %.2f\n",
            1e3 * a[[3]], a[[3]] / a[[2]], 1e3 * a[[4]], a[[4]] / a[[2]]))

# (b) Pima.tr local logistic, tricube of radius 60 (locfit's h is the tricube's radius)
if (requireNamespace("locfit", quietly = TRUE) && requireNamespace("MASS", quietly = TRUE)) {
  pima <- MASS::Pima.tr
  pima$yes <- as.numeric(pima$type == "Yes")
  radius <- 60
  ours_b <- function() fitted(local_poly(yes ~ glu, pima, family = "binomial", degree = 1,
                                         kernel = "tricube", bandwidth = radius))
  locfit_b <- function() {
    fitted(locfit::locfit(yes ~ locfit::lp(glu, h = radius, deg = 1), data = pima,
                          family = "binomial", ev = locfit::dat()))
  }
  agree <- max(abs(ours_b() - locfit_b()))
  b <- interleaved(list(localmean = ours_b, locfit = locfit_b), inner = 20L)
  cat(sprintf("(b) Pima.tr local logistic: localmean %.3f ms, locfit %.3f ms, ratio %.2f: %s (fits differ by at most %.1e)\n",
              1e3 * b[[1]], 1e3 * b[[2]], b[[1]] / b[[2]], verdict(b[[1]] <= 2 * b[[2]]), agree))
}

# (c) 1-D cv at n = 800, this library against main's, in separate processes
mainref <- Sys.getenv("LOCALMEAN_MAINREF")
if (nzchar(mainref)) {
  script <- tempfile(fileext = ".R")
  writeLines(c(
    "suppressPackageStartupMessages(library(localmean))",
    "set.seed(1); n <- 800; x <- runif(n); y <- sin(2 * pi * x) + rnorm(n, sd = 0.3)",
    "d <- data.frame(x, y); invisible(local_poly(y ~ x, d, bandwidth = 'cv'))",
    "t <- replicate(5, system.time(local_poly(y ~ x, d, bandwidth = 'cv')))",
    sprintf("t <- if ('%s' == 'elapsed') t['elapsed', ] else t['user.self', ] + t['sys.self', ]",
            timing),
    "cat(median(t))"), script)
  run <- function(lib) {
    as.numeric(system2(file.path(R.home("bin"), "Rscript"), script, stdout = TRUE,
                       env = paste0("R_LIBS=", lib)))
  }
  ours_lib <- .libPaths()[1L]
  cv <- matrix(NA_real_, reps, 2L, dimnames = list(NULL, c("localmean", "main")))
  for (r in seq_len(reps)) {
    cv[r, "localmean"] <- run(ours_lib)
    cv[r, "main"] <- run(mainref)
  }
  c_med <- apply(cv, 2L, stats::median)
  cat(sprintf("(c) 1-D cv, n = 800: this branch %.1f ms, main 63c023d %.1f ms, speed-up %.2fx: %s\n",
              1e3 * c_med[[1]], 1e3 * c_med[[2]], c_med[[2]] / c_med[[1]],
              verdict(c_med[[2]] >= 3 * c_med[[1]])))
}
cat("load average at end:", load_now(), "\n")
