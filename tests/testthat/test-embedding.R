# embedding_quality() against plain-R definitions.

quality_ref <- function(x, y, labels, k) {
  n <- nrow(x)
  dx <- as.matrix(dist(x))
  dy <- as.matrix(dist(y))
  diag(dx) <- diag(dy) <- Inf
  rx <- t(apply(dx, 1, rank, ties.method = "first"))
  ry <- t(apply(dy, 1, rank, ties.method = "first"))
  t_sum <- c_sum <- shared <- 0
  correct <- 0
  for (i in seq_len(n)) {
    nx <- which(rx[i, ] <= k)
    ny <- which(ry[i, ] <= k)
    t_sum <- t_sum + sum(rx[i, setdiff(ny, nx)] - k)
    c_sum <- c_sum + sum(ry[i, setdiff(nx, ny)] - k)
    shared <- shared + length(intersect(nx, ny))
    neighbours <- order(ry[i, ])[1:k]
    votes <- table(as.character(labels[neighbours]))
    best <- names(votes)[votes == max(votes)]
    pick <- as.character(labels[neighbours])[as.character(labels[neighbours]) %in% best][1]
    correct <- correct + (pick == as.character(labels[i]))
  }
  norm <- 2 / (n * k * (2 * n - 3 * k - 1))
  xc <- scale(x, scale = FALSE)
  rss <- function(z) {
    z <- scale(z, scale = FALSE)
    sum(residuals(lm(xc ~ z - 1))^2)
  }
  pca <- prcomp(x)$x[, seq_len(ncol(y)), drop = FALSE]
  c(trustworthiness = 1 - norm * t_sum, continuity = 1 - norm * c_sum,
    neighbour_preservation = shared / (n * k),
    global_score = exp(-(rss(y) - rss(pca)) / rss(pca)), knn_accuracy = correct / n)
}

test_that("embedding_quality() equals the plain-R definitions", {
  set.seed(9)
  x <- as.matrix(iris[, 1:4]) + matrix(rnorm(600, sd = 1e-6), ncol = 4)
  y <- x[, 1:2] + matrix(rnorm(300, sd = 0.3), ncol = 2)
  for (k in c(5, 12)) {
    expect_equal(embedding_quality(x, y, iris$Species, k = k),
                 quality_ref(x, y, iris$Species, k), tolerance = 1e-10)
  }
  # Subsampled rows use the same formulas over those rows.
  q <- embedding_quality(x, y, iris$Species, k = 5, max_points = 50)
  expect_true(all(q >= 0 & q <= 1))
  pca <- prcomp(x)$x[, 1:2]
  perfect <- embedding_quality(x, x, k = 7)
  expect_equal(unname(perfect[c("trustworthiness", "continuity", "neighbour_preservation")]),
               c(1, 1, 1))
  expect_equal(embedding_quality(x, pca)[["global_score"]], 1, tolerance = 1e-12)
})

test_that("embedding_quality() refuses bad input", {
  x <- matrix(rnorm(40), 20)
  expect_error(embedding_quality(x, x[1:10, ]), "rows", class = "localmean_error")
  expect_error(embedding_quality(x, x, k = 19), "k", class = "localmean_error")
  expect_error(embedding_quality(x, x, labels = 1:3), "labels", class = "localmean_error")
  expect_error(embedding_quality(x, "a"), "layout", class = "localmean_error")
})
