# Data: IDX files (the MNIST family's format), Fashion-MNIST from its Debian package, and a small
# subset shipped with the package.

#' Read an IDX file
#'
#' Reads the IDX format of the MNIST family of data sets: a magic number
#' giving the element type (unsigned or signed byte, 16- or 32-bit integer,
#' 32- or 64-bit float) and the number of dimensions, the dimensions, then
#' the data in row-major order, all big-endian. Gzip-compressed files
#' (`.gz`) are read directly.
#'
#' @param file Path to an IDX file, optionally gzip-compressed.
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return A vector for one dimension; a matrix for two; for three or more,
#'   a matrix with one row per item and the remaining dimensions flattened in
#'   row-major order (for images: pixel `(r - 1) * ncol + c`), with the item
#'   shape in the attribute `item_dim`. Integer types give integers, floats
#'   doubles.
#' @family data
#' @export
#' @examples
#' f <- tempfile(fileext = ".idx")
#' con <- file(f, "wb")
#' writeBin(as.raw(c(0, 0, 8, 2)), con)            # unsigned bytes, 2 dimensions
#' writeBin(c(2L, 3L), con, size = 4, endian = "big")
#' writeBin(as.raw(1:6), con)
#' close(con)
#' read_idx(f)
read_idx <- function(file, ...) {
  check_dots(...)
  if (!is.character(file) || length(file) != 1L || is.na(file)) {
    abort("{.arg file} must be a single file path.")
  }
  if (!file.exists(file)) abort("{.arg file} does not exist: {.file {file}}.")
  con <- gzfile(file, "rb")  # reads plain files too
  on.exit(close(con))
  magic <- readBin(con, "raw", 4L)
  if (length(magic) < 4L || magic[1L] != as.raw(0) || magic[2L] != as.raw(0)) {
    abort("{.file {file}} is not an IDX file (bad magic number).")
  }
  type <- idx_type(as.integer(magic[3L]), file)
  dims <- readBin(con, "integer", as.integer(magic[4L]), size = 4L, endian = "big")
  if (length(dims) != as.integer(magic[4L]) || any(dims < 0L)) {
    abort("{.file {file}} has a truncated or invalid header.")
  }
  total <- prod(as.double(dims))
  values <- readBin(con, type$what, total, size = type$size, signed = type$signed,
                    endian = "big")
  if (length(values) != total) {
    abort("{.file {file}} holds {length(values)} values; its header announces {total}.")
  }
  if (length(dims) == 1L) return(values)
  out <- matrix(values, nrow = dims[1L], byrow = TRUE)
  if (length(dims) > 2L) attr(out, "item_dim") <- dims[-1L]
  out
}

# The readBin() arguments of an IDX element type code.
idx_type <- function(code, file) {
  types <- list(
    "8" = list(what = "integer", size = 1L, signed = FALSE),
    "9" = list(what = "integer", size = 1L, signed = TRUE),
    "11" = list(what = "integer", size = 2L, signed = TRUE),
    "12" = list(what = "integer", size = 4L, signed = TRUE),
    "13" = list(what = "double", size = 4L, signed = TRUE),
    "14" = list(what = "double", size = 8L, signed = TRUE)
  )
  type <- types[[as.character(code)]]
  if (is.null(type)) abort("{.file {file}} has an unknown IDX element type ({code}).")
  type
}

