# Fuzzy inference: a Takagi-Sugeno-Kang rule base is a local mean of linear models. The rules'
# normalised memberships at x are the local mean, over the rule centres, of one-hot rule labels
# (one engine pass), and the output blends the rules' linear consequents with them.

#' Fuzzy inference: a Takagi-Sugeno-Kang rule base
#'
#' A first-order Takagi-Sugeno-Kang (TSK) system of `rules` rules "if x is
#' near \eqn{c_r}{c_r} then \eqn{y = a_r + b_r' x}{y = a_r + b_r' x}": each rule has a centre
#' \eqn{c_r}{c_r} in the numeric predictors, a membership function
#' \eqn{K((x - c_r) / h)}{K((x - c_r) / h)} from the kernel registry (radial in the scaled
#' distance, with one width \eqn{h_j}{h_j} per numeric predictor shared by every
#' rule) and a linear consequent. The output is the
#' normalised-membership-weighted average of the consequents,
#' \deqn{\hat y(x) = \sum_r \bar w_r(x) (a_r + b_r' x), \quad
#' \bar w_r(x) = K((x - c_r)/h) / \sum_s K((x - c_s)/h),}{
#'   y(x) = sum_r w_r(x) (a_r + b_r' x),  w_r(x) = K((x - c_r)/h) / sum_s K((x - c_s)/h),}
#' so the normalised memberships are the local mean, over the centres, of the
#' rules' labels; the engine computes them (as [local_mean()] would with the
#' centres as data).
#'
#' **Rule centres** (`centres`): `"kmeans"` clusters the numeric predictors,
#' each divided by its spread (the smaller of the sd and IQR / 1.349), by
#' [stats::kmeans()] with 10 random starts, so `set.seed()` makes the rules
#' reproducible (they are numbered in the order of their centres);
#' `"mean_shift"` takes the modes of [mean_shift()] (its `"plugin"` bandwidth)
#' whose clusters hold more points than a consequent has coefficients,
#' largest cluster first, at most `rules` of them; or give a matrix (or data
#' frame, or a vector for one predictor) of centres with one column per
#' numeric predictor.
#'
#' **Consequents** (`consequent`): `"global"` fits every rule's coefficients
#' at once by weighted least squares of \eqn{y}{y} on the blended design
#' \eqn{[\bar w_r(x) (1, x')]_r}{[w_r(x) (1, x')]_r} (the standard TSK estimate, as in the
#' least-squares step of ANFIS). The fit is then linear in \eqn{y}{y}, so
#' `predict()` gives standard errors, leverages and a leave-one-out score
#' (`cv`) follow, and one rule is exactly the global linear model of
#' [stats::lm()]. Coefficients the design cannot identify (as many rules as
#' points, rules without data) are set to 0, as aliased terms are dropped by
#' `lm()`. `"local"` makes each consequent the local linear fit at its centre
#' (the localization trick at a few prototypes): the fit of
#' `local_poly(degree = 1)` with the same kernel and the membership widths
#' as bandwidths, evaluated at \eqn{c_r}{c_r}, with its gradient as slopes. The
#' consequents then explain the data near their own centres, and the rule
#' base is the local-linear fit compressed into `rules` models. Global
#' consequents have `rules` times (terms + 1) coefficients: with few
#' observations per coefficient they overfit and swing wildly between the
#' data (leverages near 1; the leave-one-out score `cv` shows it), where local
#' consequents stay stable.
#'
#' **Membership widths** (`bandwidth`): `"spacing"` (the default) is half the
#' spacing of \eqn{R}{R} centres laid evenly over the data, per predictor
#' \eqn{h_j = \sqrt{3}\,\hat\sigma_j R^{-1/d}}{h_j = sqrt(3) sigma_j R^(-1/d)} (a uniform variable with
#' standard deviation \eqn{\hat\sigma_j}{sigma_j}, the smaller of the sd and IQR / 1.349,
#' spans \eqn{2\sqrt{3}\hat\sigma_j}{2 sqrt(3) sigma_j}), converted from the Gaussian scale to
#' `kernel` as the bandwidth selectors do: neighbouring Gaussian rules then
#' cross at two widths, and each consequent speaks for its own region;
#' `"cv"` scales these widths by a common factor (0.05 to 20) that
#' minimises the leave-one-out score of the global consequents (25
#' log-spaced factors, then a golden-section search around the best); or give a
#' number or one width per numeric predictor. Where no rule fires (beyond a
#' compact kernel's support, or so far from every rule that the Gaussian
#' underflows) the point follows its nearest rule, the limit of the Gaussian
#' memberships far from the rules; `uncovered` counts such training points.
#'
#' **Predictors.** Numeric predictors carry the memberships and enter the
#' consequents; categorical ones (factors, character, logical) enter the
#' global consequents as treatment indicators (not the memberships). Formula
#' terms may be transformations; interactions are refused.
#'
#' @inheritParams local_poly
#' @param rules Number of rules: at least 1, at most the number of distinct
#'   observations and 1000. `NULL`: 3 with k-means (fewer for fewer distinct
#'   points), every mode with mean shift, the rows of a centre matrix.
#' @param kernel The membership function: a kernel name (see [kernels()]), a
#'   function of the scaled distance or a [user_kernel()].
#' @param bandwidth Membership widths: `"spacing"`, `"cv"`, a positive number or
#'   one per numeric predictor (named or in their order); see Details.
#' @param centres `"kmeans"`, `"mean_shift"` or a matrix of rule centres (a
#'   vector for one predictor).
#' @param consequent `"global"` (least squares on the blended output) or
#'   `"local"` (the local linear fit at each centre).
#' @param weights Optional non-negative prior weights of the observations (in
#'   the least squares and the local fits; k-means ignores them, mean shift
#'   uses them).
#' @param method Strategy of the engine for the local consequents' fits
#'   (`"auto"`, `"exact"`, `"tree"`); memberships always sweep every rule.
#' @return An object of class `local_fuzzy`: `centres` (one row per rule),
#'   `coefficients` (one row per rule: intercept and slopes), `bandwidth`
#'   (the membership widths) and how it was chosen, `membership` (the
#'   normalised memberships of the data, one column per rule), `share` (each
#'   rule's share of the firing strength over the data), `fitted`,
#'   `residuals`, `df` (the number of identified consequent coefficients),
#'   `sigma`, `r.squared`, `cv` (the leave-one-out mean squared error, global
#'   consequents), `uncovered`, and the data. Methods: `print()`,
#'   `summary()`, `predict()`, `fitted()`, `residuals()`, `nobs()`,
#'   `sigma()`, `formula()`, `plot()`, `tidy()`, `glance()`, `augment()`,
#'   `as.data.frame()`.
#' @references
#' Takagi, T. and Sugeno, M. (1985). Fuzzy identification of systems and its
#' applications to modeling and control. *IEEE Transactions on Systems, Man,
#' and Cybernetics* 15, 116-132.
#'
#' Jang, J.-S. R. (1993). ANFIS: adaptive-network-based fuzzy inference
#' system. *IEEE Transactions on Systems, Man, and Cybernetics* 23, 665-685.
#' @family generative
#' @export
#' @examples
#' set.seed(1)
#' fit <- fuzzy_inference(mpg ~ wt, data = mtcars, rules = 3)
#' fit
#' summary(fit)
#' predict(fit, data.frame(wt = c(2, 3, 4)), se.fit = TRUE)
#' plot(fit)
#' # consequents from local linear fits at the rule centres
#' local <- fuzzy_inference(mpg ~ wt + hp, data = mtcars, rules = 3, consequent = "local")
#' coef(summary(local))
fuzzy_inference <- function(x, ...) UseMethod("fuzzy_inference")

