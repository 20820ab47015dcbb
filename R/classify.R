# The local-mode classifier: class probabilities are local means of one-hot labels.

#' Local-mode classification
#'
#' The probability of class \eqn{c}{c} at \eqn{x^*}{x^*} is the local mean of the
#' indicator \eqn{1(y_i = c)}{1(y_i = c)}; the predicted class is the local mode, the class
#' of largest probability. With `kernel = "uniform", bandwidth = nn(k)` this
#' is exactly the k-nearest-neighbour classifier (ties between classes go to
#' the first level; ties in distance include every point at the k-th
#' distance). Selectors: `"cv"` minimises the leave-one-out Brier score
#' (squared error of the one-hot labels), `"rot"` is the normal-reference rule.
#'
#' With `degree = 1` (or more) and two classes it is local logistic
#' regression: the local likelihood fit of `local_poly(family = "binomial")`
#' to the second class's indicator (the probabilities of both classes are
#' returned); its `"cv"` selector minimises the leave-one-out deviance.
#' Categorical predictors enter through the product kernel as in
#' [local_poly()].
#'
#' **Local multinomial logit.** With `degree >= 1` and more than two classes,
#' each query point \eqn{x^*}{x^*} gets its own multinomial logit (baseline-category
#' logits, as `nnet::multinom()`): the log-odds of every class against a
#' baseline class are local polynomials in \eqn{x - x^*}{x - x^*}, fitted by maximising
#' the kernel-weighted log-likelihood \eqn{\sum_i K(x^*, x_i) w_i \log
#' p_{y_i}(x_i)}{sum_i K(x*, x_i) w_i log p[y_i](x_i)} with Newton steps (the
#' convergence rule and step halving of the local likelihood, see
#' [local_poly()] and `max_iter`, `tol` in [local_control()]). The class
#' probabilities at \eqn{x^*}{x^*} are those of the local fit there and sum to one.
#' A class that is absent from the kernel window (its share of the window's
#' weight at most 1e-8, e.g. no point of it within a compact kernel's reach)
#' gets probability 0 there: that is the limit the local likelihood tends to
#' (its log-odds go to \eqn{-\infty}{-Inf}), and the other classes are fitted among
#' themselves. A window holding one class only gives it probability 1. Where
#' the classes present are separated within the window (the fit gives every
#' point its own class with probability 1), or the Newton steps do not
#' converge, the local fit does not exist: the probabilities are `NA`, with a
#' warning. The `"cv"` selector then minimises the exact leave-one-out
#' deviance \eqn{-2 \sum_i w_i \log p_{y_i}^{(-i)}(x_i) / \sum_i w_i}{-2 sum_i
#' w_i log p[y_i](x_i without i) / sum_i w_i}: each data point's class
#' probabilities are refitted without it (as costly as the fit itself); it is
#' infinite where a point's own class is absent from its leave-one-out window.
#'
#' @inheritParams local_poly
#' @param degree 0 for the local mode (local means of the class indicators),
#'   1 or more (at most 3) for local logistic regression of two classes and
#'   the local multinomial logit of more.
#' @param formula A formula `class ~ x1 + x2` with a factor (or character)
#'   response.
#' @param y A factor (or character vector) of class labels.
#' @param bandwidth A number, one per predictor, [nn()], `"cv"` or `"rot"`.
#' @return An object of class `c("local_classify", "local_model")`.
#' @family regression
#' @export
#' @examples
#' fit <- local_classify(Species ~ Petal.Length + Petal.Width, data = iris)
#' fit
#' predict(fit, iris[c(1, 51, 101), ], type = "prob")
#' knn <- local_classify(Species ~ ., data = iris, kernel = "uniform", bandwidth = nn(7))
#' mean(predict(knn) == iris$Species)
#' plot(fit)   # the map of the predicted class
#' plot(knn)   # four predictors: the class probabilities along each
#' # local multinomial logit of three classes
#' multi <- local_classify(Species ~ Sepal.Length, data = iris, degree = 1, bandwidth = 0.5)
#' predict(multi, data.frame(Sepal.Length = c(5, 6, 7)), type = "prob")
local_classify <- function(x, ...) UseMethod("local_classify")

