# Seconds from Ctrl-C (SIGINT) to the end of each long-running path. Each path runs in a child R
# process: its data are made first, then the call starts and is interrupted `after` seconds in;
# R must then still evaluate code. A path is a function that makes the data and returns the
# long call as a function.
# Usage: R_LIBS=<library> Rscript tools/interrupt-latency.R [path ...]   (needs callr)
args <- commandArgs(trailingOnly = TRUE)
after <- as.numeric(Sys.getenv("LATENCY_AFTER", "2"))  # seconds into the call



paths <- list(
  impute_images = function() {
    x <- localmean::fashion_mnist("train")$x[seq_len(1e4), ] / 255
    set.seed(1)
    x[sample(length(x), length(x) %/% 5)] <- NA
    function() localmean::local_impute(x, image_dim = c(28, 28), verbose = FALSE)
  },
  impute_image_blocks = function() {
    x <- localmean::fashion_mnist("train")$x[seq_len(1e4), ] / 255
    set.seed(1)
    for (i in seq_len(nrow(x))) {
      r <- sample(0:18, 1)
      c <- sample(0:18, 1)
      x[i, outer((r + 1):(r + 10), (c + 1):(c + 10), function(a, b) (a - 1) * 28 + b)] <- NA
    }
    function() localmean::local_impute(x, image_dim = c(28, 28), verbose = FALSE)
  },
  impute_table = function() {
    set.seed(1)
    x <- matrix(stats::rnorm(2e4 * 50), ncol = 50)
    x[sample(length(x), length(x) %/% 5)] <- NA
    function() localmean::local_impute(x, verbose = FALSE)
  },
  trimap_60k = function() {
    x <- localmean::fashion_mnist("train")$x[seq_len(6e4), ] / 255
    function() localmean::trimap(x, verbose = FALSE)
  },
  lle_10k = function() {
    x <- localmean::fashion_mnist("train")$x[seq_len(1e4), ] / 255
    function() localmean::lle(x, ndim = 2, k = 10, verbose = FALSE)
  },
  poly_cv = function() {
    set.seed(1)
    x <- matrix(stats::runif(4e4), ncol = 2)
    y <- sin(6 * x[, 1])
    function() localmean::local_poly(x, y, bandwidth = "cv", verbose = FALSE)
  },
  kde_exact = function() {
    set.seed(1)
    x <- matrix(stats::rnorm(4e5), ncol = 2)
    function() localmean::kde(x, method = "exact", verbose = FALSE)
  },
  mean_shift = function() {
    set.seed(1)
    x <- matrix(stats::rnorm(1e5), ncol = 2)
    function() localmean::mean_shift(x, bandwidth = 0.05, verbose = FALSE)
  },
  medoid_shift = function() {
    set.seed(1)
    x <- matrix(stats::rnorm(4e4), ncol = 2)
    function() localmean::medoid_shift(x, bandwidth = 0.3, verbose = FALSE)
  },
  denoise = function() {
    set.seed(1)
    img <- matrix(stats::runif(1e6), 1000)
    function() localmean::local_denoise(img, verbose = FALSE)
  },
  classify_nn = function() {
    set.seed(1)
    x <- matrix(stats::rnorm(1e6), ncol = 10)
    cls <- factor(x[, 1] > 0)
    function() localmean::local_classify(x, cls, bandwidth = localmean::nn(30), verbose = FALSE)
  }
)
if (length(args)) paths <- paths[args]

measure <- function(name, path) {
  ready <- tempfile()
  child <- callr::r_bg(function(path, ready) {
    f <- path()
    file.create(ready)
    started <- Sys.time()
    res <- tryCatch(f(), interrupt = function(e) "interrupted")
    list(if (identical(res, "interrupted")) "interrupted" else "finished",
         as.double(difftime(Sys.time(), started, units = "secs")), sum(1:10))
  }, list(path, ready), libpath = .libPaths(), stdout = NULL, stderr = NULL, supervise = TRUE)
  while (!file.exists(ready) && child$is_alive()) Sys.sleep(0.05)
  Sys.sleep(after)
  running <- child$is_alive()
  sent <- Sys.time()
  child$interrupt()
  child$wait(300000)
  latency <- as.double(difftime(Sys.time(), sent, units = "secs"))
  if (child$is_alive()) child$kill()
  res <- tryCatch(child$get_result(), error = function(e) list(conditionMessage(e), NA, NA))
  data.frame(path = name, running_at_signal = running, outcome = res[[1]],
             latency_s = round(latency, 2), r_usable = identical(res[[3]], 55L))
}

out <- do.call(rbind, Map(measure, names(paths), paths))
print(out, row.names = FALSE)
