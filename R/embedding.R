# Embeddings: LLE, TriMap, ordinal embedding and asymmetric MDS, one result class for all four,
# and the quality measures shared by every embedding method.

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
#'   \eqn{\exp(-(e - e_{PCA}) / e_{PCA})}{exp(-(e - e_PCA) / e_PCA)}, where \eqn{e}{e} is the
#'   residual sum of squares of the best linear reconstruction of the centred data from the centred
#'   layout and \eqn{e_{PCA}}{e_PCA} that of a PCA layout of the same dimension; 1 for PCA, smaller
#'   for layouts that lose global structure.
#' - `knn_accuracy` (with `labels`): leave-one-out accuracy of the k-nearest-
#'   neighbour vote in the layout (ties go to the class of the nearest
#'   neighbour among the tied classes).
#'
#' The neighbour measures need every point's ranking of all others (exact
#' distances, computed in C++ in parallel); with more than `max_points`
#' points they are averaged over `max_points` evenly spaced points (their
#' neighbours still drawn from all the data).
#'
#' @param x The data: a numeric matrix or data frame, one row per point.
#' @param layout The embedding: a numeric matrix with the same rows, or an
#'   embedding made by [lle()], [trimap()], ... (its layout).
#' @param labels Optional class labels (a vector with one entry per point).
#' @param k Number of neighbours.
#' @param max_points Most points whose neighbourhoods are compared.
#' @inheritParams lle
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return A named numeric vector of the measures.
#' @family embedding
#' @export
#' @examples
#' x <- as.matrix(iris[, 1:4])
#' pca <- prcomp(x)$x[, 1:2]
#' embedding_quality(x, pca, labels = iris$Species)
embedding_quality <- function(x, layout, labels = NULL, k = 10, max_points = 5000,
                              n_threads = NULL, verbose = interactive(), ...) {
  check_dots(...)
  x <- check_predictors(x)
  if (inherits(layout, "local_embedding")) layout <- layout$layout
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
  max_points <- check_count(max_points)
  rows <- if (n <= max_points) seq_len(n) else round(seq(1, n, length.out = max_points))
  ranks <- cpp_rank_agreement(x, layout, rows, k, n_threads(n_threads), check_flag(verbose))
  norm <- 2 / (length(rows) * k * (2 * n - 3 * k - 1))
  out <- c(trustworthiness = 1 - norm * sum(ranks$data_excess),
           continuity = 1 - norm * sum(ranks$layout_excess),
           neighbour_preservation = mean(ranks$shared) / k,
           global_score = global_score(x, layout))
  if (!is.null(labels)) out["knn_accuracy"] <- knn_vote_accuracy(ranks$layout_nn, labels, rows)
  out
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
  e_layout <- residual(layout)
  # PCA reconstructs x exactly (as many axes as variables, or no spread): a layout that does
  # too scores 1, any other 0, the limits of the ratio.
  tiny <- 1e-12 * sum(xc^2)
  if (!(e_pca > tiny)) return(if (e_layout <= tiny) 1 else 0)
  exp(-(e_layout - e_pca) / e_pca)
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

#' Locally linear embedding
#'
#' LLE (Roweis and Saul, 2000) writes every point as a local mean of its `k`
#' nearest neighbours, with the weights of the best affine reconstruction:
#' \eqn{w_i = \arg\min |x_i - \sum_j w_{ij} x_j|^2}{w_i = arg min |x_i - sum_j w_ij x_j|^2} subject
#' to \eqn{\sum_j w_{ij} = 1}{sum_j w_ij = 1}, found from the local Gram matrix
#' \eqn{C = Z Z'}{C = Z Z'} (Z: the neighbours minus \eqn{x_i}{x_i}) regularised by `reg` times its
#' trace (by `reg` alone when it vanishes, so duplicated points are safe). The layout keeps those
#' local means: its columns are the eigenvectors of \eqn{M = (I - W)'(I - W)}{M = (I - W)'(I - W)}
#' for the 2nd to (`ndim` + 1)-th smallest eigenvalues (the smallest belongs to the constant
#' vector), found by the Lanczos method in shift-and-invert mode (the Spectra library of RSpectra)
#' about a small negative shift, with a sparse Cholesky factorisation of
#' \eqn{M - \sigma I}{M - sigma I}. Neighbours come from the package's kd-tree for at most 8
#' variables and from blocked brute-force search above.
#'
#' @param x A numeric matrix or data frame, one row per point.
#' @param ndim Dimension of the layout (below the number of variables).
#' @param k Number of neighbours (more than `ndim`, fewer than the points).
#' @param reg Regularisation of the local Gram matrices, relative to their
#'   trace.
#' @param n_threads Number of threads (see [n_threads()]); results do not
#'   depend on it.
#' @param verbose Show a progress bar.
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return A [`local_embedding`][local_embedding] object with method `"lle"`,
#'   holding also the neighbour indices (`neighbours`), the reconstruction
#'   weights (`weights`) and the eigenvalues.
#' @references Roweis, S. T. and Saul, L. K. (2000). Nonlinear dimensionality
#'   reduction by locally linear embedding. *Science* 290, 2323-2326.
#'   \doi{10.1126/science.290.5500.2323}
#' @family embedding
#' @export
#' @examples
#' set.seed(1)
#' t <- 1.5 * pi * (1 + 2 * runif(800))
#' roll <- cbind(t * cos(t), 20 * runif(800), t * sin(t))
#' fit <- lle(roll, k = 10)
#' plot(fit, labels = cut(t, 6))
#' predict(fit, roll[1:3, ] + 0.1)
lle <- function(x, ndim = 2, k = 12, reg = 1e-3, n_threads = NULL, verbose = interactive(), ...) {
  check_dots(...)
  x <- check_predictors(x)
  n <- nrow(x)
  ndim <- check_ndim(ndim, ncol(x))
  k <- check_count(k)
  if (k >= n) abort("{.arg k} must be below the number of points ({n}).")
  if (k <= ndim) abort("{.arg k} must exceed {.arg ndim} ({ndim}).")
  reg <- check_positive(reg)
  threads <- n_threads(n_threads)
  res <- cpp_lle(x, k, ndim, reg, threads, check_flag(verbose))
  warn_disconnected(res$neighbours, k)
  new_local_embedding(res$layout, "lle", list(k = k, reg = reg), match.call(),
                      data = x, neighbours = res$neighbours, weights = res$weights,
                      eigenvalues = res$eigenvalues)
}

# LLE's layout is, up to the regularisation, a local mean of its neighbours' layout: every row i
# of W reconstructs point i from its neighbours. A piece of the data whose points all have their
# neighbours inside it (a closed strongly connected component of the directed k-nearest-neighbour
# graph) can then take a constant of its own, and with two or more such pieces the leading
# coordinates only say which piece a point belongs to. Warn, so that the user can take a larger k.
warn_disconnected <- function(neighbours, k) {
  pieces <- closed_pieces(neighbours)
  if (pieces > 1L) {
    warn(c("The {k}-nearest-neighbour graph falls into {pieces} pieces that no neighbour links
            to the rest: the layout gives each piece a constant of its own and says little
            within them.",
           i = "Take a larger {.arg k}, or embed the pieces one by one."))
  }
}

# The number of closed strongly connected components (no edge leaves them) of the directed graph
# i -> neighbours[i, ], by Tarjan's algorithm with an explicit stack.
closed_pieces <- function(neighbours) {
  n <- nrow(neighbours)
  k <- ncol(neighbours)
  adj <- as.vector(t(neighbours))  # the edges of point v are adj[(v - 1) * k + 1:k]
  index <- integer(n)
  low <- integer(n)
  on_stack <- logical(n)
  component <- integer(n)
  stack <- integer(n)
  top <- 0L
  visit <- integer(n)  # the depth-first path and the next edge of each of its points
  next_edge <- integer(n)
  depth <- 0L
  counter <- 0L
  found <- 0L
  for (s in seq_len(n)) {
    if (index[s]) next
    counter <- counter + 1L
    index[s] <- low[s] <- counter
    top <- top + 1L
    stack[top] <- s
    on_stack[s] <- TRUE
    depth <- 1L
    visit[1L] <- s
    next_edge[1L] <- 1L
    while (depth) {
      v <- visit[depth]
      e <- next_edge[depth]
      if (e <= k) {
        next_edge[depth] <- e + 1L
        w <- adj[(v - 1L) * k + e]
        if (!index[w]) {
          counter <- counter + 1L
          index[w] <- low[w] <- counter
          top <- top + 1L
          stack[top] <- w
          on_stack[w] <- TRUE
          depth <- depth + 1L
          visit[depth] <- w
          next_edge[depth] <- 1L
        } else if (on_stack[w] && index[w] < low[v]) {
          low[v] <- index[w]
        }
        next
      }
      if (low[v] == index[v]) {
        found <- found + 1L
        repeat {
          w <- stack[top]
          top <- top - 1L
          on_stack[w] <- FALSE
          component[w] <- found
          if (w == v) break
        }
      }
      depth <- depth - 1L
      if (depth && low[v] < low[visit[depth]]) low[visit[depth]] <- low[v]
    }
  }
  leaving <- component[rep(seq_len(n), each = k)] != component[adj]
  found - length(unique(component[rep(seq_len(n), each = k)][leaving]))
}

#' TriMap
#'
#' TriMap (Amid and Warmuth, 2019) embeds points so that sampled triplets
#' keep their order: for an anchor i, a point j from its neighbourhood must
#' stay nearer than a point k from outside it. In the localization view the
#' loss is a hyperkernel, a kernel on triplets: with Student-t similarities
#' \eqn{s_{ab} = 1 / (1 + |y_a - y_b|^2)}{s_ab = 1 / (1 + |y_a - y_b|^2)} every triplet costs
#' \eqn{w_{ijk} s_{ik} / (s_{ij} + s_{ik})}{w_ijk s_ik / (s_ij + s_ik)}.
#'
#' The steps follow the published method. Data with more than 100 variables
#' are first centred and projected on their 100 leading principal axes;
#' otherwise they are scaled to the unit interval (one common range) and
#' centred. Every point gets the scale \eqn{\sigma_i}{sigma_i}, its mean distance to
#' its 4th to 6th nearest neighbours, and similarities from the scaled
#' squared distances \eqn{d^2_{ij} / (\sigma_i \sigma_j)}{d^2_ij / (sigma_i sigma_j)} among its
#' `n_inliers + 50` nearest neighbours. Each of its `n_inliers` most similar
#' neighbours is paired with `n_outliers` points drawn uniformly from outside
#' that set, and `n_random` triplets of uniform points are added per anchor.
#' The log-weight of a triplet is the difference of the scaled squared
#' distances (times 0.1 for random ones); triplets are ordered so that it is
#' positive, shifted to start at zero and passed through the tempered log
#' \eqn{((1 + w)^{1 - t} - 1) / (1 - t)}{((1 + w)^(1 - t) - 1) / (1 - t)} with \eqn{t}{t} =
#' `weight_temp`. The layout starts at 0.01 times the leading principal components and is optimised
#' by full-batch delta-bar-delta descent with momentum (0.5, then 0.8 after 250 iterations), step
#' size `lr` times n / (number of triplets).
#'
#' Neighbours are exact: the kd-tree for at most 8 variables, blocked
#' brute-force search (single-precision ranking, double-precision distances)
#' above. Triplets are drawn from a generator seeded from R's random numbers
#' for every anchor point, and gradients are summed in a fixed order, so
#' `set.seed()` reproduces a layout for any number of threads.
#'
#' @inheritParams lle
#' @param n_inliers Nearest neighbours per anchor in the triplets.
#' @param n_outliers Outliers sampled per neighbour.
#' @param n_random Random triplets per anchor. At most 1e8 triplets in all
#'   (`n` times `n_inliers * n_outliers + n_random`).
#' @param weight_temp Temperature of the tempered log applied to the triplet
#'   weights (1: the plain log).
#' @param lr Learning rate.
#' @param n_iter Number of iterations, at most 1e7 (the loss is kept for
#'   each).
#' @param init `"pca"`, `"random"` (Gaussian, standard deviation 1e-4) or a
#'   numeric matrix with one row per point and `ndim` columns.
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return A [`local_embedding`][local_embedding] object with method
#'   `"trimap"`; `loss` holds the mean triplet loss at every iteration and
#'   `violated` the share of triplets out of order at the end.
#' @references Amid, E. and Warmuth, M. K. (2019). TriMap: large-scale
#'   dimensionality reduction using triplets. arXiv:1910.00204.
#'   \doi{10.48550/arXiv.1910.00204}
#' @family embedding
#' @export
#' @examples
#' fit <- trimap(iris[, 1:4], n_iter = 200)
#' fit
#' plot(fit, labels = iris$Species)
trimap <- function(x, ndim = 2, n_inliers = 12, n_outliers = 4, n_random = 3,
                   weight_temp = 0.5, lr = 0.1, n_iter = 400, init = "pca",
                   n_threads = NULL, verbose = interactive(), ...) {
  check_dots(...)
  x <- check_predictors(x)
  n <- nrow(x)
  ndim <- check_ndim(ndim, ncol(x), max = 8L)
  n_inliers <- check_count(n_inliers)
  if (n_inliers >= n - 1L) abort("{.arg n_inliers} must be below the number of points minus one ({n - 1}).")
  n_outliers <- check_count(n_outliers)
  if (n_inliers + 1L + n_outliers > n) {
    abort("{.arg n_outliers} is too large: only {n - n_inliers - 1} points lie outside each neighbourhood.")
  }
  n_random <- check_count(n_random, min = 0)
  check_size(as.double(n) * (n_inliers * n_outliers + n_random), size_limits$triplets, "triplets",
             "n_random")
  weight_temp <- check_positive(weight_temp, zero = TRUE)
  lr <- check_positive(lr)
  n_iter <- check_size(check_count(n_iter), size_limits$iterations, "iterations", "n_iter")
  verbose <- check_flag(verbose)
  threads <- n_threads(n_threads)
  prep <- trimap_preprocessing(x, threads)
  z <- trimap_transform(prep, x, threads)
  init <- trimap_init(init, z, prep, ndim, threads)
  graph <- knn_graph(z, z, min(n_inliers + 50L, n - 1L), TRUE, threads, verbose)
  seed <- sample.int(.Machine$integer.max, 1L)
  sampled <- cpp_trimap_triplets(z, graph$index, graph$distance, n_inliers, n_outliers, n_random,
                                 weight_temp, seed, threads)
  n_triplets <- ncol(sampled$triplets)
  res <- cpp_optimise_triplets(init, sampled$triplets, sampled$weights, "trimap",
                               lr * n / n_triplets, n_iter, 0, threads, verbose)
  check_diverged(c(res$layout, res$loss), "lr")
  new_local_embedding(res$layout, "trimap",
                      list(n_inliers = n_inliers, n_outliers = n_outliers, n_random = n_random,
                           weight_temp = weight_temp, lr = lr, n_iter = n_iter,
                           n_triplets = n_triplets),
                      match.call(), data = z, preprocessing = prep, loss = res$loss,
                      violated = res$violated)
}

# TriMap's preprocessing: 100 principal components above 100 variables, else one common
# range scaled to [0, 1] and centred.
trimap_preprocessing <- function(x, n_threads) {
  if (ncol(x) > 100L) {
    pc <- cpp_principal_axes(x, 100L, n_threads)
    return(list(type = "pca", center = pc$center, rotation = pc$rotation,
                variables = colnames(x)))
  }
  lo <- min(x)
  span <- max(max(x) - lo, .Machine$double.eps)
  list(type = "range", min = lo, span = span, center = colMeans((x - lo) / span),
       variables = colnames(x))
}

trimap_transform <- function(prep, x, n_threads) {
  if (prep$type == "pca") return(cpp_principal_scores(x, prep$center, prep$rotation, n_threads))
  sweep((x - prep$min) / prep$span, 2L, prep$center)
}

trimap_init <- function(init, z, prep, ndim, n_threads, call = rlang::caller_env()) {
  n <- nrow(z)
  if (is.matrix(init)) return(check_init_matrix(init, n, ndim, call = call))
  init <- check_choice(init, c("pca", "random"), call = call)
  if (init == "random") return(matrix(stats::rnorm(n * ndim, sd = 1e-4), n, ndim))
  scores <- if (prep$type == "pca") {
    z[, seq_len(ndim), drop = FALSE]
  } else {
    pc <- cpp_principal_axes(z, ndim, n_threads)
    cpp_principal_scores(z, pc$center, pc$rotation, n_threads)
  }
  0.01 * scores
}

check_init_matrix <- function(init, n, ndim, call = rlang::caller_env()) {
  if (!is.matrix(init) || !is.numeric(init) || !identical(dim(init), c(n, ndim)) ||
      any(!is.finite(init))) {
    abort("{.arg init} must be a method name or a finite numeric matrix with {n} rows and
           {ndim} columns.", call = call)
  }
  storage.mode(init) <- "double"
  init
}

#' Ordinal embedding from triplet comparisons
#'
#' Places n objects so that triplet comparisons "i is closer to j than to k"
#' hold, by t-distributed stochastic triplet embedding (t-STE, van der Maaten
#' and Weinberger, 2012, with one degree of freedom): the probability that a
#' triplet holds is \eqn{s_{ij} / (s_{ij} + s_{ik})}{s_ij / (s_ij + s_ik)} with Student-t
#' similarities \eqn{s_{ab} = 1 / (1 + |y_a - y_b|^2)}{s_ab = 1 / (1 + |y_a - y_b|^2)}, a
#' hyperkernel on triplets, and the layout minimises the weighted negative log-likelihood plus `l2`
#' \eqn{|Y|^2}{|Y|^2}. The optimiser is TriMap's (see [trimap()]): full-batch delta-bar-delta
#' descent with momentum, step size `lr` times n / (number of triplets), from a random start
#' (Gaussian, standard deviation 1e-4) or a given one.
#'
#' @inheritParams trimap
#' @param ndim Dimension of the layout.
#' @param triplets A matrix (or data frame) of three columns of object
#'   indices: each row (i, j, k) says i is closer to j than to k.
#' @param n Number of objects; by default the largest index. At most 1e8
#'   layout coordinates (`n` times `ndim`).
#' @param weights Optional non-negative weight per triplet.
#' @param l2 Penalty on the squared norm of the layout.
#' @param init `"random"` or a numeric matrix with `n` rows and `ndim`
#'   columns.
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return A [`local_embedding`][local_embedding] object with method
#'   `"ordinal"`; `loss` holds the mean loss at every iteration and `violated`
#'   the share of triplets out of order at the end.
#' @references van der Maaten, L. and Weinberger, K. (2012). Stochastic
#'   triplet embedding. *IEEE International Workshop on Machine Learning for
#'   Signal Processing*. \doi{10.1109/MLSP.2012.6349720}
#' @family embedding
#' @export
#' @examples
#' set.seed(1)
#' truth <- matrix(rnorm(60), 30)
#' tri <- matrix(sample(30, 3 * 2000, replace = TRUE), ncol = 3)
#' tri <- tri[tri[, 1] != tri[, 2] & tri[, 1] != tri[, 3] & tri[, 2] != tri[, 3], ]
#' d <- as.matrix(dist(truth))
#' swap <- d[tri[, 1:2]] > d[tri[, c(1, 3)]]
#' tri[swap, 2:3] <- tri[swap, 3:2]
#' fit <- ordinal_embed(tri)
#' fit$violated
ordinal_embed <- function(triplets, n = NULL, ndim = 2, l2 = 0, lr = 0.1, n_iter = 1000,
                          init = "random", weights = NULL, n_threads = NULL,
                          verbose = interactive(), ...) {
  check_dots(...)
  triplets <- check_triplets(triplets, n)
  n <- attr(triplets, "n")
  ndim <- check_ndim(ndim, Inf, max = 8L)
  check_size(as.double(n) * ndim, size_limits$layout_values, "layout coordinates", "n")
  weights <- check_weights(weights, ncol(triplets)) %||% rep(1, ncol(triplets))
  l2 <- check_positive(l2, zero = TRUE)
  lr <- check_positive(lr)
  n_iter <- check_size(check_count(n_iter), size_limits$iterations, "iterations", "n_iter")
  init <- if (identical(init, "random")) {
    matrix(stats::rnorm(n * ndim, sd = 1e-4), n, ndim)
  } else {
    check_init_matrix(init, n, ndim)
  }
  res <- cpp_optimise_triplets(init, triplets, weights, "tste", lr * n / ncol(triplets),
                               n_iter, l2, n_threads(n_threads), check_flag(verbose))
  check_diverged(c(res$layout, res$loss), c("lr", "l2"))
  new_local_embedding(res$layout, "ordinal",
                      list(n_triplets = ncol(triplets), l2 = l2, lr = lr, n_iter = n_iter),
                      match.call(), loss = res$loss, violated = res$violated)
}

# Triplets as a 3 x T integer matrix of 0-based indices, with the number of objects.
check_triplets <- function(triplets, n, call = rlang::caller_env()) {
  if (is.data.frame(triplets)) triplets <- as.matrix(triplets)
  if (!is.matrix(triplets) || !is.numeric(triplets) || ncol(triplets) != 3L ||
      nrow(triplets) == 0L) {
    abort("{.arg triplets} must be a numeric matrix with three columns and at least one row.",
          call = call)
  }
  if (any(!is.finite(triplets)) || any(triplets != round(triplets)) || any(triplets < 1)) {
    abort("{.arg triplets} must hold whole numbers of at least 1 (object indices).", call = call)
  }
  n <- if (is.null(n)) as.integer(max(triplets)) else check_count(n, "n", min = 2, call = call)
  if (max(triplets) > n) {
    abort("{.arg triplets} refers to object {max(triplets)}, beyond {.arg n} = {n}.", call = call)
  }
  if (any(triplets[, 1] == triplets[, 2] | triplets[, 1] == triplets[, 3] |
          triplets[, 2] == triplets[, 3])) {
    abort("Every row of {.arg triplets} must name three different objects.", call = call)
  }
  out <- t(triplets) - 1L
  storage.mode(out) <- "integer"
  structure(out, n = n)
}

#' Asymmetric multidimensional scaling
#'
#' Embeds an asymmetric similarity, such as the conditional co-occurrence
#' \eqn{P(j | i)}{P(j | i)} of words, with two points per object: a sender
#' \eqn{u_i}{u_i} and a receiver \eqn{v_j}{v_j}. The model is a normalised
#' heterogeneous kernel between them, the local-mean weights of a Gaussian
#' kernel:
#' \deqn{Q(j | i) = \exp(-|u_i - v_j|^2) / \sum_l \exp(-|u_i - v_l|^2).}{
#'  Q(j | i) = exp(-|u_i - v_j|^2) / sum_l exp(-|u_i - v_l|^2).}
#' Rows of `s` are normalised to conditional distributions
#' \eqn{P(j | i)}{P(j | i)} and the layout minimises the weighted Kullback-Leibler divergence
#' \eqn{\sum_i w_i \sum_j P(j | i) \log(P(j | i) / Q(j | i))}{sum_i w_i sum_j P(j | i) log(P(j | i)
#' / Q(j | i))}, whose gradient moves every sender towards the P-weighted and away from the
#' Q-weighted mean of the receivers. It starts from the singular value decomposition of the
#' double-centred \eqn{\log P}{log P} (which equals \eqn{2 U V'}{2 U V'} for centred U and V when
#' the model holds exactly) and is refined by L-BFGS ([stats::optim()]).
#'
#' @param s A square, non-negative numeric matrix; row i holds the
#'   similarities (counts, probabilities) from object i to every object.
#'   Rows must not be all zero.
#' @param ndim Dimension of the layout.
#' @param weights Optional non-negative weight per row (sender); by default
#'   all equal.
#' @param max_iter Most L-BFGS iterations.
#' @param tol Relative convergence tolerance of L-BFGS (`factr` is `tol`
#'   divided by the machine precision).
#' @param n_threads Validated as for every function of the package
#'   ([n_threads()]); the optimisation runs in R's matrix algebra on the main
#'   thread.
#' @param verbose Show a progress spinner (one tick per evaluation of the
#'   loss).
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return A [`local_embedding`][local_embedding] object with method
#'   `"asym_mds"`: `layout` holds the senders, `receivers` the receivers,
#'   `loss` the final divergence, `fitted` the matrix Q and `converged`
#'   whether L-BFGS stopped by its tolerance.
#' @family embedding
#' @export
#' @examples
#' co <- word_cooccurrence(rep(c("the cat sat on the mat", "a dog ate the bone"), 20),
#'                         vocab_size = 10)
#' fit <- asym_mds(co$prob)
#' plot(fit)
asym_mds <- function(s, ndim = 2, max_iter = 1000, tol = 1e-10, weights = NULL,
                     n_threads = NULL, verbose = interactive(), ...) {
  check_dots(...)
  n_threads(n_threads)
  verbose <- check_flag(verbose)
  p <- check_similarity(s)
  n <- nrow(p)
  ndim <- check_ndim(ndim, n)
  w <- check_weights(weights, n) %||% rep(1, n)
  w <- w / sum(w)
  max_iter <- check_count(max_iter)
  tol <- check_positive(tol)
  start <- asym_mds_start(p, ndim)
  unpack <- function(theta) {
    list(u = matrix(theta[seq_len(n * ndim)], n), v = matrix(theta[-seq_len(n * ndim)], n))
  }
  model <- function(u, v) {
    d2 <- outer(rowSums(u^2), rowSums(v^2), `+`) - 2 * tcrossprod(u, v)
    logits <- -d2 - apply(-d2, 1L, max)
    q <- exp(logits)
    q / rowSums(q)
  }
  pos <- p > 0
  loss <- function(theta) {
    if (verbose) cli::cli_progress_update(.envir = progress)
    par <- unpack(theta)
    q <- model(par$u, par$v)
    # Q underflows to 0 far from a receiver: its log is floored so that the loss stays finite
    # (optim() would otherwise warn that it replaced an infinite value).
    sum((w * p)[pos] * (log(p[pos]) - log(pmax(q[pos], .Machine$double.xmin))))
  }
  progress <- environment()
  if (verbose) cli::cli_progress_bar("asymmetric MDS", total = NA)
  gradient <- function(theta) {
    par <- unpack(theta)
    r <- w * (p - model(par$u, par$v))
    c(2 * (rowSums(r) * par$u - r %*% par$v), -2 * (crossprod(r, par$u) - colSums(r) * par$v))
  }
  opt <- stats::optim(c(start$u, start$v), loss, gradient, method = "L-BFGS-B",
                      control = list(maxit = max_iter, factr = tol / .Machine$double.eps))
  if (verbose) cli::cli_progress_done(.envir = progress)
  par <- unpack(opt$par)
  labels <- rownames(p) %||% colnames(p)
  dimnames(par$u) <- dimnames(par$v) <- list(labels, paste0("dim", seq_len(ndim)))
  q <- model(par$u, par$v)
  dimnames(q) <- dimnames(p)
  new_local_embedding(par$u, "asym_mds", list(max_iter = max_iter, tol = tol), match.call(),
                      receivers = par$v, loss = opt$value, fitted = q,
                      converged = opt$convergence == 0L)
}

# Rows of a square non-negative matrix normalised to conditional distributions.
check_similarity <- function(s, call = rlang::caller_env()) {
  if (is.data.frame(s)) s <- as.matrix(s)
  if (inherits(s, "Matrix")) s <- as.matrix(s)
  if (!is.matrix(s) || !is.numeric(s)) abort("{.arg s} must be a numeric matrix.", call = call)
  if (nrow(s) != ncol(s)) {
    abort("{.arg s} must be square; it is {nrow(s)} x {ncol(s)}.", call = call)
  }
  if (nrow(s) < 3L) abort("{.arg s} must have at least 3 rows.", call = call)
  if (any(!is.finite(s))) abort("{.arg s} has missing or non-finite values.", call = call)
  if (any(s < 0)) abort("{.arg s} must be non-negative.", call = call)
  totals <- rowSums(s)
  if (any(totals == 0)) {
    abort("{.arg s} has all-zero row{?s} {which(totals == 0)}: no similarity to normalise.",
          call = call)
  }
  s / totals
}

# Senders and receivers from the SVD of the double-centred log P, split evenly.
asym_mds_start <- function(p, ndim) {
  floor_p <- min(p[p > 0]) / 10
  logp <- log(pmax(p, floor_p))
  centred <- logp - outer(rowMeans(logp), colMeans(logp), `+`) + mean(logp)
  sv <- svd(centred / 2, nu = ndim, nv = ndim)
  root <- sqrt(sv$d[seq_len(ndim)])
  list(u = sv$u %*% diag(root, ndim), v = sv$v %*% diag(root, ndim))
}

# ndim must be a count below the number of variables (and at most `max`).
check_ndim <- function(ndim, d, max = Inf, call = rlang::caller_env()) {
  ndim <- check_count(ndim, "ndim", call = call)
  if (ndim >= d) abort("{.arg ndim} must be below the number of variables ({d}).", call = call)
  if (ndim > max) abort("{.arg ndim} must be at most {max}.", call = call)
  ndim
}

#' Embedding results
#'
#' [lle()], [trimap()], [ordinal_embed()] and [asym_mds()] return an object
#' of class `local_embedding`: a list with the `layout` (one row per point),
#' the `method`, its `parameters` and the `call`, plus what the method keeps
#' (see each function). `predict()` places new points where the method
#' defines it: LLE by the reconstruction weights of the new point from its
#' `k` nearest training points applied to their layout coordinates; TriMap by
#' the local mean of the layout coordinates of the new point's `n_inliers`
#' nearest training points (tricube kernel reaching to the next neighbour,
#' in TriMap's preprocessed space), a transform that TriMap's own
#' implementation lacks.
#'
#' @param x,object A `local_embedding` object.
#' @param labels Optional labels, one per point, to colour the points by.
#' @param newdata New points: a matrix or data frame with the training
#'   variables.
#' @param n_threads Number of threads (see [n_threads()]).
#' @param verbose Show a progress bar (the TriMap transform).
#' @param main,col,pch,... Graphical parameters, or further arguments
#'   (ignored by `print()` and `as.data.frame()`).
#' @param row.names,optional Ignored.
#' @return `print()` returns `x` invisibly; `plot()` returns `NULL`
#'   invisibly; `as.data.frame()` a data frame of the layout (with the
#'   receivers of asymmetric MDS under `role`); `predict()` a layout matrix
#'   for `newdata`.
#' @name local_embedding
#' @family embedding
#' @examples
#' fit <- lle(iris[, 1:4], k = 25)
#' fit
#' head(as.data.frame(fit))
#' predict(fit, iris[1:2, 1:4])
NULL

new_local_embedding <- function(layout, method, parameters, call, ...) {
  colnames(layout) <- paste0("dim", seq_len(ncol(layout)))
  structure(list(layout = layout, method = method, parameters = parameters, call = call, ...),
            class = "local_embedding")
}

embedding_names <- c(lle = "Locally linear embedding", trimap = "TriMap",
                     ordinal = "Ordinal embedding (t-STE)", asym_mds = "Asymmetric MDS")

#' @rdname local_embedding
#' @param digits Significant digits of the numbers that `print()` and
#'   `summary()` show; `NULL` for `max(3, getOption("digits") - 3)`.
#' @export
print.local_embedding <- function(x, ..., digits = NULL) {
  check_dots(...)
  digits <- check_digits(digits)
  p <- ncol(x$layout)
  shown <- vapply(x$parameters, function(v) show_num(v, digits), "")
  print_fields(
    sprintf("<local_embedding> %s: %d points in %d dimension%s", embedding_names[[x$method]],
            nrow(x$layout), p, if (p > 1L) "s" else ""),
    list(Parameters = paste(names(shown), shown, sep = " = ", collapse = ", "),
         `Final loss` = if (!is.null(x$loss)) show_num(utils::tail(x$loss, 1L), digits),
         `Triplets out of order` = if (!is.null(x$violated)) {
           sprintf("%.2f%%", 100 * x$violated)
         }))
  invisible(x)
}

#' @rdname local_embedding
#' @export
summary.local_embedding <- function(object, ..., digits = NULL) {
  check_dots(...)
  layout <- object$layout
  colnames(layout) <- paste0("dim", seq_len(ncol(layout)))
  structure(list(fit = object, layout = summary(layout),
                 loss = if (length(object$loss)) summary(object$loss),
                 digits = check_digits(digits)),
            class = "summary.local_embedding")
}

#' @export
print.summary.local_embedding <- function(x, ..., digits = x$digits) {
  check_dots(...)
  print_summary_sections(x, x$fit, list("Layout coordinates" = x$layout,
                                        "Loss over the iterations" = x$loss), digits)
}

#' @rdname local_embedding
#' @export
plot.local_embedding <- function(x, labels = NULL, main = embedding_names[[x$method]],
                                 col = NULL, pch = 19, ...) {
  check_graphics_dots(...)
  layout <- x$layout
  if (!is.null(labels) && length(labels) != nrow(layout)) {
    abort("{.arg labels} must have one entry per point ({nrow(layout)}).")
  }
  if (x$method == "asym_mds") {
    both <- rbind(layout, x$receivers)
    plot_with_defaults(room_for_legend(both[, 1L]), range(both[, 2L]), type = "n", main = main,
                       xlab = "dim1", ylab = "dim2", ...)
    graphics::segments(layout[, 1], layout[, 2], x$receivers[, 1], x$receivers[, 2],
                       col = "grey80")
    names <- rownames(layout) %||% seq_len(nrow(layout))
    graphics::text(layout[, 1:2], labels = names, col = "firebrick", cex = 0.7)
    graphics::text(x$receivers[, 1:2], labels = names, col = "steelblue", cex = 0.7)
    graphics::legend("topright", c("sender", "receiver"), text.col = c("firebrick", "steelblue"),
                     bty = "n")
    return(invisible(NULL))
  }
  groups <- if (is.null(labels)) factor(rep(1L, nrow(layout))) else as.factor(labels)
  palette <- if (is.null(labels)) "grey30" else group_colours(nlevels(groups))
  if (is.null(col)) col <- grDevices::adjustcolor(palette[as.integer(groups)], alpha.f = 0.7)
  cex <- if (nrow(layout) > 5000L) 0.2 else if (nrow(layout) > 1000L) 0.4 else 0.8
  legend <- !is.null(labels) && nlevels(groups) <= 20L
  # with a legend, the right quarter of the plot is left for it, beside the points
  xlim <- if (legend) room_for_legend(layout[, 1L]) else range(layout[, 1L])
  plot_with_defaults(layout[, 1], if (ncol(layout) > 1L) layout[, 2] else rep(0, nrow(layout)),
                     col = col, pch = pch, cex = cex, main = main, xlab = "dim1",
                     ylab = if (ncol(layout) > 1L) "dim2" else "", xlim = xlim, ...)
  if (legend) {
    graphics::legend("topright", levels(groups), col = palette, pch = pch, bty = "n",
                     cex = 0.8)
  }
  invisible(NULL)
}

#' @rdname local_embedding
#' @export
as.data.frame.local_embedding <- function(x, row.names = NULL, optional = FALSE, ...) {
  check_dots(..., .known = "stringsAsFactors")
  out <- as.data.frame(x$layout)
  if (x$method == "asym_mds") {
    out <- rbind(data.frame(role = "sender", object = rownames(x$layout) %||% seq_len(nrow(out)),
                            out),
                 data.frame(role = "receiver",
                            object = rownames(x$receivers) %||% seq_len(nrow(out)),
                            as.data.frame(x$receivers)))
    rownames(out) <- NULL
  }
  out
}

#' @rdname local_embedding
#' @export
predict.local_embedding <- function(object, newdata, n_threads = NULL, verbose = interactive(),
                                    ...) {
  check_dots(...)
  if (!object$method %in% c("lle", "trimap")) {
    abort("{.fn predict} is defined for LLE and TriMap layouts, not for {embedding_names[[object$method]]}.")
  }
  variables <- if (object$method == "lle") colnames(object$data) else object$preprocessing$variables
  newdata <- check_predictors(newdata)
  if (ncol(newdata) != length(variables)) {
    abort("{.arg newdata} must have the {length(variables)} training variables; it has {ncol(newdata)}.")
  }
  threads <- n_threads(n_threads)
  verbose <- check_flag(verbose)
  out <- if (object$method == "lle") {
    cpp_lle_transform(object$data, object$layout, newdata, object$parameters$k,
                      object$parameters$reg, threads)
  } else {
    z <- trimap_transform(object$preprocessing, newdata, threads)
    # A compact kernel: in 100 dimensions a Gaussian as wide as the k-th neighbour's distance
    # would spread its weight over hundreds of points and pull new points to the centre.
    spec <- engine_spec(object$data, "tricube", values = object$layout,
                        nn = list(k = object$parameters$n_inliers + 1L, scale = rep(1, ncol(z))),
                        method = "exact", n_threads = threads)
    fit <- engine_run(spec, z, verbose = verbose)
    matrix(fit$coef, nrow(z))
  }
  dimnames(out) <- list(rownames(newdata), colnames(object$layout))
  out
}
