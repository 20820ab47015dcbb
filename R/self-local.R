# Output-aware local means (the self-localization kernel): the kernel on X x Y evaluated at the
# fit's own output, K((x*, m(x*)), (x_i, y_i)), iterated from the ordinary local mean.
#
# Each step is one engine pass over every query at once: the local mean of y on the joint data
# (x, y) at the points (x*, m_t(x*)). A query stops when its step is shorter than tol bandwidths
# of y, so that its result does not depend on the other queries. Leave-one-out fits at the data
# remove each point's own weight (its prior weight, its levels' discrete weights and the kernel
# at its own distance in y) from its sums, at every step.

#' Output-aware local mean (self-local regression)
#'
#' A jump-preserving smoother: the local mean whose kernel also looks at the
#' fit's own output, the paper's self-localization kernel
#' \eqn{K((x, m(x)), (x_i, y_i))}{K((x, m(x)), (x_i, y_i))} on \eqn{X \times Y}{X x Y}. From the
#' ordinary local mean \eqn{m_0}{m_0} it iterates
#' \deqn{m_{t+1}(x) = \frac{\sum_i w_i K_x(x, x_i) K_y(m_t(x), y_i)\, y_i}{\sum_i w_i K_x(x, x_i)
#'   K_y(m_t(x), y_i)},}{m_(t+1)(x) = sum_i w_i K_x(x, x_i) K_y(m_t(x), y_i) y_i / sum_i w_i
#'   K_x(x, x_i) K_y(m_t(x), y_i),}
#' so responses far from the current fit stop pulling it: near a jump of the
#' regression function the points on the other side of the jump drop out,
#' and the fit follows the side where most of its window lies instead of
#' averaging across the jump. Each step is a mean-shift step in \eqn{y}{y} under the
#' weights of the predictors, so the iteration climbs to the conditional mode
#' of \eqn{y}{y} nearest the local mean (see [conditional_modes()]).
#'
#' **Kernel.** The kernel acts on the numeric predictors and the response
#' jointly, each scaled by its bandwidth (radial, as in [kde()]; for the
#' Gaussian exactly the product \eqn{K_x K_y}{K_x K_y}), times the discrete kernels
#' of the categorical predictors, as in [local_mean()].
#'
#' **Bandwidths.** `bandwidth` is one value per predictor followed by the
#' response's (\eqn{h}{h} for numeric columns and the response, \eqn{\lambda}{lambda} for
#' categorical ones), or "cv": leave-one-out cross-validation of every
#' bandwidth jointly, minimising the mean squared leave-one-out residual of
#' the whole iteration (each point left out of every step of its own fit),
#' searched from the best of a grid of multiples of the rules of thumb by the
#' joint search of [local_poly()]'s selectors. A very large response
#' bandwidth gives back the local mean.
#'
#' @param formula A formula `y ~ x1 + x2`: a numeric response and predictors of
#'   any kind.
#' @param data A data frame.
#' @param bandwidth "cv" or the bandwidths, one per predictor followed by the
#'   response's (see Bandwidths).
#' @param max_iter Most steps at each point.
#' @param tol A point stops when its step is shorter than `tol` times the
#'   response's bandwidth.
#' @param weights Optional non-negative prior weights, evaluated in `data`.
#' @param subset,na.action As in [stats::lm()].
#' @param method Strategy of the engine: `"auto"`, `"exact"` or `"tree"`.
#' @inheritParams local_poly
#' @param ... Must be empty.
#' @return An object of class `local_self` (also a `local_model`): `fitted`,
#'   `residuals`, `y`, `x`, `categorical`, `predictors`, `weights`, `kernel`,
#'   `bandwidth` (per predictor), `bandwidth_y`, `bandwidth_method`, `cv` (the
#'   mean squared leave-one-out residual), `sigma`, `r.squared`, `iterations`
#'   (per point), `max_iter`, `tol`, `terms` and `call`. `fitted()`,
#'   `residuals()`, `predict()`, `print()`, `summary()`, `plot()`, `tidy()`,
#'   `glance()` and `augment()` apply.
#' @references Chu, C. K., Glad, I. K., Godtliebsen, F. and Marron, J. S.
#'   (1998). Edge-preserving smoothers for image processing. *JASA* 93,
#'   526-541. \doi{10.1080/01621459.1998.10473702}
#' @family regression
#' @export
#' @examples
#' set.seed(1)
#' x <- sort(runif(200))
#' y <- ifelse(x < 0.5, 0, 2) + rnorm(200, sd = 0.3)
#' d <- data.frame(x, y)
#' fit <- self_local_regression(y ~ x, data = d, bandwidth = c(0.08, 0.5))
#' fit
#' predict(fit, data.frame(x = c(0.45, 0.5, 0.55)))
#' plot(fit)
#' cv <- self_local_regression(y ~ x, data = d)
#' cv$bandwidth
#' cv$bandwidth_y
self_local_regression <- function(formula, data = NULL, kernel = "gaussian", bandwidth = "cv",
                                  max_iter = 100, tol = 1e-6, weights = NULL, subset,
                                  na.action = stats::na.omit, method = "auto", n_threads = NULL,
                                  verbose = interactive(), control = local_control(), ...) {
  check_dots(...)
  call <- match.call(expand.dots = FALSE)
  mf <- call_model_frame(call, parent.frame())
  y <- stats::model.response(mf)
  if (is.null(y) || !is.numeric(y) || is.object(y) || !is.null(dim(y))) {
    abort("The response of {.arg formula} must be a numeric vector.")
  }
  y <- as.double(y)
  if (length(unique(y)) < 2L) abort("The response of {.arg formula} is constant.")
  predictors <- split_predictors(formula_parts(mf)$x, arg = "data")
  kernel <- check_kernel(kernel, user = FALSE)
  n <- length(y)
  prior <- check_weights(stats::model.weights(mf), n, arg = "weights")
  fit <- structure(list(
    x = predictors$x, y = y, categorical = predictors$categorical,
    predictors = predictors[c("names", "kind")],
    weights = prior, degree = 0L, kernel = kernel,
    max_iter = check_count(max_iter), tol = check_positive(tol),
    method = check_choice(method, c("auto", "exact", "tree")),
    control = check_control(control), n_threads = n_threads(n_threads),
    terms = attr(mf, "terms"), na.action = attr(mf, "na.action")),
    class = c("local_self", "local_model"))
  verbose <- check_flag(verbose)
  chosen <- self_local_bandwidth(bandwidth, fit, verbose)
  fit$bandwidth <- join_bandwidth(chosen$h, chosen$lambda, fit$predictors)
  fit$bandwidth_y <- chosen$hy
  fit$bandwidth_method <- chosen$method
  fit$spec <- self_local_specs(fit, chosen)
  at_data <- self_local_iterate(fit, fit$spec, fit$x, fit$categorical$codes)
  loo <- self_local_iterate(fit, fit$spec, fit$x, fit$categorical$codes, leave_out = TRUE)
  fit$fitted <- at_data$fit
  fit$residuals <- y - at_data$fit
  fit$iterations <- at_data$iterations
  w <- fit$weights %||% rep(1, n)
  ok <- is.finite(fit$fitted)
  fit$sigma <- sqrt(sum((w * fit$residuals^2)[ok]) / sum(w[ok]))
  spread <- sum(w * (y - sum(w * y) / sum(w))^2)
  fit$r.squared <- 1 - sum((w * fit$residuals^2)[ok]) / spread
  fit$cv <- self_local_score(loo$fit, y, w)
  fit$call <- match.call()
  fit
}

