# Generative local means: the score of a kernel-smoothed density is a local mean (under the
# kernel's shadow, see kernels.hpp), Tweedie's optimal denoiser is the Gaussian local mean, and a
# kernel diffusion sampler is a sequence of local means at falling noise levels. Every local mean
# comes from the engine (R/engine.R).

#' Score of a kernel density estimate
#'
#' `local_score()` computes the score \eqn{\nabla \log \hat p_h(x)}{grad log p_h(x)} of the
#' kernel density estimate \eqn{\hat p_h}{p_h} of the data, with the density
#' itself, at any points and in any dimension. The score is a local mean:
#' for the Gaussian kernel (exact)
#' \deqn{\nabla \log \hat p_h(x) = (m_h(x) - x) / h^2,}{grad log p_h(x) = (m_h(x) - x) / h^2,}
#' where \eqn{m_h(x)}{m_h(x)} is the local mean of the data around \eqn{x}{x}, the
#' mean-shift step (with one bandwidth per variable, the division is by
#' \eqn{h_j^2}{h_j^2} in variable \eqn{j}{j}).
#'
#' **Other kernels.** For a radial kernel with profile \eqn{k(r^2)}{k(r^2)}, the
#' gradient of the estimate is a local mean under the "shadow" kernel
#' \eqn{g}{g} with \eqn{-k'(r^2) = a\, g(r^2)}{-k'(r^2) = a g(r^2)}:
#' \deqn{\nabla \log \hat p_h(x)_j = \frac{2a}{h_j^2}
#'   \frac{\sum_i w_i g_i}{\sum_i w_i k_i} (m^g_h(x)_j - x_j),}{grad log
#'   p_h(x)_j = (2 a / h_j^2) (sum_i w_i g_i / sum_i w_i k_i) (m_g(x)_j - x_j),}
#' with \eqn{k_i, g_i}{k_i, g_i} the two kernels' weights of data point \eqn{i}{i} and
#' \eqn{m^g_h}{m_g} the local mean under \eqn{g}{g}. The shadows are facts of
#' the kernel registry (see [kernels()], column `shadow`): the Gaussian is
#' its own shadow (\eqn{a = 1/2}{a = 1/2}), the Epanechnikov's is the uniform
#' (\eqn{a = 1}{a = 1}), the biweight's the Epanechnikov (\eqn{a = 2}{a = 2}) and the
#' triweight's the biweight (\eqn{a = 3}{a = 3}). The other kernels have no score
#' here: the uniform's density is a step function (its gradient a spike at
#' the edge), the triangular and Laplace profiles have derivatives unbounded
#' at zero, and the derivatives of the tricube, cosine and Cauchy profiles
#' are not registry kernels.
#'
#' Where the density is zero (beyond the support of a compact kernel, or
#' where every Gaussian weight underflows, about 38 bandwidths from every
#' data point) the score is `NA`.
#'
#' @param x A numeric vector, matrix or data frame of data (one column per
#'   variable).
#' @param at Points at which to compute the score (same columns as `x`);
#'   default: the data.
#' @param kernel "gaussian" (default), "epanechnikov", "biweight" or
#'   "triweight": the kernels whose profile's derivative is a registry kernel
#'   (see Details).
#' @param bandwidth "auto" (a bandwidth for the density gradient, as
#'   [mean_shift()] uses: the plug-in for the gradient, converted to
#'   `kernel`), a number, or one per variable.
#' @param weights Optional non-negative case weights.
#' @param method Engine strategy: "auto" (the kd-tree for kernels with a
#'   cut-off, else "exact"), "exact" (every pair), "tree" (kd-tree with the
#'   kernel's cut-off, errors about 1e-12 of the score) or "binned" (at most
#'   two variables: much faster on large data, but the score is a small
#'   difference \eqn{m_h(x) - x}{m_h(x) - x} and binning's error in the local mean makes
#'   it about 1% of the score, median over points, at the default grid of
#'   four nodes per bandwidth; finer with `local_control(gridsize =)`).
#' @param control [local_control()] settings of the engine.
#' @param n_threads Number of threads, see [n_threads()].
#' @param verbose Show a progress bar for long computations.
#' @param ... Unused.
#' @return An object of class `local_score`: `score` (one row per point, one
#'   column per variable), `density` (the estimate at the points), `at`, `x`,
#'   `weights` (normalised, or `NULL`), `kernel`, `shadow` (the shadow
#'   kernel), `bandwidth`, `bandwidth_method`, `method` (the strategy used)
#'   and `call`. Methods: `print()`, `predict()` (the score at new points),
#'   `plot()` (arrows in 2-D, the curve in 1-D), `as.data.frame()`, `tidy()`
#'   and `glance()`.
#' @family generative
#' @export
#' @examples
#' set.seed(1)
#' x <- rbind(matrix(rnorm(200, sd = 0.4), ncol = 2),
#'            matrix(rnorm(200, mean = 2, sd = 0.4), ncol = 2))
#' s <- local_score(x, at = expand.grid(seq(-1, 3, 0.5), seq(-1, 3, 0.5)), bandwidth = 0.4)
#' s
#' plot(s)
#' # the same field with the biweight kernel (its shadow is the Epanechnikov)
#' head(local_score(x, kernel = "biweight", bandwidth = 1)$score)
local_score <- function(x, at = NULL, kernel = "gaussian", bandwidth = "auto", weights = NULL,
                        method = "auto", n_threads = NULL, verbose = interactive(),
                        control = local_control(), ...) {
  check_dots(...)
  data <- check_predictors(x)
  kernel <- check_score_kernel(kernel)
  weights <- check_weights(weights, nrow(data))
  points <- score_points(at, data)
  method <- check_choice(method, c("auto", "exact", "tree", "binned"))
  n_threads <- n_threads(n_threads)
  verbose <- check_flag(verbose)
  control <- check_control(control)
  h <- shift_bandwidth(bandwidth, data, kernel, weights, n_threads, rlang::current_env())
  fit <- structure(list(x = data, weights = if (!is.null(weights)) weights / sum(weights),
                        kernel = kernel, shadow = kernel_row(kernel)$shadow, bandwidth = h,
                        bandwidth_method = if (is.character(bandwidth)) bandwidth else "user",
                        requested_method = method, control = control, call = match.call()),
                   class = "local_score")
  res <- kernel_score(fit, points, n_threads, verbose)
  fit$at <- points
  fit$score <- res$score
  fit$density <- res$density
  fit$method <- res$method
  fit
}

