# Conditional densities, distributions and quantiles: the heterogeneous product kernel on X x Y.
#
# With prior weights w_i, the kernel K_x of the predictors (the engine's: radial in the numeric
# predictors scaled by h, times the discrete kernels of the categorical ones) and a kernel k in y
# of bandwidth h_y (G its distribution function),
#   f(y | x) = sum_i w_i K_x(x, x_i) k_hy(y - y_i) / sum_i w_i K_x(x, x_i),
#   F(y | x) = sum_i w_i K_x(x, x_i) G((y - y_i) / h_y) / sum_i w_i K_x(x, x_i),
# the ratio of the product-kernel density on (x, y) to the density on x (np's local constant
# npcdens / npcdist). Both are local means: of the values k_hy(y - y_i), or G((y - y_i) / h_y),
# under the x-weights. So the engine computes them exactly for every kernel and every mix of
# predictors, and one pass gives every y of a grid at once (one value column per y, see
# cdens_grid()). The categorical kernels carry regression weights (no unit mass, as
# local_mean()): the normalisation of a density in x cancels in the ratio anyway.
#
# At pairs (x_j, y_j) with a y of their own (predict(), the quantiles' Newton steps, likelihood
# cross-validation at the data) the columns are the pairs' own y, a block of pairs at a time,
# each pair reading its own column (cdens_pairs()). For the Gaussian kernel the product kernel
# on (x, y) is the radial one, so f(y_j | x_j) is also the ratio of the engine's weight sums on
# (x, y) and on x: two passes whatever the number of pairs (cdens_pairs_gaussian(), used by
# the likelihood cross-validation).

#' Conditional density, distribution and quantiles
#'
#' `kde()` with a two-sided formula, `kde(y ~ x1 + x2, data)`, estimates the
#' conditional density \eqn{f(y \mid x)}{f(y | x)} of a numeric response given
#' predictors of any kind (numeric, factors, ordered factors, logical, in any
#' mix) with the product kernel on \eqn{(x, y)}{(x, y)}: the paper's heterogeneous kernel
#' on \eqn{X \times Y}{X x Y}. The estimate is a local mean, at \eqn{x}{x}, of the
#' kernel in \eqn{y}{y} around every response:
#' \deqn{\hat f(y \mid x) = \frac{\sum_i w_i K_x(x, x_i) k_{h_y}(y - y_i)}{\sum_i w_i K_x(x, x_i)},}{
#'  fhat(y | x) = sum_i w_i K_x(x, x_i) k_hy(y - y_i) / sum_i w_i K_x(x, x_i),}
#' the ratio of the product-kernel density on \eqn{(x, y)}{(x, y)} to the density on
#' \eqn{x}{x} (local constant, as `np::npcdens()`). Replacing \eqn{k}{k} by its
#' distribution function gives the conditional distribution function
#' \eqn{\hat F(y \mid x)}{Fhat(y | x)}, and inverting it the conditional quantiles
#' (as `np::npqreg()`). `predict()` gives all three.
#'
#' **Kernels.** \eqn{K_x}{K_x} is the kernel of [kde()] and [local_mean()] on the
#' predictors: radial in the numeric ones scaled by their bandwidths (a product
#' for the Gaussian, np's default), times the Aitchison-Aitken kernel of each
#' unordered column and \eqn{\lambda^{|r - r_i|}}{lambda^|r - r_i|} of each ordered one (the weights
#' of [local_mean()], so that a factor predictor with \eqn{\lambda = 0}{lambda = 0} gives the
#' density of each group apart). The kernel in \eqn{y}{y} is the same registry kernel
#' in one dimension. Kernels of the user's own are not accepted (the
#' distribution function needs the kernel's integral).
#'
#' **Local linear.** With `degree = 1` (np's `regtype = "ll"`) the estimates are
#' the intercepts of the local linear fits, in the numeric predictors, of the
#' same values \eqn{k_{h_y}(y - y_i)}{k_hy(y - y_i)} (or \eqn{G}{G}) under the same weights: the
#' engine's local polynomial fit, one pass for a whole grid of \eqn{y}{y}. This removes the
#' design bias of the local constant estimate near the ends of the data, but its
#' weights can be negative: \eqn{\hat f(y \mid x)}{fhat(y | x)} may be negative in the tails and
#' \eqn{\hat F(y \mid x)}{Fhat(y | x)} may leave \eqn{[0, 1]}{[0, 1]} or decrease. As np, no
#' correction is made: the estimates are returned as they are (they still integrate to one
#' over \eqn{y}{y}); the quantile is the first crossing of \eqn{\tau}{tau} found on the grid of
#' \eqn{y}{y} (see [predict.local_cdens()]), and likelihood cross-validation scores a non-positive
#' leave-one-out density as the smallest positive double. Categorical predictors enter
#' through the weights only. Without numeric predictors `degree` is ignored.
#'
#' **Categorical responses.** With a factor, ordered factor or logical response
#' the estimate is the conditional probability
#' \eqn{\hat P(y \mid x) = \sum_i w_i K_x(x, x_i) L(y, y_i) / \sum_i w_i K_x(x, x_i)}{Phat(y | x) =
#' sum_i w_i K_x(x, x_i) L(y, y_i) / sum_i w_i K_x(x, x_i)} with a discrete kernel \eqn{L}{L} on the
#' response whose weights sum to one over its levels: Aitchison-Aitken for unordered levels,
#' Li-Racine \eqn{\lambda^{|y - y_i|}}{lambda^|y - y_i|} divided by its sum over the levels for
#' ordered ones (np's). Its \eqn{\lambda}{lambda} is the response's bandwidth, chosen by the same
#' selectors; with \eqn{\lambda = 0}{lambda = 0} the probabilities are those of
#' [local_classify()] at `degree = 0`. `predict(type = "distribution")` needs an ordered
#' response; quantiles need a numeric one.
#'
#' **Bandwidths.** `bandwidth` is one value per predictor followed by the
#' response's (or named by the variables): \eqn{h}{h} for numeric columns and the
#' response, \eqn{\lambda}{lambda} for categorical ones; or a selector:
#' - "rot" (the default), the normal-reference rule: \eqn{h = 1.06\, s\, n^{-1/(4 + q)}}{h =
#'   1.06 s n^(-1/(4 + q))} for every numeric variable and the response, \eqn{s}{s} the smaller of the
#'   standard deviation and the IQR / 1.349 and \eqn{q}{q} the number of numeric variables
#'   with the response (np's `bwmethod = "normal-reference"`), converted to the kernel
#'   (see [kernels()]); \eqn{\lambda = n^{-2/(4 + q)}}{lambda = n^(-2/(4 + q))} capped at its upper bound;
#' - "mlcv", likelihood cross-validation (np's `bwmethod = "cv.ml"`): every bandwidth
#'   jointly maximises the leave-one-out log-likelihood
#'   \eqn{\sum_i w_i \log \hat f_{-i}(y_i \mid x_i)}{sum_i w_i log fhat_-i(y_i | x_i)}, from the rule of
#'   thumb, by the joint search of the regression selectors (the Gaussian kernel with numeric
#'   predictors at degree 0: by Newton's method on its exact gradient and Hessian);
#' - "lscv", least-squares cross-validation (np's `bwmethod = "cv.ls"`): every bandwidth
#'   jointly minimises \eqn{\sum_i w_i [\int \hat f_{-i}(y \mid x_i)^2 dy - 2 \hat f_{-i}(y_i \mid
#'   x_i)]}{sum_i w_i [int fhat_-i(y | x_i)^2 dy - 2 fhat_-i(y_i | x_i)]} (the integral a sum over the levels
#'   of a categorical response), by the same search; the Gaussian kernel for a numeric
#'   response. Each score costs \eqn{O(n^3)}{O(n^3)}, as np's.
#'
#' `degree` (0, the default, or 1) is an argument of the two-sided formula only.
#' The other arguments of [kde()] apply: `kernel`, `weights`, `method`, `n_threads`,
#' `verbose`, `control`, `subset` and `na.action` (not `gridsize` nor `bounds`).
#'
#' @return An object of class `local_cdens`: `x` (the numeric predictors, a
#'   matrix), `y` (the response), `n`, `d` (the number of numeric
#'   predictors), `response` (its name), `predictors` (every predictor's name
#'   and kind), `categorical` (level codes, levels and orderedness of the
#'   categorical predictors, or `NULL`), `weights` (normalised, or `NULL`),
#'   `kernel`, `bandwidth` (a list: `h` of the numeric predictors, `lambda` of
#'   the categorical ones, `y` of the response), `bandwidth_method`, `cv_loglik`
#'   (the mean leave-one-out log-likelihood when "mlcv" chose the bandwidths),
#'   `cv_ls` (the criterion when "lscv" chose them),
#'   `method`, `terms` and `call`.
#' @seealso [predict.local_cdens()], [plot.local_cdens()]
#' @family density
#' @name kde-conditional
#' @examples
#' fit <- kde(waiting ~ eruptions, data = faithful)
#' fit
#' predict(fit, data.frame(eruptions = c(2, 4.5)), y = c(55, 80))
#' predict(fit, data.frame(eruptions = c(2, 4.5)), type = "quantile", tau = c(0.1, 0.5, 0.9))
#' plot(fit)
#' # a factor predictor: the density of mpg within each number of cylinders, smoothed across
#' fit2 <- kde(mpg ~ factor(cyl), data = mtcars, bandwidth = "mlcv")
#' fit2
#' # local linear in x; a categorical response
#' kde(waiting ~ eruptions, data = faithful, degree = 1)
#' fit3 <- kde(factor(gear) ~ mpg, data = mtcars, bandwidth = c(3, 0.1))
#' predict(fit3, data.frame(mpg = c(15, 25)), y = c("3", "4", "5"))
NULL

