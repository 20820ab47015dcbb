# Locally linear embedding of a swiss roll, against scikit-learn and CRAN's lle.
#
# Targets:
#   * n = 2e4: localmean::lle(x, ndim = 2, k = 12, reg = 1e-3) at most as slow as sklearn's
#     LocallyLinearEmbedding(n_neighbors = 12, n_components = 2, reg = 1e-3,
#     eigen_solver = "arpack") (ratio ours / sklearn <= 1), with the same layout: Procrustes
#     correlation >= 0.99;
#   * n = 2000: >= 50x faster than CRAN's lle::lle(x, m = 2, k = 12, reg = 2).
# Swiss roll: t = 1.5 pi (1 + 2 u), height 21 u', x = (t cos t, height, t sin t), fixed seed.
# Procrustes correlation: each layout centred, every column of the peer's layout regressed on
# ours (lm with intercept, i.e. the best linear map, which allows any rotation, reflection and
# per-axis scale), and sqrt(R^2) averaged over the two columns; the canonical correlations of
# the two layouts are printed too. LLE fixes a layout only up to such a map (eigenvectors of
# close eigenvalues may mix).
# sklearn (Debian's python3-sklearn, /usr/bin/python3) reads the same data from a binary file;
# only fit_transform() is timed inside Python (median of BENCH_REPS fits, random_state = 0). It
# is single-threaded here (n_jobs = None, numpy on the reference BLAS). The wall time of the
# whole Python process (start-up, imports, I/O and all the fits) is printed too.
# CRAN's lle 1.1 is archived; it is used when installed in BENCH_LIB (see the README). Its
# reg = 2 adds 0.1^2 / k * trace(G) (0.01 / k; the help page says "trace divided by k"), which
# for k = 12 is 8.3e-4 * trace, the closest of its three codes to our 1e-3 * trace (reg = 1 uses
# eigenvalues of G, reg = 3 the constant 3e-3). It is timed once (BENCH_CRAN_REPS) and prints a
# lot, which is captured and dropped.
#
#   Rscript bench/bench-lle.R
# Environment: BENCH_N (default 2e4), BENCH_N_CRAN (2000), BENCH_REPS (3), BENCH_CRAN_REPS (1),
# BENCH_THREADS ("1,2"), BENCH_PYTHON (/usr/bin/python3), BENCH_LIB (/tmp/benchlib).

suppressPackageStartupMessages(library(localmean))
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])),
                 "common.R"))
n <- env_num("BENCH_N", 2e4)
n_cran <- env_num("BENCH_N_CRAN", 2000)
reps <- env_num("BENCH_REPS", 3)
cran_reps <- env_num("BENCH_CRAN_REPS", 1)
threads <- env_threads()
python <- Sys.getenv("BENCH_PYTHON", "/usr/bin/python3")
lib <- Sys.getenv("BENCH_LIB", "/tmp/benchlib")
k <- 12
reg <- 1e-3

swiss_roll <- function(n, seed) {
  set.seed(seed)
  t <- 1.5 * pi * (1 + 2 * stats::runif(n))
  h <- 21 * stats::runif(n)
  cbind(t * cos(t), h, t * sin(t))
}

# Mean over the peer's columns of sqrt(R^2) of lm(peer column ~ our layout), both centred.
procrustes_cor <- function(ours, peer) {
  ours <- scale(ours, scale = FALSE)
  peer <- scale(peer, scale = FALSE)
  r2 <- apply(peer, 2L, function(p) summary(stats::lm(p ~ ours))$r.squared)
  c(linear = mean(sqrt(r2)), cancor = stats::cancor(ours, peer)$cor)
}
fmt_agreement <- function(a) {
  sprintf("Procrustes correlation (linear map) %.5f; canonical correlations %s", a[["linear"]],
          paste(sprintf("%.5f", a[-1]), collapse = ", "))
}
met <- function(ok) if (isTRUE(ok)) "met" else "MISSED"