# Kernels with a score: those whose profile's derivative is a registry kernel (their shadow).
check_score_kernel <- function(kernel, call = rlang::caller_env()) {
  kernel <- check_kernel(kernel, call = call)
  if (!(kernel_row(kernel)$shadow_factor > 0)) {
    with_score <- kernel_names()[!is.na(registry_table()$shadow)]
    abort(c("{.arg kernel} {.val {kernel}} has no score: its profile's derivative is not a
             registry kernel.", i = "Choose one of {.val {with_score}}."), call = call)
  }
  kernel
}

# The query points as a matrix with the data's columns (the data themselves by default).
score_points <- function(at, data, arg = "at", call = rlang::caller_env()) {
  if (is.null(at)) return(data)
  if (is.numeric(at) && is.null(dim(at)) && ncol(data) > 1L) {
    if (length(at) %% ncol(data) != 0L) {
      abort("{.arg {arg}} must have {ncol(data)} columns ({.field {colnames(data)}}).",
            call = call)
    }
    at <- matrix(at, ncol = ncol(data), byrow = TRUE)
  }
  if ((is.data.frame(at) || is.matrix(at)) && !is.null(colnames(at)) &&
      all(colnames(data) %in% colnames(at))) {
    at <- at[, colnames(data), drop = FALSE]
  }
  points <- check_predictors(at, arg = arg, call = call)
  if (ncol(points) != ncol(data)) {
    abort("{.arg {arg}} must have {ncol(data)} column{?s} ({.field {colnames(data)}}).",
          call = call)
  }
  colnames(points) <- colnames(data)
  points
}

# The score and density at `points` from local moments: the density from the kernel's weight
# sums, the score from the local mean of the data under the shadow kernel g (-k' = a g):
#   score_j = (2 a / h_j^2) (S_g / S_k) (m_g(x)_j - x_j).
# The Gaussian is its own shadow: one pass gives both. "auto" never bins: the score is a small
# difference m - x, and binning's error in m, O(step^2 / h), is about 1% of it at four nodes per
# bandwidth (bench/bench-generative.R), against 1e-12 for the kd-tree.
# Tied rows make every query's window hold all their copies: the score is computed on the
# distinct data rows, weighted by their copies' prior weights (the same kernel sums up to
# rounding), at the distinct query points, and each copy takes its row's result.
kernel_score <- function(fit, points, n_threads, verbose) {
  rows <- distinct_rows(fit$x)
  if (!is.null(rows)) {
    prior <- fit$weights %||% rep(1 / nrow(fit$x), nrow(fit$x))
    fit$x <- rows$x
    fit$weights <- as.vector(rowsum(prior, rows$index, reorder = TRUE))
  }
  at <- distinct_rows(points)
  if (is.null(at)) return(score_at(fit, points, n_threads, verbose))
  res <- score_at(fit, at$x, n_threads, verbose)
  res$score <- res$score[at$index, , drop = FALSE]
  res$density <- res$density[at$index]
  res
}

# kernel_score() at distinct points on distinct data.
score_at <- function(fit, points, n_threads, verbose) {
  x <- fit$x
  h <- fit$bandwidth
  m <- nrow(points)
  row <- kernel_row(fit$kernel)
  spec_for <- function(kernel, values) {
    engine_spec(x, kernel, h, values = values, prior = fit$weights,
                method = fit$requested_method, control = fit$control, m = m,
                binnable = fit$requested_method == "binned", n_threads = n_threads,
                verbose = verbose)
  }
  shadow_spec <- spec_for(row$shadow, x)
  shadow <- engine_run(shadow_spec, points)
  own <- if (row$shadow == fit$kernel) shadow else engine_run(spec_for(fit$kernel, NULL), points)
  local_mean <- matrix(shadow$coef[, 1L, ], nrow = m)
  factor <- 2 * row$shadow_factor * shadow$wsum / own$wsum
  factor[!(own$wsum > 0)] <- NA_real_
  score <- factor * sweep(local_mean - points, 2L, h^2, `/`)
  dimnames(score) <- list(NULL, colnames(x))
  if (any(own$wsum > 0 & !is.finite(rowSums(score)))) {
    abort(c("The score overflowed: the bandwidth is too small for the data's scale.",
            i = "Rescale {.arg x}."), call = NULL)
  }
  norm <- radial_constant(fit$kernel, ncol(x)) / prod(h) /
    if (is.null(fit$weights)) nrow(x) else 1
  list(score = score, density = norm * own$wsum, method = shadow_spec$method)
}

#' @rdname local_score
#' @param object A `local_score` object.
#' @param newdata Points at which to compute the score.
#' @export
predict.local_score <- function(object, newdata, n_threads = NULL, verbose = interactive(), ...) {
  check_dots(...)
  if (missing(newdata)) abort("{.arg newdata} is required: the points at which to compute.")
  points <- score_points(newdata, object$x, arg = "newdata")
  kernel_score(object, points, n_threads(n_threads), check_flag(verbose))$score
}

#' @export
print.local_score <- function(x, ..., digits = NULL) {
  check_dots(...)
  digits <- check_digits(digits)
  d <- ncol(x$x)
  missing_score <- sum(!stats::complete.cases(x$score))
  print_fields(
    sprintf("<local_score> %d point%s from n = %d, %d variable%s, %s kernel", nrow(x$at),
            if (nrow(x$at) != 1L) "s" else "", nrow(x$x), d, if (d > 1L) "s" else "", x$kernel),
    list(Bandwidth = sprintf("%s (%s)", named_values(x$bandwidth, colnames(x$x), digits),
                             x$bandwidth_method),
         Shadow = if (x$shadow == x$kernel) {
           paste(x$shadow, "(the score is (m(x) - x) / h^2)")
         } else {
           paste(x$shadow, "kernel")
         },
         Strategy = x$method,
         `No score` = if (missing_score) paste(missing_score, "points with zero density")))
  invisible(x)
}

#' @rdname local_score
#' @param scale Arrow length per unit of score (2-D); default: the longest
#'   arrow is as long as the typical spacing of the points.
#' @export
plot.local_score <- function(x, scale = NULL, ...) {
  check_graphics_dots(...)
  d <- ncol(x$x)
  vars <- colnames(x$x)
  if (d == 1L) {
    ord <- order(x$at[, 1L])
    plot_with_defaults(x$at[ord, 1L], x$score[ord, 1L], type = "l", xlab = vars,
                       ylab = "score", main = paste("Score,", x$kernel, "kernel"), ...)
    graphics::abline(h = 0, col = "grey60")
    return(invisible(x))
  }
  if (d != 2L) abort("{.fn plot} needs one or two variables; use {.fn as.data.frame}.")
  ok <- stats::complete.cases(x$score)
  at <- x$at[ok, , drop = FALSE]
  s <- x$score[ok, , drop = FALSE]
  if (is.null(scale)) {
    spacing <- sqrt(prod(apply(at, 2L, function(v) diff(range(v))) + 1e-300) / max(1, nrow(at)))
    scale <- spacing / max(sqrt(rowSums(s^2)), 1e-300)
  } else {
    scale <- check_positive(scale)
  }
  plot_with_defaults(range(x$x[, 1L], at[, 1L]), range(x$x[, 2L], at[, 2L]), type = "n",
                     xlab = vars[1L], ylab = vars[2L],
                     main = paste("Score field,", x$kernel, "kernel"), ...)
  keep <- sample_rows(nrow(x$x), 5000L)
  graphics::points(x$x[keep, 1L], x$x[keep, 2L], pch = 20, col = "grey75", cex = 0.6)
  long <- sqrt(rowSums((s * scale)^2)) > 1e-3 * max(1e-300, sqrt(rowSums((s * scale)^2)))
  graphics::arrows(at[long, 1L], at[long, 2L], at[long, 1L] + scale * s[long, 1L],
                   at[long, 2L] + scale * s[long, 2L], length = 0.04, col = "steelblue4")
  invisible(x)
}

#' @rdname local_score
#' @param row.names,optional Unused, for compatibility.
#' @export
as.data.frame.local_score <- function(x, row.names = NULL, optional = FALSE, ...) {
  check_dots(..., .known = "stringsAsFactors")
  score <- x$score
  colnames(score) <- paste0("score_", colnames(x$x))
  data.frame(x$at, score, density = x$density, check.names = FALSE)
}

# ---- Tweedie's denoiser -------------------------------------------------------------------------

#' Tweedie's optimal denoiser of the data
#'
#' `local_denoiser()` returns the optimal (posterior mean) denoiser for
#' points drawn from the data and observed under Gaussian noise:
#' `predict(object, newdata, noise = sigma)` is \eqn{E[x_0 \mid y]}{E[x_0 | y]} for
#' \eqn{y = x_0 + \sigma \epsilon}{y = x_0 + sigma e}. By Tweedie's formula
#' \eqn{E[x_0 \mid y] = y + \sigma^2 \nabla \log p_\sigma(y)}{E[x_0 | y] = y + sigma^2 grad log
#' p_sigma(y)}, and for the
#' empirical distribution of the data (`bandwidth = 0`) this is exactly the
#' Gaussian local mean of the data with bandwidth \eqn{\sigma}{sigma}:
#' \deqn{E[x_0 \mid y] = m_\sigma(y) = \sum_i w_i \phi_\sigma(y - x_i) x_i /
#'   \sum_i w_i \phi_\sigma(y - x_i).}{E[x0 | y] = m_sigma(y) = sum_i w_i
#'   phi_sigma(y - x_i) x_i / sum_i w_i phi_sigma(y - x_i).}
#' With `bandwidth = h > 0` the prior is the data smoothed by a Gaussian of
#' scale \eqn{h}{h} (their Gaussian kernel density estimate); then, with
#' \eqn{t^2 = h^2 + \sigma^2}{t^2 = h^2 + sigma^2} per variable,
#' \eqn{E[x_0 \mid y] = y + (\sigma^2 / t^2)(m_t(y) - y)}{E[x_0 | y] = y + (sigma^2 / t^2)(m_t(y) -
#' y)}: a step of the
#' share \eqn{\sigma^2/t^2}{sigma^2/t^2} towards the local mean at scale \eqn{t}{t}.
#'
#' The empirical prior reproduces the data: every output is a weighted
#' average of data points, and at small noise the nearest one (the
#' memorisation of [diffusion_sample()]). The denoiser is `NA` where every
#' Gaussian weight underflows (about 38 noise levels from every data point).
#'
#' @inheritParams local_score
#' @param bandwidth The prior's smoothing: 0 (the data themselves, the
#'   default), a number or one per variable.
#' @param method Engine strategy: "auto", "exact", "tree" or "binned", see
#'   [local_score()].
#' @return An object of class `local_denoiser` (`x`, `weights`, `bandwidth`,
#'   `method`, `control`, `call`); `predict()` returns the denoised points as
#'   a matrix.
#' @family generative
#' @export
#' @examples
#' set.seed(1)
#' x <- matrix(rnorm(400), ncol = 2)
#' den <- local_denoiser(x)
#' den
#' y <- x[1:5, ] + matrix(rnorm(10, sd = 0.3), ncol = 2)
#' predict(den, y, noise = 0.3)
local_denoiser <- function(x, bandwidth = 0, weights = NULL, method = "auto",
                           control = local_control(), ...) {
  check_dots(...)
  data <- check_predictors(x)
  d <- ncol(data)
  if (!is.numeric(bandwidth) || is.matrix(bandwidth) || !length(bandwidth) %in% c(1L, d) ||
      any(!is.finite(bandwidth)) || any(bandwidth < 0)) {
    abort("{.arg bandwidth} must be 0 or more: one number or one per variable ({d}).")
  }
  weights <- check_weights(weights, nrow(data))
  structure(list(x = data, weights = if (!is.null(weights)) weights / sum(weights),
                 bandwidth = rep_len(as.double(bandwidth), d),
                 method = check_choice(method, c("auto", "exact", "tree", "binned")),
                 control = check_control(control), call = match.call()),
            class = "local_denoiser")
}

#' @rdname local_denoiser
#' @param object A `local_denoiser` object.
#' @param newdata Noisy points (same columns as the data).
#' @param noise The noise level \eqn{\sigma}{sigma}: a positive number or one per
#'   variable.
#' @export
predict.local_denoiser <- function(object, newdata, noise, n_threads = NULL,
                                   verbose = interactive(), ...) {
  check_dots(...)
  if (missing(newdata)) abort("{.arg newdata} is required: the noisy points.")
  if (missing(noise)) abort("{.arg noise} is required: the noise level of {.arg newdata}.")
  d <- ncol(object$x)
  if (!is.numeric(noise) || is.matrix(noise) || !length(noise) %in% c(1L, d) ||
      any(!is.finite(noise)) || any(noise <= 0)) {
    abort("{.arg noise} must be positive: one number or one per variable ({d}).")
  }
  points <- score_points(newdata, object$x, arg = "newdata")
  noise <- rep_len(as.double(noise), d)
  # t = sqrt(h^2 + sigma^2) and sigma^2 / t^2 without under- or overflow
  big <- pmax(object$bandwidth, noise)
  total <- big * sqrt(1 + (pmin(object$bandwidth, noise) / big)^2)
  share <- 1 / (1 + (object$bandwidth / noise)^2)
  mean <- gaussian_local_mean(object, points, total, n_threads(n_threads), check_flag(verbose))
  # (1 - share) y + share m: exactly the local mean m with the empirical prior (share 1)
  sweep(points, 2L, 1 - share, `*`) + sweep(mean, 2L, share, `*`)
}

# The Gaussian local mean of the data of `object` (x, weights, method, control) at `points`
# with per-variable scales `scale`.
gaussian_local_mean <- function(object, points, scale, n_threads, verbose = FALSE,
                                spec = NULL) {
  spec <- spec %||% engine_spec(object$x, "gaussian", scale, values = object$x,
                                prior = object$weights, method = object$method,
                                control = object$control, m = nrow(points),
                                n_threads = n_threads, verbose = verbose)
  res <- engine_run(spec, points)
  matrix(res$coef[, 1L, ], nrow = nrow(points), dimnames = list(NULL, colnames(object$x)))
}

#' @export
print.local_denoiser <- function(x, ..., digits = NULL) {
  check_dots(...)
  digits <- check_digits(digits)
  d <- ncol(x$x)
  print_fields(
    sprintf("<local_denoiser> n = %d, %d variable%s", nrow(x$x), d, if (d > 1L) "s" else ""),
    list(Prior = if (all(x$bandwidth == 0)) "the data (empirical distribution)" else
           paste("the data smoothed by a Gaussian,",
                 named_values(x$bandwidth, colnames(x$x), digits)),
         Denoise = "predict(object, newdata, noise = sigma): E[x0 | x0 + sigma * e]"))
  invisible(x)
}

# ---- Diffusion sampling -------------------------------------------------------------------------

#' Sampling by a kernel diffusion model
#'
#' `diffusion_sample()` draws new points by annealed Langevin dynamics or by
#' a reverse diffusion whose score at every noise level is the exact score of
#' the data smoothed by Gaussian noise of that level: at level \eqn{\sigma}{sigma}
#' the noisy data have the density \eqn{\hat p_\sigma}{p_sigma}, the Gaussian kernel
#' density estimate with bandwidth \eqn{\sigma}{sigma}, whose score is
#' \eqn{(m_\sigma(x) - x)/\sigma^2}{(m_sigma(x) - x)/sigma^2} (see [local_score()]) and whose
#' optimal
#' denoiser is the local mean \eqn{m_\sigma(x)}{m_sigma(x)} (see [local_denoiser()]).
#' Every step costs one local mean of the data at every sample (two for
#' "ode"), computed by the engine.
#'
#' **Noise levels.** The noise of variable \eqn{j}{j} runs from
#' \eqn{r_0 h_j}{r_0 h_j} down to \eqn{h_j}{h_j} (the `bandwidth`, the floor) through
#' `n_iter + 1` geometrically spaced levels \eqn{r_k h_j}{r_k h_j}, with
#' \eqn{r_0}{r_0} = `max_noise`. The samples start from the Gaussian with the
#' data's mean and variances plus \eqn{(r_0 h_j)^2}{(r_0 h_j)^2}, which approximates
#' \eqn{\hat p_{r_0 h}}{p_r_0 h} when \eqn{r_0 h}{r_0 h} exceeds the data's spread.
#'
#' **Samplers** (all end at the floor's noise level):
#' * "ddim": the DDIM update in the variance-exploding form,
#'   \eqn{x' = m + (r'/r)(x - m)}{x' = m + (r'/r)(x - m)} with \eqn{m = m_{rh}(x)}{m = m_rh(x)}
#'   (the Euler step of
#'   the probability-flow ODE in \eqn{\sigma}{sigma}); with `eta > 0` part of the
#'   carried noise is drawn afresh, `eta = 1` being ancestral sampling from
#'   \eqn{p(x_{r'} \mid x_r, x_0 = m)}{p(x_r' | x_r, x_0 = m)}.
#' * "ode": the probability-flow ODE \eqn{dx/d\sigma = -\sigma \nabla \log
#'   \hat p_\sigma(x)}{dx/dsigma = -sigma grad log
#'   p_sigma(x)} by Heun's second-order method (two local means per
#'   step; Karras et al. 2022).
#' * "langevin": annealed Langevin dynamics (Song and Ermon 2019):
#'   `langevin_steps` steps at each of the levels \eqn{r_1, \dots, r_K}{r_1, ..., r_K},
#'   \eqn{x \leftarrow x + (\epsilon/2)(m - x) + \sqrt{\epsilon}\, r h z}{x <- x + (e/2)(m - x) +
#'   sqrt(e) r h z}
#'   with \eqn{\epsilon}{e} = `step_size` (the step \eqn{\alpha = \epsilon
#'   \sigma^2}{alpha = e
#'   sigma^2} in the usual notation; the discretisation inflates the
#'   variance at a level by the factor \eqn{1/(1 - \epsilon/4)}{1/(1 - e/4)}; smaller
#'   steps need more of them to relax at each level).
#'
#' **Memorisation and the floor.** With the exact empirical score the best
#' the reverse process can do is to reproduce the noisy data at its last
#' level: at the floor \eqn{h}{h} its target is \eqn{\hat p_h}{p_h}, the Gaussian
#' kernel density estimate with bandwidth \eqn{h}{h}, so that
#' `diffusion_sample(x, bandwidth = h)` approximates `simulate(kde(x,
#' bandwidth = h))`. As the floor goes to zero the samples collapse onto the
#' training points (memorisation: no new data); a large floor smooths the
#' structure away. The floor is a density bandwidth and the default chooses
#' it as one ("rot"). `summary()` measures memorisation: each sample's
#' distance to its nearest data point in units of that point's own spacing
#' (its distance to its nearest other data point), and the share of
#' "copies", samples within half a spacing (about a fifth of fresh draws
#' from a smooth density are, by chance; nearly all samples are at a tiny
#' floor).
#'
#' **Random numbers** are drawn in R, in a fixed order (the start, then each
#' step's noise), so `set.seed()` reproduces the samples for any number of
#' threads.
#'
#' @references
#' Song, Y. and Ermon, S. (2019). Generative modeling by estimating
#' gradients of the data distribution. *NeurIPS* 32.
#'
#' Song, J., Meng, C. and Ermon, S. (2021). Denoising diffusion implicit
#' models. *ICLR*.
#'
#' Karras, T., Aittala, M., Aila, T. and Laine, S. (2022). Elucidating the
#' design space of diffusion-based generative models. *NeurIPS* 35.
#'
#' @inheritParams local_score
#' @param n Number of samples.
#' @param bandwidth The noise floor \eqn{h}{h}: a number, one per variable, or a
#'   density selector ("rot", "plugin", "lscv"; see [kde_bandwidth()]).
#' @param sampler "ddim" (default), "ode" or "langevin".
#' @param n_iter Number of steps (noise levels after the start), at most 1e7.
#' @param max_noise The largest noise level in bandwidths, \eqn{r_0}{r_0}
#'   (default: the widest span of the data, \eqn{\max_j
#'   \mathrm{range}_j/h_j}{max_j range_j / h_j}); at least 1.
#' @param eta For "ddim": the share of fresh noise, from 0 (deterministic)
#'   to 1 (ancestral).
#' @param langevin_steps For "langevin": steps per noise level.
#' @param step_size For "langevin": the step \eqn{\epsilon}{e} in units of the
#'   level's variance, in (0, 1].
#' @param method Engine strategy of the local means: "auto", "exact",
#'   "tree" or "binned" (see [local_score()]). Here "auto" bins large data
#'   (n >= 10000 in one or two variables) at levels where the grid resolves
#'   the noise: the score's error of about 1% at such a level is far below
#'   the sampler's own (see bench/bench-generative.R).
#' @return An object of class `local_diffusion`: `samples` (n x d matrix),
#'   `x` (the data), `weights`, `bandwidth` (the floor), `bandwidth_method`,
#'   `sampler`, `n_iter`, `levels` (the noise levels in bandwidths,
#'   \eqn{r_0, \dots, r_K}{r_0, ..., r_K}), `eta`, `langevin_steps`, `step_size`,
#'   `local_means` (how many the run computed per sample), `method` and
#'   `call`. Methods: `print()`, `summary()` (distances of the samples to
#'   their nearest data point), `plot()`, `as.data.frame()`, `tidy()`,
#'   `glance()`.
#' @family generative
#' @export
#' @examples
#' set.seed(1)
#' x <- rbind(matrix(rnorm(300, sd = 0.3), ncol = 2),
#'            matrix(rnorm(300, mean = 2, sd = 0.3), ncol = 2))
#' s <- diffusion_sample(x, n = 300, n_iter = 30, verbose = FALSE)
#' s
#' plot(s)
#' summary(s)
diffusion_sample <- function(x, n = 1000, bandwidth = "rot", sampler = "ddim", n_iter = 100,
                             max_noise = NULL, eta = 0, langevin_steps = 5, step_size = 0.5,
                             weights = NULL, method = "auto", n_threads = NULL,
                             verbose = interactive(), control = local_control(), ...) {
  check_dots(...)
  data <- check_predictors(x)
  n <- check_size(check_count(n), size_limits$simulated_values / ncol(data), "samples", "n")
  sampler <- check_choice(sampler, c("ddim", "ode", "langevin"))
  n_iter <- check_size(check_count(n_iter), size_limits$iterations, "iterations", "n_iter")
  check_sampler_args(sampler, !missing(eta), !missing(langevin_steps), !missing(step_size))
  eta <- check_positive(eta, zero = TRUE)
  if (eta > 1) abort("{.arg eta} must be between 0 and 1.")
  langevin_steps <- check_count(langevin_steps)
  check_size(as.double(n_iter) * langevin_steps, size_limits$iterations, "iterations",
             "langevin_steps")
  step_size <- check_positive(step_size)
  if (step_size > 1) abort("{.arg step_size} must be at most 1.")
  weights <- check_weights(weights, nrow(data))
  method <- check_choice(method, c("auto", "exact", "tree", "binned"))
  n_threads <- n_threads(n_threads)
  verbose <- check_flag(verbose)
  control <- check_control(control)
  h <- noise_floor(bandwidth, data, weights, n_threads)
  span <- diff(column_ranges(data))[1L, ]
  r0 <- if (is.null(max_noise)) max(1, span / h) else check_positive(max_noise)
  if (r0 < 1) abort("{.arg max_noise} must be at least 1 (the floor, in bandwidths).")
  if (!is.finite(sum((r0 * h)^2))) abort("{.arg max_noise} is too large for the data's scale.")
  fit <- list(x = data, weights = if (!is.null(weights)) weights / sum(weights),
              method = method, control = control)
  levels <- exp(seq(log(r0), 0, length.out = n_iter + 1L))
  levels[n_iter + 1L] <- 1
  run <- run_diffusion(fit, n, h, levels, sampler, eta, langevin_steps, step_size, n_threads,
                       verbose)
  structure(list(samples = run$samples, x = data, weights = fit$weights, bandwidth = h,
                 bandwidth_method = if (is.character(bandwidth)) bandwidth else "user",
                 sampler = sampler, n_iter = n_iter, levels = levels, eta = eta,
                 langevin_steps = langevin_steps, step_size = step_size,
                 local_means = run$local_means, method = run$method, call = match.call()),
            class = "local_diffusion")
}

# Sampler-specific arguments given to another sampler are refused, not ignored.
check_sampler_args <- function(sampler, eta, langevin_steps, step_size,
                               call = rlang::caller_env()) {
  given <- c(eta = eta && sampler != "ddim",
             langevin_steps = langevin_steps && sampler != "langevin",
             step_size = step_size && sampler != "langevin")
  if (any(given)) {
    bad <- names(given)[given]
    abort("{.arg {bad}} do{?es/} not apply to {.code sampler = \"{sampler}\"}.", call = call)
  }
}

# The noise floor: a positive number, one per variable, or a density selector's bandwidth.
noise_floor <- function(bandwidth, data, weights, n_threads, call = rlang::caller_env()) {
  d <- ncol(data)
  if (is.character(bandwidth)) {
    choices <- intersect(c("rot", "plugin", "lscv"), selector_names("density", d))
    check_choice(bandwidth, choices, arg = "bandwidth", call = call)
    h <- kde_bandwidth(data, bandwidth = bandwidth, weights = weights, n_threads = n_threads)
    return(rep_len(as.double(h), d))
  }
  if (!is.numeric(bandwidth) || is.matrix(bandwidth) || !length(bandwidth) %in% c(1L, d) ||
      any(!is.finite(bandwidth)) || any(bandwidth <= 0)) {
    abort("{.arg bandwidth} must be a positive number, one per variable ({d}), or one of
           {.val {c('rot', 'plugin', 'lscv')}}.", call = call)
  }
  rep_len(as.double(bandwidth), d)
}

# The reverse process: samples start from the Gaussian with the data's moments at the top noise
# level, then move by one sampler step per level. Random numbers come from R's stream in a fixed
# order (start, then each step's noise), so results do not depend on the thread count.
run_diffusion <- function(fit, n, h, levels, sampler, eta, langevin_steps, step_size, n_threads,
                          verbose) {
  x <- fit$x
  d <- ncol(x)
  w <- fit$weights %||% rep(1 / nrow(x), nrow(x))
  centre <- colSums(w * x)
  spread <- sqrt(colSums(w * sweep(x, 2L, centre)^2) + (levels[1L] * h)^2)
  points <- sweep(sweep(matrix(stats::rnorm(n * d), n, d), 2L, spread, `*`), 2L, centre, `+`)
  colnames(points) <- colnames(x)
  base <- engine_spec(x, "gaussian", h * levels[1L], values = x, prior = fit$weights,
                      method = fit$method, control = fit$control, m = n,
                      n_threads = n_threads, verbose = FALSE)
  local_mean <- function(p, r) {
    gaussian_local_mean(fit, p, h * r, n_threads, spec = with_scale(base, h * r, n))
  }
  noise <- function(scale) sweep(matrix(stats::rnorm(n * d), n, d), 2L, scale, `*`)
  steps <- length(levels) - 1L
  if (verbose) {
    cli::cli_progress_bar("diffusion sampling", total = steps, clear = TRUE)
    on.exit(cli::cli_progress_done(), add = TRUE)
  }
  for (k in seq_len(steps)) {
    r <- levels[k]
    r_next <- levels[k + 1L]
    points <- switch(sampler,
      ddim = {
        m <- local_mean(points, r)
        carried <- r_next / r
        if (eta > 0) {
          fresh <- eta * r_next * sqrt(1 - carried^2)
          m + sqrt(r_next^2 - fresh^2) / r * (points - m) + noise(fresh * h)
        } else {
          m + carried * (points - m)
        }
      },
      ode = {
        slope <- (points - local_mean(points, r)) / r
        euler <- points + (r_next - r) * slope
        slope_next <- (euler - local_mean(euler, r_next)) / r_next
        points + (r_next - r) * (slope + slope_next) / 2
      },
      langevin = {
        for (s in seq_len(langevin_steps)) {
          m <- local_mean(points, r_next)
          points <- points + step_size / 2 * (m - points) + noise(sqrt(step_size) * r_next * h)
        }
        points
      })
    if (!cpp_all_finite(points)) {
      abort(c("Some samples left the reach of the data (every kernel weight underflowed).",
              i = "Use a larger {.arg bandwidth} or more {.arg n_iter}."), call = NULL)
    }
    if (verbose) cli::cli_progress_update()
  }
  per_step <- switch(sampler, ddim = 1, ode = 2, langevin = langevin_steps)
  list(samples = points, local_means = steps * per_step,
       method = with_scale(base, h, n)$method)
}

#' @export
print.local_diffusion <- function(x, ..., digits = NULL) {
  check_dots(...)
  digits <- check_digits(digits)
  d <- ncol(x$x)
  print_fields(
    sprintf("<local_diffusion> %d samples of %d variable%s, %s sampler", nrow(x$samples), d,
            if (d > 1L) "s" else "", x$sampler),
    list(Data = paste(nrow(x$x), "points"),
         `Noise floor` = sprintf("%s (%s)", named_values(x$bandwidth, colnames(x$x), digits),
                                 x$bandwidth_method),
         `Noise levels` = sprintf("%d steps from %s to 1 bandwidths", x$n_iter,
                                  show_num(x$levels[1L], digits)),
         Sampler = switch(x$sampler,
           ddim = paste0("DDIM, eta = ", x$eta),
           ode = "probability-flow ODE, Heun's method",
           langevin = sprintf("annealed Langevin, %d steps per level, step size %s",
                              x$langevin_steps, show_num(x$step_size, digits))),
         `Local means` = paste(x$local_means, "per sample"),
         Strategy = x$method))
  invisible(x)
}

#' @rdname diffusion_sample
#' @param object,x A `local_diffusion` object.
#' @param digits Significant digits of the numbers that `print()` and
#'   `summary()` show; `NULL` for `max(3, getOption("digits") - 3)`.
#' @export
summary.local_diffusion <- function(object, n_threads = NULL, ..., digits = NULL) {
  check_dots(...)
  threads <- n_threads(n_threads)
  h <- object$bandwidth
  nearest <- nearest_index(object$x, h, object$samples, threads)
  gap <- sqrt(rowSums(sweep(object$samples - object$x[nearest, , drop = FALSE], 2L, h, `/`)^2))
  # each data point's own spacing: the distance to its nearest other data point
  spacing <- if (nrow(object$x) > 1L) {
    knn_radius(object$x, h, object$x, 2L, threads, FALSE)[nearest]
  } else 0
  spacing[!(spacing > 0)] <- 1 # repeated points: distances in bandwidths
  relative <- gap / spacing
  structure(list(fit = object, distance = summary(relative), copies = mean(relative < 0.5),
                 distinct = length(unique(nearest)), digits = check_digits(digits)),
            class = "summary.local_diffusion")
}

#' @export
print.summary.local_diffusion <- function(x, ..., digits = x$digits) {
  check_dots(...)
  print_summary_sections(x, x$fit, list(
    `Distance to the nearest data point, in its spacings` = x$distance,
    Memorisation = c(`samples within half a spacing` = signif(x$copies, 3),
                     `distinct nearest data points` = x$distinct)), digits)
}

#' @rdname diffusion_sample
#' @export
plot.local_diffusion <- function(x, ...) {
  check_graphics_dots(..., .known = names(formals(graphics::pairs.default)))
  d <- ncol(x$x)
  vars <- colnames(x$x)
  title <- paste0("Diffusion samples (", x$sampler, ") and data")
  if (d == 1L) {
    a <- stats::density(x$x[, 1L])
    b <- stats::density(x$samples[, 1L])
    plot_with_defaults(range(a$x, b$x), c(0, max(a$y, b$y)), type = "n", xlab = vars,
                       ylab = "density", main = title, ...)
    graphics::lines(a, col = "grey40", lwd = 2)
    graphics::lines(b, col = "firebrick", lwd = 2)
    graphics::legend("topright", c("data", "samples"), col = c("grey40", "firebrick"), lwd = 2,
                     bty = "n")
    return(invisible(x))
  }
  data <- x$x[sample_rows(nrow(x$x), 5000L), , drop = FALSE]
  samples <- x$samples[sample_rows(nrow(x$samples), 5000L), , drop = FALSE]
  cols <- c(grDevices::adjustcolor("grey40", 0.5), grDevices::adjustcolor("firebrick", 0.5))
  if (d > 2L) {
    graphics::pairs(rbind(data, samples), pch = 20, cex = 0.5,
                    col = rep(cols, c(nrow(data), nrow(samples))), main = title, ...)
    return(invisible(x))
  }
  plot_with_defaults(rbind(data, samples), NULL, type = "n", xlab = vars[1L],
                     ylab = vars[2L], main = title, ...)
  graphics::points(data, pch = 20, cex = 0.6, col = cols[1L])
  graphics::points(samples, pch = 20, cex = 0.6, col = cols[2L])
  graphics::legend("topleft", c("data", "samples"), pch = 20, col = cols, bty = "n")
  invisible(x)
}

#' @rdname diffusion_sample
#' @param row.names,optional Unused, for compatibility.
#' @export
as.data.frame.local_diffusion <- function(x, row.names = NULL, optional = FALSE, ...) {
  check_dots(..., .known = "stringsAsFactors")
  as.data.frame(x$samples, optional = TRUE)
}
