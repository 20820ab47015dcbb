# IDX reading against files written here, Fashion-MNIST and the shipped subset.

write_idx <- function(file, values, dims, type, size, gz = FALSE) {
  con <- if (gz) gzfile(file, "wb") else file(file, "wb")
  on.exit(close(con))
  writeBin(as.raw(c(0, 0, type, length(dims))), con)
  writeBin(as.integer(dims), con, size = 4, endian = "big")
  if (type %in% c(13, 14)) {
    writeBin(as.double(values), con, size = size, endian = "big")
  } else {
    writeBin(as.integer(values), con, size = size, endian = "big")
  }
}

test_that("read_idx() reads every element type, vectors, matrices and images", {
  f <- tempfile()
  write_idx(f, c(0, 7, 255), 3, 8, 1)
  expect_identical(read_idx(f), c(0L, 7L, 255L))
  write_idx(f, c(-128, -1, 127), 3, 9, 1)
  expect_identical(read_idx(f), c(-128L, -1L, 127L))
  write_idx(f, c(-30000, 2, 30000), 3, 11, 2)
  expect_identical(read_idx(f), c(-30000L, 2L, 30000L))
  write_idx(f, c(-2e9, 5, 2e9), 3, 12, 4)
  expect_identical(read_idx(f), c(-2e9L, 5L, 2e9L))
  write_idx(f, c(0.5, -1.25), 2, 13, 4)
  expect_identical(read_idx(f), c(0.5, -1.25))
  write_idx(f, c(pi, -exp(1)), 2, 14, 8)
  expect_identical(read_idx(f), c(pi, -exp(1)))
  # Two images of 2 x 3 pixels, row-major, gzip-compressed.
  g <- tempfile(fileext = ".gz")
  write_idx(g, 1:12, c(2, 2, 3), 8, 1, gz = TRUE)
  img <- read_idx(g)
  expect_equal(dim(img), c(2, 6))
  expect_equal(attr(img, "item_dim"), c(2L, 3L))
  expect_equal(img[2, ], 7:12)
  write_idx(f, 1:6, c(2, 3), 8, 1)
  expect_equal(read_idx(f), matrix(1:6, 2, byrow = TRUE))
})

test_that("read_idx() refuses what is not an IDX file", {
  f <- tempfile()
  writeLines("hello", f)
  expect_error(read_idx(f), "magic", class = "localmean_error")
  expect_error(read_idx(tempfile()), "does not exist", class = "localmean_error")
  expect_error(read_idx(1), "file", class = "localmean_error")
  con <- file(f, "wb")
  writeBin(as.raw(c(0, 0, 8, 1)), con)
  writeBin(10L, con, size = 4, endian = "big")
  writeBin(as.raw(1:3), con)
  close(con)
  expect_error(read_idx(f), "announces 10", class = "localmean_error")
  con <- file(f, "wb")
  writeBin(as.raw(c(0, 0, 5, 1)), con)
  close(con)
  expect_error(read_idx(f), "element type", class = "localmean_error")
})

test_that("fashion_mnist() explains how to get missing files", {
  expect_error(fashion_mnist(path = tempdir()), "dataset-fashion-mnist",
               class = "localmean_error")
  expect_error(fashion_mnist("validation"), "split", class = "localmean_error")
})

test_that("the shipped subset is balanced and equals the test images", {
  sub <- fashion_mnist_subset
  expect_equal(dim(sub$x), c(500, 784))
  expect_true(is.integer(sub$x) && min(sub$x) >= 0 && max(sub$x) <= 255)
  expect_equal(as.vector(table(sub$label)), rep(50, 10))
  expect_equal(sub$image_dim, c(28L, 28L))
  files <- file.path(fashion_mnist_path(), "t10k-images-idx3-ubyte.gz")
  skip_if_not(file.exists(files), "Debian's dataset-fashion-mnist is not installed")
  test <- fashion_mnist("test")
  expect_equal(dim(test$x), c(10000, 784))
  expect_identical(test$x[sub$index, ], sub$x)
  expect_identical(test$label[sub$index], sub$label)
})

test_that("word_cooccurrence() counts directed pairs within the window", {
  text <- c("The cat sat on the mat.", "The dog sat on the cat's mat")
  co <- word_cooccurrence(text, vocab_size = 4, window = 2)
  tokens <- c("the", "cat", "sat", "on", "the", "mat", "the", "dog", "sat", "on", "the",
              "cat's", "mat")
  vocab <- c("the", "mat", "on", "sat")  # by frequency, ties alphabetical
  expect_equal(co$vocab, vocab)
  ref <- matrix(0, 4, 4, dimnames = list(vocab, vocab))
  for (t in seq_along(tokens)) {
    for (s in t + seq_len(2)) {
      if (s <= length(tokens) && tokens[t] %in% vocab && tokens[s] %in% vocab) {
        ref[tokens[t], tokens[s]] <- ref[tokens[t], tokens[s]] + 1
      }
    }
  }
  expect_equal(co$counts, ref)
  expect_equal(rowSums(co$prob)[rowSums(ref) > 0], rep(1, sum(rowSums(ref) > 0)),
               ignore_attr = TRUE)
  expect_equal(co$freq[["the"]], 4)
  expect_error(word_cooccurrence(1:3), "character", class = "localmean_error")
  expect_error(word_cooccurrence("one"), "two words", class = "localmean_error")
  expect_error(word_cooccurrence(text, window = 0), "window", class = "localmean_error")
})

test_that("word_cooccurrence() splits words as tokenize_words() does", {
  text <- c("Don\u2019t stop: don't 'quote' rock''n", NA, "it's")
  co <- word_cooccurrence(text, vocab_size = 10, window = 1)
  words <- tokenize_words(text)
  expect_equal(sort(co$vocab), sort(unique(words)))
  expect_equal(sum(co$freq), length(words))
})
