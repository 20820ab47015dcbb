# The regression family: local_mean() (Nadaraya-Watson), local_poly() and their methods.

#' Local polynomial regression and the local mean
#'
#' `local_poly()` fits a polynomial of degree `degree` around every query
#' point by kernel-weighted least squares (the localization trick);
#' `local_mean()` is degree 0, the Nadaraya-Watson local mean
#' \eqn{\sum_i K(x^*, x_i) y_i / \sum_i K(x^*, x_i)}. Both work with any
#' number of numeric predictors.
#'
#' **Bandwidths.** `bandwidth` is one of
#' * a positive number (the same for every predictor) or one per predictor,
#'   each on the scale of its predictor (see [kernels()] for the convention);
#' * [nn()]`(k)`: adaptive, the distance to the k-th nearest neighbour;
#' * a selector: `"cv"` (leave-one-out least squares, the default), `"gcv"`,
#'   `"aicc"` (Hurvich, Simonoff and Tsai, 1998), each minimised over a grid of
#'   multiples of the rule-of-thumb bandwidths (see [local_control()]) and
#'   refined by golden-section search; `"rot"` (normal-reference rule
#'   \eqn{1.06\,\hat\sigma n^{-1/(4+d)}}, with \eqn{\hat\sigma} the smaller of
#'   the sd and IQR/1.349, converted to the kernel); `"plugin"` (the direct
#'   plug-in of Ruppert, Sheather and Wand, 1995, for one predictor and
#'   degree 1).
#' The leave-one-out fit uses the exact identity
#' \eqn{y_i - \hat m_{-i}(x_i) = (y_i - \hat m(x_i)) / (1 - L_{ii})}.
#'
#' **Predictors.** Every predictor must be numeric; factors and character
#' columns are refused (recode them, or fit one model per level). Duplicated
#' predictor values are fine. A constant predictor is refused.
#'
#' **Strategies** (`method`): `"exact"` sweeps every data point for every
#' query; `"tree"` visits only the kd-tree leaves within the kernel's support
#' (or cut-off, see [kernels()]); `"binned"` bins the data linearly on a grid
#' (at most two predictors, fixed bandwidths) and interpolates the grid fits.
#' `"auto"` picks `"binned"` for at least 10,000 observations in one or two
#' dimensions when the grid has at least two nodes per bandwidth and the grid
#' convolution costs less than the tree's visits, `"tree"` otherwise
#' (`"exact"` for the Cauchy kernel). Results do not depend on `n_threads`.
#'
#' **Scale-out.** `predict()` cuts large `newdata` into chunks of
#' `control$chunk_size` rows and the selectors score candidates one by one;
#' when a `future` plan other than sequential is set (e.g.
#' `future::plan("multisession")`), chunks and candidates run on its workers
#' with results identical to a single process.
#'
#' @param formula A formula `y ~ x1 + x2`; terms may be transformations such as
#'   `log(x)` but not interactions.
#' @param data A data frame holding the variables of `formula`.
#' @param x Numeric predictors: a vector, matrix or data frame.
#' @param y Numeric response.
#' @param degree Degree of the local polynomial (0 to 3).
#' @param kernel A kernel name, see [kernels()].
#' @param bandwidth A number, one number per predictor, [nn()], or a selector
#'   name (see Details).
#' @param weights Optional non-negative prior weights of the observations.
#' @param subset,na.action As in [stats::lm()]; rows with missing values are
#'   dropped by default.
#' @param method Strategy of the engine: `"auto"`, `"exact"`, `"tree"` or
#'   `"binned"`.
#' @param n_threads Number of threads, see [n_threads()].
#' @param verbose Show progress bars for long computations.
#' @param control Engine settings from [local_control()].
#' @param ... Passed to the default method.
#' @return An object of class `c("local_poly", "local_model")` (or
#'   `c("local_mean", "local_poly", "local_model")`) with the fitted values,
#'   residuals, leverages, bandwidth, how it was chosen and the selector's
#'   curve (`cv_curve`). Methods: `print()`, `summary()`, `predict()`,
#'   `fitted()`, `residuals()`, `nobs()`, `formula()`, `logLik()`, `plot()`.
#' @references
#' Fan, J. and Gijbels, I. (1996). *Local Polynomial Modelling and Its
#' Applications*. Chapman & Hall.
#'
#' Hurvich, C. M., Simonoff, J. S. and Tsai, C.-L. (1998). Smoothing parameter
#' selection in nonparametric regression using an improved Akaike information
#' criterion. *JRSS B* 60, 271-293.
#'
#' Ruppert, D., Sheather, S. J. and Wand, M. P. (1995). An effective bandwidth
#' selector for local least squares regression. *JASA* 90, 1257-1270.
#' @family regression
#' @export
#' @examples
#' fit <- local_poly(dist ~ speed, data = cars)
#' fit
#' predict(fit, data.frame(speed = c(10, 20)), se.fit = TRUE)
#' nw <- local_mean(dist ~ speed, data = cars, bandwidth = 3)
#' plot(fit)
local_poly <- function(x, ...) UseMethod("local_poly")

