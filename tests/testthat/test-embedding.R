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
  expect_identical(embedding_quality(x, y, iris$Species, max_points = 60, n_threads = 1),
                   embedding_quality(x, y, iris$Species, max_points = 60, n_threads = 2))
})

test_that("embedding_quality() refuses bad input", {
  x <- matrix(rnorm(40), 20)
  expect_error(embedding_quality(x, x[1:10, ]), "rows", class = "localmean_error")
  expect_error(embedding_quality(x, x, k = 19), "k", class = "localmean_error")
  expect_error(embedding_quality(x, x, labels = 1:3), "labels", class = "localmean_error")
  expect_error(embedding_quality(x, "a"), "layout", class = "localmean_error")
})

# --- neighbour graphs -----------------------------------------------------------------------

test_that("the neighbour graph equals a sort of all distances, tree and brute force", {
  set.seed(2)
  for (d in c(3, 20)) {
    x <- matrix(rnorm(400 * d), ncol = d)
    g <- cpp_knn_graph(x, x, 7L, TRUE, 2L, FALSE)
    expect_identical(g$index, knn_ref(x, 7))
    dref <- unname(as.matrix(dist(x)))
    expect_equal(g$distance, t(sapply(1:400, function(i) dref[i, knn_ref(x, 7)[i, ]])),
                 tolerance = 1e-12)
    expect_identical(cpp_knn_graph(x, x, 7L, TRUE, 1L, FALSE), g)
  }
})

# --- LLE ------------------------------------------------------------------------------------

test_that("lle() spans the same subspace as a dense plain-R LLE", {
  x <- swiss_roll(400)
  fit <- lle(x, k = 10, verbose = FALSE)
  ref <- lle_ref(x, 10, 2, 1e-3)
  expect_gt(subspace_fit(fit$layout, ref), 0.999)
  expect_gt(subspace_fit(ref, fit$layout), 0.999)
  expect_equal(rowSums(fit$weights), rep(1, 400), tolerance = 1e-10)
  expect_identical(fit$neighbours, knn_ref(x, 10))
  expect_identical(lle(x, k = 10, n_threads = 1, verbose = FALSE)$layout, fit$layout)
})

test_that("lle() survives duplicated points and places new points by their weights", {
  x <- swiss_roll(300)
  x <- rbind(x, x[1:40, ], x[1:40, ])
  fit <- lle(x, k = 8, verbose = FALSE)
  expect_true(all(is.finite(fit$layout)))
  # A new point halfway between two neighbours lands near their layout midpoint.
  new <- predict(fit, x[1:5, ] + 1e-3)
  expect_equal(dim(new), c(5L, 2L))
  expect_lt(max(abs(new - fit$layout[1:5, ])), 0.05 * max(abs(fit$layout)))
})

test_that("lle() refuses bad input", {
  x <- swiss_roll(50)
  expect_error(lle(x, k = 50), "k", class = "localmean_error")
  expect_error(lle(x, ndim = 3), "ndim", class = "localmean_error")
  expect_error(lle(x, k = 2), "exceed", class = "localmean_error")
  expect_error(lle(x, reg = -1), "reg", class = "localmean_error")
  x[3, 2] <- NA
  expect_error(lle(x), "missing", class = "localmean_error")
})

# --- TriMap ---------------------------------------------------------------------------------

