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
# Gaussian mean shift against ks::kms (issue 16): 3-D, four blobs (sd 1, centres 0 and 5 e_k),
# bandwidth 0.5 (H = diag(0.25, 3)), every point climbs: `mean_shift(x, bandwidth = 0.5)` with
# its defaults (tol = 1e-8 bandwidths, accelerated) against `kms(x, H = diag(0.25, 3))` with its
# defaults (a point stops when its step is below 1e-3 * min IQR, 0.0028 here, i.e. 0.006
# bandwidths: ks's tolerance is far looser than ours). Target: >= 20x faster at n = 1e4, same
# clusters. kms takes minutes at n = 1e4, so it is timed at BENCH_KS_N (4,000) by default and at
# 1e4 too with BENCH_KS_FULL=1. Agreement: the adjusted Rand index against kms's labels and
# against our unaccelerated climb (accelerate = FALSE), the largest distance from one of kms's
# modes to our nearest mode, and from every point's mode to its mode in the unaccelerated climb
# (in bandwidths).
#
#   Rscript bench/bench-meanshift.R
#   BENCH_KS_FULL=1 Rscript bench/bench-meanshift.R     # also kms at n = 1e4 (minutes)
# Environment: BENCH_N (default 2e4), BENCH_N_EXACT (5e3), BENCH_REPS (3), BENCH_THREADS ("1,2"),
# BENCH_PYTHON (/usr/bin/python3), BENCH_KS_N (4000), BENCH_KS_FULL (0), BENCH_SKIP_SKLEARN (0).

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

# ---- Gaussian mean shift, 3-D, against ks::kms ----------------------------------------------

blobs3 <- function(n, seed) {
  set.seed(seed)
  centres <- rbind(c(0, 0, 0), c(5, 0, 0), c(0, 5, 0), c(0, 0, 5))
  label <- sample.int(4, n, replace = TRUE)
  list(x = centres[label, ] + matrix(stats::rnorm(3 * n), ncol = 3), label = label)
}

# Largest distance (in bandwidths) from a row of `a` to the nearest row of `b`.
farthest_nearest <- function(a, b, h) {
  max(apply(a, 1, function(p) min(sqrt(colSums(((t(b) - p) / h)^2)))))
}

run_kms_case <- function(n, time_ks, seed = 3) {
  h3 <- 0.5
  cat(sprintf("\n== Gaussian mean shift, 3-D, n = %g, four blobs, bandwidth %g, every point climbs ==\n",
              n, h3))
  d <- blobs3(n, seed)
  ks <- NULL
  if (time_ks && requireNamespace("ks", quietly = TRUE)) {
    tk <- time_it(function() ks <<- ks::kms(d$x, H = diag(h3^2, 3)), 1, warm_up = FALSE)
    cat(sprintf("ks %s kms(x, H = diag(%g, 3)): %s, %d clusters, ARI vs truth %.4f\n",
                utils::packageVersion("ks"), h3^2, fmt_times(tk, 1), ks$nclust,
                adjusted_rand(ks$label, d$label)))
  } else {
    cat(if (time_ks) "ks: not installed\n" else
      "ks::kms not timed at this n (BENCH_KS_FULL=1 times it; minutes)\n")
  }
  plain <- mean_shift(d$x, bandwidth = h3, accelerate = FALSE, n_threads = max(threads),
                      verbose = FALSE)
  cat(sprintf("reference: the unaccelerated climb (accelerate = FALSE): %d clusters, %.1f local means per point\n",
              length(plain$size), mean(plain$iterations)))
  for (th in threads) {
    fit <- NULL
    tt <- time_it(function() {
      fit <<- mean_shift(d$x, bandwidth = h3, n_threads = th, verbose = FALSE)
    }, reps)
    cat(sprintf("localmean mean_shift(x, bandwidth = %g), %d thread%s: %s\n", h3, th,
                if (th > 1) "s" else "", fmt_times(tt, 3)))
    cat(sprintf("  %d clusters (sizes %s), %.1f local means per point; vs unaccelerated: ARI %.4f, largest point-mode distance %.1e bandwidths\n",
                length(fit$size), paste(utils::head(fit$size, 6), collapse = ", "),
                mean(fit$iterations), adjusted_rand(fit$cluster, plain$cluster),
                max(sqrt(rowSums(sweep(fit$point_modes - plain$point_modes, 2, h3, `/`)^2)))))
    if (!is.null(ks)) {
      ratio <- tk$median / tt$median
      cat(sprintf("  vs ks: ARI %.4f, farthest ks mode from our nearest mode %.3f bandwidths; ks / ours = %.1fx (target >= 20x: %s)\n",
                  adjusted_rand(fit$cluster, ks$label), farthest_nearest(ks$mode, fit$modes, h3),
                  ratio, if (ratio >= 20) "met" else "MISSED"))
    }
  }
  if (!is.null(ks)) {
    cat("  contingency table, ks labels (rows) x ours (columns), last fit:\n")
    print(table(ks = ks$label, localmean = fit$cluster))
  }
}

session_header()
cat("Mean shift benchmark; bandwidth", h, "\n")
if (Sys.getenv("BENCH_SKIP_SKLEARN") != "1") {
  run_case(sprintf("2-D, n = %g, five blobs; sklearn with bin seeding", n), n, TRUE, 1)
  run_case(sprintf("2-D, n = %g, exact (sklearn seeds at every point)", n_exact), n_exact, FALSE, 2)
}
ks_n <- env_num("BENCH_KS_N", 4000)
ks_full <- Sys.getenv("BENCH_KS_FULL") == "1"
run_kms_case(ks_n, TRUE)
if (ks_n != 1e4) run_kms_case(1e4, ks_full)