fashion_classes <- c("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                     "Sneaker", "Bag", "Ankle boot")

#' Fashion-MNIST
#'
#' `fashion_mnist()` reads the Fashion-MNIST images (Xiao, Rasul and Vollgraf,
#' 2017): 28 x 28 grey-level pictures of clothing in ten classes, 60,000 for
#' training and 10,000 for testing. By default it reads the files installed
#' by Debian's `dataset-fashion-mnist` package
#' (`/usr/share/datasets/fashion-mnist`); elsewhere, download the four
#' `*-ubyte.gz` files from <https://github.com/zalandoresearch/fashion-mnist>
#' and give their folder as `path` (or set
#' `options(localmean.fashion_mnist_path =)`).
#'
#' @param split "test" or "train".
#' @param path Folder holding the IDX files (gzip-compressed or not).
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return A list with `x`, an integer matrix with one image per row and one
#'   pixel per column in row-major order (the pixel in row `r` and column `c`
#'   of an image, counted from the top left, is column `(r - 1) * 28 + c`;
#'   grey levels 0 to 255, 0 the background), `label`, a factor of class
#'   names, and `image_dim = c(28, 28)`. `matrix(x[i, ], 28, byrow = TRUE)`
#'   is image `i` as a matrix; [plot_images()] draws them.
#' @seealso [fashion_mnist_subset], a balanced subset shipped with the package.
#' @family data
#' @export
#' @examples
#' if (file.exists(file.path(fashion_mnist_path(), "t10k-labels-idx1-ubyte.gz"))) {
#'   test <- fashion_mnist("test")
#'   table(test$label)
#' }
fashion_mnist <- function(split = "test", path = NULL, ...) {
  check_dots(...)
  split <- check_choice(split, c("test", "train"))
  path <- path %||% fashion_mnist_path()
  prefix <- c(test = "t10k", train = "train")[[split]]
  images <- fashion_file(path, paste0(prefix, "-images-idx3-ubyte"))
  labels <- fashion_file(path, paste0(prefix, "-labels-idx1-ubyte"))
  x <- read_idx(images)
  attr(x, "item_dim") <- NULL
  y <- read_idx(labels)
  if (nrow(x) != length(y)) abort("The image and label files of {.val {split}} do not match.")
  list(x = x, label = factor(fashion_classes[y + 1L], levels = fashion_classes),
       image_dim = c(28L, 28L))
}

#' @rdname fashion_mnist
#' @export
fashion_mnist_path <- function(...) {
  check_dots(...)
  getOption("localmean.fashion_mnist_path", "/usr/share/datasets/fashion-mnist")
}

# The IDX file `name` in `path`, compressed or not, or a clear error saying how to get it.
fashion_file <- function(path, name, call = rlang::caller_env()) {
  candidates <- file.path(path, c(paste0(name, ".gz"), name))
  found <- candidates[file.exists(candidates)]
  if (length(found) == 0L) {
    abort(c("Fashion-MNIST file {.file {name}} not found in {.file {path}}.",
            i = "On Debian or Ubuntu: {.code sudo apt-get install dataset-fashion-mnist}.",
            i = "Elsewhere, download the four {.file *-ubyte.gz} files from
                 {.url https://github.com/zalandoresearch/fashion-mnist} and pass their folder
                 as {.arg path}."), call = call)
  }
  found[1L]
}

#' A balanced subset of Fashion-MNIST
#'
#' The first 50 test images of each of the ten Fashion-MNIST classes, in the
#' order of the test set: small enough to ship, large enough for the
#' embedding and imputation examples. Built by
#' `data-raw/fashion_mnist_subset.R` from Debian's `dataset-fashion-mnist`.
#'
#' @format A list with `x`, an integer matrix of 500 images (rows) by 784
#'   pixels in row-major order (grey levels 0 to 255; the pixel in row `r` and
#'   column `c` of an image, counted from the top left, is column
#'   `(r - 1) * 28 + c`), `label`, a factor of the ten class names, `index`,
#'   the images' rows in the test set, and `image_dim = c(28, 28)`.
#' @source Xiao, H., Rasul, K. and Vollgraf, R. (2017). Fashion-MNIST: a novel
#'   image dataset for benchmarking machine learning algorithms.
#'   arXiv:1708.07747. \doi{10.48550/arXiv.1708.07747}
#'   <https://github.com/zalandoresearch/fashion-mnist>.
#'   Copyright 2017 Zalando SE, MIT licence (see the package's COPYRIGHTS
#'   file).
#' @family data
"fashion_mnist_subset"

#' Directed word co-occurrence
#'
#' Counts how often every word of the vocabulary follows every other within
#' `window` tokens: the asymmetric similarity that asymmetric MDS
#' embeds. The text is lower-cased and split into words (letters and inner
#' apostrophes) by [tokenize_words()]; all of `text` is one stream, so a
#' window may run across elements. The vocabulary is the `vocab_size` most
#' frequent words (ties broken alphabetically); other words still occupy
#' their positions.
#'
#' @param text A character vector (for instance the lines of a novel).
#' @param vocab_size Number of words kept.
#' @param window How many following tokens count as co-occurring.
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return A list with `counts` (a `vocab_size` x `vocab_size` matrix:
#'   `counts[i, j]` is how often word j occurs within `window` tokens after
#'   word i), `prob` (the conditional frequencies P(j | i), rows summing to 1,
#'   or 0 for a word followed by no vocabulary word), `vocab` and `freq`
#'   (the words' counts in the text).
#' @family data
#' @export
#' @examples
#' text <- c("the cat sat on the mat", "the dog sat on the cat")
#' co <- word_cooccurrence(text, vocab_size = 5, window = 1)
#' co$counts
word_cooccurrence <- function(text, vocab_size = 200, window = 2, ...) {
  check_dots(...)
  if (!is.character(text)) abort("{.arg text} must be a character vector.")
  vocab_size <- check_count(vocab_size)
  window <- check_count(window)
  tokens <- tokenize_words(text)
  if (length(tokens) < 2L) abort("{.arg text} has fewer than two words.")
  freq <- table(tokens)
  freq <- freq[order(-freq, names(freq))]
  vocab <- names(freq)[seq_len(min(vocab_size, length(freq)))]
  v <- length(vocab)
  id <- match(tokens, vocab)
  counts <- numeric(v * v)
  for (offset in seq_len(min(window, length(id) - 1L))) {
    from <- id[seq_len(length(id) - offset)]
    to <- id[-seq_len(offset)]
    keep <- !is.na(from) & !is.na(to)
    counts <- counts + tabulate((from[keep] - 1L) * v + to[keep], v * v)
  }
  counts <- matrix(counts, v, v, byrow = TRUE, dimnames = list(vocab, vocab))
  totals <- rowSums(counts)
  prob <- counts / ifelse(totals > 0, totals, 1)
  list(counts = counts, prob = prob, vocab = vocab,
       freq = stats::setNames(as.vector(freq[vocab]), vocab))
}