#' @rdname local_poly
#' @export
local_mean <- function(x, ...) UseMethod("local_mean")

#' @rdname local_poly
#' @export
local_poly.formula <- function(formula, data = NULL, degree = 1, kernel = "gaussian",
                               bandwidth = "cv", weights = NULL, subset,
                               na.action = stats::na.omit, method = "auto", n_threads = NULL,
                               verbose = interactive(), control = local_control(), ...) {
  mf <- call_model_frame(match.call(expand.dots = FALSE), parent.frame())
  parts <- formula_parts(mf)
  fit <- local_poly.default(parts$x, stats::model.response(mf), degree = degree, kernel = kernel,
                            bandwidth = bandwidth, weights = stats::model.weights(mf),
                            method = method, n_threads = n_threads, verbose = verbose,
                            control = control)
  with_formula(fit, mf, match.call())
}

#' @rdname local_poly
#' @export
local_poly.default <- function(x, y, degree = 1, kernel = "gaussian", bandwidth = "cv",
                               weights = NULL, method = "auto", n_threads = NULL,
                               verbose = interactive(), control = local_control(), ...) {
  x <- check_predictors(x)
  y <- check_response(y, nrow(x))
  fit <- fit_local_model(x, matrix(y, ncol = 1L), weights, degree, kernel, bandwidth, method,
                         n_threads, verbose, control, max_degree = 3L)
  fit$y <- y
  fit$fitted <- drop(fit$fitted)
  fit$residuals <- y - fit$fitted
  fit <- add_fit_statistics(fit)
  fit$call <- match.call()
  class(fit) <- c("local_poly", "local_model")
  fit
}

#' @rdname local_poly
#' @export
local_mean.formula <- function(formula, data = NULL, ...) {
  if ("degree" %in% ...names()) abort("{.fn local_mean} has degree 0; use {.fn local_poly}.")
  fit <- local_poly.formula(formula, data, degree = 0, ...)
  fit$call <- match.call()
  class(fit) <- c("local_mean", class(fit))
  fit
}

#' @rdname local_poly
#' @export
local_mean.default <- function(x, y, ...) {
  if ("degree" %in% ...names()) abort("{.fn local_mean} has degree 0; use {.fn local_poly}.")
  fit <- local_poly.default(x, y, degree = 0, ...)
  fit$call <- match.call()
  class(fit) <- c("local_mean", class(fit))
  fit
}

# The model frame of a formula method's call (formula, data, subset, weights, na.action),
# evaluated in the caller's environment, as lm() does.
call_model_frame <- function(call, env) {
  call <- call[c(1L, match(c("formula", "data", "subset", "weights", "na.action"), names(call), 0L))]
  call[[1L]] <- quote(stats::model.frame)
  eval(call, env)
}

