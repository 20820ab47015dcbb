# The regression family: local_mean() (Nadaraya-Watson), local_poly() and their methods.

#' Local polynomial regression and the local mean
#'
#' `local_poly()` fits a polynomial of degree `degree` around every query
#' point by kernel-weighted least squares (the localization trick);
#' `local_mean()` is degree 0, the Nadaraya-Watson local mean
#' \eqn{\sum_i K(x^*, x_i) y_i / \sum_i K(x^*, x_i)}{sum_i K(x^*, x_i) y_i / sum_i K(x^*, x_i)}.
#' Both work with any number of numeric and categorical predictors. With `family` other than
#' `"gaussian"` the local polynomial is fitted by the local likelihood: at each query \eqn{x^*}{x^*}
#' it maximises \eqn{\sum_i K(x^*, x_i) w_i \ell(y_i, g^{-1}(\beta' \phi(x_i - x^*)))}{sum_i K(x^*,
#' x_i) w_i l(y_i, g^-1(beta' phi(x_i - x^*)))}, a generalized linear model of the kernel window
#' (local logistic or Poisson regression). Robust (Huber, bisquare) and quantile losses are
#' fitted the same way, see [losses()].
#'
#' **Bandwidths.** `bandwidth` is one of
#' * a positive number (the same for every predictor, when all are numeric) or
#'   one per predictor in their order (or named by predictor): for a numeric
#'   predictor its bandwidth h, on its own scale (see [kernels()] for the
#'   convention), for a categorical one its smoothing parameter lambda (see
#'   Predictors);
#' * [nn()]`(k)`: adaptive, the distance to the k-th nearest neighbour;
#' * a selector: `"cv"` (leave-one-out least squares, the default; the
#'   leave-one-out deviance for other families), `"gcv"`, `"aicc"` (Hurvich,
#'   Simonoff and Tsai, 1998). Each is first scored on a grid of common
#'   multiples of the rule-of-thumb bandwidths (see [local_control()]; the
#'   curve of `plot(which = "bandwidth")`), which extends itself by factors of
#'   1.5 while the best candidate is at its upper end or no candidate has a
#'   score (skewed predictors need wide bandwidths for their sparse tails),
#'   within 0.001 to 10 times each predictor's range and, for a tied or rounded
#'   predictor (at least 10 distinct values), no lower than its resolution (the
#'   smallest gap between its values): below it leave-one-out lets tied points
#'   predict each other and rewards fitting each rounded value on its own, and
#'   a warning says when the minimum is there. One numeric predictor is
#'   then refined by golden-section search; several predictors, or any
#'   categorical one, by a joint search of every bandwidth h and every lambda
#'   within the same bounds: for `"cv"` of least squares at degree 0 or 1 with
#'   any kernel but the uniform (whose weights are a step), a descent along the
#'   analytic gradient of the leave-one-out score; otherwise Nelder-Mead from
#'   the grid's best and from a coordinate sweep, restarted once. A predictor
#'   whose h exceeds 3 times its range, or whose lambda reaches its upper bound,
#'   is *smoothed out*: the
#'   fit is (nearly) global in it, so it does not matter locally, and
#'   `summary()` says so (as np's bandwidths do, Hall, Li and Racine, 2007);
#'   `"rot"` (normal-reference rule
#'   \eqn{1.06\,\hat\sigma n^{-1/(4+d)}}{1.06 sigmahat n^(-1/(4+d))}, with
#'   \eqn{\hat\sigma}{sigmahat} the smaller of the sd and IQR/1.349, converted to the kernel);
#'   `"plugin"` (the direct plug-in of Ruppert, Sheather and Wand, 1995, for one numeric predictor
#'   and degree 1; its pilot fits assume a roughly symmetric predictor, so on skewed data prefer
#'   `"cv"`). Both formulas are widened by factors of 1.5 where needed until the fit exists at every
#'   data point (the sparse tail of a skewed predictor leaves narrow windows empty).
#' * `"metric"`: a learned metric, for any kernel of the registry but the
#'   uniform, least squares and degree 0 or 1 (Weinberger and Tesauro, 2007).
#'   The kernel's weights become \eqn{K(\|A(x_i - x^*)\|)}{K(||A(x_i - x^*)||)} with a full
#'   \eqn{d \times d}{d x d} matrix \eqn{A}{A} on the numeric predictors, the fit that of the unit
#'   bandwidth on \eqn{A x}{A x}, so that the kernel can follow directions that combine the
#'   predictors (a response that depends on \eqn{x_1 + x_2}{x_1 + x_2}, say). \eqn{A}{A} minimises
#'   the leave-one-out squared error by BFGS with its analytic gradient, starting from the diagonal
#'   `"cv"` solution \eqn{A = \mathrm{diag}(1/h)}{A = diag(1/h)} (degree 1: from the local mean's
#'   learned metric, whose criterion is smoother, and also from the diagonal if that search ends
#'   above the diagonal's score); categorical lambdas keep their `"cv"` values. Singular values of
#'   \eqn{A}{A} are then raised to at least 1 / (10 times the range of the data along their right
#'   singular vector), the selectors' widest bandwidth. The fit stores `metric$A`, its leave-one-out
#'   score `metric$loss` (also the fit's LOO CV score, computed directly) and the diagonal start's
#'   `metric$start_loss`; `summary()` prints \eqn{A}{A}. Derivatives (`predict(deriv = 1)`) are
#'   mapped back to the original predictors by the chain rule; their standard errors, simultaneous
#'   bands and `variance = "local"` are not available. Where the metric is sharp, queries far (in
#'   units of \eqn{A x}{A x}) from every data point may predict `NA`, as with any small bandwidth.
#' The leave-one-out fit uses the exact identity
#' \eqn{y_i - \hat m_{-i}(x_i) = (y_i - \hat m(x_i)) / (1 - L_{ii})}{y_i - mhat_(-i)(x_i) = (y_i -
#' mhat(x_i)) / (1 - L_ii)}.
#'
#' **Predictors.** Numeric predictors are localized by `kernel` and span the
#' local polynomial. Factors, character and logical columns are categorical:
#' they enter through the generalized product kernel
#' \eqn{K(x^*, x_i) = K_h(x^*_c - x_{ic}) \prod_j L_j(z^*_j, z_{ij})}{K(x^*, x_i) = K_h(x^*_c -
#' x_ic) prod_j L_j(z^*_j, z_ij)}, as in Li and Racine (2007) and the np package. Unordered levels
#' use the Aitchison-Aitken kernel, \eqn{1 - \lambda}{1 - lambda} at the query's level and
#' \eqn{\lambda / (c - 1)}{lambda / (c - 1)} at the other \eqn{c - 1}{c - 1} levels (\eqn{0 \le
#' \lambda \le (c - 1) / c}{0 <= lambda <= (c - 1) / c}); ordered factors use the Li-Racine kernel
#' \eqn{\lambda^{|r^* - r_i|}}{lambda^(|r^* - r_i|)} of the rank difference
#' (\eqn{0 \le \lambda \le 1}{0 <= lambda <= 1}). \eqn{\lambda = 0}{lambda = 0} fits each level (or
#' combination) separately; \eqn{\lambda}{lambda} at its upper bound ignores the predictor. Formula
#' terms may be transformations (`log(x)`, `I(x^2)`, `poly(x, 2)`, which gives one predictor per
#' column); interactions are refused, since the kernel already localizes in all predictors jointly.
#' Levels that `predict()` meets but the fit has not seen are refused; rows of `newdata` with
#' missing predictors give `NA`, as in [stats::predict.lm()]. Duplicated predictor values are fine.
#' A constant predictor is refused.
#'
#' **Local likelihood** (`family`): `"binomial"` takes 0/1, logical or
#' two-level factor responses (the second level is success), proportions with
#' the numbers of trials as `weights`, or a two-column matrix of successes and
#' failures, as [stats::glm()]; `"poisson"` takes counts; quasi families
#' estimate the dispersion from the Pearson residuals. Links are canonical
#' (logit, log). At each query, Newton steps start from the local mean and stop
#' when the local deviance changes by less than `control$tol` relative to it
#' (at most `control$max_iter` steps, see [local_control()]); a step that
#' raises the deviance is halved. Where the local likelihood has no maximum
#' (the steps do not converge, or the fit reproduces the responses of every
#' point of the window: the classes separate there, or are all the same) the
#' fit is `NA` with a warning. Leverages are the diagonal of the influence
#' matrix, \eqn{w_i v(\hat\mu_i) [S^{-1}]_{00}}{w_i v(muhat_i) [S^-1]_00}, so the effective degrees
#' of freedom, `deviance()`, `logLik()` and `AIC()` follow as for [stats::glm()]; the `"cv"` score
#' is the mean leave-one-out deviance from one Newton step away from the full fit.
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
#' @param x Predictors: a numeric vector or matrix, or a data frame whose
#'   columns may also be factors, ordered factors, character or logical.
#' @param y The response: numeric, or as described under Local likelihood.
#' @param degree Degree of the local polynomial (0 to 3).
#' @param kernel A kernel: a name (see [kernels()]), a function of the scaled
#'   distance or a [user_kernel()]. `local_mean()`, `local_poly()` and
#'   `local_smooth()` also take a weight matrix of queries x data points (dense,
#'   or sparse from the Matrix package): the data points themselves as queries
#'   (`local_smooth()`: the rows of `at`), for kernels that are no function of a
#'   distance; the bandwidth is then unused and `predict()` cannot leave the data.
#' @param family The loss of the local fit, a row of [losses()]: `"gaussian"`
#'   (least squares, the default), the local likelihood's `"binomial"`,
#'   `"poisson"`, `"quasibinomial"`, `"quasipoisson"` and `"Gamma"` (log
#'   link), or the [stats::family] object or function of one of them with the
#'   registry's link; the robust `"huber"` and `"bisquare"`; `"quantile"` (the
#'   check loss of the `tau` quantile). The robust and quantile losses give
#'   fits without standard errors, and choose bandwidths by `"cv"` (exact
#'   leave-one-out: the mean absolute, or check-loss, left-out residual) or
#'   `"rot"`.
#' @param tau The quantile of `family = "quantile"`, strictly between 0 and 1.
#' @param n_robust Number of robustness iterations of a least-squares fit (Cleveland, 1979):
#'   each refits with the prior weights times the bisquare robustness weights
#'   \eqn{B(r_i / (6 m))}{B(r_i / (6 m))} of the residuals, \eqn{m}{m} their median absolute
#'   value, at the bandwidth of the first fit. `n_robust = 3` with `kernel = "tricube"`,
#'   `bandwidth = nn(floor(span * n))` and the same degree reproduces
#'   `loess(family = "symmetric", surface = "direct")` (whose 4 `iterations` are 4 fits) and
#'   `lowess(iter = 3)`'s weights. The fit keeps the last weights as `robustness_weights`;
#'   `predict()` uses them. Unlike `family = "huber"` or `"bisquare"`, the weights are global: one
#'   per observation, from its residual of the whole fit.
#' @param tuning The tuning constant of `family = "huber"` (k, default 1.345)
#'   or `"bisquare"` (c, default 4.685), in units of the local scale; `NULL`:
#'   the registry's default.
#' @param bandwidth A number, one number per predictor, [nn()], a selector
#'   name, or `"metric"` for a learned metric (see Details).
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
#'   `fitted()`, `residuals()`, `nobs()`, `formula()`, `logLik()` (so `AIC()`
#'   and `BIC()`), `deviance()`, `sigma()`, `df.residual()`, `update()`,
#'   `plot()`.
#' @references
#' Fan, J. and Gijbels, I. (1996). *Local Polynomial Modelling and Its
#' Applications*. Chapman & Hall.
#'
#' Hall, P., Li, Q. and Racine, J. S. (2007). Nonparametric estimation of
#' regression functions in the presence of irrelevant regressors. *Review of
#' Economics and Statistics* 89, 784-789. \doi{10.1162/rest.89.4.784}
#'
#' Cleveland, W. S. (1979). Robust locally weighted regression and smoothing scatterplots.
#' *JASA* 74, 829-836. \doi{10.1080/01621459.1979.10481038}
#'
#' Hurvich, C. M., Simonoff, J. S. and Tsai, C.-L. (1998). Smoothing parameter
#' selection in nonparametric regression using an improved Akaike information
#' criterion. *JRSS B* 60, 271-293. \doi{10.1111/1467-9868.00125}
#'
#' Li, Q. and Racine, J. S. (2007). *Nonparametric Econometrics: Theory and
#' Practice*. Princeton University Press.
#'
#' Loader, C. (1999). *Local Regression and Likelihood*. Springer.
#'
#' Ruppert, D., Sheather, S. J. and Wand, M. P. (1995). An effective bandwidth
#' selector for local least squares regression. *JASA* 90, 1257-1270.
#'
#' Weinberger, K. Q. and Tesauro, G. (2007). Metric learning for kernel
#' regression. *Proceedings of the Eleventh International Conference on
#' Artificial Intelligence and Statistics (AISTATS)*, PMLR 2, 612-619.
#' @family regression
#' @export
#' @examples
#' fit <- local_poly(dist ~ speed, data = cars)
#' fit
#' predict(fit, data.frame(speed = c(10, 20)), se.fit = TRUE)
#' nw <- local_mean(dist ~ speed, data = cars, bandwidth = 3)
#' plot(fit)
#' # a factor enters through the kernel: h for wt, lambda for cyl
#' mixed <- local_poly(mpg ~ wt + factor(cyl), data = mtcars, bandwidth = c(1, 0.1))
#' predict(mixed, data.frame(wt = 3, cyl = c(4, 8)))
#' # three predictors: one panel per predictor, the others at typical values
#' plot(local_poly(mpg ~ wt + hp + factor(cyl), data = mtcars, bandwidth = c(1, 50, 0.3)))
#' # local logistic regression, with a 95% confidence interval
#' logistic <- local_poly(am ~ wt, data = mtcars, family = "binomial", bandwidth = 1.5)
#' predict(logistic, data.frame(wt = c(2.5, 3.5)), interval = "confidence")
#' # bootstrap bands, pointwise and simultaneous over the points
#' set.seed(1)
#' predict(fit, data.frame(speed = c(10, 15, 20)), interval = "bootstrap", B = 199)
#' counts <- local_poly(carb ~ wt, data = mtcars, family = "poisson", bandwidth = 1)
#' predict(counts, data.frame(wt = c(2, 3, 4)), interval = "bootstrap", B = 199,
#'         simultaneous = TRUE)
#' # robustness iterations, as loess(dist ~ speed, cars, span = 0.5, family = "symmetric")
#' robust <- local_poly(dist ~ speed, cars, kernel = "tricube", bandwidth = nn(25), n_robust = 3)
local_poly <- function(x, ...) UseMethod("local_poly")

