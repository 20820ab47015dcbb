# Mean shift against scikit-learn's MeanShift (Debian's python3-sklearn, run by /usr/bin/python3).
#
# Targets (issue 3):
#   * 2-D, n = 2e4, five blobs: faster than sklearn MeanShift(bin_seeding = TRUE), same clusters;
#   * exact (no seeding), n = 5e3: >= 20x faster than sklearn MeanShift(bin_seeding = FALSE).
# sklearn's MeanShift has only the flat kernel: a point moves to the mean of the data within
# `bandwidth`, which is our kernel = "uniform" with the same bandwidth. sklearn stops a seed when
# it moves less than 1e-3 bandwidths; we use the same tol. sklearn then keeps one centre among
# centres closer than the bandwidth and labels every point by its nearest centre; our points each
# climb (no seeding), or with seeds = "bin" only one seed per one-bandwidth grid cell (at the mean
# of its points; sklearn uses the cell centre); modes within merge_tol = 1 bandwidth are merged,
# the same rule, and with seeds every point joins its nearest mode, as in sklearn.
# Clusters are compared by the adjusted Rand index (1 = identical partitions).
#
#   Rscript bench/bench-meanshift.R
# Environment: BENCH_N (default 2e4), BENCH_N_EXACT (5e3), BENCH_REPS (3), BENCH_THREADS ("1,2"),
# BENCH_PYTHON (/usr/bin/python3).

suppressPackageStartupMessages(library(localmean))
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])),
                 "common.R"))
n <- env_num("BENCH_N", 2e4)
n_exact <- env_num("BENCH_N_EXACT", 5e3)
reps <- env_num("BENCH_REPS", 3)
threads <- env_threads()
python <- Sys.getenv("BENCH_PYTHON", "/usr/bin/python3")
h <- 1.5

blobs <- function(n, seed) {
  set.seed(seed)
  centres <- rbind(c(0, 0), c(8, 0), c(0, 8), c(8, 8), c(4, 14))
  label <- sample.int(5, n, replace = TRUE)
  list(x = centres[label, ] + matrix(stats::rnorm(2 * n), ncol = 2), label = label)
}

adjusted_rand <- function(a, b) {
  tab <- table(a, b)
  pairs <- function(v) sum(v * (v - 1) / 2)
  index <- pairs(tab)
  expected <- pairs(rowSums(tab)) * pairs(colSums(tab)) / pairs(length(a))
  top <- (pairs(rowSums(tab)) + pairs(colSums(tab))) / 2
  (index - expected) / (top - expected)
}

# sklearn timing (median of reps fits, in Python) and its labels.
sklearn_meanshift <- function(x, bin_seeding) {
  data <- tempfile(fileext = ".csv")
  labels <- tempfile(fileext = ".txt")
  utils::write.table(x, data, sep = ",", row.names = FALSE, col.names = FALSE)
  code <- sprintf(paste(
    "import numpy as np, time, sklearn",
    "from sklearn.cluster import MeanShift",
    "x = np.loadtxt('%s', delimiter=',')",
    "times = []",
    "for r in range(%d):",
    "    t0 = time.perf_counter()",
    "    fit = MeanShift(bandwidth=%g, bin_seeding=%s).fit(x)",
    "    times.append(time.perf_counter() - t0)",
    "np.savetxt('%s', fit.labels_, fmt='%%d')",
    "print(sklearn.__version__, np.median(times), len(fit.cluster_centers_))",
    sep = "\n"), data, reps, h, if (bin_seeding) "True" else "False", labels)
  script <- tempfile(fileext = ".py")
  writeLines(code, script)
  out <- system2(python, script, stdout = TRUE)
  parts <- strsplit(out[length(out)], " ")[[1]]
  list(version = parts[1], time = as.numeric(parts[2]), centres = as.integer(parts[3]),
       labels = scan(labels, quiet = TRUE))
}

run_case <- function(title, n, bin_seeding, seed) {
  cat("\n==", title, "==\n")
  d <- blobs(n, seed)
  sk <- tryCatch(sklearn_meanshift(d$x, bin_seeding), error = function(e) NULL)
  if (is.null(sk)) {
    cat("sklearn: not available (", python, ")\n")
  } else {
    cat(sprintf("sklearn %s MeanShift(bandwidth = %g, bin_seeding = %s): %.3f s (median of %d), %d clusters, ARI vs truth %.4f\n",
                sk$version, h, bin_seeding, sk$time, reps, sk$centres,
                adjusted_rand(sk$labels, d$label)))
  }
  seedings <- if (bin_seeding) list("bin", NULL) else list(NULL)
  for (seeds in seedings) for (th in threads) {
    fit <- NULL
    tt <- time_it(function() {
      fit <<- mean_shift(d$x, bandwidth = h, kernel = "uniform", tol = 1e-3, merge_tol = 1,
                         seeds = seeds, n_threads = th, verbose = FALSE)
    }, reps)
    cat(sprintf("localmean mean_shift(seeds = %s), %d thread%s: %s\n",
                if (is.null(seeds)) "NULL: every point climbs" else '"bin"', th,
                if (th > 1) "s" else "", fmt_times(tt, 3)))
    cat(sprintf("  %d clusters, ARI vs truth %.4f%s\n", length(fit$size),
                adjusted_rand(fit$cluster, d$label),
                if (is.null(sk)) "" else sprintf(", ARI vs sklearn %.4f; sklearn / ours = %.1fx",
                                                 adjusted_rand(fit$cluster, sk$labels),
                                                 sk$time / tt$median)))
  }
}

cat("Mean shift benchmark; bandwidth", h, "\n")
run_case(sprintf("2-D, n = %g, five blobs; sklearn with bin seeding", n), n, TRUE, 1)
run_case(sprintf("2-D, n = %g, exact (sklearn seeds at every point)", n_exact), n_exact, FALSE, 2)