# The engine specifications of a fit with bandwidths `bw` (list(h, lambda, hy)): `x` on the
# predictors (the starting local mean) and `joint` on (x, y), both with the response as values.
self_local_specs <- function(fit, bw) {
  common <- function(data, scale) {
    engine_spec(data, fit$kernel, scale, values = fit$y, prior = probabilities(fit$weights),
                method = fit$method, control = fit$control, categorical = fit$categorical,
                lambda = bw$lambda, n_threads = fit$n_threads)
  }
  list(x = common(fit$x, bw$h), joint = common(cbind(fit$x, .response = fit$y), c(bw$h, bw$hy)),
       hy = bw$hy)
}

# The iteration at the rows of `points` (numeric predictors) with level codes `codes`:
# list(fit, iterations). With `leave_out` the points are the data, in order, and each is left
# out of its own sums at every step.
self_local_iterate <- function(fit, specs, points, codes, leave_out = FALSE) {
  start <- engine_run(specs$x, points, query_codes = codes)
  m <- start$coef[, 1L, 1L]
  if (leave_out) m <- drop_own(m, start$wsum, self_weight(specs$x), fit$y)
  hy <- specs$hy
  row <- kernel_row(fit$kernel)
  own_prior <- if (leave_out) self_weight(specs$joint)
  iterations <- integer(length(m))
  active <- which(is.finite(m))
  for (iter in seq_len(fit$max_iter)) {
    if (!length(active)) break
    res <- engine_run(specs$joint, cbind(points[active, , drop = FALSE], m[active]),
                      query_codes = codes[active, , drop = FALSE])
    step <- res$coef[, 1L, 1L]
    if (leave_out) {
      # the left-out point's weight at its own predictors and the current fit
      u <- abs(m[active] - fit$y[active]) / hy
      own <- rep_len(own_prior, fit$n %||% length(fit$y))[active] *
        kernel_value(u, fit$kernel) / kernel_value(0, fit$kernel) * (u <= row$cutoff)
      step <- drop_own(step, res$wsum, own, fit$y[active])
    }
    iterations[active] <- iter
    moved <- abs(step - m[active])
    m[active] <- step
    active <- active[is.finite(step) & moved > fit$tol * hy]
  }
  m[!is.finite(m)] <- NA_real_
  list(fit = m, iterations = iterations)
}