#' @rdname local_poly
#' @export
local_mean <- function(x, ...) UseMethod("local_mean")

#' @rdname local_poly
#' @export
local_poly.formula <- function(formula, data = NULL, kernel = "gaussian", bandwidth = "cv",
                               degree = 1, family = "gaussian", tau = 0.5, tuning = NULL,
                               n_robust = 0, weights = NULL, subset, na.action = stats::na.omit,
                               method = "auto", n_threads = NULL, verbose = interactive(),
                               control = local_control(), ...) {
  check_dots(...)
  call <- match.call(expand.dots = FALSE)
  parts <- plain_model_parts(call, formula, data) %||% {
    mf <- call_model_frame(call, parent.frame())
    list(x = formula_parts(mf)$x, y = stats::model.response(mf),
         weights = stats::model.weights(mf), terms = attr(mf, "terms"),
         na.action = attr(mf, "na.action"))
  }
  fit <- poly_fit(parts$x, parts$y, kernel, bandwidth, degree, family, tau, tuning, n_robust,
                  parts$weights, method, n_threads, verbose, control)
  # (`...` is empty, so this is match.call())
  fit$call <- generic_call(call, "local_poly")
  fit$terms <- parts$terms
  fit$na.action <- parts$na.action
  fit
}

#' @rdname local_poly
#' @export
local_poly.default <- function(x, y, kernel = "gaussian", bandwidth = "cv", degree = 1,
                               family = "gaussian", tau = 0.5, tuning = NULL, n_robust = 0,
                               weights = NULL, method = "auto", n_threads = NULL,
                               verbose = interactive(), control = local_control(), ...) {
  check_dots(...)
  fit <- poly_fit(x, y, kernel, bandwidth, degree, family, tau, tuning, n_robust, weights, method,
                  n_threads, verbose, control)
  fit$call <- generic_call(match.call(), "local_poly")
  fit
}

# The fit of local_poly.default() without its call, which the formula method sets itself.
# (Errors name `x` and `y` as the default method's arguments; `call`: where they are raised.)
poly_fit <- function(x, y, kernel, bandwidth, degree, family, tau, tuning, n_robust, weights,
                     method, n_threads, verbose, control, call = rlang::caller_env()) {
  if (check_count(n_robust, min = 0, call = call) > 0L) {
    return(robust_iterations(x, y, kernel, bandwidth, degree, family, n_robust, weights, method,
                             n_threads, verbose, control, call = call))
  }
  predictors <- split_predictors(x, call = call)
  family <- check_family(family, tuning, tau, call = call)
  response <- family_response(y, weights, family, nrow(predictors$x), call = call)
  y <- response$y
  fit <- fit_local_model(predictors, one_column(y), response$weights, degree, kernel,
                         bandwidth, method, n_threads, verbose, control, max_degree = 3L,
                         likelihood = engine_family(family), loss_param = family$loss_param,
                         call = call)
  data_fit <- fit$data_fit
  fit$data_fit <- NULL
  fit$y <- y
  fit$family <- family
  # a vector (dim<- would copy the one-pass fit's vector, which has none)
  if (is.matrix(fit$fitted)) dim(fit$fitted) <- NULL
  fit <- if (family$family == "gaussian") {
    fit$residuals <- if (is.null(data_fit$residuals)) y - fit$fitted else data_fit$residuals
    add_fit_statistics(fit, data_fit$sums)
  } else if (is_m_loss(family$family)) {
    add_loss_statistics(fit)
  } else {
    add_likelihood_statistics(fit)
  }
  class(fit) <- c("local_poly", "local_model")
  fit
}

# A method's matched call under its generic's name, so that update() calls the generic.
generic_call <- function(call, generic) {
  call[[1L]] <- as.name(generic)
  call
}

#' @rdname local_poly
#' @export
local_mean.formula <- function(formula, data = NULL, ...) {
  check_degree_zero(..., .method = local_poly.formula)
  # the user's call itself, evaluated where it was made, so that the model frame finds
  # `subset` and `weights` expressions (through `...` it would see only ..1, ..2)
  call <- match.call()
  call[[1L]] <- local_poly.formula
  call$degree <- 0
  as_local_mean(eval(call, parent.frame()), match.call())
}