#' @rdname local_classify
#' @export
local_classify.formula <- function(formula, data = NULL, kernel = "gaussian", bandwidth = "cv",
                                   degree = 0, weights = NULL, subset,
                                   na.action = stats::na.omit, method = "auto", n_threads = NULL,
                                   verbose = interactive(), control = local_control(), ...) {
  check_dots(...)
  mf <- call_model_frame(match.call(expand.dots = FALSE), parent.frame())
  parts <- formula_parts(mf)
  fit <- local_classify.default(parts$x, stats::model.response(mf), degree = degree,
                                kernel = kernel, bandwidth = bandwidth,
                                weights = stats::model.weights(mf),
                                method = method, n_threads = n_threads, verbose = verbose,
                                control = control)
  with_formula(fit, mf, generic_call(match.call(), "local_classify"))
}

#' @rdname local_classify
#' @export
local_classify.default <- function(x, y, kernel = "gaussian", bandwidth = "cv", degree = 0,
                                   weights = NULL, method = "auto", n_threads = NULL,
                                   verbose = interactive(), control = local_control(), ...) {
  check_dots(...)
  predictors <- split_predictors(x)
  n <- nrow(predictors$x)
  if (is.character(y)) y <- factor(y)
  if (!is.factor(y)) abort("{.arg y} must be a factor or a character vector of class labels.")
  if (length(y) != n) {
    abort("{.arg y} has length {length(y)} but the predictors have {n} rows.")
  }
  if (anyNA(y)) abort("{.arg y} has missing values.")
  y <- droplevels(y)
  if (nlevels(y) < 2L) abort("{.arg y} must have at least two classes.")
  degree <- check_count(degree, min = 0)
  fit <- if (degree == 0L) {
    onehot <- outer(as.integer(y), seq_len(nlevels(y)), `==`) + 0
    colnames(onehot) <- levels(y)
    fit_local_model(predictors, onehot, weights, 0L, kernel, bandwidth, method, n_threads,
                    verbose, control, max_degree = 0L, family = "classification")
  } else if (nlevels(y) == 2L) {
    local_logistic(predictors, y, weights, degree, kernel, bandwidth, method, n_threads,
                   verbose, control)
  } else {
    local_multinomial(predictors, y, weights, degree, kernel, bandwidth, method, n_threads,
                      verbose, control)
  }
  fit$y <- y
  fit$levels <- levels(y)
  fit$accuracy <- mean(most_probable(fit$fitted, fit$levels) == y, na.rm = TRUE)
  fit$df <- sum(fit$leverage)
  fit$call <- generic_call(match.call(), "local_classify")
  class(fit) <- c("local_classify", "local_model")
  fit
}

# Local logistic regression of two classes: the local likelihood fit of the second class's
# indicator, whose probabilities become the two columns of `fitted`.
local_logistic <- function(predictors, y, weights, degree, kernel, bandwidth, method, n_threads,
                           verbose, control, call = rlang::caller_env()) {
  second <- matrix(as.integer(y) - 1, dimnames = list(NULL, levels(y)[2L]))
  fit <- fit_local_model(predictors, second, weights, degree, kernel, bandwidth, method,
                         n_threads, verbose, control, max_degree = 3L,
                         family = "classification", likelihood = "binomial", call = call)
  p <- stats::plogis(fit$fitted[, 1L])
  fit$linear.predictors <- fit$fitted[, 1L]
  fit$fitted <- cbind(1 - p, p)
  colnames(fit$fitted) <- levels(y)
  fit
}

# The local multinomial logit of three or more classes (the engine's "multinomial" family on the
# one-hot labels): `fitted` holds the class probabilities at the data, the softmax of the local
# fits' intercepts (see multinomial_solve() in engine.hpp); `class_deviance` is -2 sum_i w_i log
# p_{y_i}(x_i) over the fits that exist.
local_multinomial <- function(predictors, y, weights, degree, kernel, bandwidth, method,
                              n_threads, verbose, control, call = rlang::caller_env()) {
  onehot <- outer(as.integer(y), seq_len(nlevels(y)), `==`) + 0
  colnames(onehot) <- levels(y)
  fit <- fit_local_model(predictors, onehot, weights, degree, kernel, bandwidth, method,
                         n_threads, verbose, control, max_degree = 3L,
                         family = "classification", likelihood = "multinomial", call = call)
  fit$fitted <- class_softmax(fit$fitted, levels(y))
  w <- fit$weights %||% rep(1, length(y))
  own <- fit$fitted[cbind(seq_along(y), as.integer(y))]
  ok <- is.finite(own) & w > 0
  fit$class_deviance <- -2 * sum(w[ok] * log(own[ok]))
  fit
}