test_that("TriMap's triplets and weights follow the published construction", {
  set.seed(3)
  x <- matrix(rnorm(300 * 4), ncol = 4)
  g <- cpp_knn_graph(x, x, 30L, TRUE, 2L, FALSE)
  s <- cpp_trimap_triplets(x, g$index, g$distance, 5L, 3L, 2L, 0.5, 11, 2L)
  tri <- t(s$triplets) + 1L
  sig <- pmax(rowMeans(g$distance[, 3:5]), 1e-10)
  sd2 <- function(a, b) rowSums((x[a, , drop = FALSE] - x[b, , drop = FALSE])^2) / (sig[a] * sig[b])
  per <- 5 * 3 + 2
  expect_equal(nrow(tri), 300 * per)
  knn_rows <- rep(seq_len(per) <= 15, 300)
  # Neighbour triplets: one of the 5 most similar neighbours and a non-neighbour, either order.
  for (i in c(1, 77, 300)) {
    cand <- g$index[i, ]
    inl <- cand[order(sd2(rep(i, 30), cand), cand)][1:5]
    rows <- tri[tri[, 1] == i & knn_rows, ]
    pair_in <- (rows[, 2] %in% inl) + (rows[, 3] %in% inl)
    expect_true(all(pair_in == 1))
    expect_false(any(rows[, 2:3] == i))
  }
  raw <- sd2(tri[, 1], tri[, 3]) - sd2(tri[, 1], tri[, 2])
  expect_true(all(raw >= -1e-12))   # the closer point comes first
  raw[!knn_rows] <- 0.1 * raw[!knn_rows]
  raw <- raw - min(raw)
  expect_equal(s$weights, (sqrt(1 + raw) - 1) / 0.5, tolerance = 1e-10)
  expect_identical(cpp_trimap_triplets(x, g$index, g$distance, 5L, 3L, 2L, 0.5, 11, 1L), s)
})

test_that("trimap() keeps Fashion-MNIST classes and global structure", {
  # Thresholds well below the measured values (500 images: GS about 0.90, 10-NN 0.70).
  fm <- fashion_mnist_subset
  x <- fm$x / 255
  set.seed(4)
  fit <- trimap(x, verbose = FALSE)
  q <- embedding_quality(x, fit$layout, fm$label, k = 10)
  expect_gt(q[["global_score"]], 0.7)
  expect_gt(q[["knn_accuracy"]], 0.6)
  expect_lt(fit$violated, 0.1)
  expect_lt(utils::tail(fit$loss, 1), fit$loss[1])
  set.seed(4)
  expect_identical(trimap(x, n_threads = 1, verbose = FALSE)$layout, fit$layout)
})

test_that("trimap() predicts new points near their neighbours' layout", {
  set.seed(5)
  centres <- matrix(rnorm(4 * 6, sd = 8), 4)
  cls <- rep(1:4, each = 60)
  x <- centres[cls, ] + matrix(rnorm(240 * 6), ncol = 6)
  fit <- trimap(x[-(1:4 * 60), ], verbose = FALSE)
  new <- predict(fit, x[1:4 * 60, ])
  centre_of <- apply(fit$layout, 2, function(v) tapply(v, cls[-(1:4 * 60)], mean))
  nearest <- apply(new, 1, function(p) which.min(colSums((t(centre_of) - p)^2)))
  expect_equal(unname(nearest), 1:4)
})

test_that("trimap() refuses bad input", {
  x <- matrix(rnorm(200), 50)
  expect_error(trimap(x, n_inliers = 49), "n_inliers", class = "localmean_error")
  expect_error(trimap(x, n_outliers = 45), "n_outliers", class = "localmean_error")
  expect_error(trimap(x, ndim = 4), "ndim", class = "localmean_error")
  expect_error(trimap(x, init = "spectral"), "init", class = "localmean_error")
  expect_error(trimap(x, init = matrix(0, 3, 2)), "init", class = "localmean_error")
  expect_error(trimap(x, lr = 0), "lr", class = "localmean_error")
  expect_error(trimap(x, weight_temp = -1), "weight_temp", class = "localmean_error")
})

# --- ordinal embedding ----------------------------------------------------------------------

planted_triplets <- function(points, m) {
  tri <- matrix(sample(nrow(points), 3 * m, replace = TRUE), ncol = 3)
  tri <- tri[tri[, 1] != tri[, 2] & tri[, 1] != tri[, 3] & tri[, 2] != tri[, 3], ]
  d <- as.matrix(dist(points))
  swap <- d[tri[, 1:2]] > d[tri[, c(1, 3)]]
  tri[swap, 2:3] <- tri[swap, 3:2]
  tri
}

