# Imputation and denoising: the two-layer local-mean imputer (rows like this one, features like
# this one), non-local means, and a helper that shows images in a grid.

#' Impute missing values with a two-layer local mean
#'
#' Completes a numeric table with missing values by the hierarchical local
#' model of the localization method: every missing entry is a local mean,
#' over similar rows (the sample layer) and over related features of the same
#' row (the feature layer), and the two are iterated to a fixed point.
#'
#' **Sample layer.** Rows are compared on their commonly observed entries:
#' \deqn{d^2(i, j) = p \sum_c o_{ic} o_{jc} (x_{ic} - x_{jc})^2 / \sum_c o_{ic} o_{jc}}{
#'  d2(i, j) = p sum_c o_ic o_jc (x_ic - x_jc)^2 / sum_c o_ic o_jc}
#' (the squared distance over shared entries
#' rescaled to all `p` columns; `o` is 1 for observed entries). The `k` nearest rows of every
#' incomplete row are found once, exactly, on the observed entries. At each iteration the distances
#' to them are recomputed on the current values with imputed entries down-weighted (`o` replaced by
#' 1 for observed entries and `imputed_weight` for imputed ones), and the missing entry is
#' \eqn{S_{ic} = \sum_j K(d_{ij}/h_i) a_{jc} x_{jc} / \sum_j K(d_{ij}/h_i) a_{jc}}{S_ic = sum_j
#' K(d_ij / h_i) a_jc x_jc / sum_j K(d_ij / h_i) a_jc}, with \eqn{a_{jc}}{a_jc} the same entry
#' weights and \eqn{h_i}{h_i} the distance to the `ceiling(k / 2)`-th of these rows
#' (`bandwidth = NULL`, the `nn(k / 2)` rule: the nearest rows weigh most, the farther ones still
#' count), to the `m`-th for `bandwidth = nn(m)` (then `max(k, m)` rows are kept), or a fixed
#' number. With `kernel = "uniform"`, `bandwidth = nn(k)` and `imputed_weight = 0` the first
#' iteration is plain kNN imputation.
#'
#' **Feature layer.** For images (`image_dim` given), the missing pixel is the
#' local mean of the other pixels of the same image, weighted by `kernel` on
#' their distance in pixels (bandwidth `feature_bandwidth`, default 1 pixel;
#' kernels with unbounded support are cut at 3 bandwidths). For other tables,
#' features are linked by their correlation \eqn{r}{r} (pairwise complete
#' observations): the weight of feature \eqn{l}{l} for feature \eqn{c}{c} is
#' \eqn{K((1 - |r_{cl}|) / h_c)}{K((1 - |r_cl|) / h_c)}, with \eqn{h_c}{h_c} the
#' value of \eqn{1 - |r|}{1 - |r|} of the 10th most correlated feature
#' (`feature_bandwidth = NULL`, or `nn(m)` for the m-th; a number is a fixed
#' bandwidth), keeping the `2 m` most correlated features; the values
#' averaged are the per-pair regression predictions
#' \eqn{\mu_c + s_c r_{cl} z_{il}}{mu_c + s_c r_cl z_il} on the standardised
#' scale \eqn{z}{z}. Entry weights are as in the sample layer.
#'
#' For tables (`image_dim = NULL`) both layers work on standardised columns
#' (centred on the observed mean, divided by the observed standard
#' deviation), so that no column dominates the distances; the result is on
#' the original scale. Images are used as they are.
#'
#' **Combination.** Missing entries start at their column means. Each
#' iteration computes both layers from the previous values and sets every
#' missing entry to `mix * S + (1 - mix) * F` (one layer alone where the other
#' has no information). Iterations stop when the root-mean-square change of
#' the missing entries, relative to the standard deviation of the observed
#' values, falls below `tol`, or after `max_iter`. Observed entries are never
#' changed. With `mix = "auto"`, observed entries are hidden in 5% of the
#' rows (at least 20, at most 200): in each, the entries that another,
#' randomly drawn, incomplete row is missing, so that the hidden entries
#' follow the real pattern of missingness (scattered or in blocks); the
#' imputation is run with `mix = 0.5`, and `mix` is
#' the value of `seq(0, 1, 0.05)` whose combination of the two layers best
#' predicts the hidden entries (root-mean-square error); the neighbour rows
#' found on that masked table are then reused for the final run. This uses
#' R's random numbers: call `set.seed()` first for a reproducible `mix`.
#'
#' **Special cases.** Rows with no observed entry get their column means
#' (with a warning) and take no part in the layers; columns with no observed
#' entry start at the mean of all observed values (with a warning) and keep it
#' unless the feature layer links them to other features (images). A table
#' without missing values is returned unchanged, with a message.
#'
#' @param x A numeric matrix or data frame with `NA` for missing values.
#' @param image_dim For images stored one per row: `c(height, width)`, with
#'   pixel `(r, c)` in column `(r - 1) * width + c` (the layout of
#'   [fashion_mnist()]); `NULL` for other tables.
#' @param layers Which layers to use: `"feature"`, `"sample"` or both.
#' @param kernel A kernel name, see [kernels()], used by both layers.
#' @param bandwidth Sample-layer bandwidth: `NULL` for the distance to the
#'   `ceiling(k / 2)`-th nearest row, an [nn()] object, or a positive number
#'   (in the units of the rescaled distance).
#' @param k Number of neighbour rows of every incomplete row.
#' @param feature_bandwidth Feature-layer bandwidth: `NULL` for the defaults
#'   above, a positive number, or (for tables) an [nn()] object.
#' @param mix Share of the sample layer in the combined estimate, a number in
#'   \[0, 1\] or `"auto"`. Ignored with a single layer.
#' @param imputed_weight Weight of currently imputed entries, relative to
#'   observed ones, inside both layers (in \[0, 1\]).
#' @param max_iter Most iterations.
#' @param tol Convergence tolerance on the relative change.
#' @param n_threads Number of threads, see [n_threads()]; results do not
#'   depend on it.
#' @param verbose Show progress.
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return An object of class `local_imputation`: a list with `completed`
#'   (the completed matrix), `missing` (the logical matrix of missing
#'   entries), `change` (relative change at every iteration), `iterations`,
#'   `converged`, `layers`, `mix`, `mix_search` (for `mix = "auto"`, the
#'   hold-out error of every candidate `mix`), `parameters` and `call`. Use
#'   `as.matrix()` for the completed matrix.
#' @family imputation
#' @export
#' @examples
#' set.seed(1)
#' x <- tcrossprod(matrix(rnorm(200 * 2), 200), matrix(rnorm(8 * 2), 8))
#' x_na <- x
#' x_na[sample(length(x), 300)] <- NA
#' fit <- local_impute(x_na, max_iter = 5, n_threads = 1)
#' fit
#' sqrt(mean((as.matrix(fit) - x)[is.na(x_na)]^2))
local_impute <- function(x, kernel = "gaussian", bandwidth = NULL, image_dim = NULL,
                         layers = c("feature", "sample"), k = 10,
                         feature_bandwidth = NULL, mix = "auto", imputed_weight = 0.1,
                         max_iter = 20, tol = 1e-4, n_threads = NULL,
                         verbose = interactive(), ...) {
  check_dots(...)
  x <- check_incomplete(x)
  n <- nrow(x)
  p <- ncol(x)
  if (!is.null(image_dim)) image_dim <- check_image_dim(image_dim, p)
  if (!is.character(layers) || length(layers) == 0L || !all(layers %in% c("feature", "sample"))) {
    abort("{.arg layers} must be {.val feature}, {.val sample} or both.")
  }
  layers <- intersect(c("sample", "feature"), layers)
  kernel <- check_kernel(kernel, user = FALSE,
                         need = "Imputation and denoising evaluate built-in kernels only.")
  k <- check_count(k)
  if (n < 2L && "sample" %in% layers) abort("{.arg x} needs at least two rows for the sample layer.")
  nn_rank <- as.integer(ceiling(k / 2))
  h_fixed <- 0
  if (inherits(bandwidth, "local_nn")) {
    nn_rank <- bandwidth$k
  } else if (!is.null(bandwidth)) {
    h_fixed <- check_positive(bandwidth)
    nn_rank <- 0L
  }
  candidates <- min(n - 1L, max(k, nn_rank))
  imputed_weight <- check_positive(imputed_weight, zero = TRUE)
  if (imputed_weight > 1) abort("{.arg imputed_weight} must be in [0, 1].")
  max_iter <- check_count(max_iter)
  tol <- check_positive(tol, zero = TRUE)
  both <- length(layers) == 2L
  if (!both) {
    mix <- if (layers == "sample") 1 else 0
  } else if (!identical(mix, "auto")) {
    mix <- check_positive(mix, zero = TRUE)
    if (mix > 1) abort("{.arg mix} must be {.val auto} or a number in [0, 1].")
  }
  n_threads <- n_threads(n_threads)
  verbose <- check_flag(verbose)
  call <- match.call()
  parameters <- list(k = k, kernel = kernel, imputed_weight = imputed_weight,
                     max_iter = max_iter, tol = tol)

  miss <- is.na(x)
  if (!any(miss)) {
    cli::cli_inform("{.arg x} has no missing values; it is returned unchanged.")
    return(new_local_imputation(x, miss, numeric(0), TRUE, layers, if (both) NA_real_ else mix,
                                NULL, parameters, call))
  }
  obs <- !miss
  empty_rows <- rowSums(obs) == 0L
  empty_cols <- colSums(obs) == 0L
  if (all(empty_rows)) abort("{.arg x} has no observed values.")
  if (any(empty_rows)) {
    warn("{sum(empty_rows)} row{?s} of {.arg x} {?has/have} no observed value and get{?s/} the
          column means.")
  }
  if (any(empty_cols)) {
    bad <- colnames(x)[empty_cols] %||% which(empty_cols)
    warn("Column{?s} {.field {bad}} of {.arg x} {?has/have} no observed value and start{?s/} at
          the mean of all observed values.")
  }
  original <- x
  if (is.null(image_dim)) {
    # Tables: standardised columns, so that no column dominates the row distances.
    col_mu <- colMeans(x, na.rm = TRUE)
    col_sd <- apply(x, 2L, stats::sd, na.rm = TRUE)
    col_mu[empty_cols] <- mean(x, na.rm = TRUE)
    col_sd[!is.finite(col_sd) | col_sd <= 0] <- 1
    x <- sweep(sweep(x, 2L, col_mu), 2L, col_sd, "/")
  }
  centre <- colMeans(x, na.rm = TRUE)
  centre[empty_cols] <- if (is.null(image_dim)) 0 else mean(x, na.rm = TRUE)
  start <- x
  start[miss] <- centre[col(x)[miss]]
  scale <- stats::sd(x[obs])
  if (!is.finite(scale) || scale <= 0) scale <- 1

  links <- if ("feature" %in% layers) {
    feature_links(x, image_dim, kernel, feature_bandwidth, centre)
  } else {
    empty_links(p)
  }
  settings <- list(kernel = kernel, use_sample = "sample" %in% layers,
                   use_feature = "feature" %in% layers, imputed_weight = imputed_weight,
                   nn_rank = nn_rank, bandwidth = h_fixed, max_iter = max_iter, tol = tol,
                   scale = scale, n_threads = n_threads, verbose = verbose)

  mix_search <- NULL
  search_obs <- obs
  hidden <- integer(0)
  if (identical(mix, "auto")) {
    hidden <- holdout_entries(miss, empty_rows)
    search_obs[hidden] <- FALSE
  }
  graph <- if (settings$use_sample) {
    query <- rowSums(search_obs) > 0L & rowSums(search_obs) < p
    xt0 <- t(x)
    xt0[!t(search_obs)] <- 0
    cpp_shared_neighbours(xt0, t(search_obs) + 0, query, candidates, n_threads, verbose)$index
  } else {
    matrix(0L, 0L, n)
  }
  if (identical(mix, "auto")) {
    masked <- start
    masked[hidden] <- centre[col(x)[hidden]]
    val <- run_impute(masked, search_obs, graph, links, settings, 0.5)
    truth <- t(x)[match_positions(hidden, n, p)]
    at <- match(match_positions(hidden, n, p), val$position)
    keep <- !is.na(at)
    grid <- seq(0, 1, by = 0.05)
    rmse <- vapply(grid, function(m) {
      est <- combine_layers_r(val$sample[at[keep]], val$feature[at[keep]], m,
                              t(masked)[match_positions(hidden, n, p)][keep])
      sqrt(mean((est - truth[keep])^2))
    }, 0)
    mix_search <- data.frame(mix = grid, rmse = rmse)
    mix <- if (any(is.finite(rmse))) grid[which.min(rmse)] else 0.5
  }
  res <- run_impute(start, obs, graph, links, settings, mix)
  completed <- t(res$x)
  if (is.null(image_dim)) completed <- sweep(sweep(completed, 2L, col_sd, "*"), 2L, col_mu, "+")
  completed[obs] <- original[obs]
  dimnames(completed) <- dimnames(original)
  parameters$bandwidth <- if (nn_rank > 0L) paste0("nn(", nn_rank, ")") else h_fixed
  parameters$feature_bandwidth <- attr(links, "bandwidth")
  parameters$image_dim <- image_dim
  new_local_imputation(completed, miss, res$change,
                       length(res$change) < max_iter || utils::tail(res$change, 1L) < tol,
                       layers, mix, mix_search, parameters, call)
}

# Entries to hide for choosing `mix`: in up to 200 random rows (5% of them, at least 20), the
# observed entries that a randomly drawn incomplete row is missing, so that the hidden entries
# look like the real missing ones (scattered pixels or whole blocks); every row keeps one
# observed entry at least.
holdout_entries <- function(miss, empty_rows) {
  n <- nrow(miss)
  usable <- which(!empty_rows)
  donors <- which(rowSums(miss) > 0L & !empty_rows)
  size <- min(length(usable), 200L, max(20L, ceiling(0.05 * n)))
  rows <- usable[sample.int(length(usable), size)]
  hidden <- numeric(0)
  if (length(donors)) {
    from <- donors[sample.int(length(donors), size, replace = TRUE)]
    hidden <- unlist(lapply(seq_len(size), function(a) {
      i <- rows[a]
      cols <- which(!miss[i, ] & miss[from[a], ])
      if (length(cols) >= sum(!miss[i, ])) cols <- cols[-1L]
      if (length(cols)) i + (cols - 1) * n else numeric(0)
    }))
  }
  if (length(hidden) == 0L) {
    # Only empty rows are incomplete, or no pattern fits: 5% of the observed entries at random.
    observed_at <- which(!miss & !empty_rows[row(miss)])
    hidden <- observed_at[sample.int(length(observed_at),
                                     max(1L, ceiling(0.05 * length(observed_at))))]
  }
  hidden
}

# One run of the iterations from `start` (n x p) with observed flags `obs`.
run_impute <- function(start, obs, graph, links, s, mix) {
  active <- rowSums(obs) > 0L & rowSums(obs) < ncol(obs)
  cpp_impute(t(start), t(obs) + 0, active, graph, links, s$kernel, s$use_sample, s$use_feature,
             s$imputed_weight, s$nn_rank, s$bandwidth, mix, s$max_iter, s$tol, s$scale,
             s$n_threads, s$verbose)
}

# Positions in the transposed (p x n) matrix of entries given by their positions in n x p.
match_positions <- function(pos, n, p) {
  i <- (pos - 1L) %% n
  j <- (pos - 1L) %/% n
  i * p + j + 1
}

combine_layers_r <- function(s, f, mix, fallback) {
  out <- mix * s + (1 - mix) * f
  out[is.na(s)] <- f[is.na(s)]
  out[is.na(f)] <- s[is.na(f)]
  out[is.na(out)] <- fallback[is.na(out)]
  out
}

empty_links <- function(p) {
  list(start = rep(0, p + 1L), feature = integer(0), weight = numeric(0), slope = numeric(0),
       centre = numeric(p), scale = rep(1, p))
}

# The most feature-layer links of an image (pixel pairs, 16 bytes each: 800 MB).
feature_link_limit <- 5e7

# Feature-layer links: spatial for images, by correlation for other tables.
feature_links <- function(x, image_dim, kernel, feature_bandwidth, centre,
                          call = rlang::caller_env()) {
  compact <- kernel_row(kernel)$compact
  if (!is.null(image_dim)) {
    h <- if (is.null(feature_bandwidth)) 1 else {
      check_positive(feature_bandwidth, arg = "feature_bandwidth", call = call)
    }
    # no pixel lies beyond the image's diagonal: a wider reach only lengthens the loop over offsets
    reach <- min(if (compact) h else 3 * h, sqrt(sum((image_dim - 1)^2)) + 1)
    pixels <- prod(image_dim)
    check_size(pixels * min(pixels, pi * reach^2), feature_link_limit,
               "feature links (pixel pairs within the kernel's reach)", "feature_bandwidth",
               call = call)
    links <- cpp_spatial_links(image_dim[1L], image_dim[2L], h, reach, kernel)
    attr(links, "bandwidth") <- h
    return(links)
  }
  p <- ncol(x)
  if (p < 2L) return(structure(empty_links(p), bandwidth = NA))
  r <- suppressWarnings(stats::cor(x, use = "pairwise.complete.obs"))
  r[!is.finite(r)] <- 0
  diag(r) <- 0
  rank <- 10L
  h_fixed <- NULL
  if (inherits(feature_bandwidth, "local_nn")) {
    rank <- feature_bandwidth$k
  } else if (!is.null(feature_bandwidth)) {
    h_fixed <- check_positive(feature_bandwidth, arg = "feature_bandwidth", call = call)
  }
  rank <- min(rank, p - 1L)
  keep <- min(p - 1L, 2L * rank)
  spread <- apply(x, 2L, stats::sd, na.rm = TRUE)
  spread[!is.finite(spread) | spread <= 0] <- 1
  start <- 0
  feature <- integer(0)
  weight <- slope <- numeric(0)
  for (c in seq_len(p)) {
    d <- 1 - abs(r[, c])
    d[c] <- Inf
    ord <- order(d)[seq_len(keep)]
    h <- h_fixed %||% d[ord[rank]]
    w <- if (h > 0) kernel_value(d[ord] / h, kernel) else as.numeric(d[ord] <= 0)
    ok <- w > 0 & r[ord, c] != 0
    feature <- c(feature, ord[ok] - 1L)
    weight <- c(weight, w[ok])
    slope <- c(slope, r[ord[ok], c])
    start <- c(start, length(feature))
  }
  structure(list(start = start, feature = feature, weight = weight, slope = slope,
                 centre = as.double(centre), scale = as.double(spread)),
            bandwidth = if (is.null(h_fixed)) paste0("nn(", rank, ")") else h_fixed)
}

# A numeric matrix that may hold NA (but no infinite values or NaN-free text).
check_incomplete <- function(x, arg = rlang::caller_arg(x), call = rlang::caller_env()) {
  force(arg)
  if (is.data.frame(x)) {
    bad <- names(x)[!vapply(x, function(col) is.numeric(col) && !is.object(col), TRUE)]
    if (length(bad)) {
      abort(c("{.arg {arg}} must have numeric columns only.", x = "Not numeric: {.field {bad}}."),
            call = call)
    }
    x <- as.matrix(x)
  }
  if (!is.matrix(x) || !(is.numeric(x) || is.logical(x) && all(is.na(x)))) {
    abort("{.arg {arg}} must be a numeric matrix or data frame.", call = call)
  }
  storage.mode(x) <- "double"
  if (nrow(x) == 0L || ncol(x) == 0L) abort("{.arg {arg}} has no rows or no columns.", call = call)
  if (any(is.infinite(x))) abort("{.arg {arg}} has infinite values.", call = call)
  x
}

check_image_dim <- function(image_dim, p, arg = rlang::caller_arg(image_dim),
                            call = rlang::caller_env()) {
  force(arg)
  if (!is.numeric(image_dim) || length(image_dim) != 2L || any(!is.finite(image_dim)) ||
      any(image_dim < 1) || any(image_dim != round(image_dim))) {
    abort("{.arg {arg}} must be two whole numbers: the height and width of the images.",
          call = call)
  }
  if (prod(image_dim) != p) {
    abort("{.arg {arg}} gives {prod(image_dim)} pixels ({image_dim[1]} x {image_dim[2]}) but
           {.arg x} has {p} columns.", call = call)
  }
  as.integer(image_dim)
}

new_local_imputation <- function(completed, missing, change, converged, layers, mix, mix_search,
                                 parameters, call) {
  structure(list(completed = completed, missing = missing, change = change,
                 iterations = length(change), converged = converged, layers = layers, mix = mix,
                 mix_search = mix_search, parameters = parameters, call = call),
            class = "local_imputation")
}

#' Methods for local imputations
#'
#' `print()` summarises a [local_impute()] result, `plot()` draws the
#' convergence trace (relative change per iteration, log scale) and
#' `as.matrix()` returns the completed matrix.
#'
#' @param x A `local_imputation` object.
#' @param ... Passed on to [graphics::plot()] (ignored by the other methods).
#' @param main Plot title.
#' @return `print()` and `plot()` return `x` invisibly; `as.matrix()` the
#'   completed matrix.
#' @name local_imputation
#' @family imputation
#' @examples
#' x <- as.matrix(iris[, 1:4])
#' x[c(3, 40, 77), c(1, 3)] <- NA
#' fit <- local_impute(x, max_iter = 5, n_threads = 1)
#' fit
#' plot(fit)
#' head(as.matrix(fit), 3)
NULL

#' @rdname local_imputation
#' @param digits Significant digits of the numbers that `print()` and
#'   `summary()` show; `NULL` for `max(3, getOption("digits") - 3)`.
#' @export
print.local_imputation <- function(x, ..., digits = NULL) {
  check_dots(...)
  digits <- check_digits(digits)
  n_miss <- sum(x$missing)
  header <- sprintf("<local_imputation> %d missing entr%s of %d (%.1f%%) in a %d x %d table",
                    n_miss, if (n_miss == 1L) "y" else "ies", length(x$missing),
                    100 * n_miss / length(x$missing), nrow(x$completed), ncol(x$completed))
  if (n_miss == 0L) {
    print_fields(header, list())
    return(invisible(x))
  }
  mix <- if (length(x$layers) == 2L) {
    sprintf(" (mix = %.2f%s)", x$mix, if (is.null(x$mix_search)) "" else ", chosen on hold-out")
  }
  print_fields(header, list(
    Layers = paste0(paste(x$layers, collapse = " + "), mix),
    Iterations = sprintf("%d (%s, last relative change %s)", x$iterations,
                         if (x$converged) "converged" else "not converged",
                         show_num(utils::tail(x$change, 1L), digits))))
  invisible(x)
}

#' @rdname local_impute
#' @param object A `local_imputation`.
#' @param ... Must be empty.
#' @param digits Significant digits of the numbers that `print()` and
#'   `summary()` show; `NULL` for `max(3, getOption("digits") - 3)`.
#' @export
summary.local_imputation <- function(object, ..., digits = NULL) {
  check_dots(...)
  per_column <- colSums(object$missing)
  names(per_column) <- colnames(object$completed) %||% paste0("V", seq_along(per_column))
  imputed <- object$completed[object$missing]
  structure(list(fit = object, per_column = per_column,
                 imputed = if (length(imputed)) summary(imputed), change = object$change,
                 digits = check_digits(digits)),
            class = "summary.local_imputation")
}

#' @export
print.summary.local_imputation <- function(x, ..., digits = x$digits) {
  check_dots(...)
  print_summary_sections(x, x$fit, list("Missing entries by column" = x$per_column,
                                        "Imputed values" = x$imputed,
                                        "Relative change by iteration" = signif(x$change, 3)),
                         digits)
}

#' @rdname local_imputation
#' @export
plot.local_imputation <- function(x, main = "Convergence of the local imputation", ...) {
  check_graphics_dots(...)
  if (length(x$change) == 0L) abort("Nothing was imputed: there is no convergence trace.")
  change <- pmax(x$change, .Machine$double.eps)
  graphics::plot(seq_along(change), change, type = "b", log = "y", pch = 19, main = main,
                 xlab = "iteration", ylab = "relative change", ...)
  graphics::abline(h = x$parameters$tol, lty = 2, col = "grey50")
  invisible(x)
}

#' @rdname local_imputation
#' @export
as.matrix.local_imputation <- function(x, ...) {
  check_dots(...)
  x$completed
}

#' Non-local means denoising
#'
#' Denoises an image by non-local means (Buades, Coll and Morel, 2005): every
#' pixel becomes the local mean of the pixels of its `search` x `search`
#' window, weighted by a kernel on the distance between the `patch` x `patch`
#' patches around them. With the default Gaussian kernel
#' \deqn{w = \exp(-\max(d^2 - 2\sigma^2, 0) / h^2),}{
#'  w = exp(-max(d2 - 2 sigma^2, 0) / h^2),}
#' where \eqn{d^2}{d^2} is the mean squared difference of the two patches and
#' \eqn{\sigma}{sigma} the noise standard deviation (the form of Buades, Coll and
#' Morel, 2011); another kernel \eqn{k}{k} gives
#' \eqn{w = k(\sqrt{2 \max(d^2 - 2\sigma^2, 0)} / h)}{w = k(sqrt(2 max(d2 - 2 sigma^2, 0)) / h)}
#' up to a constant, so that the bandwidth `h` keeps the Gaussian's meaning (a compact
#' kernel ignores patches whose excess distance exceeds \eqn{h^2 / 2}{h^2 / 2}). The image is
#' mirrored at its edges. When `sigma` is `NULL` it is estimated by Immerkaer's (1996) fast
#' estimator (a Laplacian-type 3 x 3 filter that cancels smooth structure); when `bandwidth` is `NULL` it is
#' `0.8 * sigma`, the factor that gave the highest PSNR on noisy mosaics of Fashion-MNIST images
#' (noise sd 0.1, 7 x 7 patches; 0.6 to 1 were within 0.4 dB). The work is split over rows; the
#' result does not depend on the number of threads.
#'
#' @param img A numeric matrix (the image, rows from the top).
#' @param kernel A kernel name, see [kernels()]: the weight of a patch as a
#'   function of its distance.
#' @param bandwidth The filtering parameter \eqn{h}{h}, or `NULL` for
#'   `0.8 * sigma`.
#' @param patch,search Odd widths of the patch and of the search window.
#' @param sigma Noise standard deviation, or `NULL` to estimate it.
#' @inheritParams local_impute
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return The denoised image, a matrix like `img`, with attributes `sigma`
#'   and `bandwidth`.
#' @references
#' Buades, A., Coll, B. and Morel, J.-M. (2005). A non-local algorithm for
#' image denoising. *CVPR 2005* 2, 60-65. \doi{10.1109/CVPR.2005.38}
#'
#' Buades, A., Coll, B. and Morel, J.-M. (2011). Non-local means denoising.
#' *Image Processing On Line* 1, 208-212. \doi{10.5201/ipol.2011.bcm_nlm}
#'
#' Immerkaer, J. (1996). Fast noise variance estimation. *Computer Vision and
#' Image Understanding* 64(2), 300-302. \doi{10.1006/cviu.1996.0060}
#' @family imputation
#' @export
#' @examples
#' set.seed(1)
#' img <- outer(1:64, 1:64, function(r, c) as.numeric((r - 32)^2 + (c - 32)^2 < 300))
#' noisy <- img + matrix(rnorm(64 * 64, sd = 0.2), 64)
#' clean <- local_denoise(noisy, patch = 5, search = 11, n_threads = 1)
#' attr(clean, "sigma")
#' c(noisy = sqrt(mean((noisy - img)^2)), denoised = sqrt(mean((clean - img)^2)))
local_denoise <- function(img, kernel = "gaussian", bandwidth = NULL, patch = 7, search = 21,
                          sigma = NULL, n_threads = NULL, verbose = interactive(), ...) {
  check_dots(...)
  if (!is.matrix(img) || !is.numeric(img)) abort("{.arg img} must be a numeric matrix.")
  if (any(!is.finite(img))) abort("{.arg img} has missing or non-finite values.")
  if (length(img) == 0L) abort("{.arg img} has no pixels.")
  kernel <- check_kernel(kernel, user = FALSE,
                         need = "Imputation and denoising evaluate built-in kernels only.")
  patch <- check_odd(patch)
  search <- check_odd(search)
  if (is.null(sigma)) {
    sigma <- noise_sd(img)
  } else {
    sigma <- check_positive(sigma, zero = TRUE)
  }
  h <- if (is.null(bandwidth)) 0.8 * sigma else check_positive(bandwidth)
  n_threads <- n_threads(n_threads)
  verbose <- check_flag(verbose)
  scale <- max(abs(img))
  # h negligible against the image puts all the weight on each pixel itself: nothing to do
  out <- if (scale > 0 && h > 1e-100 * scale) {
    storage.mode(img) <- "double"
    # The weights divide squared patch distances by h^2, which under- or overflow for values
    # far from 1: such images are denoised in units of their largest value.
    unit <- if (scale > 1e-100 && scale < 1e100 && h > 1e-100 && h < 1e100) 1 else scale
    unit * t(cpp_nl_means(t(img / unit), patch %/% 2L, search %/% 2L, h / unit, sigma / unit,
                          kernel, n_threads, verbose))
  } else {
    img + 0  # a noiseless image: nothing to do
  }
  dimnames(out) <- dimnames(img)
  structure(out, sigma = sigma, bandwidth = h)
}

check_odd <- function(x, arg = rlang::caller_arg(x), call = rlang::caller_env()) {
  force(arg)
  x <- check_count(x, arg = arg, call = call)
  if (x %% 2L == 0L) abort("{.arg {arg}} must be an odd whole number.", call = call)
  x
}

# Immerkaer's estimate of the noise sd: sqrt(pi / 2) / (6 (H - 2) (W - 2)) sum |I * N| with the
# mask N = [1 -2 1; -2 4 -2; 1 -2 1], which is blind to locally linear structure.
noise_sd <- function(img) {
  H <- nrow(img)
  W <- ncol(img)
  if (H < 3L || W < 3L) return(stats::mad(as.vector(img)))
  r <- 2:(H - 1L)
  c <- 2:(W - 1L)
  s <- function(dr, dc) img[r + dr, c + dc]
  conv <- s(-1, -1) + s(-1, 1) + s(1, -1) + s(1, 1) -
    2 * (s(-1, 0) + s(1, 0) + s(0, -1) + s(0, 1)) + 4 * s(0, 0)
  sqrt(pi / 2) * sum(abs(conv)) / (6 * (H - 2) * (W - 2))
}

#' Show images in a grid
#'
#' Draws images side by side with base graphics, one panel each, on a common
#' grey scale (dark for high values). Missing pixels are drawn in `na_col`.
#'
#' @param x A matrix with one image per row (pixel `(r, c)` in column
#'   `(r - 1) * width + c`), or a list of image matrices.
#' @param image_dim `c(height, width)` of the images in the rows of `x`;
#'   `NULL` for square images (or when `x` is a list).
#' @param nrow,ncol Layout of the grid; by default about square.
#' @param main Titles of the panels (recycled), or `NULL`.
#' @param range Values mapped to the ends of the grey scale; by default the
#'   range of all images.
#' @param col Colours of the scale.
#' @param na_col Colour of missing pixels.
#' @param ... Passed on to [graphics::image()].
#' @return `NULL`, invisibly.
#' @family imputation
#' @export
#' @examples
#' plot_images(fashion_mnist_subset$x[1:6, ], c(28, 28),
#'             main = as.character(fashion_mnist_subset$label[1:6]))
plot_images <- function(x, image_dim = NULL, nrow = NULL, ncol = NULL, main = NULL,
                        range = NULL, col = grDevices::gray.colors(64, start = 1, end = 0),
                        na_col = "firebrick", ...) {
  check_graphics_dots(..., .known = names(formals(graphics::image.default)))
  images <- if (is.list(x) && !is.data.frame(x)) {
    if (!all(vapply(x, function(m) is.matrix(m) && is.numeric(m), TRUE))) {
      abort("{.arg x} must be a matrix of images in rows or a list of numeric matrices.")
    }
    x
  } else {
    if (is.data.frame(x)) x <- as.matrix(x)
    if (is.numeric(x) && is.null(dim(x))) x <- matrix(x, nrow = 1L)
    if (!is.matrix(x) || !is.numeric(x)) abort("{.arg x} must be a numeric matrix or a list.")
    if (is.null(image_dim)) {
      side <- round(sqrt(ncol(x)))
      if (side * side != ncol(x)) {
        abort("{.arg image_dim} is needed: {ncol(x)} pixels do not make a square image.")
      }
      image_dim <- c(side, side)
    }
    image_dim <- check_image_dim(image_dim, ncol(x))
    lapply(seq_len(nrow(x)), function(i) matrix(x[i, ], image_dim[1L], image_dim[2L],
                                                byrow = TRUE))
  }
  m <- length(images)
  if (m == 0L) abort("{.arg x} holds no image.")
  if (!is.null(nrow)) nrow <- check_count(nrow)
  if (!is.null(ncol)) ncol <- check_count(ncol)
  if (is.null(ncol)) ncol <- if (is.null(nrow)) ceiling(sqrt(m)) else ceiling(m / nrow)
  if (is.null(nrow)) nrow <- ceiling(m / ncol)
  nrow <- min(nrow, m) # panels beyond the images would stay blank
  ncol <- min(ncol, m)
  if (is.null(range)) range <- base::range(unlist(images), na.rm = TRUE, finite = TRUE)
  if (!is.null(main)) main <- rep_len(as.character(main), m)
  old <- graphics::par(mfrow = c(nrow, ncol), mar = c(0.2, 0.2, if (is.null(main)) 0.2 else 1.4,
                                                      0.2))
  on.exit(graphics::par(old))
  for (i in seq_len(m)) {
    img <- images[[i]]
    z <- t(img)[, nrow(img):1, drop = FALSE]  # image() puts the first row at the bottom
    graphics::plot.new()
    graphics::plot.window(c(0, 1), c(0, 1), xaxs = "i", yaxs = "i")
    gx <- seq(0, 1, length.out = ncol(img) + 1L)
    gy <- seq(0, 1, length.out = nrow(img) + 1L)
    graphics::image(gx, gy, pmin(pmax(z, range[1]), range[2]), zlim = range, col = col,
                    add = TRUE, ...)
    if (anyNA(z)) {
      graphics::image(gx, gy, ifelse(is.na(z), 1, NA), zlim = c(0, 1), col = na_col, add = TRUE)
    }
    if (!is.null(main)) graphics::title(main[i], line = 0.3, cex.main = 0.8, font.main = 1)
  }
  invisible(NULL)
}
