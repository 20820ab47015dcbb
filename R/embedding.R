# Embeddings: quality measures shared by every embedding method.

#' Quality of an embedding
#'
#' Measures how well a low-dimensional `layout` keeps the structure of the
#' data `x`, on the k nearest neighbours of every point (Euclidean distances
#' in both spaces, each point excluded from its own neighbours):
#'
#' - `trustworthiness` (Venna and Kaski, 2001): penalises points that are
#'   neighbours in the layout but not in the data, by how far down the data's
#'   neighbour ranking they are; 1 is perfect.
#' - `continuity`: the same with the roles of data and layout swapped.
#' - `neighbour_preservation`: the average share of every point's k nearest
#'   neighbours in the data that are also among its k nearest in the layout.
#' - `global_score` (Amid and Warmuth, 2019, TriMap's GS):
#'   \eqn{\exp(-(e - e_{PCA}) / e_{PCA})}, where \eqn{e} is the residual sum of
#'   squares of the best linear reconstruction of the centred data from the
#'   centred layout and \eqn{e_{PCA}} that of a PCA layout of the same
#'   dimension; 1 for PCA, smaller for layouts that lose global structure.
#' - `knn_accuracy` (with `labels`): leave-one-out accuracy of the k-nearest-
#'   neighbour vote in the layout (ties go to the class of the nearest
#'   neighbour among the tied classes).
#'
#' The neighbour measures need every point's ranking of all others; with
#' more than `max_points` points they are averaged over `max_points` evenly
#' spaced points (their neighbours still drawn from all the data).
#'
#' @param x The data: a numeric matrix or data frame, one row per point.
#' @param layout The embedding: a numeric matrix with the same rows.
#' @param labels Optional class labels (a vector with one entry per point).
#' @param k Number of neighbours.
#' @param max_points Most points whose neighbourhoods are compared.
#' @return A named numeric vector of the measures.
#' @family embedding
#' @export
#' @examples
#' x <- as.matrix(iris[, 1:4])
#' pca <- prcomp(x)$x[, 1:2]
#' embedding_quality(x, pca, labels = iris$Species)
embedding_quality <- function(x, layout, labels = NULL, k = 10, max_points = 5000) {
  x <- check_predictors(x)
  layout <- check_predictors(layout, arg = "layout")
  n <- nrow(x)
  if (nrow(layout) != n) {
    abort("{.arg layout} has {nrow(layout)} rows but {.arg x} has {n}.")
  }
  k <- check_count(k)
  if (k >= n - 1L) abort("{.arg k} must be below the number of points minus one ({n - 1}).")
  if (!is.null(labels) && length(labels) != n) {
    abort("{.arg labels} must have one entry per point ({n}).")
  }
  rows <- if (n <= max_points) seq_len(n) else round(seq(1, n, length.out = check_count(max_points)))
  ranks <- neighbour_ranks(x, layout, rows, k)
  norm <- 2 / (length(rows) * k * (2 * n - 3 * k - 1))
  out <- c(trustworthiness = 1 - norm * sum(pmax(ranks$x_rank_of_layout_nn - k, 0)),
           continuity = 1 - norm * sum(pmax(ranks$layout_rank_of_x_nn - k, 0)),
           neighbour_preservation = mean(ranks$shared) / k,
           global_score = global_score(x, layout))
  if (!is.null(labels)) out["knn_accuracy"] <- knn_vote_accuracy(ranks$layout_nn, labels, rows)
  out
}

# For every point of `rows`: the data's ranks of its k nearest neighbours in the layout, the
# layout's ranks of its k nearest in the data, how many of those neighbours they share, and its
# k nearest in the layout (rows of a matrix). Processed in blocks of rows.
neighbour_ranks <- function(x, layout, rows, k) {
  blocks <- split(rows, ceiling(seq_along(rows) / 256))
  parts <- lapply(blocks, function(b) {
    rank_x <- distance_ranks(x, b)
    rank_y <- distance_ranks(layout, b)
    nn_x <- rank_x <= k
    nn_y <- rank_y <= k
    list(x_rank_of_layout_nn = rank_x[nn_y], layout_rank_of_x_nn = rank_y[nn_x],
         shared = rowSums(nn_x & nn_y),
         layout_nn = t(apply(rank_y, 1L, function(r) order(r)[seq_len(k)])))
  })
  list(x_rank_of_layout_nn = unlist(lapply(parts, `[[`, 1L)),
       layout_rank_of_x_nn = unlist(lapply(parts, `[[`, 2L)),
       shared = unlist(lapply(parts, `[[`, 3L)),
       layout_nn = do.call(rbind, lapply(parts, `[[`, 4L)))
}

# Ranks (1 = nearest) of all points by distance from each point of `b`; the point itself gets
# rank n (it is nobody's neighbour). Ties are ranked by index.
distance_ranks <- function(x, b) {
  sq <- rowSums(x^2)
  d2 <- outer(sq[b], sq, `+`) - 2 * tcrossprod(x[b, , drop = FALSE], x)
  d2[cbind(seq_along(b), b)] <- Inf
  t(apply(d2, 1L, function(r) {
    out <- integer(length(r))
    out[order(r)] <- seq_along(r)
    out
  }))
}

# TriMap's global score: the linear reconstruction error of the layout against PCA's.
global_score <- function(x, layout) {
  xc <- scale(x, scale = FALSE)
  residual <- function(y) {
    y <- scale(y, scale = FALSE)
    sum(stats::lm.fit(y, xc)$residuals^2)
  }
  pca <- prcomp_layout(xc, ncol(layout))
  e_pca <- residual(pca)
  exp(-(residual(layout) - e_pca) / e_pca)
}

prcomp_layout <- function(xc, ndim) {
  sv <- svd(xc, nu = min(ndim, ncol(xc)), nv = 0)
  sv$u %*% diag(sv$d[seq_len(ncol(sv$u))], ncol(sv$u))
}

# Leave-one-out k-NN vote: the most frequent class among the neighbours, ties to the class of
# the nearest neighbour among the tied ones.
knn_vote_accuracy <- function(nn, labels, rows) {
  labels <- as.character(labels)
  votes <- vapply(seq_len(nrow(nn)), function(i) {
    cls <- labels[nn[i, ]]
    counts <- table(cls)
    tied <- names(counts)[counts == max(counts)]
    cls[cls %in% tied][1L]
  }, "")
  mean(votes == labels[rows])
}