satisfied <- function(layout, tri) {
  d <- as.matrix(dist(layout))
  mean(d[tri[, 1:2]] < d[tri[, c(1, 3)]])
}

test_that("ordinal_embed() satisfies noise-free triplets", {
  set.seed(6)
  truth <- matrix(runif(80), 40)
  tri <- planted_triplets(truth, 4000)
  fit <- ordinal_embed(tri, verbose = FALSE)
  expect_gte(satisfied(fit$layout, tri), 0.95)
  expect_equal(fit$violated, 1 - satisfied(fit$layout, tri), tolerance = 0.02)
  # Held-out triplets of the same points are mostly right too.
  expect_gt(satisfied(fit$layout, planted_triplets(truth, 2000)), 0.9)
  set.seed(6)
  one <- ordinal_embed(tri, n_threads = 1, verbose = FALSE)$layout
  set.seed(6)
  expect_identical(ordinal_embed(tri, n_threads = 2, verbose = FALSE)$layout, one)
})

test_that("ordinal_embed() refuses bad triplets", {
  tri <- matrix(c(1, 2, 3, 2, 3, 4), ncol = 3, byrow = TRUE)
  expect_error(ordinal_embed(tri, n = 3), "beyond", class = "localmean_error")
  expect_error(ordinal_embed(tri[, 1:2]), "three columns", class = "localmean_error")
  expect_error(ordinal_embed(rbind(tri, c(1, 1, 2))), "different", class = "localmean_error")
  expect_error(ordinal_embed(rbind(tri, c(0, 1, 2))), "at least 1", class = "localmean_error")
  expect_error(ordinal_embed(tri, init = matrix(0, 2, 2)), "init", class = "localmean_error")
  expect_error(ordinal_embed(tri, weights = c(1, -1)), "weights", class = "localmean_error")
})

# --- asymmetric MDS -------------------------------------------------------------------------

test_that("asym_mds() recovers planted senders and receivers", {
  set.seed(7)
  n <- 25
  u <- matrix(rnorm(2 * n), n)
  v <- u + matrix(rnorm(2 * n, sd = 0.5), n)
  d2 <- outer(rowSums(u^2), rowSums(v^2), `+`) - 2 * u %*% t(v)
  p <- exp(-d2) / rowSums(exp(-d2))
  fit <- asym_mds(p * 1000)  # counts: rows are normalised
  expect_lt(max(abs(fit$fitted - p)), 1e-4)
  # Sender-receiver distances do not depend on rotation or translation.
  fd2 <- outer(rowSums(fit$layout^2), rowSums(fit$receivers^2), `+`) -
    2 * fit$layout %*% t(fit$receivers)
  expect_gt(cor(as.vector(fd2), as.vector(d2)), 0.999)
  expect_true(fit$converged)
  df <- as.data.frame(fit)
  expect_equal(nrow(df), 2 * n)
  expect_setequal(df$role, c("sender", "receiver"))
})

test_that("asym_mds() refuses bad similarity matrices", {
  s <- matrix(runif(16), 4)
  expect_error(asym_mds(s[, 1:3]), "square", class = "localmean_error")
  expect_error(asym_mds(-s), "non-negative", class = "localmean_error")
  s0 <- s
  s0[2, ] <- 0
  expect_error(asym_mds(s0), "all-zero", class = "localmean_error")
  s[1, 1] <- NA
  expect_error(asym_mds(s), "missing", class = "localmean_error")
  expect_error(asym_mds(matrix(1, 4, 4), ndim = 4), "ndim", class = "localmean_error")
})

# --- the local_embedding class --------------------------------------------------------------