# Class probabilities from rows of linear predictors (the local fits' intercepts; -Inf for a
# class absent from the window, NA where the fit does not exist).
class_softmax <- function(eta, levels) {
  eta <- matrix(eta, ncol = length(levels))
  top <- apply(eta, 1L, max)
  top[!is.finite(top)] <- 0
  e <- exp(eta - top)
  matrix(e / rowSums(e), ncol = length(levels), dimnames = list(NULL, levels))
}

# The exact leave-one-out deviance of a local multinomial logit's specification: every data
# point's class probabilities refitted without it, -2 sum_i w_i log p_{y_i} / sum_i w_i; Inf
# where a fit does not exist or gives a point's own class probability 0.
multinomial_cv <- function(spec, n_threads = spec$n_threads, verbose = FALSE) {
  n <- NROW(spec$x)
  res <- engine_run(spec, spec$x, n_threads = n_threads, verbose = verbose,
                    query_codes = spec$categorical$codes, leave_out = seq_len(n))
  p <- class_softmax(res$coef[, 1L, ], colnames(spec$values))
  w <- spec$prior %||% rep(1, n)
  own <- p[cbind(seq_len(n), max.col(spec$values, ties.method = "first"))][w > 0]
  if (length(own) == 0L || anyNA(own)) return(Inf)
  -2 * sum(w[w > 0] * log(own)) / sum(w)
}

# Class probabilities of a fit at model_queries(): local means of the indicators, for local
# logistic regression the two probabilities of its fit, for the local multinomial logit the
# softmax of its intercepts.
class_probabilities <- function(object, res) {
  if (object$degree == 0L) {
    return(matrix(res$coef[, 1L, ], ncol = length(object$levels),
                  dimnames = list(NULL, object$levels)))
  }
  if (length(object$levels) > 2L) return(class_softmax(res$coef[, 1L, ], object$levels))
  p <- stats::plogis(res$coef[, 1L, 1L])
  matrix(c(1 - p, p), ncol = 2L, dimnames = list(NULL, object$levels))
}

# How a classifier estimates its class probabilities.
classifier_model <- function(object) {
  if (object$degree == 0L) return("local mode (local means of the class indicators)")
  if (length(object$levels) == 2L) return("local logistic regression")
  sprintf("local multinomial logit (%d classes, baseline %s)", length(object$levels),
          object$levels[1L])
}

most_probable <- function(prob, levels) {
  cls <- rep(NA_integer_, nrow(prob))
  ok <- stats::complete.cases(prob)
  cls[ok] <- max.col(prob[ok, , drop = FALSE], ties.method = "first")
  factor(levels[cls], levels = levels)
}

#' @rdname local_classify
#' @param object A fitted `local_classify` model.
#' @param newdata New predictor values; `NULL` for the training data.
#' @param type `"class"` for the local mode, `"prob"` for the matrix of class
#'   probabilities.
#' @param method `NULL` (the fit's strategy) or a strategy for these predictions.
#' @return `predict()`: a factor of classes or a matrix of probabilities.
#' @export
predict.local_classify <- function(object, newdata = NULL, type = c("class", "prob"),
                                   method = NULL, n_threads = NULL, verbose = interactive(), ...) {
  check_dots(...)
  type <- match_choice(type, c("class", "prob"))
  prob <- if (is.null(newdata)) {
    object$fitted
  } else {
    queries <- new_predictors(object, newdata)
    res <- predict_engine(object, queries, FALSE, n_threads, verbose, method)
    expand_rows(class_probabilities(object, res), queries$ok)
  }
  if (type == "prob") prob else most_probable(prob, object$levels)
}

#' @export
print.local_classify <- function(x, ..., digits = NULL) {
  check_dots(...)
  digits <- check_digits(digits)
  print_fields(model_header(x), c(model_fields(x, digits), list(
    Classifier = classifier_model(x),
    Deviance = if (!is.null(x$class_deviance)) show_num(x$class_deviance, digits))))
  invisible(x)
}

#' @export
summary.local_classify <- function(object, ..., digits = NULL) {
  check_dots(...)
  out <- NextMethod()
  out$model <- classifier_model(object)
  out$classifier_deviance <- object$class_deviance
  out$brier <- loo_brier(object)
  class(out) <- c("summary.local_classify", class(out))
  out
}

