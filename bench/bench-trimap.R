# TriMap on the full Fashion-MNIST training set (60000 x 784), against uwot's UMAP.
#
# Targets: on 2 threads, localmean::trimap() takes at most 0.5x the wall time of
# uwot::umap(); its global score is at least uwot's; and its 10-NN accuracy (leave-one-out vote
# of the 10 nearest neighbours in the layout) is >= 0.75.
# Both run with their defaults except n_threads = 2 (uwot's default n_sgd_threads = 0 keeps its
# optimisation on one thread; its neighbour search uses both). The images are converted to
# double first (outside the timings). Each method is timed once, after set.seed(1), without a
# warm-up run. Quality: localmean::embedding_quality(x, layout, labels, k = 10,
# max_points = 5000) for each layout (neighbour measures on 5000 evenly spaced points; the
# global score on all points). The quality measures take several minutes (reference BLAS).
# The 10-NN accuracy is also computed on all points (the layout's exact 10 nearest neighbours
# from the package's kd-tree, the same vote), since 5000 points leave a standard error of about
# 0.006.
# The Fashion-MNIST files come from Debian's dataset-fashion-mnist.
#
#   Rscript bench/bench-trimap.R    # about 15 minutes on 2 cores
# Environment: BENCH_THREADS (only its largest value is used; default 2), BENCH_N (use the
# first BENCH_N images; default all 60000).

suppressPackageStartupMessages(library(localmean))
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])),
                 "common.R"))
threads <- max(as.integer(strsplit(Sys.getenv("BENCH_THREADS", "2"), ",")[[1]]))
met <- function(ok) if (isTRUE(ok)) "met" else "MISSED"

session_header()
fm <- fashion_mnist("train")
n <- min(env_num("BENCH_N", nrow(fm$x)), nrow(fm$x))
x <- fm$x[seq_len(n), , drop = FALSE]
storage.mode(x) <- "double"
labels <- fm$label[seq_len(n)]
cat(sprintf("Fashion-MNIST train: %d x %d, %d threads\n", nrow(x), ncol(x), threads))

layouts <- list()
tt <- list()
tt$trimap <- time_it(function() {
  set.seed(1)
  layouts$trimap <<- trimap(x, n_threads = threads, verbose = FALSE)$layout
}, 1, warm_up = FALSE)
cat("localmean trimap():", fmt_times(tt$trimap, 1), "\n")
if (requireNamespace("uwot", quietly = TRUE)) {
  tt$uwot <- time_it(function() {
    set.seed(1)
    layouts$uwot <<- uwot::umap(x, n_threads = threads)
  }, 1, warm_up = FALSE)
  cat(sprintf("uwot %s umap():", utils::packageVersion("uwot")), fmt_times(tt$uwot, 1), "\n")
  ratio <- tt$trimap$median / tt$uwot$median
  cat(sprintf("time ratio trimap / umap = %.2f (target <= 0.5: %s)\n", ratio, met(ratio <= 0.5)))
} else {
  cat("uwot: not installed\n")
}

quality <- list()
for (m in names(layouts)) {
  t0 <- now()
  quality[[m]] <- embedding_quality(x, layouts[[m]], labels, k = 10, max_points = 5000)
  cat(sprintf("embedding_quality(%s): %.0f s\n", m, now() - t0))
}
cat("\nQuality (k = 10, max_points = 5000):\n")
print(round(do.call(cbind, quality), 4))
# Leave-one-out 10-NN vote of every point in a 2-D layout.
knn_accuracy_all <- function(layout) {
  nn <- localmean:::cpp_knn_graph(layout, layout, 10L, TRUE, threads, FALSE)$index
  localmean:::knn_vote_accuracy(nn, labels, seq_len(nrow(layout)))
}
all_acc <- vapply(layouts, knn_accuracy_all, 0)
cat("10-NN accuracy on all points:",
    paste(sprintf("%s %.4f", names(all_acc), all_acc), collapse = ", "), "\n")
q <- quality$trimap
cat(sprintf("TriMap 10-NN accuracy %.4f on %d points, %.4f on all (target >= 0.75: %s / %s)\n",
            q[["knn_accuracy"]], min(n, 5000L), all_acc[["trimap"]],
            met(q[["knn_accuracy"]] >= 0.75), met(all_acc[["trimap"]] >= 0.75)))
if (!is.null(quality$uwot)) {
  cat(sprintf("global score: TriMap %.4f, UMAP %.4f (target TriMap >= UMAP: %s)\n",
              q[["global_score"]], quality$uwot[["global_score"]],
              met(q[["global_score"]] >= quality$uwot[["global_score"]])))
}