kde_conditional <- function(mf, weights = NULL, kernel = "gaussian", bandwidth = "rot",
                            degree = 0L, gridsize = NULL, bounds = NULL, method = "auto",
                            n_threads = NULL,
                            verbose = interactive(), control = local_control(),
                            call = rlang::caller_env()) {
  if (!is.null(gridsize) || !is.null(bounds)) {
    abort("{.arg {if (is.null(gridsize)) 'bounds' else 'gridsize'}} is for densities without a
           response; a conditional density is evaluated by {.fn predict}.", call = call)
  }
  response <- names(mf)[1L]
  resp <- check_cdens_response(stats::model.response(mf), response, call)
  y <- resp$y
  columns <- formula_parts(mf, call)$x
  if (response %in% names(columns)) {
    abort("{.arg x}: the response {.field {response}} is also a predictor.", call = call)
  }
  predictors <- split_predictors(columns, arg = "data", call = call)
  n <- length(y)
  kernel <- check_kernel(kernel, user = FALSE, call = call,
                         need = "The conditional distribution needs the kernel's integral.")
  weights <- check_weights(weights, n, call = call)
  fit <- structure(list(
    x = predictors$x, y = y, y_kind = resp$kind, y_levels = resp$levels, n = n,
    d = ncol(predictors$x), response = response,
    predictors = predictors[c("names", "kind")], categorical = predictors$categorical,
    level_type = if (!is.null(predictors$categorical)) {
      level_types(columns[predictors$kind != "numeric"])
    },
    weights = if (!is.null(weights)) weights / sum(weights), kernel = kernel,
    degree = if (ncol(predictors$x)) check_cdens_degree(degree, call) else 0L,
    method = check_choice(method, c("auto", "exact", "tree"), call = call),
    control = check_control(control, call = call)), class = "local_cdens")
  n_threads <- n_threads(n_threads)
  chosen <- resolve_cdens_bandwidth(bandwidth, fit, n_threads, check_flag(verbose), call)
  fit$bandwidth <- chosen[c("h", "lambda", "y")]
  fit$bandwidth_method <- chosen$method
  fit$cv_loglik <- chosen$cv_loglik
  fit$cv_ls <- chosen$cv_ls
  fit
}

# The response: list(y, kind, levels). A numeric one as doubles (kind "numeric"); a factor,
# ordered factor, logical or character one as its 1-based level codes (kind "unordered" or
# "ordered"), whose estimate is the conditional probability.
check_cdens_response <- function(y, name, call) {
  if (is.factor(y) || is.logical(y) || is.character(y)) {
    if (is.null(y) || !is.null(dim(y))) abort("The response {.field {name}} must be a vector.",
                                                call = call)
    if (anyNA(y)) abort("The response {.field {name}} has missing values.", call = call)
    kind <- if (is.ordered(y)) "ordered" else "unordered"
    levels <- if (is.logical(y)) c("FALSE", "TRUE") else levels(as.factor(y))
    codes <- match(as.character(y), levels)
    if (length(unique(codes)) < 2L) {
      abort("The response {.field {name}} has a single value.", call = call)
    }
    return(list(y = codes, kind = kind, levels = levels))
  }
  if (!is.numeric(y) || is.object(y) || !is.null(dim(y))) {
    abort("The response {.field {name}} must be numeric, a factor, an ordered factor or
           logical.", call = call)
  }
  y <- as.double(y)
  if (any(!is.finite(y))) abort("The response {.field {name}} has non-finite values.", call = call)
  if (length(unique(y)) < 2L) abort("The response {.field {name}} is constant.", call = call)
  list(y = y, kind = "numeric", levels = NULL)
}

check_cdens_degree <- function(degree, call) {
  if (!is.numeric(degree) || length(degree) != 1L || !degree %in% c(0, 1)) {
    abort(c("{.arg degree} must be 0 (local constant) or 1 (local linear in the numeric
             predictors).", x = "Got {.val {degree}}."), call = call)
  }
  as.integer(degree)
}

# The local polynomial degree (fits made before it existed: 0).
cdens_degree <- function(fit) fit$degree %||% 0L

# Whether the response is categorical (its estimate a conditional probability).
cdens_discrete <- function(fit) !is.null(fit$y_kind) && fit$y_kind != "numeric"

# The response's discrete kernel as a c x c matrix, [z, l] the probability of level z for a
# data point at level l (Aitchison-Aitken; for an ordered one np's normalised Li-Racine or
# Wang-van Ryzin, as `local_control(ordered_kernel)` says).
cdens_y_table <- function(fit, lambda) {
  discrete_kernel_table(list(levels = list(fit$y_levels), ordered = fit$y_kind == "ordered"),
                        1L, lambda, fit$control)
}

# The largest lambda of a categorical response.
cdens_y_upper <- function(fit) {
  if (fit$y_kind == "ordered") 1 else (length(fit$y_levels) - 1) / length(fit$y_levels)
}

# Level codes of values of a categorical response (`arg` names them in errors).
cdens_y_codes <- function(fit, y, arg, call = rlang::caller_env()) {
  if (!(is.factor(y) || is.character(y) || is.logical(y))) {
    abort("{.arg {arg}} must hold levels of the categorical response {.field {fit$response}}.",
          call = call)
  }
  codes <- match(as.character(y), fit$y_levels)
  bad <- !is.na(y) & is.na(codes)
  if (any(bad)) {
    abort(c("{.arg {arg}} has values outside the levels of {.field {fit$response}}.",
            x = "Unknown: {.val {unique(as.character(y[bad]))}}."), call = call)
  }
  codes
}

# ---- Bandwidths -------------------------------------------------------------------------------

# list(h, lambda, y, method, cv_loglik) from a numeric `bandwidth` (one per predictor, then the
# response's; or named) or a selector of the "conditional" family.
resolve_cdens_bandwidth <- function(bandwidth, fit, n_threads, verbose, call) {
  if (is.character(bandwidth)) {
    method <- check_choice(bandwidth, selector_names("conditional"), arg = "bandwidth",
                           call = call)
    problem <- list(x = cdens_numeric(fit), fit = fit, kernel = fit$kernel,
                    weights = fit$weights, n_threads = n_threads, verbose = verbose)
    chosen <- run_selector(method, "conditional", problem, call = call)
    bw <- lapply(chosen$bandwidth, function(v) if (!is.null(v)) unname(v))
    return(c(bw, list(method = method, cv_loglik = chosen$cv_loglik, cv_ls = chosen$cv_ls)))
  }
  vars <- c(fit$predictors$names, fit$response)
  if (!is.numeric(bandwidth) || is.matrix(bandwidth) || length(bandwidth) != length(vars)) {
    abort(c("{.arg bandwidth} must be {.val {selector_names('conditional')}} or one value per
             variable ({length(vars)}), in the order {.field {vars}}: h for numeric ones and
             the response, lambda for categorical ones.",
            x = "Got {if (is.numeric(bandwidth)) length(bandwidth) else class(bandwidth)[1L]}
                 {if (is.numeric(bandwidth)) 'values' else ''}."), call = call)
  }
  if (!is.null(names(bandwidth)) && all(nzchar(names(bandwidth)))) {
    if (!setequal(names(bandwidth), vars) || anyDuplicated(names(bandwidth))) {
      abort("{.arg bandwidth} names must be the variables {.field {vars}}.", call = call)
    }
    bandwidth <- bandwidth[vars]
  }
  bandwidth <- unname(as.double(bandwidth))
  hy <- bandwidth[length(vars)]
  if (cdens_discrete(fit)) {
    if (!is.finite(hy) || hy < 0 || hy > cdens_y_upper(fit)) {
      abort(c("{.arg bandwidth} of the response {.field {fit$response}} is a lambda in [0,
               {signif(cdens_y_upper(fit), 4)}].", x = "Got {.val {hy}}."), call = call)
    }
  } else if (!is.finite(hy) || hy <= 0) {
    abort(c("{.arg bandwidth} of the response {.field {fit$response}} must be positive and
             finite.", x = "Got {.val {hy}}."), call = call)
  }
  bw <- split_bandwidth(bandwidth[-length(vars)], cdens_predictors(fit), call = call)
  list(h = bw$h, lambda = bw$lambda, y = hy, method = "user", cv_loglik = NULL)
}

cdens_predictors <- function(fit) c(fit$predictors, list(categorical = fit$categorical))

# The numeric variables: the numeric predictors, then a numeric response.
cdens_numeric <- function(fit) if (cdens_discrete(fit)) fit$x else cbind(fit$x, fit$y)

# The categorical variables of the joint kernel: the categorical predictors, then a
# categorical response.
cdens_joint_categorical <- function(fit) {
  cat <- fit$categorical
  if (!cdens_discrete(fit)) return(cat)
  y <- matrix(as.integer(fit$y), dimnames = list(NULL, fit$response))
  list(codes = if (is.null(cat)) y else cbind(cat$codes, y),
       levels = c(cat$levels, stats::setNames(list(fit$y_levels), fit$response)),
       ordered = c(cat$ordered, fit$y_kind == "ordered"))
}

# Bandwidths list(h, lambda, y) from the joint search's numeric ones `h` and lambdas (the
# response's last, numeric or categorical), and back.
cdens_unpack <- function(fit, h, lambda) {
  if (cdens_discrete(fit)) {
    k <- length(lambda)
    return(list(h = h, lambda = if (k > 1L) lambda[-k], y = lambda[k]))
  }
  q <- length(h)
  list(h = h[-q], lambda = if (length(lambda)) lambda, y = h[q])
}
cdens_pack <- function(fit, bw) {
  if (cdens_discrete(fit)) list(h = bw$h, lambda = c(bw$lambda, bw$y))
  else list(h = c(bw$h, bw$y), lambda = bw$lambda)
}

# The normal-reference rule (np's): 1.06 s n^(-1/(4 + q)) for the q numeric variables with the
# response, s = min(sd, IQR / 1.349), on the Gaussian scale converted to the kernel;
# lambda = n^(-2/(4 + q)) capped at its upper bound (lambda_rot()).
cdens_rot <- function(fit, call = rlang::caller_env()) {
  z <- cdens_numeric(fit)
  n <- weight_summary(fit$weights, fit$n)$n
  q <- ncol(z)
  spread <- apply(z, 2L, robust_scale, iqr_divisor = 1.349, weights = fit$weights)
  if (!isTRUE(all(spread > 0))) {
    abort(c("A numeric predictor has no spread: the rule of thumb gives a zero bandwidth.",
            i = "Give {.arg bandwidth} as numbers."), call = call)
  }
  h <- 1.06 * spread * n^(-1 / (4 + q)) * kernel_scale_factor(fit$kernel)
  lambda <- lambda_rot(fit$categorical, n, q)
  if (cdens_discrete(fit)) {
    return(list(bandwidth = list(h = h, lambda = lambda,
                                 y = min(cdens_y_upper(fit), n^(-2 / (4 + q)))), curve = NULL))
  }
  list(bandwidth = list(h = h[-q], lambda = lambda, y = h[q]), curve = NULL)
}

# Likelihood cross-validation: minimises the mean negative leave-one-out log-likelihood
# -sum_i w_i log f_-i(y_i | x_i) over the log-bandwidths and the lambdas' logits with the joint
# search of the regression selectors (joint_search()), from the best common multiple of the rule
# of thumb's bandwidths on a grid; for the Gaussian product kernel of numeric variables at
# degree 0, by Newton's method on the analytic gradient and Hessian (cdens_mlcv_newton()). A
# zero (or undefined) leave-one-out density scores as the smallest positive double, as np's
# cv.ml does, so that the score stays finite.
cdens_mlcv <- function(fit, n_threads, verbose, call = rlang::caller_env()) {
  check_spread(cdens_numeric(fit), fit$weights, "mlcv", call = call)
  specs <- cdens_search_specs(fit, n_threads)
  if (gaussian_mlcv_applies(fit)) return(cdens_mlcv_newton(fit, specs, call))
  cdens_mlcv_search(fit, specs, call)
}

# Likelihood cross-validation by the joint search of cdens_joint_search() (cdens_mlcv()).
cdens_mlcv_search <- function(fit, specs, call) {
  w <- fit$weights %||% rep(1 / fit$n, fit$n)
  score <- function(bw) {
    dens <- cdens_at_data(fit, bw, specs, leave_out = TRUE)
    -sum(w * log(pmax(dens, .Machine$double.xmin)), na.rm = TRUE) -
      sum(w[is.na(dens)]) * log(.Machine$double.xmin)
  }
  best <- cdens_joint_search(fit, specs, score, call)
  warn_mlcv_floor(specs$joint$x, best$h, best$floor)
  list(bandwidth = best$bandwidth, curve = NULL, cv_loglik = -best$value)
}

# Whether the likelihood cross-validation can follow its analytic gradient and Hessian in the
# log-bandwidths (cdens_mlcv_newton()): the Gaussian kernel, a numeric response, local
# constant, numeric predictors only.
gaussian_mlcv_applies <- function(fit) {
  fit$kernel == "gaussian" && !cdens_discrete(fit) && cdens_degree(fit) == 0L &&
    is.null(fit$categorical) && fit$d > 0L
}

# The mean negative leave-one-out log-likelihood of the Gaussian product kernel at log-bandwidths
# `theta` (the predictors', then the response's) with its gradient and Hessian in theta.
# With W_ij the joint kernel weights on (x, y) and V_ij those on x,
#   log f_-i(y_i | x_i) = log sum_j W_ij - log sum_j V_ij - log h_y + constant,
# and d W / d log h_k = W u_k^2, d^2 W / d log h_k d log h_l = W (u_k^2 u_l^2 - 2 [k = l] u_k^2):
# the engine's weight sums with their derivatives (engine_scale_moments()) give all three in
# one pass over the pairs within the window of x (V_ij is W_ij's kernel factor in x: the
# joint's sums are fused into the marginal's pass; without derivatives, or when the joint's
# window is not within it, two passes). Each point's own weight is removed from its sums
# (leave-one-out); a leave-one-out density that is not positive scores as the smallest positive
# double (cdens_mlcv()) and adds nothing to the derivatives. `z`: the predictors and the
# response, cbind(fit$x, fit$y), and `scaled` the specifications' search_scaler()s (a search
# makes them once).
gaussian_mlcv_score <- function(fit, specs, theta, self, w, derivatives = TRUE,
                                z = cbind(fit$x, fit$y),
                                scaled = lapply(specs[c("joint", "x")], search_scaler)) {
  q <- length(theta)
  h <- exp(theta)
  sums <- if (derivatives) {
    engine_scale_moments(scaled$x(h[-q]), fit$x, at_data = TRUE, joint = scaled$joint(h),
                         y = fit$y)
  }
  if (!is.null(sums)) {
    joint <- sums$joint
    marginal <- sums$marginal
  } else {
    joint <- engine_scale_moments(scaled$joint(h), z, derivatives = derivatives, at_data = TRUE)
    marginal <- engine_scale_moments(scaled$x(h[-q]), fit$x, derivatives = derivatives,
                                     at_data = TRUE)
  }
  joint[, 1L] <- joint[, 1L] - self
  marginal[, 1L] <- marginal[, 1L] - self
  dens <- joint[, 1L] / marginal[, 1L] * kernel_row("gaussian")$constant / h[q]
  floor <- .Machine$double.xmin
  used <- is.finite(dens) & dens > floor
  value <- if (all(used)) -sum(w * log(dens)) else
    -sum(w[used] * log(dens[used])) - sum(w[!used]) * log(floor)
  if (!derivatives) return(list(value = value))
  wu <- w * used
  dj <- log_sum_derivatives(joint, q, wu)
  dm <- log_sum_derivatives(marginal, q - 1L, wu)
  x_vars <- seq_len(q - 1L)
  gradient <- -dj$gradient
  gradient[x_vars] <- gradient[x_vars] + dm$gradient
  gradient[q] <- gradient[q] + sum(wu)
  hessian <- -dj$hessian
  hessian[x_vars, x_vars] <- hessian[x_vars, x_vars] + dm$hessian
  list(value = value, gradient = gradient, hessian = hessian)
}

# function(scale) with_scale(spec, scale), for a search's scores at the data
# (gaussian_mlcv_score()): for the "auto" strategy of a truncated kernel with fixed scales below
# binned_min_n$fit points, choose_method() gives tree_or_exact(), here decided without the rest
# of with_scale() (which a Newton search would repeat for every score).
search_scaler <- function(spec) {
  if (!identical(spec$requested_method, "auto") || !is.null(spec$nn) ||
      !is.null(spec$point_scale) || NROW(spec$x) >= binned_min_n$fit ||
      spec$numeric_vars == 0L || !kernel_row(spec$kernel)$truncated) {
    return(function(scale) with_scale(spec, scale))
  }
  function(scale) {
    spec$scale <- scale
    spec$bandwidth <- scale
    spec$method <- tree_or_exact(spec)
    spec
  }
}

# The weighted sums over the points (weights wu) of the first and second derivatives of
# log sum_j W_ij in the k log-scales from the weight sums and their derivatives `sums`
# (engine_scale_moments()): list(gradient, hessian).
log_sum_derivatives <- function(sums, k, wu) {
  s0 <- sums[, 1L]
  first <- sums[, 1L + seq_len(k), drop = FALSE] / s0
  second <- array(0, c(k, k))
  at <- 1L + k
  for (a in seq_len(k)) {
    for (b in a:k) {
      at <- at + 1L
      v <- sums[, at] / s0 - first[, a] * first[, b] - if (a == b) 2 * first[, a] else 0
      second[a, b] <- second[b, a] <- sum(wu * v, na.rm = TRUE)
    }
  }
  list(gradient = colSums(wu * first, na.rm = TRUE), hessian = second)
}

# Likelihood cross-validation of the Gaussian product kernel by Newton's method on the
# log-bandwidths with the analytic gradient and Hessian (gaussian_mlcv_score()): from a common
# multiple of the rule of thumb's bandwidths on the grid of cdens_joint_search() (the third, or
# the best of a scan, mlcv_newton_start()), within the same bounds; a Hessian that is not positive definite is shifted until it is, every step
# halved until the score decreases (Armijo), bandwidths at a bound whose gradient points outward
# held there. Converged when the gradient of the bandwidths not held falls below 1e-8, the
# Newton decrement below 1e-14, or the step changes every log-bandwidth by less than 1e-9 or the
# score by less than 1e-13 relative; a pure Newton step from a decrement below 1e-7 (and 1/100
# of the one before) is the last if it is taken whole, its score without derivatives (one pass
# with derivatives less; quadratic convergence leaves it within about 1e-14 of the minimum).
cdens_mlcv_newton <- function(fit, specs, call) {
  start <- cdens_pack(fit, cdens_rot(fit, call)$bandwidth)$h
  self <- cdens_self_weight(fit, NULL)
  w <- fit$weights %||% rep(1 / fit$n, fit$n)
  z <- cbind(fit$x, fit$y)
  scaled <- lapply(specs[c("joint", "x")], search_scaler)
  score <- function(theta, derivatives = TRUE) {
    gaussian_mlcv_score(fit, specs, theta, self, w, derivatives, z, scaled)
  }
  bounds <- bandwidth_bounds(specs$joint)
  bounds[1L, ] <- pmax(bounds[1L, ], lscv_floor(specs$joint$x, start))
  lower <- log(bounds[1L, ])
  upper <- log(bounds[2L, ])
  begin <- mlcv_newton_start(score, start, lower, upper)
  theta <- begin$theta
  now <- begin$now
  decrement <- Inf
  for (iter in seq_len(100L)) {
    g <- now$gradient
    free <- !((theta <= lower & g > 0) | (theta >= upper & g < 0))
    # (below 1e-8 the gradient is rounding: the score is flat to about 1e-15 there)
    if (!any(free) || max(abs(g[free])) <= 1e-8) break
    step <- numeric(length(theta))
    direction <- newton_direction(now$hessian[free, free, drop = FALSE], g[free])
    step[free] <- direction
    slope <- sum(g * step)
    # (the Newton decrement: the score is within about -slope / 2 of its minimum)
    if (-slope <= 1e-14 * max(1, abs(now$value))) break
    # (converging quadratically, a pure Newton step with every bandwidth free and the
    # decrement below 1e-7 and 1/100 of the last one ends within about slope^2 of the minimum,
    # below the score's rounding: scored without derivatives, and the last)
    last <- -slope <= 1e-7 * max(1, abs(now$value)) && -slope <= 0.01 * decrement &&
      all(free) && attr(direction, "pure")
    decrement <- -slope
    t <- 1
    repeat {
      trial <- pmin(pmax(theta + t * step, lower), upper)
      nxt <- score(trial, derivatives = !last)
      if (nxt$value <= now$value + 1e-4 * t * slope || t < 1e-10) break
      last <- FALSE  # (a full step that fails is no sign of convergence: on with derivatives)
      t <- t / 2
    }
    moved <- max(abs(trial - theta))
    gain <- now$value - nxt$value
    if (nxt$value <= now$value) {
      theta <- trial
      now <- nxt
    }
    if (last || moved < 1e-9 || abs(gain) <= 1e-13 * max(1, abs(now$value))) break
  }
  h <- exp(theta)
  warn_mlcv_floor(specs$joint$x, h, bounds[1L, ])
  list(bandwidth = cdens_unpack(fit, h, NULL), curve = NULL, cv_loglik = -now$value)
}

# The start of cdens_mlcv_newton(): list(theta, now = its score with derivatives). The common
# multiples `mult` of the rule of thumb's bandwidths `start` are scored from the second; the
# third with derivatives: when it improves on the second and the score's quadratic model along
# the diagonal (every log-bandwidth moved together) is convex with its minimum within one step
# of the grid, the search starts there (the best multiple would be the third or a neighbour:
# Newton's steps from the third cost no more, and two value-only passes are saved). Otherwise
# the best multiple of scan_until_rising() (from the second; scores known are reused), held
# within the bounds.
mlcv_newton_start <- function(score, start, lower, upper,
                              mult = exp(seq(log(0.25), log(2), length.out = 10L))) {
  known <- rep(NA_real_, length(mult))
  known[2L] <- score(log(mult[2L] * start), FALSE)$value
  theta <- log(mult[3L] * start)
  probe <- score(theta)
  known[3L] <- probe$value
  slope <- sum(probe$gradient)
  curve <- sum(probe$hessian)
  inside <- all(theta >= lower & theta <= upper)
  if (inside && known[3L] < known[2L] && curve > 0 &&
      abs(slope) <= curve * (log(mult[2L]) - log(mult[1L]))) {
    return(list(theta = theta, now = probe))
  }
  values <- scan_until_rising(function(a) {
    k <- match(a, mult)
    if (is.na(known[k])) score(log(a * start), FALSE)$value else known[k]
  }, mult, 1L, 2L)
  best <- which.min(values)
  theta <- pmin(pmax(log(mult[best] * start), lower), upper)
  list(theta = theta, now = if (best == 3L && inside) probe else score(theta))
}

# The scores f(a) along `grid` (ascending multiples of the bandwidths), from grid[from] up
# until `patience` in a row do not improve on the best: a score with one minimum along the grid
# has passed it, and the widest bandwidths, which cost the most, are rarely scored; when the
# first scored is the best, the smaller ones down from it until one does not improve. Inf where
# not scored.
scan_until_rising <- function(f, grid, patience = 2L, from = 1L) {
  values <- rep(Inf, length(grid))
  worse <- 0L
  for (k in seq(from, length(grid))) {
    values[k] <- f(grid[k])
    worse <- if (k > from && values[k] >= min(values[from:(k - 1L)])) worse + 1L else 0L
    if (worse == patience) break
  }
  if (which.min(values) == from) {
    for (k in rev(seq_len(from - 1L))) {
      values[k] <- f(grid[k])
      if (values[k] >= values[k + 1L]) break
    }
  }
  values
}

# The Newton step -H^-1 g, with H shifted by a multiple of the identity until it is positive
# definite (a descent direction whatever the curvature), each step at most 1 (a factor e) in
# every log-bandwidth.
newton_direction <- function(hessian, gradient) {
  shift <- 0
  scale <- max(abs(diag(hessian)), 1e-12)
  repeat {
    factor <- tryCatch(chol(hessian + diag(shift, nrow(hessian))), error = function(e) NULL)
    if (!is.null(factor)) break
    shift <- if (shift == 0) 1e-6 * scale else 10 * shift
  }
  step <- -backsolve(factor, forwardsolve(t(factor), gradient))
  # (attribute "pure": Newton's own step, neither shifted nor shortened)
  structure(step / max(1, max(abs(step))), pure = shift == 0 && max(abs(step)) <= 1)
}

# The joint search of every bandwidth (log h and the lambdas' logits, joint_search()) for a
# score of list(h, lambda, y), from the best common multiple of the rule of thumb's numeric
# bandwidths on a grid. None below 1/20 of the rule of thumb nor the resolution of rounded
# data, where the leave-one-out likelihood of a point's twins grows without bound as the
# bandwidths shrink. Returns list(bandwidth, value, h (the numeric ones), floor).
cdens_joint_search <- function(fit, specs, score, call) {
  start <- cdens_pack(fit, cdens_rot(fit, call)$bandwidth)
  memo <- new.env(parent = emptyenv())
  score_of <- function(h, threads = NULL, lambda = start$lambda) {
    key <- paste(format(c(h, lambda), digits = 17), collapse = ",")
    if (is.null(memo[[key]])) memo[[key]] <- score(cdens_unpack(fit, h, lambda))
    memo[[key]]
  }
  h0 <- start$h
  bounds <- bandwidth_bounds(specs$joint)
  if (length(h0)) {
    mult <- exp(seq(log(0.25), log(2), length.out = 10L))
    values <- vapply(mult, function(a) score_of(a * h0), 1)
    bounds[1L, ] <- pmax(bounds[1L, ], lscv_floor(specs$joint$x, h0))
    h0 <- pmax(mult[which.min(values)] * h0, bounds[1L, ])
  } else {
    bounds <- matrix(numeric(0), 2L, 0L)
  }
  best <- joint_search(score_of, h0, start$lambda, bounds, specs$joint)
  best <- cdens_polish(score_of, best, bounds, specs$joint)
  lambda <- if (length(start$lambda)) best$lambda
  list(bandwidth = cdens_unpack(fit, best$h, lambda), value = score_of(best$h, lambda = lambda),
       h = best$h, floor = bounds[1L, ])
}

# A final Nelder-Mead from the joint search's result with a tight tolerance (the search stops
# at relative changes of 1e-4, np's optimiser goes further), kept when better. list(h, lambda).
cdens_polish <- function(score_of, best, bounds, spec) {
  layout <- theta_layout(spec, bounds)
  score <- theta_score(score_of, layout)
  clamp <- function(theta) pmin(pmax(theta, layout$bounds[1L, ]), layout$bounds[2L, ])
  theta0 <- clamp(c(log(best$h), stats::qlogis(best$lambda / layout$lambda_upper)))
  if (!length(theta0)) return(best)
  opt <- if (length(theta0) == 1L) {
    stats::optimize(score, theta0 + c(-0.2, 0.2), tol = 1e-8)[c("minimum", "objective")]
  } else {
    stats::optim(theta0, score, method = "Nelder-Mead",
                 control = list(reltol = 1e-10, maxit = 200L * length(theta0)))[c("par", "value")]
  }
  if (opt[[2L]] < score(theta0)) theta_scales(clamp(opt[[1L]]), layout) else best
}

# Least-squares cross-validation (np's cv.ls, Hall, Racine and Li 2004): minimises
#   LSCV = sum_i w_i [ int f_-i(y | x_i)^2 dy - 2 f_-i(y_i | x_i) ]
# (the integrated squared error of f(. | x) averaged over the x_i, less its constant) over every
# bandwidth jointly, by the search of cdens_joint_search().
cdens_lscv <- function(fit, n_threads, verbose, call = rlang::caller_env()) {
  if (!cdens_discrete(fit) && fit$kernel != "gaussian") {
    abort(c("{.code bandwidth = \"lscv\"} of a numeric response needs {.code kernel =
             \"gaussian\"}.", i = "Use {.val mlcv} or {.val rot} for other kernels."),
          call = call)
  }
  check_spread(cdens_numeric(fit), fit$weights, "lscv", call = call)
  specs <- cdens_search_specs(fit, n_threads)
  best <- cdens_joint_search(fit, specs, function(bw) {
    finite_or_max(cdens_lscv_score(fit, bw, n_threads))
  }, call)
  list(bandwidth = best$bandwidth, curve = NULL, cv_ls = best$value)
}

# The LSCV criterion at bandwidths `bw`. Every estimate is linear in the y-kernel values:
# f(y | x_i) = sum_j l_ij k_hy(y - y_j), with l_ij the weights of the local constant or local
# linear fit at x_i (the engine's fits of the unit vectors, one column per data point), and
# leaving point i out gives the weights a_ij = l_ij / (1 - l_ii), a_ii = 0 (as for any linear
# smoother). Then int f_-i(y | x_i)^2 dy = sum_jl a_ij a_il c(y_j - y_l), with c the kernel
# convolved with itself: the Gaussian of scale sqrt(2) h_y, or for a categorical response the
# sum over the levels z of L(z, y_j) L(z, y_l). O(n^3) per score, as np's.
cdens_lscv_score <- function(fit, bw, n_threads = 1L) {
  n <- fit$n
  ell <- cdens_local_means(fit, diag(n), fit$x, fit$categorical$codes, bw, n_threads)$mean
  a <- ell / (1 - diag(ell))
  diag(a) <- 0
  if (cdens_discrete(fit)) {
    table <- cdens_y_table(fit, bw$y)
    conv <- crossprod(table)[fit$y, fit$y]
    own <- table[fit$y, fit$y]
  } else {
    gap <- outer(fit$y, fit$y, "-")
    conv <- stats::dnorm(gap, sd = sqrt(2) * bw$y)
    own <- stats::dnorm(gap, sd = bw$y)
  }
  w <- fit$weights %||% rep(1 / n, n)
  sum(w * (rowSums((a %*% conv) * a) - 2 * rowSums(a * own)))
}

# Warns when the likelihood cross-validation chose the lower limit of some bandwidth.
warn_mlcv_floor <- function(z, h, floor) {
  low <- h <= floor * (1 + 1e-6)
  if (!length(h)) return(invisible())
  if (!any(low)) return(invisible())
  tied <- vapply(which(low), function(j) mean(duplicated(z[, j])), 1)
  warn(c("The {.val mlcv} score has its maximum at the smallest bandwidth searched for
          {.field {colnames(z)[low]}}: {signif(floor[low], 3)} (the larger of 1/20 of the
          rule of thumb and the resolution of the data).",
         i = if (any(tied > 0)) "{round(100 * tied)}% of the values are duplicated: likelihood
             cross-validation undersmooths tied or rounded data.",
         i = "Consider {.val rot}, or give {.arg bandwidth} as numbers."),
       class = "localmean_rounded")
}

# Engine specifications of a bandwidth search, built once so that every score reuses their
# engine objects: `joint` on (x, y) and `x` on the predictors alone (weight sums), for
# cdens_pairs_gaussian().
cdens_search_specs <- function(fit, n_threads) {
  lambda <- lambda_upper(fit$categorical)
  z <- cdens_numeric(fit)
  joint_cat <- cdens_joint_categorical(fit)
  joint <- engine_spec(z, fit$kernel, rep(1, ncol(z)), prior = fit$weights,
                       method = fit$method, control = fit$control, categorical = joint_cat,
                       lambda = lambda_upper(joint_cat), n_threads = n_threads)
  if (ncol(z)) colnames(joint$x) <- c(colnames(fit$x), if (!cdens_discrete(fit)) fit$response)
  x <- engine_spec(fit$x, fit$kernel, rep(1, fit$d), prior = fit$weights, method = fit$method,
                   control = fit$control, categorical = fit$categorical, lambda = lambda,
                   n_threads = n_threads)
  list(joint = joint, x = x)
}

# f(y_i | x_i) at the data; with `leave_out`, f_-i(y_i | x_i), each point left out of its own
# estimate by removing its own weight from the engine's sums (cdens_self_weight()).
cdens_at_data <- function(fit, bw, specs, leave_out = FALSE) {
  self <- if (leave_out) cdens_self_weight(fit, bw)
  if (fit$kernel == "gaussian" && !cdens_discrete(fit) && cdens_degree(fit) == 0L) {
    return(cdens_pairs_gaussian(fit, fit$x, fit$categorical$codes, fit$y, bw, specs, self))
  }
  cdens_pairs(fit, fit$x, fit$categorical$codes, fit$y, "density", bw, self,
              n_threads = specs$x$n_threads)[, 1L]
}

# The weight of each data point in its own window: its prior weight (as the engine has it) times
# the kernel at distance 0 (1 for every registry kernel) and its own level's discrete weights
# (1 - lambda unordered, 1 ordered).
cdens_self_weight <- function(fit, bw) {
  w <- rep_len(fit$weights %||% 1, fit$n)
  cat <- fit$categorical
  wvr <- identical(fit$control$ordered_kernel, "wangvanryzin")
  if (!is.null(cat)) w <- w * prod(ifelse(cat$ordered & !wvr, 1, 1 - bw$lambda))
  w
}

# ---- Evaluation -------------------------------------------------------------------------------

# The values whose local means are the estimates: k_hy(at_k - y_i) ("density") or
# G((at_k - y_i) / h_y) ("distribution"), n x length(at).
cdens_values <- function(fit, at, type, hy = fit$bandwidth$y) {
  if (cdens_discrete(fit)) {
    table <- cdens_y_table(fit, hy)
    if (type == "distribution") table <- apply(table, 2L, cumsum)
    return(t(table[at, fit$y, drop = FALSE]))
  }
  u <- outer(fit$y, at, function(yi, a) (a - yi) / hy)
  v <- if (type == "density") kernel_value(u, fit$kernel) / hy else kernel_cdf(u, fit$kernel)
  matrix(v, fit$n)
}

# Local means of the columns of `values` under the x-weights at the rows of `points` (numeric
# predictors) with level codes `codes`: list(mean = m x ncol(values), NA where no data weigh;
# wsum = the weight sums).
cdens_local_means <- function(fit, values, points, codes, bw = fit$bandwidth, n_threads = 1L,
                              want_var = FALSE) {
  spec <- engine_spec(fit$x, fit$kernel, bw$h, values = values, prior = fit$weights,
                      degree = cdens_degree(fit), method = fit$method, control = fit$control,
                      m = nrow(points), categorical = fit$categorical, lambda = bw$lambda,
                      n_threads = n_threads)
  res <- engine_run(spec, points, want_var = want_var, query_codes = codes)
  list(mean = matrix(res$coef[, 1L, ], nrow(points)), wsum = res$wsum, s00 = res$s00,
       var = res$var)
}

# Leave-one-out estimates at the data from the local fits `res` (cdens_local_means()) at the
# data points: each point's own weight `self` and value `own` removed. A local linear fit is a
# linear smoother, so deleting point i gives (m_i - l_i v_i) / (1 - l_i) with its leverage
# l_i = self_i [S^-1]_00 (S the local moment matrix); at degree 0, l_i = self_i / wsum_i.
cdens_leave_out <- function(fit, res, mean, self, own) {
  if (cdens_degree(fit) == 0L) return((mean * res$wsum - self * own) / (res$wsum - self))
  leverage <- self * res$s00
  (mean - leverage * own) / (1 - leverage)
}

# Estimates of `type` at every row of `points` for every y of `at`: m x length(at), in blocks
# of columns.
cdens_grid <- function(fit, points, codes, at, type, n_threads = 1L, block = 256L) {
  out <- matrix(NA_real_, nrow(points), length(at))
  for (cols in split(seq_along(at), (seq_along(at) - 1L) %/% block)) {
    out[, cols] <- cdens_local_means(fit, cdens_values(fit, at[cols], type), points, codes,
                                     n_threads = n_threads)$mean
  }
  out
}

# Estimates of each of `types` at the pairs (row j of points and codes, at[j]): m x
# length(types). A block of pairs at a time: the values hold the block's own y (one column per
# pair and type), and each pair reads its own columns. With `self` (the pairs are the data, in
# order), each pair's own weight self[j] and value are removed from its sums: leave-one-out.
cdens_pairs <- function(fit, points, codes, at, types, bw = fit$bandwidth, self = NULL,
                        n_threads = 1L, block = 32L) {
  m <- nrow(points)
  out <- matrix(NA_real_, m, length(types))
  if (cdens_discrete(fit)) {
    # one pass with a column per level, each pair reading its own level's
    own <- cbind(seq_len(m), at)
    for (t in seq_along(types)) {
      values <- cdens_values(fit, seq_along(fit$y_levels), types[t], bw$y)
      res <- cdens_local_means(fit, values, points, codes, bw, n_threads)
      out[, t] <- if (is.null(self)) res$mean[own] else {
        cdens_leave_out(fit, res, res$mean[own], self, values[own])
      }
    }
    out[!is.finite(out)] <- NA_real_
    return(out)
  }
  for (rows in split(seq_len(m), (seq_len(m) - 1L) %/% block)) {
    k <- length(rows)
    values <- do.call(cbind, lapply(types, function(t) cdens_values(fit, at[rows], t, bw$y)))
    res <- cdens_local_means(fit, values, points[rows, , drop = FALSE],
                             codes[rows, , drop = FALSE], bw, n_threads)
    for (t in seq_along(types)) {
      own <- cbind(seq_len(k), (t - 1L) * k + seq_len(k))
      out[rows, t] <- if (is.null(self)) res$mean[own] else {
        cdens_leave_out(fit, res, res$mean[own], self[rows], values[cbind(rows, own[, 2L])])
      }
    }
  }
  out[!is.finite(out)] <- NA_real_
  out
}

# f(y_j | x_j) for the Gaussian kernel, whose product kernel on (x, y) is the radial one: the
# engine's weight sums on (x, y) over those on x, times the kernel's constant over h_y. Two
# passes for any number of pairs. `self`: leave-one-out at the data, as cdens_pairs().
cdens_pairs_gaussian <- function(fit, points, codes, at, bw, specs, self = NULL) {
  joint <- engine_run(with_scale(specs$joint, c(bw$h, bw$y), lambda = bw$lambda),
                      cbind(points, at), query_codes = codes)$wsum
  marginal <- engine_run(with_scale(specs$x, bw$h, lambda = bw$lambda), points,
                         query_codes = codes)$wsum
  if (!is.null(self)) {
    joint <- joint - self
    marginal <- marginal - self
  }
  dens <- joint / marginal * kernel_row("gaussian")$constant / bw$y
  dens[!is.finite(dens)] <- NA_real_
  dens
}

# Conditional quantiles at the rows of `points` for every tau: m x length(tau). Local constant
# estimates, whose F(. | x) is nondecreasing, are solved by the engine in each query's window,
# every tau at once (cdens_quantile_spec()). Otherwise (cdens_quantiles_grid()) F(. | x) is
# tabulated on a grid of y spanning the data and the kernel's reach, which brackets every
# quantile (the bracket widens where tau lies beyond the grid's F, for kernels with unbounded
# support); a safeguarded Newton iteration on the exact F and f then converges within the
# bracket (bisection whenever a step leaves it or f vanishes). The quantile is the smallest y
# with F(y | x) >= tau up to the tolerance.
cdens_quantiles <- function(fit, points, codes, tau, n_threads = 1L, n_grid = 101L,
                            max_iter = 100L) {
  m <- nrow(points)
  hy <- fit$bandwidth$y
  spec <- cdens_quantile_spec(fit, m, n_threads)
  if (!is.null(spec)) {
    return(engine_cdens_quantiles(spec, points, codes, fit$y, fit$kernel, hy, tau, max_iter))
  }
  cdens_quantiles_grid(fit, points, codes, tau, n_threads, n_grid, max_iter)
}

# Conditional quantiles by the first crossing of tau on a grid of y, then Newton steps
# (cdens_quantiles()): local linear estimates, binned fits.
cdens_quantiles_grid <- function(fit, points, codes, tau, n_threads = 1L, n_grid = 101L,
                                 max_iter = 100L) {
  m <- nrow(points)
  hy <- fit$bandwidth$y
  row <- kernel_row(fit$kernel)
  reach <- if (is.finite(row$cutoff)) row$cutoff else 10
  grid <- seq(min(fit$y) - reach * hy, max(fit$y) + reach * hy, length.out = n_grid)
  cdf <- cdens_grid(fit, points, codes, grid, "distribution", n_threads)
  out <- matrix(NA_real_, m, length(tau))
  for (t in seq_along(tau)) {
    ok <- !is.na(cdf[, 1L])
    above <- cdf >= tau[t]
    first <- max.col(above, ties.method = "first")
    first[!above[cbind(seq_len(m), first)]] <- n_grid + 1L  # every grid F below tau
    lo <- ifelse(first <= 1L, -Inf, grid[pmax(first - 1L, 1L)])
    hi <- ifelse(first > n_grid, Inf, grid[pmin(first, n_grid)])
    lo[!ok] <- hi[!ok] <- NA_real_
    out[, t] <- cdens_invert(fit, points, codes, tau[t], lo, hi, grid, n_threads, max_iter)
  }
  out
}

# The engine specification of the predictors under which the engine solves F(y | x) = tau
# itself, every tau of a query in one pass over its window (engine_cdens_quantiles()): local
# constant estimates, whose F is nondecreasing in y, swept point by point (not binned). NULL
# otherwise: the grid and Newton steps of cdens_quantiles() then find the first crossing.
cdens_quantile_spec <- function(fit, m, n_threads) {
  if (cdens_degree(fit) != 0L) return(NULL)
  bw <- fit$bandwidth
  spec <- engine_spec(fit$x, fit$kernel, bw$h, prior = fit$weights, method = fit$method,
                      control = fit$control, m = m, categorical = fit$categorical,
                      lambda = bw$lambda, n_threads = n_threads)
  if (spec$method == "binned") NULL else spec
}

# Pointwise standard errors of conditional quantiles q (m x length(tau)) by the delta method:
# the standard error of Fhat(q | x), sqrt(tau (1 - tau) v(x)), over fhat(q | x), with v(x) the
# variance factor of cdens_variance_factor(). NA where fhat <= 0.
cdens_quantile_se <- function(fit, points, codes, q, tau, n_threads = 1L,
                              call = rlang::caller_env()) {
  v <- cdens_variance_factor(fit, points, codes, n_threads, call)
  se <- q
  for (t in seq_along(tau)) {
    has <- !is.na(q[, t])
    dens <- rep(NA_real_, nrow(q))
    if (any(has)) {
      dens[has] <- cdens_pairs(fit, points[has, , drop = FALSE], codes[has, , drop = FALSE],
                               q[has, t], "density", n_threads = n_threads)[, 1L]
    }
    se[, t] <- sqrt(tau[t] * (1 - tau[t]) * v) / dens
  }
  se[!is.finite(se) | se <= 0] <- NA_real_
  se
}

# The variance factor v(x) of Fhat(y | x) = sum_i l_i(x) G((y - y_i) / h_y): Var Fhat = F (1 - F)
# v(x) to first order, v = sum_i l_i(x)^2 for the estimate's weights l_i (summing to one).
# Local constant: np's (npqreg's) asymptotic form R(K) / (n h f(x)), n h f(x) = c sum_i w_i
# K_x(x, x_i) (times the effective number of observations 1 / sum w_i^2 with prior weights w
# summing to one; c is the kernel's normalising constant) and R(K) = int K^2, both to the power
# of the number of numeric predictors (a product kernel: the Gaussian, or one numeric
# predictor). Local linear: the sum itself, over the local linear weights l_i = w_i K_i
# e_1' S^-1 (1, x_i - x) (S = sum_i w_i K_i (1, x_i - x) (1, x_i - x)'), as the engine's
# variance of the intercept gives it, sum_i w_i K_i^2 (e_1' S^-1 (1, x_i - x))^2, times
# sum_i w_i^2 with prior weights (as the local constant form: exact with equal weights), so that
# the design's larger variance near the ends of the data shows.
cdens_variance_factor <- function(fit, points, codes, n_threads, call) {
  kish <- if (is.null(fit$weights)) 1 else sum(fit$weights^2)
  if (cdens_degree(fit) == 1L) {
    res <- cdens_local_means(fit, matrix(1, fit$n, 1L), points, codes, n_threads = n_threads,
                             want_var = TRUE)
    return(res$var[, 1L] * kish)
  }
  d <- fit$d
  if (d > 1L && fit$kernel != "gaussian") {
    abort("{.arg se.fit} with {d} numeric predictors needs {.code kernel = \"gaussian\"}.",
          call = call)
  }
  row <- kernel_row(fit$kernel)
  wsum <- cdens_local_means(fit, matrix(1, fit$n, 1L), points, codes, n_threads = n_threads)$wsum
  row$roughness^d / (row$constant^d * wsum / kish)
}

# The root of F(y | x_j) = tau within (lo_j, hi_j] (an infinite end is widened first).
cdens_invert <- function(fit, points, codes, tau, lo, hi, grid, n_threads, max_iter) {
  step <- diff(range(grid))
  active <- which(!is.na(lo))
  # widen infinite ends by doubling steps until F brackets tau
  for (side in c("lo", "hi")) {
    for (k in seq_len(60L)) {
      ends <- if (side == "lo") lo else hi
      open <- active[is.infinite(ends[active])]
      if (!length(open)) break
      probe <- if (side == "lo") grid[1L] - step * 2^(k - 1L) else grid[length(grid)] + step * 2^(k - 1L)
      f <- cdens_pairs(fit, points[open, , drop = FALSE], codes[open, , drop = FALSE],
                       rep(probe, length(open)), "distribution", n_threads = n_threads)[, 1L]
      done <- if (side == "lo") f < tau else f >= tau
      if (side == "lo") lo[open[done]] <- probe else hi[open[done]] <- probe
    }
  }
  y <- (lo + hi) / 2
  for (iter in seq_len(max_iter)) {
    if (!length(active)) break
    at <- cdens_pairs(fit, points[active, , drop = FALSE], codes[active, , drop = FALSE],
                      y[active], c("distribution", "density"), n_threads = n_threads)
    gap <- at[, 1L] - tau
    below <- gap < 0
    lo[active[below]] <- y[active[below]]
    hi[active[!below]] <- y[active[!below]]
    newton <- y[active] - gap / at[, 2L]
    inside <- is.finite(newton) & newton > lo[active] & newton < hi[active]
    nxt <- ifelse(inside, newton, (lo[active] + hi[active]) / 2)
    scale <- pmax(abs(lo[active]), abs(hi[active]), 1)
    exact <- abs(gap) <= 1e-14
    converged <- exact | hi[active] - lo[active] <= 1e-13 * scale |
      abs(nxt - y[active]) <= 1e-13 * scale
    y[active] <- ifelse(exact, y[active], nxt)
    active <- active[!converged]
  }
  y[is.na(lo)] <- NA_real_
  y
}

# ---- Methods ----------------------------------------------------------------------------------

#' Methods for conditional densities
#'
#' `predict()` evaluates a conditional density fit made by `kde(y ~ x)` (see
#' [kde-conditional]) exactly at new predictors: the conditional density
#' \eqn{\hat f(y \mid x)}{fhat(y | x)} (`type = "density"`), the conditional distribution
#' function \eqn{\hat F(y \mid x)}{Fhat(y | x)} (`"distribution"`) or the conditional
#' quantiles \eqn{\hat q_\tau(x) = \min\{y : \hat F(y \mid x) \ge \tau\}}{qhat_tau(x) = min{y :
#' Fhat(y | x) >= tau}} (`"quantile"`), found by inverting \eqn{\hat F}{Fhat} with safeguarded
#' Newton steps on the exact estimate (local linear: after bracketing on a grid of \eqn{y}{y}),
#' to about 1e-12 relative.
#' A row with a missing predictor (or response) gets `NA`.
#'
#' `plot()` draws, for one numeric predictor, the conditional density as an
#' image over the data with the conditional quantile curves of `tau`; for
#' one categorical predictor, the conditional density of each level. `summary()`
#' adds the leave-one-out log-likelihood and conditional quartiles at a few
#' values of the first predictor (the others at their median or most frequent
#' level). `logLik()` is \eqn{n \sum_i w_i \log \hat f(y_i \mid x_i)}{n sum_i w_i log fhat(y_i | x_i)} at the
#' data (not cross-validated).
#'
#' @param object,x A `local_cdens` object made by `kde(y ~ x)`.
#' @param newdata A data frame with the predictors (and the response, when `y`
#'   is not given); by default the data of the fit.
#' @param y Values of the response at which to evaluate: every row of `newdata`
#'   with every value of `y` (a matrix with one column per value). `NULL` (the
#'   default) takes each row's own response from `newdata` (a vector).
#' @param type "density", "distribution" or "quantile".
#' @param tau Probabilities of the quantiles, strictly between 0 and 1.
#' @param se.fit For quantiles: also their pointwise standard errors by the
#'   delta method, the standard error of \eqn{\hat F(\hat q \mid x)}{Fhat(qhat | x)}
#'   divided by \eqn{\hat f(\hat q \mid x)}{fhat(qhat | x)}. Local constant: np's
#'   asymptotic formula (as `np::npqreg()`), \eqn{\sqrt{\tau (1 - \tau) R(K)^d / (n h_1 \cdots h_d
#'   \hat f(x))}}{sqrt(tau (1 - tau) R(K)^d / (n h_1 ... h_d fhat(x)))} for the standard error of
#'   \eqn{\hat F}{Fhat} (\eqn{R(K) = \int K^2}{R(K) = int K^2}, \eqn{\hat f(x)}{fhat(x)} the kernel
#'   density of the predictors, \eqn{n}{n} the effective number of observations with prior
#'   weights); more than one numeric predictor needs the Gaussian kernel. Local linear
#'   (`degree = 1`): \eqn{\sqrt{\tau (1 - \tau) \sum_i l_i(x)^2}}{sqrt(tau (1 - tau) sum_i l_i(x)^2)}
#'   with the local linear weights \eqn{l_i(x)}{l_i(x)} of the estimate (summing to one; with
#'   unequal prior weights, the effective number of observations enters as in the local
#'   constant form), which grows near the ends of the data as the design does. Both are
#'   first-order. `NA` where the density estimate is not positive.
#' @param n_grid For `plot()`: grid points per axis of the image.
#' @param points For `plot()`: draw the data.
#' @inheritParams kde
#' @param ... Unused, or for `plot()` passed to the plotting functions.
#' @return `predict()`: with `y`, a matrix with a row per row of `newdata` and a
#'   column per value of `y`; without, a vector with a value per row; for
#'   quantiles a matrix with a column per `tau` (with `se.fit = TRUE`, a list of
#'   `fit` and `se.fit`, two such matrices). `summary()`: an object of class
#'   `summary.local_cdens`; `logLik()`: a `logLik` object.
#' @name cdens-methods
#' @family density
#' @examples
#' fit <- kde(waiting ~ eruptions, data = faithful, bandwidth = c(0.3, 4))
#' predict(fit, data.frame(eruptions = 3), y = seq(50, 90, by = 10))
#' predict(fit, data.frame(eruptions = 3, waiting = 70), type = "distribution")
#' predict(fit, data.frame(eruptions = c(2, 3, 4.5)), type = "quantile", tau = c(0.1, 0.9))
#' predict(fit, data.frame(eruptions = 3), type = "quantile", tau = 0.5, se.fit = TRUE)
#' summary(fit)
#' plot(fit)
NULL

#' @rdname cdens-methods
#' @export
predict.local_cdens <- function(object, newdata = NULL, y = NULL,
                                type = c("density", "distribution", "quantile"), tau = 0.5,
                                se.fit = FALSE, n_threads = NULL, verbose = interactive(), ...) {
  check_dots(...)
  check_flag(se.fit)
  type <- match_choice(type, c("density", "distribution", "quantile"))
  n_threads <- n_threads(n_threads)
  check_flag(verbose)
  discrete <- cdens_discrete(object)
  if (discrete && (type == "quantile" || (type == "distribution" && object$y_kind != "ordered"))) {
    abort(c("{.arg type} {.val {type}} needs a numeric{if (type == 'distribution') ' or ordered'}
             response; {.field {object$response}} is {object$y_kind}.",
            i = "Its conditional probabilities are {.code type = \"density\"}."))
  }
  if (se.fit && type != "quantile") abort("{.arg se.fit} is for {.code type = \"quantile\"}.")
  if (type == "quantile") {
    if (!is.null(y)) abort("{.arg y} is for densities and distributions; quantiles take {.arg tau}.")
    tau <- check_tau(tau)
  } else if (!missing(tau)) {
    abort("{.arg tau} is for {.code type = \"quantile\"}.")
  }
  if (discrete && !is.null(y)) {
    labels <- as.character(y)
    y <- cdens_y_codes(object, y, "y")
  } else if (!is.null(y) && (!is.numeric(y) || is.object(y) || length(y) == 0L ||
                             any(is.infinite(y) | is.nan(y)))) {
    abort("{.arg y} must be a numeric vector of finite values (or {.code NA}).")
  }
  points <- cdens_new_points(object, newdata, need_response = type != "quantile" && is.null(y))
  ok <- points$ok
  if (type == "quantile") {
    q <- cdens_quantiles(object, points$x, points$codes, tau, n_threads)
    colnames(q) <- quantile_names(tau)
    if (se.fit) {
      se <- cdens_quantile_se(object, points$x, points$codes, q, tau, n_threads)
      dimnames(se) <- dimnames(q)
      return(list(fit = expand_rows(q, ok), se.fit = expand_rows(se, ok)))
    }
    return(expand_rows(q, ok))
  }
  if (is.null(y)) {
    at <- points$y
    value <- rep(NA_real_, length(at))
    has <- !is.na(at)
    if (any(has)) {
      rows <- list(points$x[has, , drop = FALSE], points$codes[has, , drop = FALSE], at[has])
      value[has] <- if (type == "density" && object$kernel == "gaussian" && !discrete &&
                        cdens_degree(object) == 0L) {
        cdens_pairs_gaussian(object, rows[[1L]], rows[[2L]], rows[[3L]], object$bandwidth,
                             cdens_search_specs(object, n_threads))
      } else {
        cdens_pairs(object, rows[[1L]], rows[[2L]], rows[[3L]], type, n_threads = n_threads)[, 1L]
      }
    }
    return(expand_rows(value, ok))
  }
  value <- matrix(NA_real_, nrow(points$x), length(y))
  has <- !is.na(y)
  if (any(has) && nrow(points$x)) {
    value[, has] <- cdens_grid(object, points$x, points$codes, as.double(y[has]), type, n_threads)
  }
  colnames(value) <- if (discrete) labels else format(y)
  expand_rows(value, ok)
}

check_tau <- function(tau, call = rlang::caller_env()) {
  if (!is.numeric(tau) || length(tau) == 0L || anyNA(tau) || any(tau <= 0 | tau >= 1)) {
    abort(c("{.arg tau} must hold probabilities strictly between 0 and 1.",
            x = if (is.numeric(tau)) "Got {.val {tau}}."), call = call)
  }
  as.double(tau)
}

quantile_names <- function(tau) paste0(formatC(100 * tau, format = "fg", width = 1, digits = 7), "%")

# New predictors (list(x, codes, ok), as new_predictors()) and, with `need_response`, the
# response of every complete row (`y`, NA where missing).
cdens_new_points <- function(object, newdata, need_response, call = rlang::caller_env()) {
  if (is.null(newdata)) {
    return(list(x = object$x, codes = object$categorical$codes, ok = rep(TRUE, object$n),
                y = object$y))
  }
  if (!is.data.frame(newdata)) abort("{.arg newdata} must be a data frame.", call = call)
  points <- new_predictors(object, newdata, call = call)
  if (need_response) {
    expr <- attr(object$terms, "variables")[[2L]]
    y <- tryCatch(eval(expr, newdata, environment(object$terms)), error = function(e) NULL)
    if (is.null(y)) {
      abort(c("{.arg newdata} lacks the response {.field {object$response}}.",
              i = "Give the values at which to evaluate as {.arg y}."), call = call)
    }
    if (cdens_discrete(object)) {
      y <- cdens_y_codes(object, y, "newdata", call = call)
    } else if (!is.numeric(y)) {
      abort("The response {.field {object$response}} of {.arg newdata} must be numeric.",
            call = call)
    }
    if (length(y) != nrow(newdata)) {
      abort("The response {.field {object$response}} of {.arg newdata} has the wrong length.",
            call = call)
    }
    points$y <- as.double(y)[points$ok]
  }
  points
}

#' @rdname cdens-methods
#' @param digits Significant digits of the numbers that `print()` and `summary()` show.
#' @export
print.local_cdens <- function(x, ..., digits = NULL) {
  check_dots(...)
  digits <- check_digits(digits)
  print_fields(
    sprintf("<local_cdens> %s(%s | %s), n = %d, %s kernel%s",
            if (cdens_discrete(x)) "P" else "f", x$response,
            paste(x$predictors$names, collapse = ", "), x$n, x$kernel,
            if (cdens_degree(x) == 1L) ", local linear" else ""),
    list(Bandwidth = sprintf("%s (%s)", format_cdens_bandwidth(x, digits), x$bandwidth_method),
         `CV log-likelihood` = if (!is.null(x$cv_loglik)) {
           sprintf("%s per observation", format(x$cv_loglik, digits = digits))
         },
         `LSCV criterion` = if (!is.null(x$cv_ls)) format(x$cv_ls, digits = digits)))
  invisible(x)
}

format_cdens_bandwidth <- function(x, digits = 4L) {
  kind <- x$predictors$kind
  value <- join_bandwidth(x$bandwidth$h, x$bandwidth$lambda, x$predictors)
  label <- ifelse(kind == "numeric", "h", paste0("lambda (", kind, ")"))
  y_label <- if (cdens_discrete(x)) paste0("lambda (", x$y_kind, ")") else "h"
  paste(paste0(c(x$predictors$names, x$response), " ", c(label, y_label), " = ",
               show_num(c(value, x$bandwidth$y), digits)), collapse = ", ")
}

#' @rdname cdens-methods
#' @export
summary.local_cdens <- function(object, ..., digits = NULL) {
  check_dots(...)
  specs <- cdens_search_specs(object, 1L)
  loo <- cdens_at_data(object, object$bandwidth, specs, leave_out = TRUE)
  w <- object$weights %||% rep(1 / object$n, object$n)
  at <- cdens_summary_points(object)
  if (cdens_discrete(object)) {
    quartiles <- cdens_grid(object, at$x, at$codes, seq_along(object$y_levels), "density")
    colnames(quartiles) <- paste0("P(", object$y_levels, ")")
  } else {
    tau <- c(0.25, 0.5, 0.75)
    quartiles <- cdens_quantiles(object, at$x, at$codes, tau)
    colnames(quartiles) <- quantile_names(tau)
  }
  structure(list(fit = object, cv_loglik = sum(w * log(pmax(loo, .Machine$double.xmin)),
                                               na.rm = TRUE),
                 quartiles = cbind(at$frame, as.data.frame(quartiles, check.names = FALSE)),
                 digits = check_digits(digits)),
            class = "summary.local_cdens")
}

# A few rows of predictors: the first at five quantiles (numeric) or at its levels (at most
# ten), the others at their median or most frequent level. list(frame (to show), x, codes).
cdens_summary_points <- function(object) {
  kind <- object$predictors$kind
  first <- if (kind[1L] == "numeric") {
    unname(stats::quantile(object$x[, 1L], c(0.1, 0.3, 0.5, 0.7, 0.9)))
  } else {
    utils::head(seq_along(object$categorical$levels[[1L]]), 10L)
  }
  rows <- length(first)
  x <- matrix(apply(object$x, 2L, stats::median), rows, object$d, byrow = TRUE,
              dimnames = list(NULL, colnames(object$x)))
  codes <- NULL
  if (!is.null(object$categorical)) {
    cat <- object$categorical
    common <- vapply(seq_along(cat$levels), function(j) {
      which.max(tabulate(cat$codes[, j], length(cat$levels[[j]])))
    }, 1L)
    codes <- matrix(common, rows, length(common), byrow = TRUE,
                    dimnames = list(NULL, colnames(cat$codes)))
  }
  if (kind[1L] == "numeric") x[, 1L] <- first else codes[, 1L] <- first
  frame <- lapply(seq_along(kind), function(j) {
    if (kind[j] == "numeric") return(x[, sum(kind[seq_len(j)] == "numeric")])
    k <- sum(kind[seq_len(j)] != "numeric")
    level_values(object, k, codes[, k])
  })
  frame <- as.data.frame(stats::setNames(frame, object$predictors$names),
                         stringsAsFactors = FALSE, optional = TRUE)
  list(frame = frame, x = x, codes = codes)
}

#' @export
print.summary.local_cdens <- function(x, ..., digits = x$digits) {
  check_dots(...)
  digits <- print_summary_fit(x, digits)
  print_fields(NULL, list(`Leave-one-out log-likelihood` = sprintf(
    "%s per observation", format(x$cv_loglik, digits = digits))))
  cat(if (cdens_discrete(x$fit)) "Conditional probabilities:\n" else "Conditional quartiles:\n")
  q <- x$quartiles
  num <- vapply(q, is.numeric, TRUE)
  q[num] <- lapply(q[num], signif, digits = digits)
  print(q, row.names = FALSE)
  invisible(x)
}

#' @rdname cdens-methods
#' @export
logLik.local_cdens <- function(object, ...) {
  check_dots(...)
  dens <- cdens_at_data(object, object$bandwidth, cdens_search_specs(object, 1L))
  w <- object$weights %||% rep(1 / object$n, object$n)
  structure(sum(object$n * w * log(dens)), df = NA_real_, nobs = object$n, class = "logLik")
}

#' @rdname cdens-methods
#' @export
nobs.local_cdens <- function(object, ...) {
  check_dots(...)
  object$n
}

#' @export
formula.local_cdens <- function(x, ...) {
  check_dots(...)
  stats::formula(x$terms)
}

#' @rdname cdens-methods
#' @export
plot.local_cdens <- function(x, tau = c(0.1, 0.5, 0.9), n_grid = 101L, points = TRUE, ...) {
  check_graphics_dots(...)
  tau <- check_tau(tau)
  n_grid <- check_count(n_grid, min = 3)
  check_flag(points)
  kind <- x$predictors$kind
  if (cdens_discrete(x)) return(plot_cdens_probabilities(x, n_grid, ...))
  hy <- x$bandwidth$y
  ys <- seq(min(x$y) - 2 * hy, max(x$y) + 2 * hy, length.out = n_grid)
  if (length(kind) == 1L && kind == "numeric") {
    xs <- seq(min(x$x), max(x$x), length.out = n_grid)
    grid <- matrix(xs, dimnames = list(NULL, colnames(x$x)))
    dens <- cdens_grid(x, grid, NULL, ys, "density")
    plot_with_defaults(range(xs), range(ys), type = "n", xlab = x$predictors$names,
                       ylab = x$response,
                       main = sprintf("Conditional density of %s", x$response), ...)
    graphics::image(xs, ys, dens, col = grDevices::hcl.colors(64L, "YlOrRd", rev = TRUE),
                    add = TRUE, useRaster = TRUE)
    if (points) {
      keep <- sample_rows(x$n, 5000L)
      graphics::points(x$x[keep, 1L], x$y[keep], pch = 20, cex = 0.5, col = "grey20")
    }
    q <- cdens_quantiles(x, grid, NULL, tau)
    graphics::matlines(xs, q, lty = 1, lwd = 2, col = "navy")
    graphics::legend("topleft", legend = paste("quantiles", paste(quantile_names(tau),
                                                                  collapse = ", ")),
                     lwd = 2, col = "navy", bty = "n", cex = 0.85)
    return(invisible(x))
  }
  if (length(kind) == 1L) {
    levels <- x$categorical$levels[[1L]]
    codes <- matrix(seq_along(levels), dimnames = list(NULL, x$predictors$names))
    dens <- cdens_grid(x, matrix(numeric(0), length(levels), 0L), codes, ys, "density")
    cols <- grDevices::hcl.colors(max(2L, length(levels)), "Dark 3")[seq_along(levels)]
    plot_with_defaults(range(ys), range(dens), type = "n", xlab = x$response, ylab = "density",
                       main = sprintf("Conditional density of %s by %s", x$response,
                                      x$predictors$names), ...)
    for (k in seq_along(levels)) graphics::lines(ys, dens[k, ], col = cols[k], lwd = 2)
    graphics::legend("topright", legend = levels, col = cols, lwd = 2, bty = "n",
                     title = x$predictors$names)
    return(invisible(x))
  }
  abort("{.fn plot} of a conditional density needs exactly one predictor; use {.fn predict}.")
}

# plot() of a categorical response: the conditional probability of each level along one
# numeric predictor.
plot_cdens_probabilities <- function(x, n_grid, ...) {
  if (!identical(x$predictors$kind, "numeric")) {
    abort("{.fn plot} of conditional probabilities needs exactly one numeric predictor; use
           {.fn predict}.", call = rlang::caller_env())
  }
  xs <- seq(min(x$x), max(x$x), length.out = n_grid)
  prob <- cdens_grid(x, matrix(xs, dimnames = list(NULL, colnames(x$x))), NULL,
                     seq_along(x$y_levels), "density")
  cols <- grDevices::hcl.colors(max(2L, length(x$y_levels)), "Dark 3")[seq_along(x$y_levels)]
  plot_with_defaults(range(xs), c(0, 1), type = "n", xlab = x$predictors$names,
                     ylab = "probability",
                     main = sprintf("Conditional probabilities of %s", x$response), ...)
  graphics::matlines(xs, prob, lty = 1, lwd = 2, col = cols)
  graphics::legend("topright", legend = x$y_levels, col = cols, lwd = 2, bty = "n",
                   title = x$response)
  invisible(x)
}