# Predictors of a model frame as a numeric matrix; interactions and factors are refused.
formula_parts <- function(mf, call = rlang::caller_env()) {
  tt <- attr(mf, "terms")
  if (nrow(mf) == 0L) abort("{.arg data} has no complete rows.", call = call)
  if (any(attr(tt, "order") > 1L)) {
    abort("Interaction terms are not supported in {.arg formula}; the kernel already
           localizes in all predictors jointly.", call = call)
  }
  labels <- attr(tt, "term.labels")
  if (length(labels) == 0L) abort("{.arg formula} has no predictors.", call = call)
  list(x = check_predictors(mf[labels], arg = "data", call = call))
}

with_formula <- function(fit, mf, call) {
  fit$terms <- attr(mf, "terms")
  fit$na.action <- attr(mf, "na.action")
  fit$call <- call
  fit
}

# The shared fitting path of every local model: checks, bandwidth, fits at the data points.
fit_local_model <- function(x, values, weights, degree, kernel, bandwidth, method, n_threads,
                            verbose, control, max_degree, family = "regression",
                            call = rlang::caller_env()) {
  n <- nrow(x)
  d <- ncol(x)
  degree <- check_count(degree, min = 0, call = call)
  if (degree > max_degree) abort("{.arg degree} must be at most {max_degree}.", call = call)
  kernel <- check_kernel(kernel, call = call)
  prior <- check_weights(weights, n, call = call)
  control <- check_control(control, call = call)
  n_threads <- n_threads(n_threads)
  check_flag(verbose, call = call)
  terms <- choose(d + degree, degree)
  if (sum((prior %||% rep(1, n)) > 0) < terms) {
    abort("{n} observation{?s} cannot fit a local polynomial of degree {degree} in {d}
           variable{?s}: at least {terms} are needed.", call = call)
  }
  range <- column_ranges(x)
  constant <- colnames(x)[diff(range)[1L, ] == 0]
  if (length(constant)) abort("Predictor{?s} {.field {constant}} {?is/are} constant.", call = call)
  bw <- resolve_bandwidth(bandwidth, x, values, prior, degree, kernel, method, control,
                          n_threads, verbose, call, family, range)
  f <- fit_at_data(bw$spec, verbose = verbose)
  missing <- sum(f$status != 0L)
  if (missing) {
    warn(c("{missing} fitted value{?s} {?is/are} NA: the kernel window holds too few points.",
           i = "Increase the bandwidth or lower the degree."))
  }
  colnames(f$fitted) <- colnames(values)
  list(x = x, values = values, weights = prior, degree = degree, kernel = kernel,
       bandwidth = bw$spec$bandwidth, nn = bw$spec$nn, bandwidth_method = bw$how,
       cv_curve = bw$curve, spec = bw$spec, fitted = f$fitted, leverage = f$leverage,
       n_threads = n_threads, control = control)
}

# Turns the `bandwidth` argument into an engine specification and says how it was chosen.
resolve_bandwidth <- function(bandwidth, x, values, prior, degree, kernel, method, control,
                              n_threads, verbose, call, family = "regression",
                              range = column_ranges(x)) {
  n <- nrow(x)
  d <- ncol(x)
  spec_for <- function(h, nn = NULL) {
    engine_spec(x, kernel, h, values = values, prior = prior, nn = nn, degree = degree,
                method = method, control = control, range = range, n_threads = n_threads,
                call = call)
  }
  if (inherits(bandwidth, "nn_bandwidth")) return(resolve_nn(bandwidth, x, spec_for, verbose, call))
  if (is.numeric(bandwidth)) {
    if (!length(bandwidth) %in% c(1L, d) || any(!is.finite(bandwidth)) || any(bandwidth <= 0)) {
      abort(c("{.arg bandwidth} must be positive and finite, one value or one per predictor ({d}).",
              x = "Got {.val {bandwidth}}."), call = call)
    }
    return(list(spec = spec_for(rep_len(as.double(bandwidth), d)), how = "fixed", curve = NULL))
  }
  if (!is_selector_name(bandwidth, family)) {
    abort("{.arg bandwidth} must be a number, {.fn nn}, or one of {.val {selector_names(family)}}.",
          call = call)
  }
  spec <- spec_for(bw_rot(x, kernel))
  problem <- list(x = x, values = values, weights = prior, kernel = kernel, degree = degree,
                  spec = spec, control = control, n_threads = n_threads, verbose = verbose)
  sel <- run_selector(bandwidth, family, problem, call = call)
  h <- sel$bandwidth
  if (any(!is.finite(h)) || any(h <= 0)) {
    abort("The {.val {bandwidth}} bandwidth could not be computed.", call = call)
  }
  list(spec = with_scale(spec, h, call = call), how = bandwidth, curve = sel$curve)
}

add_fit_statistics <- function(fit) {
  w <- fit$weights %||% rep(1, length(fit$y))
  ok <- is.finite(fit$fitted)
  r <- fit$residuals
  rss <- sum((w * r^2)[ok])
  fit$df <- sum(fit$leverage[ok])
  n <- sum(w > 0 & ok)
  fit$sigma <- sqrt(rss / max(n - fit$df, 1))
  ybar <- sum((w * fit$y)[ok]) / sum(w[ok])
  fit$r.squared <- 1 - rss / sum((w * (fit$y - ybar)^2)[ok])
  fit$cv <- smoother_score("cv", matrix(fit$y[ok]), matrix(fit$fitted[ok]), fit$leverage[ok],
                           fit$weights[ok])
  fit
}

bandwidth_label <- function(object) {
  if (!is.null(object$nn)) return(sprintf("nn(%d)", object$nn$k))
  paste(format(signif(object$bandwidth, 4)), collapse = ", ")
}

#' @export
print.local_model <- function(x, ...) {
  cat(sprintf("<%s> %s kernel, degree %d, n = %d\n", class(x)[1L], x$kernel, x$degree,
              length(x$leverage)))
  cat(sprintf("bandwidth: %s (%s)\n", bandwidth_label(x), x$bandwidth_method))
  if (!is.null(x$sigma)) {
    cat(sprintf("effective df: %.2f, residual se: %.4g, R-squared: %.4f\n", x$df, x$sigma,
                x$r.squared))
  }
  if (!is.null(x$accuracy)) {
    cat(sprintf("effective df: %.2f, training accuracy: %.4f\n", x$df, x$accuracy))
  }
  invisible(x)
}

#' @rdname local_poly
#' @param object A fitted model.
#' @export
summary.local_model <- function(object, ...) {
  structure(list(call = object$call, class = class(object)[1L], kernel = object$kernel,
                 degree = object$degree, bandwidth = bandwidth_label(object),
                 how = object$bandwidth_method, method = object$spec$method,
                 n = length(object$leverage), df = object$df, sigma = object$sigma,
                 r.squared = object$r.squared, cv = object$cv,
                 accuracy = object$accuracy),
            class = "summary.local_model")
}

#' @export
print.summary.local_model <- function(x, ...) {
  cat("Call:\n")
  print(x$call)
  cat("\n")
  rows <- c(Model = x$class, Kernel = x$kernel, Degree = x$degree,
            Bandwidth = sprintf("%s (%s)", x$bandwidth, x$how), Strategy = x$method,
            Observations = x$n, `Effective df` = sprintf("%.3f", x$df))
  if (!is.null(x$sigma)) {
    rows <- c(rows, `Residual std. error` = format(signif(x$sigma, 5)),
              `R-squared` = sprintf("%.4f", x$r.squared),
              `LOO CV score` = format(signif(x$cv, 5)))
  }
  if (!is.null(x$accuracy)) rows <- c(rows, `Training accuracy` = sprintf("%.4f", x$accuracy))
  cat(paste0(format(names(rows)), " : ", rows), sep = "\n")
  invisible(x)
}

# Predictor matrix of new data, with the model's columns in the model's order.
new_predictors <- function(object, newdata, call = rlang::caller_env()) {
  if (is.null(object$terms)) {
    nd <- newdata
    if (is.data.frame(nd) || is.matrix(nd)) {
      cols <- colnames(object$x)
      if (!is.null(colnames(nd)) && all(cols %in% colnames(nd))) nd <- nd[, cols, drop = FALSE]
    }
    x <- check_predictors(nd, arg = "newdata", call = call)
    if (ncol(x) == ncol(object$x)) colnames(x) <- colnames(object$x)
  } else {
    tt <- stats::delete.response(object$terms)
    if (!is.data.frame(newdata)) newdata <- as.data.frame(newdata)
    missing <- setdiff(all.vars(tt), names(newdata))
    if (length(missing)) {
      abort("{.arg newdata} lacks the predictor{?s} {.field {missing}}.", call = call)
    }
    mf <- stats::model.frame(tt, newdata, na.action = stats::na.pass)
    x <- check_predictors(mf[attr(tt, "term.labels")], arg = "newdata", call = call)
  }
  if (ncol(x) != ncol(object$x)) {
    abort("{.arg newdata} has {ncol(x)} predictor{?s}; the model has {ncol(object$x)}.",
          call = call)
  }
  x
}

# Engine fits of a model at new points, with NA and a warning where no data are in the window.
# `method` overrides the fit's strategy (e.g. exact predictions from a binned fit).
predict_engine <- function(object, x, want_var, n_threads, verbose, method = NULL,
                           call = rlang::caller_env()) {
  spec <- object$spec
  if (!is.null(method)) spec$method <- choose_method(spec, method, nrow(x), call = call)
  res <- engine_run(spec, x, want_var = want_var,
                    n_threads = n_threads(n_threads %||% object$n_threads), verbose = verbose)
  bad <- sum(res$status != 0L)
  if (bad) {
    warn(c("{bad} prediction{?s} {?is/are} NA: no data (or too few) within the kernel window.",
           i = "Use a wider bandwidth or a kernel with unbounded support."))
  }
  res
}

#' @rdname local_poly
#' @param newdata New predictor values (a data frame for formula fits); `NULL`
#'   for the fitted values.
#' @param se.fit Return pointwise standard errors.
#' @param deriv Order of derivative to estimate (at most `degree`): 0 the
#'   function, 1 the gradient, 2 the pure second partial derivatives.
#' @param method For `predict()`: `NULL` (the fit's strategy) or a strategy
#'   for these predictions, e.g. `"exact"` after a binned fit.
#' @return `predict()`: a vector (a matrix with one column per predictor for
#'   derivatives of several predictors), or with `se.fit = TRUE` a list with
#'   `fit`, `se.fit`, `df` and `residual.scale`.
#' @export
predict.local_poly <- function(object, newdata = NULL, se.fit = FALSE, deriv = 0,
                               method = NULL, n_threads = NULL, verbose = FALSE, ...) {
  check_flag(se.fit)
  deriv <- check_count(deriv, min = 0)
  if (deriv > object$degree) {
    abort("{.arg deriv} = {deriv} needs a local polynomial of degree at least {deriv}.")
  }
  if (deriv > 2L) abort("{.arg deriv} must be 0, 1 or 2.")
  if (is.null(newdata) && !se.fit && deriv == 0L && is.null(method)) return(fitted(object))
  x <- if (is.null(newdata)) object$x else new_predictors(object, newdata)
  res <- predict_engine(object, x, se.fit, n_threads, verbose, method)
  cols <- deriv_columns(res$powers, deriv)
  mult <- if (deriv == 2L) 2 else 1
  fit <- mult * res$coef[, cols, 1L]
  se <- if (se.fit) mult * object$sigma * sqrt(res$var[, cols]) else NULL
  shape <- function(v) {
    if (length(cols) == 1L) return(as.vector(v))
    v <- matrix(v, ncol = length(cols))
    colnames(v) <- colnames(object$x)
    v
  }
  if (!se.fit) return(shape(fit))
  list(fit = shape(fit), se.fit = shape(se), df = length(object$y) - object$df,
       residual.scale = object$sigma)
}

# Basis columns holding the derivatives of a given order (pure partials, in predictor order).
deriv_columns <- function(powers, deriv) {
  if (deriv == 0L) return(1L)
  d <- ncol(powers)
  vapply(seq_len(d), function(j) {
    target <- integer(d)
    target[j] <- deriv
    which(apply(powers, 1L, function(p) all(p == target)))
  }, 1L)
}

#' @export
fitted.local_model <- function(object, ...) {
  f <- object$fitted
  if (is.matrix(f) && ncol(f) == 1L) f <- f[, 1L]
  stats::napredict(object$na.action, f)
}

#' @export
residuals.local_model <- function(object, ...) {
  stats::naresid(object$na.action, object$residuals)
}

#' @export
nobs.local_model <- function(object, ...) length(object$leverage)

#' @export
formula.local_model <- function(x, ...) {
  if (is.null(x$terms)) abort("The model was not fitted with a formula.")
  stats::formula(x$terms)
}

#' @export
logLik.local_poly <- function(object, ...) {
  w <- object$weights %||% rep(1, length(object$y))
  ok <- is.finite(object$fitted)
  n <- sum(w[ok] > 0)
  rss <- sum((w * object$residuals^2)[ok])
  val <- 0.5 * (sum(log(w[ok & w > 0])) - n * (log(2 * pi) + 1 - log(n) + log(rss)))
  structure(val, nobs = n, df = object$df + 1, class = "logLik")
}

#' @rdname local_poly
#' @param which `"fit"` (the fitted curve with a +-2 standard-error band, or a
#'   filled contour for two predictors) or `"bandwidth"` (the selector's curve).
#' @param n_grid Grid points per predictor for the plot.
#' @export
plot.local_poly <- function(x, which = c("fit", "bandwidth"), n_grid = 200, ...) {
  which <- match.arg(which)
  if (which == "bandwidth") return(plot_bandwidth_curve(x, ..., call = rlang::current_env()))
  d <- ncol(x$x)
  if (d == 1L) {
    grid <- seq(min(x$x), max(x$x), length.out = n_grid)
    p <- predict(x, stats::setNames(data.frame(grid), colnames(x$x)), se.fit = TRUE)
    graphics::plot(x$x[, 1L], x$y, xlab = colnames(x$x), ylab = response_name(x),
                   col = grDevices::gray(0.5), ...)
    band <- c(p$fit + 2 * p$se.fit, rev(p$fit - 2 * p$se.fit))
    ok <- is.finite(band)
    graphics::polygon(c(grid, rev(grid))[ok], band[ok], border = NA,
                      col = grDevices::adjustcolor("steelblue", 0.25))
    graphics::lines(grid, p$fit, col = "steelblue", lwd = 2)
  } else if (d == 2L) {
    g1 <- seq(min(x$x[, 1L]), max(x$x[, 1L]), length.out = min(n_grid, 60))
    g2 <- seq(min(x$x[, 2L]), max(x$x[, 2L]), length.out = min(n_grid, 60))
    nd <- stats::setNames(expand.grid(g1, g2), colnames(x$x))
    z <- matrix(suppressWarnings(predict(x, nd)), length(g1))
    pts <- x$x
    graphics::filled.contour(g1, g2, z, xlab = colnames(x$x)[1L], ylab = colnames(x$x)[2L],
                             color.palette = grDevices::hcl.colors,
                             plot.axes = {
                               graphics::axis(1)
                               graphics::axis(2)
                               graphics::points(pts, pch = 20, cex = 0.4)
                             }, ...)
  } else {
    abort("{.fn plot} draws fits of one or two predictors; use {.fn predict} for more.")
  }
  invisible(x)
}

response_name <- function(x) {
  if (is.null(x$terms)) "y" else deparse(x$terms[[2L]])
}

plot_bandwidth_curve <- function(x, ..., call = rlang::caller_env()) {
  curve <- x$cv_curve
  if (is.null(curve)) {
    abort("The bandwidth was not chosen by a selector, so there is no curve to plot.",
          call = call)
  }
  h <- curve[[1L]]
  ok <- is.finite(curve$score)
  graphics::plot(h[ok], curve$score[ok], log = "x", type = "b", pch = 20,
                 xlab = if (ncol(curve) > 2L) {
                   paste("bandwidth of", names(curve)[1L], "(the others in proportion)")
                 } else {
                   paste("bandwidth of", names(curve)[1L])
                 },
                 ylab = paste(x$bandwidth_method, "score"), ...)
  graphics::abline(v = x$bandwidth[1L], lty = 2, col = "steelblue")
  invisible(x)
}

#' Local polynomial estimates at given points, without a model object
#'
#' The low-level entry point of the regression family, for programmers and for
#' large data: it estimates the regression function (or a derivative) at the
#' points `at` with a fixed or `nn()` bandwidth, and skips everything a model
#' object needs (fitted values, leverages, residuals). With one predictor and
#' `at = NULL` it evaluates on a regular grid of `gridsize` points over the
#' range of `x`, like `KernSmooth::locpoly()`.
#'
#' @inheritParams local_poly
#' @param at Points at which to estimate: a vector, matrix or data frame with
#'   the columns of `x`; `NULL` for a regular grid (one or two predictors).
#' @param bandwidth A positive number, one per predictor, or [nn()].
#' @param deriv Order of derivative (at most `degree`), as in
#'   [predict.local_poly()].
#' @return A data frame with the columns of `at` and `estimate` (for
#'   derivatives of several predictors, one column per predictor:
#'   `d_<name>`).
#' @family regression
#' @export
#' @examples
#' x <- runif(1e4)
#' y <- sin(2 * pi * x) + rnorm(1e4, sd = 0.3)
#' est <- local_smooth(x, y, bandwidth = 0.02)
#' plot(est, type = "l")
local_smooth <- function(x, y, at = NULL, degree = 1, kernel = "gaussian", bandwidth,
                         deriv = 0, weights = NULL, method = "auto", n_threads = NULL,
                         verbose = interactive(), control = local_control()) {
  x <- check_predictors(x)
  y <- check_response(y, nrow(x))
  degree <- check_count(degree, min = 0)
  deriv <- check_count(deriv, min = 0)
  if (degree > 3L) abort("{.arg degree} must be at most 3.")
  if (deriv > min(degree, 2L)) abort("{.arg deriv} must be at most {min(degree, 2L)}.")
  if (missing(bandwidth) || is.character(bandwidth)) {
    abort("{.arg bandwidth} must be a number, one per predictor, or {.fn nn}; use
           {.fn local_poly} for data-driven selectors.")
  }
  kernel <- check_kernel(kernel)
  control <- check_control(control)
  prior <- check_weights(weights, nrow(x))
  bw <- resolve_bandwidth(bandwidth, x, matrix(y), prior, degree, kernel, method, control,
                          n_threads(n_threads), FALSE, rlang::current_env())
  if (is.null(at)) {
    if (ncol(x) > 2L) abort("{.arg at} is needed for more than two predictors.")
    ranges <- bw$spec$range
    grids <- lapply(seq_len(ncol(x)), function(j) {
      seq(ranges[1L, j], ranges[2L, j], length.out = bw$spec$gridsize[j])
    })
    at <- as.matrix(expand.grid(grids))
    colnames(at) <- colnames(x)
  } else {
    at <- check_predictors(at, arg = "at")
    if (ncol(at) != ncol(x)) abort("{.arg at} must have {ncol(x)} column{?s}.")
    colnames(at) <- colnames(x)
  }
  res <- engine_run(bw$spec, at, verbose = verbose)
  cols <- deriv_columns(res$powers, deriv)
  est <- (if (deriv == 2L) 2 else 1) * matrix(res$coef[, cols, 1L], nrow = nrow(at))
  colnames(est) <- if (length(cols) == 1L) "estimate" else paste0("d_", colnames(x))
  if (any(res$status != 0L)) {
    warn("{sum(res$status != 0L)} estimate{?s} {?is/are} NA: too few data in the kernel window.")
  }
  data.frame(at, est, check.names = FALSE)
}
