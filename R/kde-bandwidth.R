# Bandwidth selectors for kernel density estimation.

kde_selectors <- c("rot", "plugin", "lscv", "scv", "isj")

#' Bandwidth selectors for kernel density estimation
#'
#' `kde_bandwidth()` computes the bandwidth that [kde()] uses for a selector
#' name. All selectors work on the Gaussian scale and convert the result to
#' `kernel` by the ratio of canonical bandwidths (see [kernels()]).
#'
#' - "rot": Silverman's rule \eqn{0.9 \min(s, IQR/1.34) n^{-1/5}} in one
#'   dimension (`stats::bw.nrd0()`), Scott's rule \eqn{s_j n^{-1/(d+4)}} per
#'   variable in more.
#'
#' @param x A numeric vector or matrix.
#' @param method The selector.
#' @inheritParams kde
#' @return A bandwidth in the package convention: a number (1-D), a vector
#'   (one scale per variable) or a bandwidth matrix.
#' @family density
#' @export
#' @examples
#' kde_bandwidth(faithful$eruptions)
kde_bandwidth <- function(x, method = "rot", kernel = "gaussian", weights = NULL,
                          n_threads = NULL) {
  x <- check_predictors(x)
  method <- check_choice(method, kde_selectors)
  kernel <- check_kernel(kernel)
  weights <- check_weights(weights, nrow(x))
  n_threads <- n_threads(n_threads)
  if (nrow(x) < 2L) abort("{.arg x} needs at least 2 points to choose a bandwidth.")
  bw <- switch(method,
    rot = bw_kde_rot(x, weights),
    abort("Selector {.val {method}} is not available yet.")
  )
  if (is.matrix(bw)) bw * kernel_scale_factor(kernel)^2 else bw * kernel_scale_factor(kernel)
}

# Weighted spread min(sd, IQR / 1.34) of every column and the effective sample size.
weighted_spread <- function(x, weights) {
  w <- (weights %||% rep(1, nrow(x)))
  w <- w / sum(w)
  n_eff <- 1 / sum(w^2)
  spread <- apply(x, 2L, function(v) {
    mu <- sum(w * v)
    s <- sqrt(sum(w * (v - mu)^2) * n_eff / max(n_eff - 1, 1))
    iqr <- if (is.null(weights)) stats::IQR(v) else weighted_iqr(v, w)
    iqr <- iqr / 1.34
    if (iqr > 0) min(s, iqr) else s
  })
  list(spread = spread, n = n_eff)
}

weighted_iqr <- function(v, w) {
  ord <- order(v)
  cw <- cumsum(w[ord])
  v[ord][which(cw >= 0.75)[1L]] - v[ord][which(cw >= 0.25)[1L]]
}

bw_kde_rot <- function(x, weights) {
  sp <- weighted_spread(x, weights)
  if (any(!(sp$spread > 0))) {
    abort(c("{.arg x} has a column with no spread: the rule of thumb gives a zero bandwidth.",
            i = "Give {.arg bandwidth} as a number."), call = rlang::caller_env(2L))
  }
  d <- ncol(x)
  if (d == 1L) 0.9 * sp$spread * sp$n^(-1 / 5) else sp$spread * sp$n^(-1 / (d + 4))
}