#' @rdname fuzzy_inference
#' @export
fuzzy_inference.formula <- function(formula, data = NULL, kernel = "gaussian",
                                    bandwidth = "spacing", rules = NULL,
                                    centres = c("kmeans", "mean_shift"),
                                    consequent = c("global", "local"), weights = NULL, subset,
                                    na.action = stats::na.omit, method = "auto",
                                    n_threads = NULL, verbose = interactive(), ...) {
  check_dots(...)
  mf <- call_model_frame(match.call(expand.dots = FALSE), parent.frame())
  parts <- formula_parts(mf)
  fit <- fuzzy_inference.default(parts$x, stats::model.response(mf), kernel = kernel,
                                 bandwidth = bandwidth, rules = rules, centres = centres,
                                 consequent = consequent, weights = stats::model.weights(mf),
                                 method = method, n_threads = n_threads, verbose = verbose)
  with_formula(fit, mf, generic_call(match.call(), "fuzzy_inference"))
}

#' @rdname fuzzy_inference
#' @export
fuzzy_inference.default <- function(x, y, kernel = "gaussian", bandwidth = "spacing", rules = NULL,
                                    centres = c("kmeans", "mean_shift"),
                                    consequent = c("global", "local"), weights = NULL,
                                    method = "auto", n_threads = NULL, verbose = interactive(),
                                    ...) {
  check_dots(...)
  predictors <- split_predictors(x)
  x <- predictors$x
  n <- nrow(x)
  if (ncol(x) == 0L) {
    abort("{.arg x} needs a numeric predictor: the rules' memberships live on numeric ones.")
  }
  y <- check_response(y, n)
  kernel <- check_kernel(kernel)
  prior <- check_weights(weights, n)
  consequent <- match_choice(consequent, c("global", "local"))
  method <- check_choice(method, c("auto", "exact", "tree"))
  n_threads <- n_threads(n_threads)
  check_flag(verbose)
  range <- predictors$range %||% column_ranges(x)
  constant <- colnames(x)[diff(range)[1L, ] == 0]
  if (length(constant)) abort("Predictor{?s} {.field {constant}} {?is/are} constant.")
  if (consequent == "local" && !is.null(predictors$categorical)) {
    abort("{.code consequent = \"local\"} needs numeric predictors only; use
           {.code consequent = \"global\"} with categorical ones.")
  }
  design <- consequent_design(x, predictors$categorical)
  centres <- rule_centres(centres, rules, x, prior, kernel, ncol(design) + 1L, n_threads,
                          verbose)
  check_size(as.double(n) * (ncol(design) + 1) * nrow(centres$centres),
             size_limits$design_values, "values of the consequents' design", "rules")
  widths <- membership_widths(bandwidth, x, centres$centres, kernel, consequent, design, y,
                              prior, n_threads, verbose)
  fit <- list(x = x, y = y, categorical = predictors$categorical,
              predictors = predictors[c("names", "kind")], weights = prior, kernel = kernel,
              bandwidth = widths$h, bandwidth_method = widths$how, centres = centres$centres,
              centre_method = centres$how, consequent = consequent, method = method,
              spec = widths$spec, n_threads = n_threads)
  member <- memberships(fit$spec, x, n_threads, verbose)
  fit$membership <- member$membership
  fit$uncovered <- member$uncovered
  fit <- if (consequent == "global") {
    fit_global_consequents(fit, design)
  } else {
    fit_local_consequents(fit, design, verbose)
  }
  fit$call <- generic_call(match.call(), "fuzzy_inference")
  class(fit) <- "local_fuzzy"
  fit
}

# ---- Rules and memberships ----------------------------------------------------------------------

# The consequents' predictors: the numeric ones, then a treatment indicator for every level but
# the first of each categorical one.
consequent_design <- function(x, categorical, codes = categorical$codes) {
  if (is.null(categorical)) return(x)
  indicators <- lapply(seq_along(categorical$levels), function(j) {
    lv <- categorical$levels[[j]]
    m <- outer(codes[, j], seq_along(lv)[-1L], `==`) * 1
    colnames(m) <- paste0(colnames(categorical$codes)[j], lv[-1L])
    m
  })
  do.call(cbind, c(list(x), indicators))
}

# The rule centres (a matrix, one row per rule, original units) and how they were found.
rule_centres <- function(centres, rules, x, prior, kernel, terms, n_threads, verbose,
                         call = rlang::caller_env()) {
  d <- ncol(x)
  if (!is.null(rules)) {
    rules <- check_count(rules, call = call)
    check_size(rules, size_limits$rules, "rules", "rules", call = call)
  }
  if (is.numeric(centres) || is.data.frame(centres)) {
    given <- check_predictors(centres, arg = "centres", call = call)
    if (ncol(given) != d) {
      abort("{.arg centres} must have one column per numeric predictor ({d}).", call = call)
    }
    if (!is.null(colnames(centres)) && all(colnames(x) %in% colnames(centres))) {
      given <- given[, colnames(x), drop = FALSE]
    }
    if (!is.null(rules) && rules != nrow(given)) {
      abort("{.arg rules} ({rules}) must equal the rows of {.arg centres} ({nrow(given)}).",
            call = call)
    }
    check_size(nrow(given), size_limits$rules, "rules", "centres", call = call)
    colnames(given) <- colnames(x)
    return(list(centres = given, how = "given"))
  }
  how <- match_choice(centres, c("kmeans", "mean_shift"), arg = "centres", call = call)
  distinct <- nrow(unique(x))
  if (!is.null(rules) && rules > distinct) {
    abort("{.arg rules} ({rules}) must be at most the number of distinct observations
           ({distinct}).", call = call)
  }
  out <- if (how == "kmeans") {
    kmeans_centres(x, rules %||% min(3L, distinct), call)
  } else {
    # the plug-in locates the modes more closely than the smoother default, and rules need
    # centres, not a robust count of clusters
    ms <- mean_shift(x, kernel = kernel, bandwidth = "plugin", tol = 1e-4, weights = prior,
                     n_threads = n_threads, verbose = verbose)
    # clusters come largest first; a rule needs the points to fit its consequent
    fit_enough <- max(1L, sum(ms$size >= terms + 1L))
    ms$modes[seq_len(min(rules %||% Inf, fit_enough)), , drop = FALSE]
  }
  dimnames(out) <- list(NULL, colnames(x))
  list(centres = out, how = how)
}

# k-means on the predictors divided by their spreads (so that units do not matter), 10 starts.
kmeans_centres <- function(x, rules, call = rlang::caller_env()) {
  spread <- predictor_spread(x)
  scaled <- sweep(x, 2L, spread, "/")
  if (rules == 1L) return(matrix(colMeans(x), 1L))
  distinct <- unique(scaled)
  # every distinct point its own rule: kmeans() has nothing to cluster
  if (rules == nrow(distinct)) return(sweep(distinct, 2L, spread, "*"))
  km <- tryCatch(stats::kmeans(scaled, centers = rules, nstart = 10L, iter.max = 100L),
                 error = function(e) {
                   abort(c("k-means could not place {rules} rule centres.",
                           x = conditionMessage(e),
                           i = "Use fewer {.arg rules} or other {.arg centres}."), call = call)
                 })
  # k-means numbers its clusters arbitrarily: rules in the order of their centres
  centres <- km$centers[do.call(order, as.data.frame(km$centers)), , drop = FALSE]
  sweep(centres, 2L, spread, "*")
}

# The membership widths, their engine specification (the centres as data) and how they were
# chosen.
membership_widths <- function(bandwidth, x, centres, kernel, consequent, design, y, prior,
                              n_threads, verbose, call = rlang::caller_env()) {
  d <- ncol(x)
  spacing <- spacing_widths(x, nrow(centres), kernel)
  spec_for <- function(h) membership_spec(centres, kernel, h, n_threads, verbose)
  if (is.numeric(bandwidth)) {
    numeric_only <- list(names = colnames(x), kind = rep("numeric", d))
    h <- split_bandwidth(bandwidth, numeric_only, call = call)$h
    return(list(h = h, spec = spec_for(h), how = "user"))
  }
  how <- match_choice(bandwidth, c("spacing", "cv"), arg = "bandwidth", call = call)
  if (how == "spacing") return(list(h = spacing, spec = spec_for(spacing), how = how))
  if (consequent == "local") {
    abort("{.code bandwidth = \"cv\"} scores global consequents; give widths or
           {.val spacing} with {.code consequent = \"local\"}.", call = call)
  }
  score <- function(log_factor) {
    member <- memberships(spec_for(exp(log_factor) * spacing), x, n_threads, FALSE)$membership
    finite_or_max(global_least_squares(member, design, y, prior)$cv)
  }
  # the score is bumpy where leverages near 1 come and go: a grid first, then its best cell
  grid <- seq(log(0.05), log(20), length.out = 25L)
  scores <- vapply(grid, score, 1)
  best <- which.min(scores)
  cell <- grid[c(max(best - 1L, 1L), min(best + 1L, length(grid)))]
  refined <- stats::optimize(score, cell)
  factor <- if (refined$objective < scores[best]) refined$minimum else grid[best]
  h <- exp(factor) * spacing
  list(h = h, spec = spec_for(h), how = how)
}

# Each predictor's robust spread, min(sd, IQR / 1.349); for data so small that the variance
# underflows, the range's (that of a uniform variable, range / (2 sqrt(3))).
predictor_spread <- function(x) {
  spread <- apply(x, 2L, robust_scale, iqr_divisor = 1.349)
  ifelse(spread > 0, spread, diff(column_ranges(x))[1L, ] / (2 * sqrt(3)))
}

# Half the spacing of `rules` centres spread evenly over each predictor's range: a uniform
# variable with standard deviation s spans 2 sqrt(3) s (s robust, as the rules of thumb's).
spacing_widths <- function(x, rules, kernel) {
  spread <- predictor_spread(x)
  sqrt(3) * spread * rules^(-1 / ncol(x)) * kernel_scale_factor(kernel)
}

# The engine sees the rule centres as data with one-hot labels: the local mean of the labels at
# x is the vector of normalised memberships. The exact strategy never truncates the kernel, so
# the memberships of far points stay continuous.
membership_spec <- function(centres, kernel, h, n_threads, verbose) {
  engine_spec(centres, kernel, h, values = diag(nrow(centres)), method = "exact",
              binnable = FALSE, n_threads = n_threads, verbose = verbose)
}

# Normalised memberships (m x rules) at points x; where no rule fires, the nearest rule's.
memberships <- function(spec, x, n_threads, verbose) {
  res <- engine_run(spec, x, n_threads = n_threads, verbose = verbose)
  rules <- nrow(spec$x)
  out <- matrix(res$coef[, 1L, ], nrow = nrow(x), ncol = rules)
  uncovered <- which(res$status != 0L | !is.finite(out[, 1L]))
  if (length(uncovered)) {
    nearest <- nearest_index(spec$x, spec$scale, x[uncovered, , drop = FALSE], n_threads)
    out[uncovered, ] <- 0
    out[cbind(uncovered, nearest)] <- 1
  }
  list(membership = out, uncovered = length(uncovered))
}

# The blended design [w_r(x) (1, z)]_r: rule r's block holds its intercept and slopes.
blended_design <- function(member, design) {
  ones <- cbind(1, design)
  do.call(cbind, lapply(seq_len(ncol(member)), function(r) member[, r] * ones))
}

# ---- Consequents --------------------------------------------------------------------------------

# Weighted least squares of y on the blended design by a pivoted QR (as lm.wfit()): the
# coefficients (0 where aliased), fits, leverages, the leave-one-out score and what se needs.
global_least_squares <- function(member, design, y, prior) {
  phi <- blended_design(member, design)
  w <- prior %||% rep(1, length(y))
  used <- w > 0
  sw <- sqrt(w[used])
  qr <- qr(phi[used, , drop = FALSE] * sw)
  coef <- qr.coef(qr, y[used] * sw)
  coef[is.na(coef)] <- 0
  fitted <- drop(phi %*% coef)
  inverse_root <- coef_inverse_root(qr)
  leverage <- w * quadratic_form(phi, inverse_root)
  r <- y - fitted
  near_one <- any(leverage[used] > 1 - 1e-10)
  cv <- if (near_one) Inf else sum(w * (r / (1 - leverage))^2) / sum(w)
  list(coef = coef, fitted = fitted, leverage = leverage, cv = cv, rank = qr$rank,
       inverse_root = inverse_root)
}

# R^-1 of the identified columns (`columns`): phi' (Phi' W Phi)^-1 phi = |phi[columns] R^-1|^2.
coef_inverse_root <- function(qr) {
  k <- qr$rank
  list(columns = qr$pivot[seq_len(k)],
       root = backsolve(qr.R(qr)[seq_len(k), seq_len(k), drop = FALSE], diag(k)))
}

quadratic_form <- function(phi, inverse_root) {
  v <- phi[, inverse_root$columns, drop = FALSE] %*% inverse_root$root
  unname(rowSums(v^2))
}

fit_global_consequents <- function(fit, design) {
  ls <- global_least_squares(fit$membership, design, fit$y, fit$weights)
  rules <- nrow(fit$centres)
  fit$coefficients <- consequent_matrix(ls$coef, rules, design)
  fit$fitted <- check_overflow(ls$fitted, "x")
  fit$leverage <- ls$leverage
  fit$inverse_root <- ls$inverse_root
  fit$df <- ls$rank
  fit$cv <- ls$cv
  add_fuzzy_statistics(fit)
}

# Each consequent is the local linear fit at its centre, with the membership widths as
# bandwidths: the engine's degree-1 coefficients there (value and gradient) in intercept-slope
# form a_r + b_r' x.
fit_local_consequents <- function(fit, design, verbose, call = rlang::caller_env()) {
  spec <- engine_spec(fit$x, fit$kernel, fit$bandwidth, values = one_column(fit$y),
                      prior = fit$weights, degree = 1L, method = fit$method,
                      n_threads = fit$n_threads, verbose = verbose, call = call)
  res <- engine_run(spec, fit$centres)
  missing <- which(res$status != 0L)
  if (length(missing)) {
    abort(c("The local linear fit at rule centre{cli::qty(length(missing))}{?s} {missing} is
             undefined: too few points in the kernel window.",
            i = "Widen {.arg bandwidth} or use fewer {.arg rules}."),
          call = call)
  }
  slopes <- matrix(res$coef[, -1L, 1L], nrow = nrow(fit$centres))
  intercept <- res$coef[, 1L, 1L] - rowSums(slopes * fit$centres)
  coef <- as.vector(t(cbind(intercept, slopes)))
  fit$coefficients <- consequent_matrix(coef, nrow(fit$centres), design)
  fit$fitted <- check_overflow(blend(fit$membership, design, fit$coefficients), "x")
  fit$df <- length(coef)
  fit$cv <- NULL
  add_fuzzy_statistics(fit)
}

consequent_matrix <- function(coef, rules, design) {
  matrix(coef, nrow = rules, byrow = TRUE,
         dimnames = list(paste("rule", seq_len(rules)), c("(Intercept)", colnames(design))))
}

# The output at points: memberships times each rule's linear consequent, summed over rules.
blend <- function(member, design, coefficients) {
  unname(rowSums(member * (cbind(1, design) %*% t(coefficients))))
}

add_fuzzy_statistics <- function(fit) {
  w <- fit$weights %||% rep(1, length(fit$y))
  fit$residuals <- fit$y - fit$fitted
  rss <- sum(w * fit$residuals^2)
  spread <- sum(w * (fit$y - stats::weighted.mean(fit$y, w))^2)
  fit$sigma <- sqrt(rss / max(sum(w > 0) - fit$df, 1))
  fit$r.squared <- if (spread > 0) 1 - rss / spread else NA_real_
  fit$share <- colSums(w * fit$membership) / sum(w)
  fit
}

# ---- Methods ------------------------------------------------------------------------------------

# Predictions at query points (model_queries()): fits, memberships and, for global
# consequents, phi' (Phi' W Phi)^-1 phi.
fuzzy_at <- function(object, queries, n_threads, verbose, want_var = FALSE) {
  member <- memberships(object$spec, queries$x, n_threads(n_threads %||% object$n_threads),
                        verbose)$membership
  design <- consequent_design(queries$x, object$categorical, queries$codes)
  out <- list(fit = blend(member, design, object$coefficients), membership = member)
  if (want_var) {
    out$quad <- quadratic_form(blended_design(member, design), object$inverse_root)
  }
  out
}

#' Methods for fuzzy rule bases
#'
#' `predict()`, `summary()`, `plot()` and the accessors of a [fuzzy_inference()]
#' fit.
#'
#' @param object,x A `local_fuzzy` fit.
#' @param newdata New predictor values (a data frame for formula fits); `NULL`
#'   for the data.
#' @param se.fit Return standard errors (global consequents):
#'   \eqn{\hat\sigma (\phi' (\Phi' W \Phi)^{-1} \phi)^{1/2}}{sigma (phi' (Phi' W Phi)^-1 phi)^(1/2)}, the consequent
#'   estimates' error at fixed centres and widths, as [stats::predict.lm()].
#' @param type `"response"` (the output) or `"membership"` (the normalised
#'   memberships, one column per rule).
#' @param n_threads Number of threads, see [n_threads()].
#' @param verbose Show progress bars for long computations.
#' @param ... Must be empty (for `plot()`: graphical parameters).
#' @return `predict()`: a vector; with `se.fit = TRUE` a list with `fit`,
#'   `se.fit`, `df` and `residual.scale`; for `type = "membership"` a matrix.
#'   Rows of `newdata` with missing predictors give `NA`.
#' @family generative
#' @name fuzzy_inference-methods
#' @examples
#' set.seed(1)
#' fit <- fuzzy_inference(mpg ~ wt + hp, data = mtcars, rules = 3)
#' summary(fit)
#' predict(fit, data.frame(wt = 3, hp = 150), se.fit = TRUE)
#' predict(fit, data.frame(wt = 3, hp = 150), type = "membership")
#' plot(fit)
#' plot(fit, which = "membership")
NULL

#' @rdname fuzzy_inference-methods
#' @export
predict.local_fuzzy <- function(object, newdata = NULL, se.fit = FALSE,
                                type = c("response", "membership"), n_threads = NULL,
                                verbose = interactive(), ...) {
  check_dots(...)
  check_flag(se.fit)
  check_flag(verbose)
  type <- match_choice(type, c("response", "membership"))
  if (se.fit && object$consequent != "global") {
    abort("{.arg se.fit} needs {.code consequent = \"global\"}.")
  }
  if (se.fit && type != "response") abort("{.arg se.fit} is for {.code type = \"response\"}.")
  if (is.null(newdata) && !se.fit && type == "response") return(stats::fitted(object))
  queries <- model_queries(object, newdata)
  at <- fuzzy_at(object, queries, n_threads, verbose, want_var = se.fit)
  if (type == "membership") {
    member <- at$membership
    colnames(member) <- rownames(object$coefficients)
    return(expand_rows(member, queries$ok))
  }
  fit <- expand_rows(at$fit, queries$ok)
  if (!se.fit) return(fit)
  list(fit = fit, se.fit = expand_rows(object$sigma * sqrt(at$quad), queries$ok),
       df = stats::nobs(object) - object$df,
       residual.scale = object$sigma)
}

#' @export
print.local_fuzzy <- function(x, ..., digits = NULL) {
  check_dots(...)
  print_fields(sprintf("<local_fuzzy> Takagi-Sugeno-Kang rule base, %s memberships, n = %d",
                       x$kernel, length(x$y)), fuzzy_fields(x, check_digits(digits)))
  invisible(x)
}

fuzzy_fields <- function(x, digits) {
  centres <- c(kmeans = "k-means", mean_shift = "mean shift", given = "given")[[x$centre_method]]
  list(Rules = sprintf("%d (centres: %s)", nrow(x$centres), centres),
       Consequents = if (x$consequent == "global") "global least squares" else
         "local linear fits at the centres",
       `Membership width` = sprintf("%s (%s)",
                                    named_values(x$bandwidth, colnames(x$x), digits),
                                    x$bandwidth_method),
       Uncovered = if (x$uncovered > 0L) {
         sprintf("%d points fire no rule and follow the nearest", x$uncovered)
       },
       `Residual se` = show_num(x$sigma, digits),
       `R-squared` = show_num(x$r.squared, digits),
       `LOO CV score` = if (!is.null(x$cv)) show_num(x$cv, digits))
}

#' @rdname fuzzy_inference-methods
#' @return `summary()`: an object whose print shows the fit and the rules as a
#'   table (`rules`: each rule's centre, its share of the firing strength over
#'   the data and its consequent coefficients; the membership widths, shared by
#'   every rule, are in the header). `coef()` of it gives the coefficients
#'   with standard errors (global consequents).
#' @param digits Significant digits of the numbers that `print()` and
#'   `summary()` show; `NULL` for `max(3, getOption("digits") - 3)`.
#' @export
summary.local_fuzzy <- function(object, ..., digits = NULL) {
  check_dots(...)
  centre <- object$centres
  colnames(centre) <- paste0("centre.", colnames(centre))
  rules <- data.frame(rule = seq_len(nrow(centre)), centre, share = object$share,
                      object$coefficients, check.names = FALSE, row.names = NULL)
  structure(list(fit = object, rules = rules, coefficients = coefficient_rows(object),
                 digits = check_digits(digits)),
            class = "summary.local_fuzzy")
}

# One row per rule and consequent term: estimate and (global consequents) standard error.
coefficient_rows <- function(object) {
  coef <- object$coefficients
  out <- data.frame(rule = rep(seq_len(nrow(coef)), each = ncol(coef)),
                    term = rep(colnames(coef), nrow(coef)), estimate = as.vector(t(coef)))
  if (!is.null(object$inverse_root)) {
    se <- rep(NA_real_, nrow(out))
    ir <- object$inverse_root
    se[ir$columns] <- object$sigma * sqrt(rowSums(ir$root^2))
    out$std.error <- se
  }
  out
}

#' @export
coef.summary.local_fuzzy <- function(object, digits = NULL, ...) {
  check_dots(...)
  object$coefficients
}

#' @export
coef.local_fuzzy <- function(object, ...) {
  check_dots(...)
  object$coefficients
}

#' @export
print.summary.local_fuzzy <- function(x, ..., digits = x$digits) {
  check_dots(...)
  digits <- check_digits(digits)
  rules <- x$rules
  numbers <- vapply(rules, is.double, TRUE)
  rules[numbers] <- lapply(rules[numbers], function(v) signif(v, digits))
  print_summary_sections(x, x$fit, list(Rules = rules), digits)
}

#' @export
fitted.local_fuzzy <- function(object, ...) {
  check_dots(...)
  stats::napredict(object$na.action, object$fitted)
}

#' @export
residuals.local_fuzzy <- function(object, ...) {
  check_dots(...)
  stats::naresid(object$na.action, object$residuals)
}

#' @export
nobs.local_fuzzy <- function(object, ...) {
  check_dots(...)
  sum((object$weights %||% rep(1, length(object$y))) > 0)
}

#' @export
sigma.local_fuzzy <- function(object, ...) {
  check_dots(...)
  object$sigma
}

#' @export
formula.local_fuzzy <- function(x, ...) {
  check_dots(...)
  if (is.null(x$terms)) abort("The fit was not made from a formula.")
  stats::formula(x$terms)
}

#' @rdname fuzzy_inference-methods
#' @param which `"fit"`: with one numeric predictor, the data, the blended
#'   fit and each rule's linear consequent drawn with its membership as
#'   opacity, over the normalised memberships in a lower panel; with several,
#'   one partial plot per numeric predictor (the others at their medians,
#'   categorical ones at their most frequent level). `"membership"`: the
#'   normalised memberships (one predictor) or a map of the rule with the
#'   largest membership (two predictors).
#' @param n_grid Grid points per predictor.
#' @export
plot.local_fuzzy <- function(x, which = c("fit", "membership"), n_grid = 200, ...) {
  check_graphics_dots(...)
  which <- match_choice(which, c("fit", "membership"))
  d <- ncol(x$x)
  n_grid <- check_n_grid(n_grid, if (which == "membership") min(d, 2L) else 1L)
  cols <- cluster_colours(nrow(x$centres))
  if (which == "membership") {
    if (d > 2L) abort("{.code which = \"membership\"} draws one or two numeric predictors.")
    if (d == 1L) {
      grid <- plot_grid(x, 1L, n_grid)
      draw_memberships(grid$x[, 1L], fuzzy_at(x, grid, NULL, FALSE)$membership, cols,
                       colnames(x$x), ...)
    } else {
      draw_membership_map(x, n_grid, cols, ...)
    }
    return(invisible(x))
  }
  if (d == 1L) {
    old <- graphics::par(no.readonly = TRUE)
    on.exit(graphics::par(old))
    graphics::layout(matrix(1:2), heights = c(2, 1))
    graphics::par(mar = c(1, 4.1, 2, 1))
    grid <- plot_grid(x, 1L, n_grid)
    at <- fuzzy_at(x, grid, NULL, FALSE)
    draw_rules(x, grid, at, cols, ...)
    graphics::par(mar = c(4.1, 4.1, 0.5, 1))
    draw_memberships(grid$x[, 1L], at$membership, cols, colnames(x$x))
    return(invisible(x))
  }
  old <- graphics::par(mfrow = if (d <= 3L) c(1L, d) else grDevices::n2mfrow(d))
  on.exit(graphics::par(old))
  for (j in seq_len(d)) {
    grid <- plot_grid(x, j, n_grid)
    curve <- fuzzy_at(x, grid, NULL, FALSE)$fit
    plot_with_defaults(x$x[, j], x$y, xlab = colnames(x$x)[j], ylab = response_name(x),
                       col = grDevices::gray(0.5), pch = 20,
                       ylim = range(x$y, curve, finite = TRUE),
                       main = "Partial fit (the others at their medians)", cex.main = 0.9,
                       font.main = 1, ...)
    graphics::lines(grid$x[, j], curve, col = "steelblue", lwd = 2)
    for (r in seq_along(cols)) graphics::rug(x$centres[r, j], col = cols[r], lwd = 3)
  }
  invisible(x)
}

# Queries along predictor j (the others at their medians, categorical ones at their most
# frequent level).
plot_grid <- function(x, j, n_grid) {
  grid <- matrix(apply(x$x, 2L, stats::median), n_grid, ncol(x$x), byrow = TRUE,
                 dimnames = list(NULL, colnames(x$x)))
  grid[, j] <- seq(min(x$x[, j]), max(x$x[, j]), length.out = n_grid)
  codes <- x$categorical$codes
  if (!is.null(codes)) {
    codes <- matrix(apply(codes, 2L, function(v) which.max(tabulate(v))), n_grid, ncol(codes),
                    byrow = TRUE, dimnames = list(NULL, colnames(codes)))
  }
  structure(list(x = grid, codes = codes, ok = rep(TRUE, n_grid)), class = "local_queries")
}

# The data, every rule's line with its membership as opacity, the blended fit and the centres.
draw_rules <- function(x, grid, at, cols, ...) {
  g <- grid$x[, 1L]
  design <- consequent_design(grid$x, x$categorical, grid$codes)
  lines <- cbind(1, design) %*% t(x$coefficients)
  plot_with_defaults(x$x[, 1L], x$y, xlab = "", ylab = response_name(x), xaxt = "n",
                     col = grDevices::gray(0.55), pch = 20,
                     ylim = range(x$y, at$fit, finite = TRUE),
                     main = "Blended fit (black) and rule consequents (opacity: membership)",
                     cex.main = 0.9, font.main = 1, ...)
  k <- length(g)
  for (r in seq_len(ncol(lines))) {
    strength <- (at$membership[-1L, r] + at$membership[-k, r]) / 2
    graphics::segments(g[-k], lines[-k, r], g[-1L], lines[-1L, r], lwd = 2,
                       col = with_alpha(cols[r], 0.05 + 0.9 * strength))
  }
  graphics::lines(g, at$fit, lwd = 2.5)
  centre_fit <- stats::approx(g, at$fit, x$centres[, 1L], rule = 2)$y
  graphics::points(x$centres[, 1L], centre_fit, pch = 21, bg = cols, cex = 1.4)
}

# Colours with an opacity each (adjustcolor() takes one).
with_alpha <- function(cols, alpha) {
  rgb <- grDevices::col2rgb(cols)
  grDevices::rgb(rgb[1L, ], rgb[2L, ], rgb[3L, ], alpha = round(255 * alpha),
                 maxColorValue = 255)
}

draw_memberships <- function(g, member, cols, xlab, ...) {
  graphics::matplot(g, member, type = "l", lty = 1, lwd = 2, col = cols, xlab = xlab,
                    ylab = "membership", ylim = c(0, 1), yaxt = "n", ...)
  graphics::axis(2L, at = c(0, 0.5, 1))
}

# Two predictors: the rule with the largest membership at each grid node, paler where it
# dominates less, with the data and the centres.
draw_membership_map <- function(x, n_grid, cols, ...) {
  n_grid <- min(n_grid, 100L)
  g1 <- seq(min(x$x[, 1L]), max(x$x[, 1L]), length.out = n_grid)
  g2 <- seq(min(x$x[, 2L]), max(x$x[, 2L]), length.out = n_grid)
  nodes <- as.matrix(expand.grid(g1, g2))
  colnames(nodes) <- colnames(x$x)
  member <- memberships(x$spec, nodes, x$n_threads, FALSE)$membership
  top <- max.col(member, ties.method = "first")
  strength <- member[cbind(seq_along(top), top)]
  plot_with_defaults(range(g1), range(g2), type = "n", xlab = colnames(x$x)[1L],
                     ylab = colnames(x$x)[2L], ...)
  dx <- diff(g1[1:2]) / 2
  dy <- diff(g2[1:2]) / 2
  graphics::rect(nodes[, 1L] - dx, nodes[, 2L] - dy, nodes[, 1L] + dx, nodes[, 2L] + dy,
                 border = NA, col = with_alpha(cols[top], 0.6 * strength))
  graphics::points(x$x, pch = 20, cex = 0.6)
  graphics::points(x$centres, pch = 21, bg = cols, cex = 1.6)
}