test_that("local_embedding methods print, plot, convert and predict where defined", {
  x <- swiss_roll(200)
  fit <- lle(x, k = 10, verbose = FALSE)
  expect_output(print(fit), "Locally linear embedding: 200 points in 2 dimensions")
  df <- as.data.frame(fit)
  expect_equal(names(df), c("dim1", "dim2"))
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_silent(plot(fit, labels = rep(c("a", "b"), 100)))
  expect_error(plot(fit, labels = 1:3), "labels", class = "localmean_error")
  expect_error(predict(fit, x[, 1:2]), "variables", class = "localmean_error")
  tri <- planted_triplets(matrix(runif(40), 20), 500)
  ord <- ordinal_embed(tri, n_iter = 50, verbose = FALSE)
  expect_output(print(ord), "out of order")
  expect_error(predict(ord, x), "defined", class = "localmean_error")
})

test_that("diverging and oversized triplet embeddings are clear errors (issue 18)", {
  set.seed(1)
  tri <- matrix(sample(20L, 300, replace = TRUE), ncol = 3)
  tri <- tri[apply(tri, 1, function(r) length(unique(r)) == 3L), ]
  expect_error(ordinal_embed(tri, n_iter = 20, lr = 1e300, verbose = FALSE),
               class = "localmean_error", regexp = "lr")
  expect_error(ordinal_embed(tri, n = 1e9, verbose = FALSE), class = "localmean_error",
               regexp = "n")
  expect_error(ordinal_embed(tri, n_iter = 1e9, verbose = FALSE), class = "localmean_error",
               regexp = "n_iter")
  expect_error(trimap(matrix(runif(300), 100), n_iter = 1e9, verbose = FALSE),
               class = "localmean_error", regexp = "n_iter")
})

test_that("embedding_quality's global score is 1 for a layout as good as exact PCA", {
  set.seed(1)
  x <- matrix(runif(120), 60)
  q <- embedding_quality(x, x, verbose = FALSE)
  expect_identical(unname(q["global_score"]), 1)
  expect_false(anyNA(embedding_quality(x * 1e-300, x, verbose = FALSE)))
})

test_that("lle() warns when the neighbour graph falls into pieces (scale(iris), k = 12)", {
  x <- scale(iris[, 1:4])
  # setosa is one such piece: no point of it has a neighbour outside (point 42 does, but no
  # setosa point has 42 as a neighbour), so the first coordinate takes three values
  expect_warning(fit <- lle(x, verbose = FALSE), "12-nearest-neighbour graph falls into 2 pieces")
  expect_lte(length(unique(round(fit$layout[, 1L], 6))), 3L)
  expect_no_warning(fit <- lle(x, k = 20, verbose = FALSE))
  expect_gt(length(unique(round(fit$layout[, 1L], 6))), 50L)
})

test_that("the closed pieces of a directed graph match a transitive-closure reference", {
  closed_ref <- function(nb) {
    n <- nrow(nb)
    reach <- diag(n) > 0
    for (i in seq_len(n)) reach[i, nb[i, ]] <- TRUE
    repeat {
      wider <- (reach %*% reach) > 0 | reach
      if (all(wider == reach)) break
      reach <- wider
    }
    scc <- apply(reach & t(reach), 1L, function(r) min(which(r)))
    sum(tapply(seq_len(n), scc, function(c) !any(reach[c, -c, drop = FALSE])))
  }
  set.seed(2)
  for (i in 1:60) {
    n <- sample(2:30, 1)
    nb <- matrix(sample(n, n * sample(1:3, 1), replace = TRUE), n)
    expect_identical(localmean:::closed_pieces(nb), closed_ref(nb), info = i)
  }
  # a long chain (deep search) and two separate chains
  expect_identical(localmean:::closed_pieces(cbind(c(2:5000, 4999))), 1L)
  expect_identical(localmean:::closed_pieces(cbind(c(2, 1, 4, 3))), 2L)
})

test_that("embedding_quality() takes the embedding object, and as.matrix() is its layout", {
  x <- scale(iris[, 1:4])
  fit <- lle(x, k = 20, verbose = FALSE)
  expect_identical(as.matrix(fit), fit$layout)
  expect_identical(embedding_quality(x, fit, iris$Species, verbose = FALSE),
                   embedding_quality(x, fit$layout, iris$Species, verbose = FALSE))
})