#' @rdname local_poly
#' @export
local_mean.default <- function(x, y, ...) {
  check_degree_zero(..., .method = local_poly.default)
  as_local_mean(local_poly.default(x, y, degree = 0, ...), match.call())
}

# local_mean() passes every argument of local_poly()'s `.method` but the degree (the names
# after `...` match only exactly, so that no argument for local_poly() lands here).
check_degree_zero <- function(..., .method, .call = rlang::caller_env()) {
  if ("degree" %in% ...names()) {
    abort("{.fn local_mean} has degree 0; use {.fn local_poly}.", call = .call)
  }
  check_dots(..., .known = setdiff(names(formals(.method)), c("degree", "...")), .call = .call,
             .own = names(formals(sys.function(sys.parent()))))
}

# A degree-0 local_poly() fit as local_mean() returns it.
as_local_mean <- function(fit, call) {
  fit$call <- generic_call(call, "local_mean")
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

with_formula <- function(fit, mf, call) {
  fit$terms <- attr(mf, "terms")
  fit$na.action <- attr(mf, "na.action")
  fit$call <- call
  fit
}

# The shared fitting path of every local model: checks, bandwidth, fits at the data points.
# `predictors` comes from split_predictors(); `likelihood` is the engine's family ("gaussian":
# least squares).
fit_local_model <- function(predictors, values, weights, degree, kernel, bandwidth, method,
                            n_threads, verbose, control, max_degree, family = "regression",
                            likelihood = "gaussian", loss_param = NA_real_,
                            call = rlang::caller_env()) {
  x <- predictors$x
  n <- nrow(x)
  d <- ncol(x)
  degree <- check_count(degree, min = 0, call = call)
  if (degree > max_degree) abort("{.arg degree} must be at most {max_degree}.", call = call)
  if (is_weight_matrix(kernel)) {
    return(fit_weight_matrix(predictors, values, weights, degree, kernel, n_threads, control,
                             family, likelihood, call))
  }
  kernel <- check_kernel(kernel, call = call)
  prior <- check_weights(weights, n, call = call)
  control <- check_control(control, call = call)
  n_threads <- n_threads(n_threads)
  check_flag(verbose, call = call)
  terms <- choose(d + degree, degree)
  if ((if (is.null(prior)) n else sum(prior > 0)) < terms) {
    abort("{n} observation{?s} cannot fit a local polynomial of degree {degree} in {d}
           variable{?s}: at least {terms} are needed.", call = call)
  }
  range <- if (is.null(predictors$range)) column_ranges(x) else predictors$range
  constant <- colnames(x)[range[2L, ] == range[1L, ]]
  if (length(constant)) abort("Predictor{?s} {.field {constant}} {?is/are} constant.", call = call)
  bw <- resolve_bandwidth(bandwidth, x, values, prior, degree, kernel, method, control,
                          n_threads, verbose, call, family, range, predictors, likelihood,
                          loss_param)
  regression <- family == "regression"
  f <- fit_at_data(bw$spec, verbose = verbose, keep_residuals = regression,
                   keep_nodes = regression)
  warn_missing_fits(f$status_counts, "fitted value", likelihood)
  # (in place: colnames<- would copy; the one-pass fit of one value column is a plain vector)
  if (is.matrix(f$fitted)) dimnames(f$fitted) <- list(NULL, colnames(values))
  fit <- list(x = x, categorical = predictors$categorical,
              predictors = predictors[c("names", "kind")], values = values, weights = prior,
              degree = degree, kernel = kernel,
              bandwidth = join_bandwidth(bw$spec$bandwidth, bw$spec$categorical$lambda,
                                         predictors),
              nn = bw$spec$nn, bandwidth_method = bw$how, cv_curve = bw$curve, spec = bw$spec,
              fitted = f$fitted, leverage = f$leverage, n_threads = n_threads, control = control)
  fit$metric <- bw$metric
  # a binned fit's node fits, which predictions on the same grid interpolate (predict_engine())
  fit$nodes <- f$nodes
  # residuals and summaries from the binned one-pass fit, for add_fit_statistics()
  if (regression && !is.null(f$sums)) fit$data_fit <- f[c("residuals", "sums")]
  fit
}

# Warns that some fits are NA, saying why from the number of fits per engine status (see
# status_counts()) and the loss.
warn_missing_fits <- function(counts, what, loss = "gaussian") {
  sparse <- counts[2L] + counts[3L]
  if (sparse) {
    warn(c("{sparse} {what}{cli::qty(sparse)}{?s} {?is/are} NA: the kernel window holds too
            few points.",
           i = "Increase the bandwidth or lower the degree."))
  }
  no_fit <- counts[4L]
  if (no_fit && is_m_loss(loss)) {
    warn(c("{no_fit} {what}{cli::qty(no_fit)}{?s} {?is/are} NA: the local {.val {loss}} fit did
            not converge there.",
           i = "Raise {.code local_control(max_iter =)} or increase the bandwidth."))
  } else if (no_fit) {
    warn(c("{no_fit} {what}{cli::qty(no_fit)}{?s} {?is/are} NA: the local likelihood has no
            maximum there.",
           i = "The response separates perfectly (or is all 0) within the kernel window, or
                the Newton steps did not converge; increase the bandwidth."))
  }
}

# Turns the `bandwidth` argument into an engine specification and says how it was chosen.
resolve_bandwidth <- function(bandwidth, x, values, prior, degree, kernel, method, control,
                              n_threads, verbose, call, family = "regression",
                              range = predictors$range %||% column_ranges(x), predictors = NULL,
                              likelihood = "gaussian", loss_param = NA_real_) {
  n <- nrow(x)
  d <- ncol(x)
  categorical <- predictors$categorical
  spec_for <- function(h, nn = NULL, lambda = NULL) {
    engine_spec(x, kernel, h, values = values, prior = prior, nn = nn, degree = degree,
                method = method, control = control, range = range,
                categorical = categorical, lambda = lambda, family = likelihood,
                loss_param = loss_param, n_threads = n_threads, call = call)
  }
  if (inherits(bandwidth, "local_nn")) {
    if (!is.null(categorical)) {
      abort("{.fn nn} bandwidths are for numeric predictors only.", call = call)
    }
    return(resolve_nn(bandwidth, x, spec_for, verbose, call))
  }
  if (is.numeric(bandwidth)) {
    bw <- split_bandwidth(bandwidth, predictors %||% split_predictors(x), call = call)
    return(list(spec = spec_for(bw$h, lambda = bw$lambda), how = "user", curve = NULL))
  }
  if (identical(bandwidth, "metric")) {
    return(resolve_metric(x, values, prior, degree, kernel, method, control, n_threads, verbose,
                          call, family, categorical, likelihood, function() {
      resolve_bandwidth("cv", x, values, prior, degree, kernel, method, control, n_threads,
                        verbose, call, family, range, predictors, likelihood)
    }))
  }
  if (!is_selector_name(bandwidth, family)) {
    names <- c(selector_names(family), if (family == "regression") "metric")
    abort("{.arg bandwidth} must be a number, {.fn nn}, or one of {.val {names}}.", call = call)
  }
  if (is_m_loss(likelihood) && !bandwidth %in% c("cv", "rot")) {
    abort("The {.val {likelihood}} loss takes a fixed bandwidth, {.fn nn}, {.val cv} or
           {.val rot}.", call = call)
  }
  spec <- spec_for(if (d) bw_rot(x, kernel), lambda = lambda_rot(categorical, n, d))
  problem <- list(x = x, values = values, weights = prior, kernel = kernel, degree = degree,
                  spec = spec, control = control, n_threads = n_threads, verbose = verbose)
  sel <- run_selector(bandwidth, family, problem, call = call)
  h <- sel$bandwidth
  if (any(!is.finite(h)) || any(h <= 0)) {
    abort("The {.val {bandwidth}} bandwidth could not be computed.", call = call)
  }
  list(spec = with_scale(spec, h, call = call, lambda = sel$lambda %||% spec$categorical$lambda),
       how = bandwidth, curve = sel$curve)
}

# A starting value for categorical lambdas: lambda shrinks like h^2, at the rate n^(-2/(4 + d))
# of the numeric bandwidths (Li and Racine 2007), capped at the upper bound.
lambda_rot <- function(categorical, n, d) {
  if (is.null(categorical)) return(NULL)
  pmin(lambda_upper(categorical), n^(-2 / (4 + d)))
}

# Residual statistics and the leave-one-out score of a least-squares fit, over the points with
# a fit, from the summaries of fit_sums() (given by the binned one-pass fit, else computed here).
add_fit_statistics <- function(fit, sums = NULL) {
  if (is.null(sums)) sums <- fit_sums(fit$y, fit$fitted, fit$leverage, fit$weights, fit$n_threads)
  fit$df <- sums$trace
  fit$sigma <- sqrt(sums$rss / max(sums$count - fit$df, 1))
  # undefined (NA) when the weighted response does not vary, e.g. one positive weight
  fit$r.squared <- if (sums$spread > 0) 1 - sums$rss / sums$spread else NA_real_
  fit$cv <- if (sums$near_one) Inf else sums$loo / sums$weight
  # a learned metric's score, computed directly (it may hold leverages too close to 1 for the
  # identity)
  if (!is.null(fit$metric)) fit$cv <- fit$metric$loss
  fit
}

bandwidth_label <- function(object, digits = 4L) {
  if (!is.null(object$nn)) return(sprintf("nn(%d)", object$nn$k))
  if (!is.null(object$metric)) return(metric_label(object))
  named_values(object$bandwidth, object$predictors$names, digits)
}

#' @rdname local_poly
#' @param digits For `print()`, `summary()` and `format()`: significant digits
#'   of the numbers shown; `NULL` for `max(3, getOption("digits") - 3)`.
#' @export
print.local_model <- function(x, ..., digits = NULL) {
  check_dots(...)
  digits <- check_digits(digits)
  print_fields(model_header(x), model_fields(x, digits))
  invisible(x)
}

model_header <- function(x) {
  sprintf("<%s> %s kernel, degree %d, n = %d", class(x)[1L], x$kernel, x$degree,
          length(x$leverage))
}

# The fields print() shows for every local model (classifiers add their own).
model_fields <- function(x, digits) {
  likelihood <- !is.null(x$deviance)
  num <- function(v) show_num(v, digits)
  list(Bandwidth = sprintf("%s (%s)", bandwidth_label(x, digits), x$bandwidth_method),
       `Smoothed out` = smoothed_out_label(x),
       Family = if (likelihood) sprintf("%s (%s link)", x$family$family, x$family$link),
       Loss = if (!is.null(x$loss)) sprintf("%s, total %s", loss_label(x$family), num(x$loss)),
       `Effective df` = if (length(x$df) && !is.na(x$df)) num(x$df),
       Deviance = if (likelihood) sprintf("%s (null %s)", num(x$deviance), num(x$null.deviance)),
       `Residual se` = if (!likelihood && !is.null(x$sigma)) num(x$sigma),
       `R-squared` = if (!likelihood && !is.null(x$r.squared)) num(x$r.squared),
       `Training accuracy` = if (!is.null(x$accuracy)) num(x$accuracy))
}

# The predictors the bandwidth smooths out, with what that means for each (bandwidth_table()):
# a selector that ends at a search limit says so in print(), not only in summary(). NULL if none.
smoothed_out_label <- function(x) {
  tab <- bandwidth_table(x)
  if (is.null(tab) || !any(nzchar(tab$note))) return(NULL)
  tab <- tab[nzchar(tab$note), , drop = FALSE]
  paste(sprintf("%s (%s)", tab$predictor, sub("smoothed out: ", "", tab$note, fixed = TRUE)),
        collapse = ", ")
}

#' @rdname local_poly
#' @param object A fitted model.
#' @export
summary.local_model <- function(object, ..., digits = NULL) {
  check_dots(...)
  digits <- check_digits(digits)
  structure(list(call = object$call, class = class(object)[1L], kernel = object$kernel,
                 degree = object$degree, bandwidth = bandwidth_label(object, digits),
                 digits = digits,
                 how = object$bandwidth_method, method = object$spec$method,
                 n = length(object$leverage), df = object$df, sigma = object$sigma,
                 r.squared = object$r.squared, cv = object[["cv"]],
                 accuracy = object$accuracy, family = object$family,
                 deviance = object$deviance, null.deviance = object$null.deviance,
                 dispersion = object$dispersion, bandwidths = bandwidth_table(object),
                 metric = object$metric$A),
            class = "summary.local_model")
}

# Each predictor's bandwidth, with a note where it smooths the predictor out (see
# smoothed_out()): for a categorical predictor or a local mean it is then irrelevant; for
# degree >= 1 a numeric predictor enters the fit as a global polynomial.
bandwidth_table <- function(object) {
  vars <- object$predictors$names
  bw <- object$bandwidth
  if (is.null(vars) || length(bw) != length(vars) || !is.null(object$metric) ||
      is.null(object$spec)) {
    return(NULL)
  }
  kind <- object$predictors$kind
  numeric_vars <- kind == "numeric"
  flags <- smoothed_out(object$spec, bw[numeric_vars], bw[!numeric_vars])
  out <- logical(length(vars))
  out[numeric_vars] <- flags[seq_len(sum(numeric_vars))]
  out[!numeric_vars] <- flags[-seq_len(sum(numeric_vars))]
  note <- ifelse(!out, "", ifelse(!numeric_vars | object$degree == 0L, "smoothed out: irrelevant",
                                  "smoothed out: enters globally"))
  data.frame(predictor = vars, type = ifelse(numeric_vars, "h", paste("lambda,", kind)),
             bandwidth = bw, note = note)
}

#' @export
print.summary.local_model <- function(x, ..., digits = x$digits) {
  check_dots(...)
  digits <- check_digits(digits)
  num <- function(v) show_num(v, digits)
  cat("Call:\n")
  print_trimmed(x$call)
  cat("\n")
  rows <- c(Model = x$class, Kernel = x$kernel, Degree = x$degree,
            Bandwidth = sprintf("%s (%s)", x$bandwidth, x$how), Strategy = x$method,
            Observations = x$n, `Effective df` = num(x$df))
  if (!is.null(x$deviance)) {
    rows <- c(rows, Family = sprintf("%s (%s link)", x$family$family, x$family$link),
              Deviance = num(x$deviance), `Null deviance` = num(x$null.deviance),
              Dispersion = num(x$dispersion), `LOO deviance (mean)` = num(x$cv))
  } else if (!is.null(x$sigma)) {
    rows <- c(rows, `Residual std. error` = num(x$sigma), `R-squared` = num(x$r.squared),
              `LOO CV score` = num(x$cv))
  }
  if (!is.null(x$accuracy)) rows <- c(rows, `Training accuracy` = num(x$accuracy))
  print_fields(NULL, as.list(rows))
  if (!is.null(x$bandwidths) && nrow(x$bandwidths) > 1L) {
    cat("\nBandwidths:\n")
    tab <- x$bandwidths
    tab$bandwidth <- num(tab$bandwidth)
    print_trimmed(tab, row.names = FALSE, right = FALSE)
  }
  if (!is.null(x$metric)) {
    cat("\nLearned metric A (the kernel acts on A x, unit bandwidth):\n")
    print_trimmed(signif(x$metric, digits))
  }
  invisible(x)
}

# The query points of a model's predictions: new_predictors() of newdata, or the data.
model_queries <- function(object, newdata, call = rlang::caller_env()) {
  if (inherits(newdata, "local_queries")) return(newdata)  # from plot(): x and codes ready
  if (!is.null(newdata)) return(new_predictors(object, newdata, call = call))
  list(x = object$x, codes = object$categorical$codes, ok = rep(TRUE, nrow(object$x)))
}

# Engine fits of a model at query points (model_queries()), with NA and a warning where the
# fit does not exist. `method` overrides the fit's strategy (e.g. exact predictions from a
# binned fit).
# `values_only`: only the fits' values (coef[, 1L, 1L]) are needed.
predict_engine <- function(object, queries, want_var, n_threads, verbose, method = NULL,
                           call = rlang::caller_env(), values_only = FALSE) {
  if (is.null(object$spec)) {
    abort(c("A fit with a weight matrix as {.arg kernel} predicts only at its own data.",
            i = "Refit with the weights of the new points, e.g. {.fn local_smooth} with a
                 weight matrix of them."), call = call)
  }
  spec <- object$spec
  x <- metric_transform(object, queries$x)
  if (!is.null(method)) spec$method <- choose_method(spec, method, nrow(x), call = call)
  # (n_threads() of one thread is that thread)
  threads <- if (is.null(n_threads) && identical(object$n_threads, 1L)) 1L else
    n_threads(if (is.null(n_threads)) object$n_threads else n_threads)
  res <- if (values_only && !want_var && is.null(method) && one_call(spec, nrow(x))) {
    engine_values(spec, x, threads, verbose)
  } else {
    engine_run(spec, x, want_var = want_var, n_threads = threads, verbose = verbose,
               query_codes = queries$codes, nodes = object$nodes)
  }
  if (any(res$status != 0L)) {
    warn_missing_fits(status_counts(res$status), "prediction", spec$family %||% "gaussian")
  }
  res
}

#' @rdname local_poly
#' @param newdata New predictor values (a data frame for formula fits); `NULL`
#'   for the fitted values. Points outside the range of the numeric
#'   predictors' data are extrapolations: `predict()` warns once, saying how
#'   many there are, and returns their values (where `loess()` gives `NA`).
#' @param se.fit Return pointwise standard errors.
#' @param deriv Order of derivative to estimate (at most `degree`): 0 the
#'   function, 1 the gradient, 2 the pure second partial derivatives.
#' @param type For `predict()`: predictions on the scale of the response or of
#'   the linear predictor (the link); derivatives are always on the link
#'   scale.
#' @param interval `"none"`, `"confidence"`: a confidence band for the
#'   regression function (or, with one predictor, its derivative), as in
#'   [stats::predict.lm()], or `"prediction"`: an interval for a new
#'   observation of the response (Gaussian family), whose standard error adds
#'   the residual variance to the fit's, \eqn{\sqrt{se.fit^2 + \sigma^2}}{sqrt(se.fit^2 +
#'   sigma^2)} (with `variance = "local"`, \eqn{\hat\sigma^2(x)}{sigmahat^2(x)}), as
#'   `predict.lm()` does for a new observation of unit weight, or
#'   `"bootstrap"`: a confidence band from `B` bootstrap replicates (see
#'   "Bootstrap bands"). See "Confidence bands" below.
#' @param level Coverage probability of the band.
#' @param simultaneous `FALSE` for a pointwise band, `TRUE` for a band that
#'   covers the whole curve (or surface) over the range of the data, or of
#'   `newdata`, with probability `level` (one or two numeric predictors, a
#'   fixed bandwidth, the Gaussian family); with `interval = "bootstrap"`, a
#'   band that covers the fit at all the evaluation points at once (any fit).
#' @param B Number of bootstrap replicates of `interval = "bootstrap"`, a
#'   whole number of at least 19.
#' @param variance `"constant"`: one residual variance, `sigma^2`;
#'   `"local"`: a heteroscedastic estimate \eqn{\sigma^2(x)}{sigma^2(x)}, the local mean
#'   of the leverage-corrected squared residuals (Gaussian family, numeric
#'   predictors).
#' @param method For `predict()`: `NULL` (the fit's strategy) or a strategy
#'   for these predictions, e.g. `"exact"` after a binned fit.
#' @return `predict()`: a vector (a matrix with one column per predictor for
#'   derivatives of several predictors), or with `se.fit = TRUE` a list with
#'   `fit`, `se.fit`, `df` and `residual.scale` (with `variance = "local"`,
#'   the local scale and its degrees of freedom at each point). With `interval =
#'   "confidence"`, `fit` is a matrix with columns `fit`, `lwr` and `upr`, and
#'   the list of `se.fit = TRUE` also holds the band's `critical` value.
#'   `cbind(newdata, predict(fit, newdata, interval = "confidence"))` is a
#'   `confint()`-style data frame.
#' @section Confidence bands:
#' The fit is linear in the response, \eqn{\hat m(x) = l(x)'y}{mhat(x) = l(x)'y}, and its
#' standard error is \eqn{\sigma \|l(x)\|}{sigma ||l(x)||} (for prior weights \eqn{p_i}{p_i},
#' \eqn{\sigma (\sum_i l_i(x)^2 / p_i)^{1/2}}{sigma (sum_i l_i(x)^2 / p_i)^(1/2)}), with
#' \eqn{\sigma}{sigma} the residual standard error of the fit,
#' \eqn{\sqrt{RSS / (n - tr L)}}{sqrt(RSS / (n - tr L))}. The band is `fit` \eqn{\pm c}{+/- c}
#' `se.fit`. Pointwise, \eqn{c}{c} is the Student t quantile with `df` \eqn{= n - tr L}{= n - tr L}
#' residual degrees of freedom, as `predict.lm()`; with `variance = "local"` the t quantile with the
#' local estimate's degrees of freedom, \eqn{(\sum_i w_i)^2 / \sum_i w_i^2}{(sum_i w_i)^2 / sum_i
#' w_i^2} for its kernel weights \eqn{w_i}{w_i} (Satterthwaite; the smallest over the points for
#' simultaneous bands). `variance = "local"` replaces \eqn{\sigma^2}{sigma^2} by
#' \eqn{\hat\sigma^2(x)}{sigmahat^2(x)}, the local mean (same kernel, bandwidth and weights) of
#' \eqn{p_i r_i^2 / (1 - 2 L_{ii} + p_i \|l(x_i)\|^2)}{p_i r_i^2 / (1 - 2 L_ii + p_i ||l(x_i)||^2)}:
#' each squared residual divided by its expectation under a locally constant variance, so that these
#' divisors sum to \eqn{n - 2 tr L + tr L'L}{n - 2 tr L + tr L'L}.
#'
#' Simultaneous bands use the tube formula (Sun and Loader 1994), as
#' `locfit::scb()`: \eqn{c}{c} solves \eqn{2[P(t_\nu > c) + \kappa_0/(2\pi)
#' (1 + c^2/\nu)^{-\nu/2}] = 1 - \mathrm{level}}{2[P(t_nu > c) + kappa_0/(2 pi) (1 +
#' c^2/nu)^(-nu/2)] = 1 - level} in 1-D, with the boundary term \eqn{\zeta_0}{zeta_0} added in 2-D
#' (`locfit::crit()` uses the normal limit, \eqn{\nu = \infty}{nu = Inf}). \eqn{\kappa_0}{kappa_0}
#' is the length (area in 2-D) of the curve \eqn{T(x) = l(x) / \|l(x)\|}{T(x) = l(x) / ||l(x)||} on
#' the unit sphere over the range of the points (in 2-D their bounding box). The equivalent kernels
#' \eqn{l(x)}{l(x)} come from the engine on a grid of at least eight points per bandwidth (1-D; four
#' in 2-D), and the length (area) by finite differences: the polygon (triangulated surface) through
#' the grid's images, refined by Richardson extrapolation. Above 1,000 observations the data are
#' first binned linearly (1,000 nodes; 40 x 40 in 2-D). The formula assumes a band without bias:
#' with a bandwidth chosen for prediction the band covers the smoothed curve, as all such bands do.
#' It needs a fixed bandwidth and a kernel that is continuous at its edge (not `"uniform"`).
#' @section Bootstrap bands:
#' `interval = "bootstrap"` draws `B` replicates of the fit at the evaluation points. Least
#' squares (Gaussian family): the wild bootstrap (Hardle and Marron 1991), responses
#' \eqn{y^*_i = y_i + s_i V_i}{y*_i = y_i + s_i V_i} with Rademacher signs \eqn{V_i}{V_i}
#' (symmetric: the scale \eqn{s_i}{s_i} carries no sign) and \eqn{s_i^2 = \tilde\sigma^2(x_i) / p_i}{s_i^2 = sigmatilde^2(x_i) / p_i},
#' so that the band holds under heteroscedastic errors. \eqn{\tilde\sigma^2}{sigmatilde^2} is
#' the estimate of `variance = "local"` at three times the bandwidth: the squared residuals
#' themselves (the classical wild bootstrap) make the band's width as noisy as a variance
#' estimated from one window, and simultaneous bands then cover too little (82% for a nominal
#' 95% in the package's simulations). The fit being linear, a replicate's deviation is
#' \eqn{l(x)'(s V)}{l(x)'(s V)}, and the engine smooths many replicates in one pass. Binomial and Poisson families: responses drawn from the fitted means, each refitted at
#' the fit's bandwidth (on the link scale, then mapped to the response's); a replicate without a
#' fit at some point (a window its draws separate) is left out there, with a warning. Pointwise,
#' the band is
#' the basic bootstrap interval \eqn{[\hat m(x) - q_{1-\alpha/2}(x), \hat m(x) -
#' q_{\alpha/2}(x)]}{[mhat(x) - q_(1-alpha/2)(x), mhat(x) - q_(alpha/2)(x)]}, \eqn{q}{q} the quantiles of
#' the replicates' deviations from their mean (least squares), or the percentile interval
#' \eqn{[\hat m(x) + q_{\alpha/2}(x), \hat m(x) + q_{1-\alpha/2}(x)]}{[mhat(x) + q_(alpha/2)(x),
#' mhat(x) + q_(1-alpha/2)(x)]} (local likelihood, where a replicate that separates a window
#' would throw a huge link value into the other tail); simultaneous (`simultaneous = TRUE`), \eqn{\hat
#' m(x) \pm c\, s(x)}{mhat(x) +/- c s(x)} with \eqn{s(x)}{s(x)} the replicates' standard deviation
#' and \eqn{c}{c} the `level` quantile of their maximum of \eqn{|deviation| / s(x)}{|deviation| / s(x)}
#' over the evaluation points (the max-t band; it covers those points, not the range between
#' them). Unlike the tube formula it needs no Gaussian errors, fixed bandwidth or continuous
#' kernel, and serves categorical predictors and local likelihood. **Bias:** the replicates are
#' centred at their bootstrap mean, so the band, like the tube formula's, covers the expectation
#' of the smoother (the variability band of Bowman and Azzalini 1997) and not the bias
#' that smoothing adds: undersmooth (a bandwidth below the selector's) for a band about the curve
#' itself. The draws are made in the R session before any fit: `set.seed()` gives the same band
#' for any `n_threads` and under any `future` plan. `se.fit = TRUE` adds `bootstrap.sd`.
#' @references
#' Sun, J. and Loader, C. R. (1994). Simultaneous confidence bands for linear
#' regression and smoothing. *Annals of Statistics* 22, 1328-1345.
#'
#' Hardle, W. and Marron, J. S. (1991). Bootstrap simultaneous error bars for
#' nonparametric regression. *Annals of Statistics* 19, 778-796.
#'
#' Bowman, A. W. and Azzalini, A. (1997). *Applied Smoothing Techniques for
#' Data Analysis*. Oxford University Press.
#'
#' Cleveland, W. S. and Devlin, S. J. (1988). Locally weighted regression: an
#' approach to regression analysis by local fitting. *JASA* 83, 596-610.
#' \doi{10.1080/01621459.1988.10478639}
#' @export
predict.local_poly <- function(object, newdata = NULL, se.fit = FALSE, deriv = 0,
                               type = c("response", "link"),
                               interval = c("none", "confidence", "prediction", "bootstrap"),
                               level = 0.95, simultaneous = FALSE,
                               variance = c("constant", "local"), B = 999, method = NULL,
                               n_threads = NULL, verbose = interactive(), ...) {
  check_dots(...)
  # (arguments left at their defaults need no checks)
  type <- if (missing(type)) "response" else match_choice(type, c("response", "link"))
  check_flag(se.fit)
  deriv <- if (missing(deriv)) 0L else check_count(deriv, min = 0)
  interval <- if (missing(interval)) "none" else
    match_choice(interval, c("none", "confidence", "prediction", "bootstrap"))
  bootstrap <- interval == "bootstrap"
  if (!missing(B)) {
    if (!bootstrap) abort("{.arg B} needs {.code interval = \"bootstrap\"}.")
    B <- check_replicates(B)
  }
  variance <- if (missing(variance)) "constant" else match_choice(variance, c("constant", "local"))
  if (!missing(level)) level <- check_level(level)
  check_flag(simultaneous)
  if (simultaneous && !interval %in% c("confidence", "bootstrap")) {
    abort("{.code simultaneous = TRUE} needs {.code interval = \"confidence\"} or
           {.val bootstrap}.")
  }
  if (deriv > object$degree) {
    abort("{.arg deriv} = {deriv} needs a local polynomial of degree at least {deriv}.")
  }
  if (deriv > 2L) abort("{.arg deriv} must be 0, 1 or 2.")
  family <- object$family %||% stats::gaussian()
  likelihood <- family$family != "gaussian"
  if ((se.fit || interval != "none") && is_m_loss(family$family)) {
    abort("Standard errors and confidence intervals are not available for the {.val
           {family$family}} loss.")
  }
  if ((likelihood || !is.null(object$categorical)) &&
      ((simultaneous && !bootstrap) || variance == "local")) {
    abort("Simultaneous bands and {.code variance = \"local\"} are for Gaussian fits on numeric
           predictors.")
  }
  if (interval == "prediction" && (likelihood || deriv > 0L)) {
    abort("{.code interval = \"prediction\"} is for the response of a Gaussian fit
           ({.code deriv = 0}).")
  }
  check_metric_predict(object, deriv, se.fit || interval != "none", simultaneous && !bootstrap,
                       variance)
  response <- type == "response" && deriv == 0L
  want_var <- se.fit || interval %in% c("confidence", "prediction")
  if (is.null(newdata) && !want_var && !bootstrap && deriv == 0L && is.null(method) &&
      response) {
    return(fitted(object))
  }
  queries <- model_queries(object, newdata)
  x <- queries$x
  if (!is.null(newdata) && !inherits(newdata, "local_queries")) {
    warn_outside_range(object, x, queries$range)
  }
  res <- predict_engine(object, queries, want_var, n_threads, verbose, method,
                        values_only = deriv == 0L)
  cols <- deriv_columns(res$powers, deriv)
  mult <- if (deriv == 2L) 2 else 1
  fit <- metric_gradient(object, mult * res$coef[, cols, 1L], deriv)
  noise <- if (want_var) residual_scale(object, x, variance) else NULL
  se <- if (want_var) mult * noise$scale * sqrt(res$var[, cols]) else NULL
  shape <- function(v) {
    if (length(cols) == 1L) return(expand_rows(as.vector(v), queries$ok))
    v <- matrix(v, ncol = length(cols))
    colnames(v) <- colnames(object$x)
    expand_rows(v, queries$ok)
  }
  if (interval != "none" && length(cols) > 1L) {
    abort("{.arg interval} with {.arg deriv} > 0 needs one predictor.")
  }
  if (bootstrap) {
    band <- bootstrap_predict_band(object, queries, fit, cols, mult, level, simultaneous, B,
                                   n_threads, verbose)
    if (response && likelihood) band$band[] <- family$linkinv(band$band)
    band$band <- expand_rows(band$band, queries$ok)
    if (!se.fit) return(band$band)
    return(list(fit = band$band, se.fit = shape(se), df = noise$df, residual.scale = noise$scale,
                critical = band$critical, bootstrap.sd = shape(band$sd)))
  }
  if (interval != "none") {
    # Local likelihood: a normal band on the link scale, mapped to the response's.
    # a new observation varies about the fit with the residual variance (as predict.lm())
    spread <- if (interval == "prediction") sqrt(se^2 + noise$scale^2) else se
    band <- confidence_band(object, x, fit, spread, if (likelihood) Inf else noise$df, cols,
                            level, simultaneous, variance, deriv)
    if (response && likelihood) band$band[] <- family$linkinv(band$band)
    band$band <- expand_rows(band$band, queries$ok)
    if (!se.fit) return(band$band)
    return(list(fit = band$band, se.fit = shape(se), df = noise$df,
                residual.scale = noise$scale, critical = band$critical))
  }
  if (response && likelihood) {
    # The delta method: se(mu) = |dmu/deta| se(eta).
    if (se.fit) se <- se * abs(family$mu.eta(fit))
    fit <- family$linkinv(fit)
  }
  if (!se.fit) return(shape(fit))
  list(fit = shape(fit), se.fit = shape(se), df = noise$df, residual.scale = noise$scale)
}

# Warns once when predictions reach beyond the range of the numeric predictors' data: there the
# local polynomial extrapolates (and its standard error grows fast); the values are kept.
# `extent`: the column ranges of x, when the caller has them.
warn_outside_range <- function(object, x, extent = NULL) {
  numeric_vars <- colnames(object$x)
  if (length(numeric_vars) == 0L || nrow(x) == 0L) return(invisible())
  # (the specification holds the ranges of the data, unless a metric transformed them)
  range <- if (is.null(object$metric) && !is.null(object$spec$range)) object$spec$range else
    column_ranges(object$x)
  slack <- 1e-10 * (range[2L, ] - range[1L, ])
  extent <- extent %||% column_ranges(x)
  if (all(extent[1L, ] >= range[1L, ] - slack & extent[2L, ] <= range[2L, ] + slack)) {
    return(invisible())
  }
  beyond <- x < rep(range[1L, ] - slack, each = nrow(x)) |
    x > rep(range[2L, ] + slack, each = nrow(x))
  outside <- sum(rowSums(beyond) > 0)
  if (outside) {
    warn(c("{outside} of the {nrow(x)} prediction point{?s} {cli::qty(outside)}{?is/are} outside
            the range of the data: there the fit extrapolates.",
           i = "Out of range: {.field {numeric_vars[colSums(beyond) > 0]}}."),
         class = "localmean_extrapolation")
  }
  invisible()
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

#' @rdname local_poly
#' @return `coef()`: the local coefficients at the evaluation points (the data
#'   points, or `newdata`): a matrix with one row per point and one column per
#'   term of the local polynomial centred there,
#'   \eqn{\hat\beta_0(x) + \hat\beta_1(x)(u - x) + \hat\beta_2(x)(u - x)^2 +
#'   \dots}{b0(x) + b1(x) (u - x) + b2(x) (u - x)^2 + ...}: `(Intercept)` is the fit
#'   at the point (on the link scale), the column of a predictor its slope there,
#'   `x^2` half its second derivative, `x:z` a mixed term. Categorical
#'   predictors enter through the kernel and have no coefficient.
#' @export
coef.local_poly <- function(object, newdata = NULL, n_threads = NULL, ...) {
  check_dots(...)
  local_coefficients(object, newdata, n_threads, want_var = FALSE)$coef
}

#' @rdname local_poly
#' @param parm For `confint()`: the local coefficients (names or column
#'   numbers of `coef()`), all by default.
#' @return `confint()`: pointwise confidence intervals for the local
#'   coefficients at the evaluation points, a matrix with one row per point and
#'   two columns per coefficient (`"(Intercept) 2.5 %"`,
#'   `"(Intercept) 97.5 %"`, ...): the coefficient plus or minus the Student
#'   t quantile (normal for local likelihood) times its standard error, as the
#'   bands of `predict()` (see "Confidence bands"; the intervals of
#'   `(Intercept)` are those of `predict(type = "link", interval =
#'   "confidence")`).
#' @export
confint.local_poly <- function(object, parm, level = 0.95, newdata = NULL, n_threads = NULL,
                               ...) {
  check_dots(...)
  level <- check_level(level)
  est <- local_coefficients(object, newdata, n_threads, want_var = TRUE)
  if (!missing(parm)) {
    columns <- if (is.character(parm)) colnames(est$coef) else seq_len(ncol(est$coef))
    known <- parm %in% columns
    if (!length(parm) || !all(known)) {
      abort("{.arg parm} must name columns of {.code coef()}: {.val {colnames(est$coef)}}.")
    }
    est$coef <- est$coef[, parm, drop = FALSE]
    est$se <- est$se[, parm, drop = FALSE]
  }
  likelihood <- (object$family %||% stats::gaussian())$family != "gaussian"
  crit <- if (likelihood) stats::qnorm((1 + level) / 2) else stats::qt((1 + level) / 2, est$df)
  tails <- paste(format(100 * c(1 - level, 1 + level) / 2, trim = TRUE, digits = 3), "%")
  out <- matrix(NA_real_, nrow(est$coef), 2L * ncol(est$coef),
                dimnames = list(NULL, paste(rep(colnames(est$coef), each = 2L), tails)))
  out[, c(TRUE, FALSE)] <- est$coef - crit * est$se
  out[, c(FALSE, TRUE)] <- est$coef + crit * est$se
  out
}

# The local coefficients (and with `want_var` their standard errors and degrees of freedom) of
# a fit at model_queries(), named by the terms of the local polynomial.
local_coefficients <- function(object, newdata, n_threads, want_var,
                               call = rlang::caller_env()) {
  if (!is.null(object$metric)) {
    abort("Local coefficients are not available with {.code bandwidth = \"metric\"}: they
           belong to the learned coordinates.", call = call)
  }
  queries <- model_queries(object, newdata, call = call)
  if (!is.null(newdata)) warn_outside_range(object, queries$x)
  res <- predict_engine(object, queries, want_var, n_threads, FALSE)
  names <- term_names(res$powers, colnames(object$x))
  coef <- matrix(res$coef[, , 1L], ncol = length(names), dimnames = list(NULL, names))
  out <- list(coef = expand_rows(coef, queries$ok))
  if (want_var) {
    noise <- residual_scale(object, queries$x, "constant")
    se <- matrix(noise$scale * sqrt(res$var), ncol = length(names), dimnames = list(NULL, names))
    out$se <- expand_rows(se, queries$ok)
    out$df <- noise$df
  }
  out
}

# Names of the local polynomial's terms from their powers (one row per term).
term_names <- function(powers, vars) {
  apply(powers, 1L, function(p) {
    if (all(p == 0L)) return("(Intercept)")
    used <- which(p > 0L)
    paste(ifelse(p[used] > 1L, paste0(vars[used], "^", p[used]), vars[used]), collapse = ":")
  })
}

#' @export
fitted.local_model <- function(object, ...) {
  check_dots(...)
  f <- object$fitted
  if (is.matrix(f) && ncol(f) == 1L) f <- f[, 1L]
  stats::napredict(object$na.action, f)
}

#' @export
residuals.local_model <- function(object, ...) {
  check_dots(...)
  stats::naresid(object$na.action, object$residuals)
}

#' @export
nobs.local_model <- function(object, ...) {
  check_dots(...)
  length(object$leverage)
}

#' @export
formula.local_model <- function(x, ...) {
  check_dots(...)
  if (is.null(x$terms)) abort("The model was not fitted with a formula.")
  stats::formula(x$terms)
}

#' @rdname local_poly
#' @param formula. For `update()`: changes to the formula, as in
#'   [stats::update.formula()] (e.g. `. ~ . - hp`).
#' @param evaluate For `update()`: `TRUE` to refit, `FALSE` for the call.
#' @return `update()`: the model refitted with the changed arguments (the
#'   call, with `evaluate = FALSE`). When predictors are dropped from the
#'   formula and the fit was given one bandwidth per predictor (named, or in
#'   the order of the predictors), the remaining predictors keep theirs.
#' @export
update.local_model <- function(object, formula., ..., evaluate = TRUE) {
  call <- update_call(object, formula., match.call(expand.dots = FALSE)$..., "formula")
  if (!missing(formula.) && !"bandwidth" %in% ...names()) {
    call$bandwidth <- kept_bandwidths(object, call, parent.frame())
  }
  if (isTRUE(evaluate)) eval(call, parent.frame()) else call
}

# The stored call of a fit with a new formula (in argument `formula_arg`) and the `extras`
# replacing or adding arguments, as stats::update.default() builds it.
update_call <- function(object, formula., extras, formula_arg, call = rlang::caller_env()) {
  fit_call <- stats::getCall(object)
  if (is.null(fit_call)) abort("The fit holds no call to update.", call = call)
  if (!missing(formula.)) {
    fit_call[[formula_arg]] <- stats::update(stats::formula(object), formula.)
  }
  for (arg in names(extras)) fit_call[[arg]] <- extras[[arg]]
  fit_call
}

# The bandwidths of the predictors an updated formula keeps, when the fit was given one per
# predictor; otherwise the call's own `bandwidth` argument.
kept_bandwidths <- function(object, call, env) {
  given <- call$bandwidth
  bw <- tryCatch(eval(given, env), error = function(e) NULL)
  vars <- object$predictors$names
  if (!is.numeric(bw) || length(bw) < 2L || length(bw) != length(vars)) return(given)
  if (is.null(names(bw))) names(bw) <- vars
  data <- if (!is.null(call$data)) eval(call$data, env)
  kept <- attr(stats::terms(stats::as.formula(call$formula), data = data), "term.labels")
  if (!all(kept %in% names(bw))) return(given)
  bw[kept]
}

#' @export
logLik.local_poly <- function(object, ...) {
  check_dots(...)
  w <- object$weights %||% rep(1, length(object$y))
  ok <- is.finite(object$fitted)
  n <- sum(w[ok] > 0)
  family <- object$family$family %||% "gaussian"
  if (family == "gaussian") {
    rss <- sum((w * object$residuals^2)[ok])
    val <- 0.5 * (sum(log(w[ok & w > 0])) - n * (log(2 * pi) + 1 - log(n) + log(rss)))
    return(structure(val, nobs = n, df = object$df + 1, class = "logLik"))
  }
  # As glm's: no likelihood for quasi families; the family's aic() is -2 log-likelihood.
  val <- if (family %in% c("binomial", "poisson")) {
    -0.5 * object$family$aic(object$y[ok], n, object$fitted[ok], w[ok], object$deviance)
  } else {
    NA_real_
  }
  structure(val, nobs = n, df = object$df, class = "logLik")
}

#' @rdname local_poly
#' @param type For `residuals()`: `"deviance"`, `"pearson"`, `"response"` or
#'   `"working"`, as for [stats::glm()]; the default is `"response"` for the
#'   Gaussian family (as [stats::lm()]) and `"deviance"` for the others.
#' @export
residuals.local_poly <- function(object, type = NULL, ...) {
  check_dots(...)
  family <- object$family %||% stats::gaussian()
  type <- type %||% if (family$link == "identity") "response" else "deviance"
  type <- check_choice(type, c("deviance", "pearson", "response", "working"))
  w <- object$weights %||% rep(1, length(object$y))
  y <- object$y
  mu <- object$fitted
  r <- switch(type,
    response = y - mu,
    deviance = sign(y - mu) * sqrt(pmax(family$dev.resids(y, mu, w), 0)),
    pearson = sqrt(w) * (y - mu) / sqrt(family$variance(mu)),
    working = (y - mu) / family$mu.eta(family$linkfun(mu))
  )
  stats::naresid(object$na.action, r)
}

#' @export
sigma.local_poly <- function(object, ...) {
  check_dots(...)
  object$sigma
}

#' @export
df.residual.local_poly <- function(object, ...) {
  check_dots(...)
  w <- object$weights %||% rep(1, length(object$y))
  sum(w > 0 & is.finite(object$fitted)) - object$df
}

#' @export
deviance.local_poly <- function(object, ...) {
  check_dots(...)
  if (!is.null(object$deviance)) return(object$deviance)
  w <- object$weights %||% rep(1, length(object$y))
  sum((w * object$residuals^2)[is.finite(object$fitted)])
}

#' @rdname local_poly
#' @param which `"fit"` (the fitted curve with its pointwise confidence band
#'   at `level`, and with `simultaneous = TRUE` the simultaneous band in a
#'   lighter shade; a filled contour for two numeric predictors; with
#'   categorical predictors and one numeric one, a curve and pointwise band per
#'   combination of their levels, up to 8; otherwise, as for three or more
#'   predictors, the conditional panels of `"conditional"`),
#'   `"conditional"` (one panel per predictor, as `mgcv::plot.gam()` draws one
#'   per term: the fit along that predictor with the others at their medians or
#'   most frequent levels, with its pointwise band at `level` and, for
#'   least-squares fits, the partial residuals) or `"bandwidth"` (the
#'   selector's curve).
#' @param n_grid Grid points per predictor for the plot.
#' @param interval The bands drawn: `"confidence"` (the tube formula) or
#'   `"bootstrap"` (`predict(interval = "bootstrap")` with `B` replicates).
#' @return `plot()` returns, invisibly, the data frame of the conditional
#'   curves drawn (columns `predictor`, `numeric`, `x`, `level`, `.fitted`,
#'   `.lower`, `.upper`) when it draws conditional panels, and `x` otherwise.
#' @export
plot.local_poly <- function(x, which = c("fit", "conditional", "bandwidth"), n_grid = 200,
                            level = 0.95, simultaneous = FALSE,
                            interval = c("confidence", "bootstrap"), B = 999, ...) {
  # filled.contour() (two predictors) takes its own arguments too
  check_graphics_dots(..., .known = names(formals(graphics::filled.contour)))
  which <- match_choice(which, c("fit", "conditional", "bandwidth"))
  interval <- match_choice(interval, c("confidence", "bootstrap"))
  n_grid <- check_n_grid(n_grid, min(2L, max(1L, NCOL(x$x))))
  check_level(level)
  check_flag(simultaneous)
  if (which == "bandwidth") return(plot_bandwidth_curve(x, ..., call = rlang::current_env()))
  if (which == "conditional" || !has_fit_view(x)) {
    if (simultaneous) {
      abort("Conditional panels show pointwise bands; drop {.code simultaneous = TRUE}.")
    }
    return(plot_conditional(x, n_grid, level, ..., interval = interval, B = B))
  }
  if (!is.null(x$categorical)) {
    return(plot_by_level(x, n_grid, level, simultaneous, ..., interval = interval, B = B))
  }
  d <- ncol(x$x)
  if (d == 1L) {
    grid <- seq(min(x$x), max(x$x), length.out = n_grid)
    nd <- stats::setNames(data.frame(grid), colnames(x$x))
    p <- fit_band(x, nd, interval, level, B)
    wide <- if (simultaneous) fit_band(x, nd, interval, level, B, simultaneous = TRUE)
    scatter(x, grDevices::gray(0.5), bands = list(p, wide), main = fit_title(x), ...)
    bands <- sprintf("%g%% %sbands", 100 * level, if (interval == "bootstrap") "bootstrap " else "")
    pointwise <- sprintf("; %g%% pointwise %sbands", 100 * level,
                         if (interval == "bootstrap") "bootstrap " else "")
    bandwidth_note(paste0(fit_bandwidth_note(x), if (!simultaneous) pointwise))
    if (simultaneous) draw_band(grid, wide, "steelblue", 0.12)
    draw_band(grid, p, "steelblue", 0.3)
    graphics::lines(grid, p[, "fit"], col = "steelblue", lwd = 2)
    if (simultaneous) {
      graphics::legend("topleft", c("pointwise", "simultaneous"), bty = "n",
                       title = bands,
                       fill = c(grDevices::adjustcolor("steelblue", 0.38),  # 0.3 over 0.12
                                grDevices::adjustcolor("steelblue", 0.12)), border = NA)
    }
  } else if (d == 2L) {
    g1 <- seq(min(x$x[, 1L]), max(x$x[, 1L]), length.out = min(n_grid, 60))
    g2 <- seq(min(x$x[, 2L]), max(x$x[, 2L]), length.out = min(n_grid, 60))
    nd <- stats::setNames(expand.grid(g1, g2), colnames(x$x))
    z <- suppressWarnings(predict(x, nd))
    # no surface where there are no data: farther than two bandwidths from every point
    z[far_from_data(x$x, nd, local_scales(x$x, if (is.null(x$nn)) x$bandwidth))] <- NA
    z <- matrix(z, length(g1))
    pts <- x$x
    title <- fit_title(x)
    note <- fit_bandwidth_note(x)
    response <- response_name(x)
    graphics::filled.contour(g1, g2, z, color.palette = grDevices::hcl.colors,
                             plot.title = {
                               graphics::title(main = title, xlab = colnames(pts)[1L],
                                               ylab = colnames(pts)[2L])
                               bandwidth_note(note)
                             },
                             key.title = graphics::title(main = response, cex.main = 0.9),
                             plot.axes = {
                               graphics::axis(1)
                               graphics::axis(2)
                               graphics::points(pts, pch = 21, cex = 0.8, bg = "white")
                             }, ...)
  }
  invisible(x)
}

# Whether a fit has a single view of its own (a curve, a surface, a curve per combination of up
# to 8 levels over one numeric predictor); the others are drawn as conditional panels.
has_fit_view <- function(x) {
  d <- ncol(x$x)
  if (is.null(x$categorical)) return(d %in% 1:2)
  d == 1L && prod(lengths(x$categorical$levels)) <= 8L
}

# One fitted curve with its pointwise band per combination of the categorical predictors'
# levels, over the one numeric predictor; the data points in the colour of their combination.
plot_by_level <- function(x, n_grid, level, simultaneous, ..., interval = "confidence",
                          B = 999) {
  if (ncol(x$x) != 1L || simultaneous) {
    abort("{.fn plot} draws fits with categorical predictors over one numeric predictor, with
           pointwise bands; use {.fn predict} for more.", call = rlang::caller_env())
  }
  categorical <- x$categorical
  combos <- expand.grid(lapply(categorical$levels, seq_along), KEEP.OUT.ATTRS = FALSE)
  if (nrow(combos) > 8L) {
    abort("{.fn plot} draws at most 8 curves, one per combination of levels; these predictors
           have {nrow(combos)}. Use {.fn predict} instead.", call = rlang::caller_env())
  }
  cols <- group_colours(nrow(combos))
  key <- function(codes) do.call(paste, as.data.frame(codes))
  point_combo <- match(key(categorical$codes), key(combos))
  # each curve over the range of its own data (the whole range for a level without two points)
  curves <- lapply(seq_len(nrow(combos)), function(k) {
    own <- x$x[point_combo == k, 1L]
    span <- if (length(unique(own)) > 1L) range(own) else range(x$x)
    grid <- seq(span[1L], span[2L], length.out = n_grid)
    codes <- matrix(unlist(combos[k, ]), n_grid, ncol(combos), byrow = TRUE,
                    dimnames = list(NULL, colnames(categorical$codes)))
    queries <- structure(list(x = matrix(grid, dimnames = list(NULL, colnames(x$x))),
                              codes = codes, ok = rep(TRUE, n_grid)), class = "local_queries")
    list(grid = grid, band = suppressWarnings(fit_band(x, queries, interval, level, B)))
  })
  scatter(x, grDevices::adjustcolor(cols[point_combo], 0.7),
          bands = lapply(curves, `[[`, "band"), pch = 20, main = fit_title(x), ...)
  bandwidth_note(fit_bandwidth_note(x))
  for (k in seq_along(curves)) {
    draw_band(curves[[k]]$grid, curves[[k]]$band, cols[k], 0.2)
    graphics::lines(curves[[k]]$grid, curves[[k]]$band[, "fit"], col = cols[k], lwd = 2)
  }
  labels <- vapply(seq_len(nrow(combos)), function(k) {
    paste(mapply(function(lv, i) lv[i], categorical$levels, unlist(combos[k, ])), collapse = ", ")
  }, "")
  graphics::legend("topright", legend = labels, col = cols, lwd = 2, pch = 20, bty = "n",
                   title = paste(names(categorical$levels), collapse = ", "))
  invisible(x)
}

# The data of a one-predictor plot, with y-limits that hold the data and the `bands` (the user's
# ylim wins).
# The data of a one-predictor fit, with y-limits that hold every band; graphical parameters in
# `...` (the defaults first, the user's after them) override the defaults.
scatter <- function(x, point_col, bands, ...) {
  ylim <- range(x$y, unlist(lapply(bands, function(b) b[, c("lwr", "upr")])), finite = TRUE)
  plot_with_defaults(x$x[, 1L], x$y, xlab = colnames(x$x), ylab = response_name(x),
                     col = point_col, ylim = ylim, ...)
}

# The title of a regression plot: what was fitted, with which kernel.
fit_title <- function(x) {
  what <- if (inherits(x, "local_classify")) {
    if (x$degree == 0L) {
      "Local-mode classifier"
    } else {
      sprintf("Local classifier, degree %d", x$degree)
    }
  } else if (!is.null(x$deviance)) {
    sprintf("Local %s regression", x$family$family)
  } else {
    c("Local mean", "Local linear fit", "Local quadratic fit", "Local cubic fit")[x$degree + 1L]
  }
  sprintf("%s, %s kernel", what, x$kernel)
}

fit_bandwidth_note <- function(x) {
  sprintf("bandwidth %s (%s)", bandwidth_label(x), x$bandwidth_method)
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
#' object needs (fitted values, leverages, residuals). With one or two numeric
#' predictors and `at = NULL` it evaluates on a regular grid over the range of
#' `x`, like `KernSmooth::locpoly()`: the binned strategy's grid, whose size is
#' `local_control(gridsize =)` when given.
#'
#' @inheritParams local_poly
#' @param method Strategy of the engine: `"auto"`, `"exact"`, `"tree"` or
#'   `"binned"`.
#' @param at Points at which to estimate: a vector, matrix or data frame with
#'   the columns of `x`; `NULL` for a regular grid (one or two predictors).
#' @param bandwidth A positive number, one per predictor, or [nn()].
#' @param deriv Order of derivative (at most `degree`), as in
#'   [predict.local_poly()]; derivatives of local likelihood fits are on the
#'   link scale, estimates on the response scale.
#' @param ... Must be empty: a misspelt or unknown argument is an error.
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
local_smooth <- function(x, y, at = NULL, kernel = "gaussian", bandwidth, degree = 1,
                         deriv = 0, family = "gaussian", weights = NULL, method = "auto",
                         n_threads = NULL, verbose = interactive(), control = local_control(),
                         ...) {
  check_dots(...)
  predictors <- split_predictors(x)
  x <- predictors$x
  family <- check_family(family)
  response <- family_response(y, weights, family, nrow(x))
  degree <- check_count(degree, min = 0)
  deriv <- check_count(deriv, min = 0)
  check_flag(verbose)
  if (degree > 3L) abort("{.arg degree} must be at most 3.")
  if (deriv > min(degree, 2L)) abort("{.arg deriv} must be at most {min(degree, 2L)}.")
  if (is_weight_matrix(kernel)) {
    return(smooth_weight_matrix(predictors, response, at, kernel, degree, deriv, family))
  }
  if (missing(bandwidth) || is.character(bandwidth)) {
    abort("{.arg bandwidth} must be a number, one per predictor, or {.fn nn}; use
           {.fn local_poly} for data-driven selectors.")
  }
  kernel <- check_kernel(kernel)
  control <- check_control(control)
  prior <- check_weights(response$weights, nrow(x), arg = "weights")
  bw <- resolve_bandwidth(bandwidth, x, one_column(response$y), prior, degree, kernel, method,
                          control, n_threads(n_threads), FALSE, rlang::current_env(),
                          predictors = predictors, likelihood = engine_family(family),
                          loss_param = family$loss_param)
  if (is.null(at)) {
    if (ncol(x) > 2L || !is.null(predictors$categorical)) {
      abort("{.arg at} is needed for more than two predictors or categorical ones.")
    }
    ranges <- bw$spec$range
    grids <- lapply(seq_len(ncol(x)), function(j) {
      seq(ranges[1L, j], ranges[2L, j], length.out = bw$spec$gridsize[j])
    })
    at <- as.matrix(expand.grid(grids))
    colnames(at) <- colnames(x)
  }
  if (is.null(predictors$categorical) && !is.data.frame(at)) {
    at <- check_predictors(at, arg = "at")
    if (ncol(at) != ncol(x)) abort("{.arg at} must have {ncol(x)} column{?s}.")
    colnames(at) <- colnames(x)
  }
  model <- list(x = x, categorical = predictors$categorical, predictors = predictors)
  queries <- new_predictors(model, at, arg = "at")
  res <- engine_run(bw$spec, queries$x, verbose = verbose, query_codes = queries$codes)
  cols <- deriv_columns(res$powers, deriv)
  est <- (if (deriv == 2L) 2 else 1) * matrix(res$coef[, cols, 1L], nrow = nrow(queries$x))
  if (deriv == 0L) est <- family$linkinv(est)
  colnames(est) <- if (length(cols) == 1L) "estimate" else paste0("d_", colnames(x))
  if (any(res$status != 0L)) {
    warn_missing_fits(status_counts(res$status), "estimate", engine_family(family))
  }
  data.frame(at, expand_rows(est, queries$ok), check.names = FALSE)
}