# The leave-one-out Brier score of a local-mode classifier (what its "cv" selector minimises):
# a local mean without point i is (fit - h_i y_i) / (1 - h_i), h_i the point's own weight share.
loo_brier <- function(object) {
  if (object$degree != 0L) return(NULL)
  onehot <- outer(as.integer(object$y), seq_along(object$levels), `==`) + 0
  h <- object$leverage
  loo <- (object$fitted - h * onehot) / (1 - h)
  score <- rowSums((onehot - loo)^2)
  ok <- is.finite(score)
  stats::weighted.mean(score[ok], (object$weights %||% rep(1, length(h)))[ok])
}

#' @export
print.summary.local_classify <- function(x, ..., digits = x$digits) {
  check_dots(...)
  digits <- check_digits(digits)
  NextMethod(digits = digits)
  cat("\n")
  print_fields(NULL, list(
    Classifier = x$model,
    `LOO Brier score` = if (!is.null(x$brier)) show_num(x$brier, digits),
    Deviance = if (!is.null(x$classifier_deviance)) show_num(x$classifier_deviance, digits)))
  invisible(x)
}

#' @rdname local_classify
#' @return `logLik()`: the log-likelihood of the fitted class probabilities at
#'   the data, \eqn{\sum_i w_i \log \hat p_{y_i}(x_i)}{sum_i w_i log phat[y_i](x_i)} (over
#'   the points with a fit), with `df` the trace of the smoother (the sum of
#'   the leverages, as for [local_poly()] fits), so that `AIC()` and `BIC()`
#'   apply.
#' @export
logLik.local_classify <- function(object, ...) {
  check_dots(...)
  w <- object$weights %||% rep(1, length(object$y))
  own <- object$fitted[cbind(seq_along(object$y), as.integer(object$y))]
  ok <- is.finite(own) & w > 0
  structure(sum(w[ok] * log(own[ok])), nobs = sum(ok), df = object$df, class = "logLik")
}

#' @export
fitted.local_classify <- function(object, ...) {
  check_dots(...)
  stats::napredict(object$na.action, most_probable(object$fitted, object$levels))
}

#' @rdname local_classify
#' @param x A fitted `local_classify` model (for `plot()`).
#' @param which `"fit"`: with two numeric predictors, the map of the
#'   predicted class (left blank farther than two bandwidths from the data)
#'   with the data; otherwise the panels of `"conditional"`. `"conditional"`:
#'   one panel per predictor, the class probabilities along it with the other
#'   predictors at their medians or most frequent levels (curves for numeric
#'   predictors, with the data's classes as rugs; stacked bars for categorical
#'   ones).
#' @param n_grid Grid points per predictor.
#' @return `plot()` returns, invisibly, the data frame of the probabilities
#'   drawn (columns `predictor`, `numeric`, `x`, `level`, `class`, `.prob`)
#'   for conditional panels, and `x` for the map.
#' @export
plot.local_classify <- function(x, which = c("fit", "conditional"), n_grid = 150, ...) {
  check_graphics_dots(...)
  which <- match_choice(which, c("fit", "conditional"))
  map <- which == "fit" && ncol(x$x) == 2L && is.null(x$categorical)
  n_grid <- check_n_grid(n_grid, if (map) 2L else 1L)
  if (!map) return(plot_class_probabilities(x, n_grid, ...))
  g1 <- seq(min(x$x[, 1L]), max(x$x[, 1L]), length.out = n_grid)
  g2 <- seq(min(x$x[, 2L]), max(x$x[, 2L]), length.out = n_grid)
  nd <- stats::setNames(expand.grid(g1, g2), colnames(x$x))
  cls <- as.integer(suppressWarnings(predict(x, nd)))
  # no regions where there are no data: farther than two bandwidths from every point
  cls[far_from_data(x$x, nd, local_scales(x$x, if (is.null(x$nn)) x$bandwidth))] <- NA
  cols <- group_colours(length(x$levels))
  # the right quarter of the plot is left for the legend, beside the points
  plot_with_defaults(room_for_legend(g1), range(g2), type = "n", xlab = colnames(x$x)[1L],
                     ylab = colnames(x$x)[2L], main = fit_title(x), ...)
  bandwidth_note(fit_bandwidth_note(x))
  graphics::image(g1, g2, matrix(cls, n_grid), col = grDevices::adjustcolor(cols, 0.3),
                  breaks = seq_len(length(x$levels) + 1L) - 0.5, useRaster = TRUE, add = TRUE)
  graphics::points(x$x, col = cols[as.integer(x$y)], pch = 20)
  graphics::legend("topright", legend = x$levels, col = cols, pch = 20,
                   fill = grDevices::adjustcolor(cols, 0.3), border = NA, bty = "n",
                   title = response_name(x))
  invisible(x)
}