# sklearn: the median time of `reps` fit_transform() calls, the whole process's wall time and
# the layout.
sklearn_lle <- function(x) {
  data <- tempfile(fileext = ".bin")
  out <- tempfile(fileext = ".bin")
  writeBin(as.vector(x), data)
  code <- sprintf(paste(
    "import numpy as np, time, sklearn",
    "from sklearn.manifold import LocallyLinearEmbedding",
    "x = np.ascontiguousarray(np.fromfile('%s', dtype='<f8').reshape(%d, %d).T)",
    "times = []",
    "for r in range(%d):",
    "    t0 = time.perf_counter()",
    "    y = LocallyLinearEmbedding(n_neighbors=%d, n_components=2, reg=%g,",
    "                               eigen_solver='arpack', random_state=0).fit_transform(x)",
    "    times.append(time.perf_counter() - t0)",
    "y.T.astype('<f8').tofile('%s')",
    "print(sklearn.__version__, np.median(times), ' '.join('%%.4f' %% t for t in times))",
    sep = "\n"), data, ncol(x), nrow(x), reps, k, reg, out)
  script <- tempfile(fileext = ".py")
  writeLines(code, script)
  t0 <- now()
  res <- system2(python, script, stdout = TRUE)
  wall <- now() - t0
  parts <- strsplit(res[length(res)], " ")[[1]]
  list(version = parts[1], time = as.numeric(parts[2]), times = parts[-(1:2)], wall = wall,
       layout = matrix(readBin(out, "double", 2 * nrow(x)), nrow(x)))
}

session_header()
cat(sprintf("Locally linear embedding of a swiss roll: ndim = 2, k = %d, reg = %g (times trace)\n",
            k, reg))

cat(sprintf("\n== n = %g: localmean vs scikit-learn (arpack) ==\n", n))
x <- swiss_roll(n, 1)
sk <- tryCatch(sklearn_lle(x), error = function(e) NULL, warning = function(w) NULL)
if (is.null(sk)) {
  cat("sklearn: not available (", python, ")\n")
} else {
  cat(sprintf("sklearn %s fit_transform: %.3f s (median of %d: %s s), single-threaded; whole Python process %.2f s wall (start-up, imports, I/O and %d fits)\n",
              sk$version, sk$time, reps, paste(sk$times, collapse = ", "), sk$wall, reps))
}
for (th in threads) {
  fit <- NULL
  tt <- time_it(function() {
    fit <<- localmean::lle(x, ndim = 2, k = k, reg = reg, n_threads = th, verbose = FALSE)
  }, reps)
  cat(sprintf("localmean lle, %d thread%s: %s\n", th, if (th > 1) "s" else "", fmt_times(tt, 3)))
  if (!is.null(sk)) {
    a <- procrustes_cor(fit$layout, sk$layout)
    cat(sprintf("  ours / sklearn = %.2f (target <= 1: %s); %s (target >= 0.99: %s)\n",
                tt$median / sk$time, met(tt$median <= sk$time), fmt_agreement(a),
                met(a[["linear"]] >= 0.99)))
  }
}
cat(sprintf("  our eigenvalues: %s\n", paste(sprintf("%.3g", fit$eigenvalues), collapse = ", ")))

cat(sprintf("\n== n = %g: localmean vs CRAN lle::lle(x, m = 2, k = %d, reg = 2) ==\n", n_cran, k))
x <- swiss_roll(n_cran, 2)
.libPaths(c(lib, .libPaths()))
if (!requireNamespace("lle", quietly = TRUE)) {
  cat("CRAN lle: not installed in", lib, "(see bench/README.md)\n")
} else {
  suppressPackageStartupMessages(library(lle, lib.loc = lib))  # its code needs MASS attached
  cran <- NULL
  tc <- time_it(function() invisible(utils::capture.output(
    cran <<- lle::lle(x, m = 2, k = k, reg = 2))), cran_reps, warm_up = FALSE)
  cat(sprintf("CRAN lle %s: %s\n", utils::packageVersion("lle"), fmt_times(tc, 2)))
  for (th in threads) {
    fit <- NULL
    tt <- time_it(function() {
      fit <<- localmean::lle(x, ndim = 2, k = k, reg = reg, n_threads = th, verbose = FALSE)
    }, reps)
    cat(sprintf("localmean lle, %d thread%s: %s\n", th, if (th > 1) "s" else "",
                fmt_times(tt, 4)))
    cat(sprintf("  CRAN lle / ours = %.0fx faster (target >= 50x: %s); %s\n",
                tc$median / tt$median, met(tc$median / tt$median >= 50),
                fmt_agreement(procrustes_cor(fit$layout, cran$Y))))
  }
  same <- localmean::lle(x, ndim = 2, k = k, reg = 0.01 / k, verbose = FALSE)
  cat(sprintf("  with CRAN's regularisation (reg = 0.01 / k = %.3g): %s\n", 0.01 / k,
              fmt_agreement(procrustes_cor(same$layout, cran$Y))))
}