# A local mean with one point's weight `own` and value `y` removed from its sums.
drop_own <- function(mean, wsum, own, y) (mean * wsum - own * y) / (wsum - own)

# Prior weights as probabilities (the engine's prior), NULL without weights.
probabilities <- function(w) if (!is.null(w)) w / sum(w)

# Mean squared leave-one-out residual (prior weights w), Inf where a fit is missing.
self_local_score <- function(loo, y, w) {
  if (any(!is.finite(loo))) return(Inf)
  sum(w * (y - loo)^2) / sum(w)
}

# ---- Bandwidths -------------------------------------------------------------------------------

# list(h, lambda, hy, method) from numbers (one per predictor, then the response's) or "cv".
self_local_bandwidth <- function(bandwidth, fit, verbose, call = rlang::caller_env()) {
  vars <- c(fit$predictors$names, response_name(fit))
  if (identical(bandwidth, "cv")) return(c(self_local_cv(fit, verbose, call), method = "cv"))
  if (!is.numeric(bandwidth) || is.matrix(bandwidth) || length(bandwidth) != length(vars)) {
    abort(c("{.arg bandwidth} must be {.val cv} or one value per variable ({length(vars)}), in
             the order {.field {vars}}: h for numeric ones and the response, lambda for
             categorical ones."), call = call)
  }
  if (!is.null(names(bandwidth))) {
    if (!setequal(names(bandwidth), vars) || anyDuplicated(names(bandwidth))) {
      abort(c("The names of {.arg bandwidth} must be the variables {.field {vars}}.",
              x = "Got {.field {names(bandwidth)}}."), call = call)
    }
    bandwidth <- bandwidth[vars]
  }
  hy <- as.double(bandwidth[length(vars)])
  if (!is.finite(hy) || hy <= 0) {
    abort(c("{.arg bandwidth} of the response must be positive and finite.",
            x = "Got {.val {hy}}."), call = call)
  }
  bw <- split_bandwidth(unname(bandwidth[-length(vars)]), cdens_predictors(fit), call = call)
  list(h = bw$h, lambda = bw$lambda, hy = hy, method = "user")
}

# Leave-one-out cross-validation of every bandwidth: the best of a grid of multiples of the
# rules of thumb (the predictors' and, for the response, that of its residuals from the local
# mean at the rule-of-thumb bandwidths), then the joint search of the regression selectors.
self_local_cv <- function(fit, verbose, call) {
  tick <- search_progress(verbose)
  n <- length(fit$y)
  w <- fit$weights %||% rep(1, n)
  d <- ncol(fit$x)
  h0 <- if (d) bw_rot(fit$x, fit$kernel) else numeric(0)
  lambda0 <- lambda_rot(fit$categorical, n, d)
  rough <- self_local_specs(fit, list(h = h0, lambda = lambda0, hy = 1))
  resid <- fit$y - engine_run(rough$x, fit$x, query_codes = fit$categorical$codes)$coef[, 1L, 1L]
  spread <- robust_scale(resid[is.finite(resid)], iqr_divisor = 1.349)
  if (!(spread > 0)) spread <- stats::sd(fit$y)
  hy0 <- 1.06 * spread * n^(-1 / 5) * kernel_scale_factor(fit$kernel)
  specs <- self_local_specs(fit, list(h = h0, lambda = lambda0, hy = hy0))
  score_of <- function(h, lambda = lambda0, threads = NULL) {
    q <- length(h)
    bw <- list(h = h[-q], lambda = lambda, hy = h[q])
    specs$x <- with_scale(specs$x, bw$h, lambda = lambda)
    specs$joint <- with_scale(specs$joint, h, lambda = lambda)
    specs$hy <- bw$hy
    loo <- self_local_iterate(fit, specs, fit$x, fit$categorical$codes, leave_out = TRUE)$fit
    tick()
    self_local_score(loo, fit$y, w)
  }
  mult <- c(0.25, 0.5, 1, 2)
  grid <- expand.grid(x = mult, y = c(0.5, 1, 2, 4))
  values <- apply(grid, 1L, function(a) score_of(c(a[["x"]] * h0, a[["y"]] * hy0)))
  best <- grid[which.min(values), ]
  start <- c(best$x * h0, best$y * hy0)
  bounds <- bandwidth_bounds(specs$joint)
  found <- joint_search(score_of, pmax(start, bounds[1L, ]), lambda0, bounds, specs$joint)
  q <- length(found$h)
  list(h = found$h[-q], lambda = if (length(lambda0)) found$lambda, hy = found$h[q])
}

# ---- Methods ----------------------------------------------------------------------------------

#' Methods for output-aware local means
#'
#' `predict()` runs the iteration of [self_local_regression()] at new
#' predictors (a row with a missing predictor gets `NA`); `plot()` draws the
#' fit over one numeric predictor with the data and, dashed, the ordinary
#' local mean at the same predictor bandwidths; `print()` and `summary()`
#' show the bandwidths and the fit's statistics.
#'
#' @param object,x A `local_self` fit.
#' @param newdata A data frame with the predictors; by default the fitted values.
#' @param n_grid For `plot()`: points of the curve.
#' @param digits Significant digits shown.
#' @param n_threads,verbose For `predict()`: threads and progress, as in
#'   [self_local_regression()].
#' @param ... Unused, or for `plot()` graphical parameters.
#' @return `predict()`: a vector of fits. `summary()`: an object of class
#'   `summary.local_self`.
#' @name self-local-methods
#' @family regression
#' @examples
#' set.seed(2)
#' x <- sort(runif(150))
#' d <- data.frame(x, y = ifelse(x < 0.6, 1, -1) + rnorm(150, sd = 0.3))
#' fit <- self_local_regression(y ~ x, data = d, bandwidth = c(0.08, 0.6))
#' summary(fit)
#' predict(fit, data.frame(x = c(0.55, 0.65)))
NULL

#' @rdname self-local-methods
#' @export
predict.local_self <- function(object, newdata = NULL, n_threads = NULL, verbose = interactive(),
                               ...) {
  check_dots(...)
  threads <- n_threads(n_threads)
  verbose <- check_flag(verbose)
  if (is.null(newdata)) return(stats::fitted(object))
  for (part in c("x", "joint")) {
    object$spec[[part]]$n_threads <- threads
    object$spec[[part]]$verbose <- verbose
  }
  queries <- new_predictors(object, newdata)
  fit <- if (nrow(queries$x)) {
    self_local_iterate(object, object$spec, queries$x, queries$codes)$fit
  } else {
    numeric(0)
  }
  expand_rows(fit, queries$ok)
}

self_local_fields <- function(x, digits) {
  vars <- c(x$predictors$names, response_name(x))
  list(Bandwidth = sprintf("%s (%s)", named_values(c(x$bandwidth, x$bandwidth_y), vars, digits),
                           x$bandwidth_method),
       Iterations = sprintf("at most %d per point (max_iter = %d)", max(x$iterations),
                            x$max_iter),
       `Residual se` = show_num(x$sigma, digits), `R-squared` = show_num(x$r.squared, digits),
       `LOO CV score` = show_num(x$cv, digits))
}

#' @rdname self-local-methods
#' @export
print.local_self <- function(x, ..., digits = NULL) {
  check_dots(...)
  digits <- check_digits(digits)
  print_fields(sprintf("<local_self> output-aware local mean, %s kernel, n = %d", x$kernel,
                       length(x$y)), self_local_fields(x, digits))
  invisible(x)
}

#' @rdname self-local-methods
#' @export
summary.local_self <- function(object, ..., digits = NULL) {
  check_dots(...)
  structure(list(fit = object, digits = check_digits(digits),
                 converged = mean(object$iterations < object$max_iter)),
            class = "summary.local_self")
}

#' @export
print.summary.local_self <- function(x, ..., digits = x$digits) {
  check_dots(...)
  cat("Call:\n")
  print_trimmed(x$fit$call)
  cat("\n")
  print(x$fit, digits = digits)
  print_fields(NULL, list(Converged = sprintf("%s%% of the points",
                                              show_num(100 * x$converged, digits))))
  invisible(x)
}

#' @export
nobs.local_self <- function(object, ...) {
  check_dots(...)
  length(object$y)
}

#' @rdname self-local-methods
#' @export
plot.local_self <- function(x, n_grid = 400, ...) {
  check_graphics_dots(...)
  n_grid <- check_count(n_grid, min = 2)
  if (!identical(x$predictors$kind, "numeric")) {
    abort("{.fn plot} draws an output-aware local mean of one numeric predictor; use
           {.fn predict}.")
  }
  grid <- seq(min(x$x), max(x$x), length.out = n_grid)
  nd <- stats::setNames(data.frame(grid), colnames(x$x))
  fit <- predict(x, nd)
  plain <- engine_run(x$spec$x, matrix(grid))$coef[, 1L, 1L]
  plot_with_defaults(x$x[, 1L], x$y, xlab = colnames(x$x), ylab = response_name(x),
                     col = grDevices::gray(0.5),
                     main = sprintf("Output-aware local mean, %s kernel", x$kernel), ...)
  bandwidth_note(sprintf("bandwidth %s (%s)", named_values(c(x$bandwidth, x$bandwidth_y),
                                                           c(colnames(x$x), response_name(x))),
                         x$bandwidth_method))
  graphics::lines(grid, plain, col = "grey40", lty = 2)
  graphics::lines(grid, fit, col = "steelblue", lwd = 2)
  graphics::legend("topleft", c("output-aware", "local mean"), col = c("steelblue", "grey40"),
                   lty = c(1, 2), lwd = c(2, 1), bty = "n")
  invisible(x)
}

#' @rdname localmean-tidiers
#' @export
tidy.local_self <- function(x, ...) {
  check_dots(...)
  kind <- c(x$predictors$kind, "response")
  as_tidy_frame(data.frame(term = c(x$predictors$names, response_name(x)),
                           type = ifelse(kind %in% c("numeric", "response"), "h", "lambda"),
                           bandwidth = c(x$bandwidth, x$bandwidth_y)))
}

#' @rdname localmean-tidiers
#' @export
glance.local_self <- function(x, ...) {
  check_dots(...)
  glance_row(nobs = length(x$y), sigma = x$sigma, r.squared = x$r.squared, cv = x$cv,
             kernel = x$kernel, bandwidth.method = x$bandwidth_method,
             iterations = max(x$iterations))
}

#' @rdname localmean-tidiers
#' @export
augment.local_self <- function(x, data = NULL, newdata = NULL, ...) {
  check_dots(...)
  if (!is.null(newdata)) {
    base <- as.data.frame(newdata)
    base$.fitted <- predict(x, newdata)
    return(as_tidy_frame(base))
  }
  base <- augment_base(data, length(x$y), function() model_data(x))
  base$.fitted <- x$fitted
  base$.resid <- x$residuals
  as_tidy_frame(base)
}

#' @rdname localmean-autoplot
#' @exportS3Method ggplot2::autoplot
autoplot.local_self <- function(object, n_grid = 200, ...) {
  check_dots(...)
  check_ggplot2()
  n_grid <- check_count(n_grid, min = 2)
  if (!identical(object$predictors$kind, "numeric")) {
    abort("{.fn autoplot} draws an output-aware local mean of one numeric predictor; use
           {.fn predict}.")
  }
  grid <- seq(min(object$x), max(object$x), length.out = n_grid)
  fit <- predict(object, stats::setNames(data.frame(grid), colnames(object$x)))
  plain <- engine_run(object$spec$x, matrix(grid))$coef[, 1L, 1L]
  curves <- data.frame(x = rep(grid, 2L), .fitted = c(fit, plain),
                       fit = rep(c("output-aware", "local mean"), each = n_grid))
  points <- data.frame(x = object$x[, 1L], y = object$y)
  vars <- c(colnames(object$x), response_name(object))
  ggplot2::ggplot(curves, ggplot2::aes(x = .data$x, y = .data$.fitted)) +
    ggplot2::geom_point(ggplot2::aes(y = .data$y), data = points, colour = "grey55") +
    ggplot2::geom_line(ggplot2::aes(colour = .data$fit, linetype = .data$fit), linewidth = 0.9) +
    ggplot2::scale_colour_manual(values = c(`output-aware` = "steelblue",
                                            `local mean` = "grey30"), name = NULL) +
    ggplot2::scale_linetype_manual(values = c(`output-aware` = "solid", `local mean` = "dashed"),
                                   name = NULL) +
    ggplot2::labs(x = vars[1L], y = vars[2L],
                  title = sprintf("Output-aware local mean, %s kernel", object$kernel),
                  subtitle = sprintf("bandwidth %s (%s)",
                                     named_values(c(object$bandwidth, object$bandwidth_y), vars),
                                     object$bandwidth_method))
}
