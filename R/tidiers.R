# Tidiers (generics' tidy(), glance(), augment()), as.data.frame() and the standard accessors that
# the fits lacked. Columns follow broom's conventions: one row per term or cluster from tidy(),
# one row per model from glance(), the data plus dot-prefixed columns from augment().

#' @importFrom generics tidy
#' @export
generics::tidy

#' @importFrom generics glance
#' @export
generics::glance

#' @importFrom generics augment
#' @export
generics::augment

#' Tidy data frames from fitted models
#'
#' Methods for the [generics::tidy()], [generics::glance()] and
#' [generics::augment()] generics (the ones broom uses), so that fits from
#' this package work with broom and the tidyverse. The results are tibbles
#' when the tibble package is installed and data frames otherwise; columns
#' follow broom's conventions.
#'
#' * `tidy()`: for regression and classification fits, one row per predictor
#'   with its bandwidth (`term`, `type` is `"h"` for a numeric predictor or
#'   `"lambda"` for a categorical one, `bandwidth`); for densities the
#'   estimate on its grid (one column per variable, `density`); for mode
#'   clusters one row per mode (`cluster`, `size`, `density`, the mode's
#'   coordinates); for embeddings the layout (`dim1`, `dim2`, ...); for
#'   imputations one row per imputed cell (`row`, `column`, `value`); for a
#'   principal-component shift the points on the ridge; for QKV models the
#'   loss by epoch; for fuzzy rule bases one row per rule and consequent term
#'   (`rule`, `term`, `estimate`, and for global consequents `std.error`); for
#'   scores the points with their score and density; for diffusion samples the
#'   samples.
#' * `glance()`: one row of model statistics (`nobs`, `df`, `sigma`,
#'   `r.squared`, `deviance`, `logLik`, `AIC`, `BIC`, `df.residual`, the
#'   kernel and how the bandwidth was chosen, as each class has them).
#' * `augment()`: the data (the predictors and response the model was fitted
#'   to, or `data` when given, or `newdata`) with `.fitted`, and where they
#'   apply `.resid`, `.hat`, `.std.resid`, `.se.fit`, `.lower`/`.upper`
#'   (regression), `.pred_<level>` class probabilities (classification),
#'   `.cluster` (mode clusters), `.dim1`, ... (embeddings), `.density`
#'   (densities), `.imputed` (the number of imputed cells of each row),
#'   `.denoised_<variable>` (a [local_denoiser()] at `newdata` with `noise`).
#'
#' @param x A fitted model.
#' @param data A data frame with one row per training observation, to which
#'   augment() adds its columns; by default the predictors and response that
#'   the model kept.
#' @param newdata New data at which to predict (augment() then returns no
#'   residuals).
#' @param se_fit Whether to add the standard error of the fit, `.se.fit`.
#' @param interval `"none"`, `"confidence"` (the tube-formula band of
#'   [predict.local_poly()]) or `"bootstrap"` (its bootstrap band; for a kde,
#'   the smoothed-bootstrap band of [predict.local_kde()]): adds `.lower` and
#'   `.upper`.
#' @param conf.level Confidence level of the interval.
#' @param B Bootstrap replicates of `interval = "bootstrap"`.
#' @param ... Must be empty.
#' @return A tibble (or data frame without tibble).
#' @family ecosystem
#' @name localmean-tidiers
#' @examples
#' fit <- local_poly(dist ~ speed, data = cars, bandwidth = 5)
#' tidy(fit)
#' glance(fit)
#' head(augment(fit, interval = "confidence"))
#' cl <- mean_shift(faithful, bandwidth = c(0.5, 5))
#' tidy(cl)
#' head(augment(cl))
NULL

# A tibble where tibble is installed (as broom returns), else the data frame itself.
as_tidy_frame <- function(df) {
  rownames(df) <- NULL
  if (requireNamespace("tibble", quietly = TRUE)) tibble::as_tibble(df) else df
}

# One-row summaries: NULL entries are dropped, so each class reports what it has.
glance_row <- function(...) {
  values <- Filter(Negate(is.null), list(...))
  as_tidy_frame(as.data.frame(values, optional = TRUE, stringsAsFactors = FALSE))
}

# The data frame that augment() extends: `data` when given (one row per observation), else what
# the model kept of the training data.
augment_base <- function(data, n, kept, call = rlang::caller_env()) {
  if (is.null(data)) return(kept())
  data <- as.data.frame(data)
  if (nrow(data) != n) {
    abort("{.arg data} has {nrow(data)} rows but the model was fitted to {n}.", call = call)
  }
  data
}

## regression and classification ---------------------------------------------------------------

# The predictors (numeric and categorical) and response a local model was fitted to, one row per
# observation used in the fit, under the names the formula gave them.
model_data <- function(object) {
  out <- as.data.frame(object$x, optional = TRUE)
  if (!is.null(object$categorical)) {
    cat <- object$categorical
    for (j in colnames(cat$codes)) {
      out[[j]] <- factor(cat$levels[[j]][cat$codes[, j]], levels = cat$levels[[j]],
                         ordered = any(cat$ordered))
    }
  }
  vars <- object$predictors$names
  if (!is.null(vars) && all(vars %in% names(out))) out <- out[vars]
  out[[response_name(object)]] <- object$y
  out
}

# Per-predictor bandwidths: the metric's own label when one was learned.
bandwidth_rows <- function(object) {
  table <- bandwidth_table(object)
  if (is.null(table)) {
    return(data.frame(term = bandwidth_label(object), type = "h", bandwidth = NA_real_))
  }
  data.frame(term = table$predictor, type = sub(",.*", "", table$type),
             bandwidth = table$bandwidth)
}

#' @rdname localmean-tidiers
#' @export
tidy.local_model <- function(x, ...) {
  check_dots(...)
  as_tidy_frame(bandwidth_rows(x))
}

#' @rdname localmean-tidiers
#' @export
glance.local_poly <- function(x, ...) {
  check_dots(...)
  ll <- stats::logLik(x)
  gaussian <- is.null(x$deviance)
  glance_row(nobs = stats::nobs(x), df = x$df, sigma = if (gaussian) x$sigma,
             r.squared = x$r.squared, deviance = stats::deviance(x),
             null.deviance = x$null.deviance, logLik = as.numeric(ll),
             AIC = stats::AIC(ll), BIC = stats::BIC(ll), df.residual = stats::df.residual(x),
             cv = x[["cv"]], kernel = x$kernel, degree = x$degree,
             bandwidth.method = x$bandwidth_method,
             family = (x$family %||% stats::gaussian())$family)
}

#' @rdname localmean-tidiers
#' @export
augment.local_poly <- function(x, data = NULL, newdata = NULL, se_fit = FALSE,
                               interval = c("none", "confidence", "bootstrap"),
                               conf.level = 0.95, B = 999, ...) {
  check_dots(...)
  interval <- match_choice(interval, c("none", "confidence", "bootstrap"))
  check_flag(se_fit)
  base <- if (is.null(newdata)) {
    augment_base(data, length(x$fitted), function() model_data(x))
  } else {
    as.data.frame(newdata)
  }
  if (se_fit || interval != "none" || !is.null(newdata)) {
    pred <- if (interval == "bootstrap") {
      predict(x, newdata, se.fit = TRUE, interval = interval, level = conf.level, B = B,
              verbose = FALSE)
    } else {
      predict(x, newdata, se.fit = TRUE, interval = interval, level = conf.level)
    }
    band <- if (interval != "none") pred$fit
    base$.fitted <- as.vector(if (is.null(band)) pred$fit else band[, "fit"])
    if (se_fit) base$.se.fit <- as.vector(pred$se.fit)
    if (!is.null(band)) {
      base$.lower <- band[, "lwr"]
      base$.upper <- band[, "upr"]
    }
  }
  if (is.null(newdata)) {
    # one value per observation used, whatever na.action would pad
    used <- x
    used$na.action <- NULL
    base$.fitted <- as.vector(x$fitted)
    base$.resid <- as.vector(stats::residuals(used))
    base$.hat <- x$leverage
    if (is.null(x$deviance)) {
      base$.std.resid <- base$.resid / (x$sigma * sqrt(pmax(1 - x$leverage, 0)))
    }
  }
  as_tidy_frame(base)
}

#' @rdname localmean-tidiers
#' @export
glance.local_classify <- function(x, ...) {
  check_dots(...)
  ll <- stats::logLik(x)
  # (x[["cv"]]: `$` would match the selector's curve, `cv_curve`, one row per candidate)
  glance_row(nobs = stats::nobs(x), df = x$df, accuracy = x$accuracy, logLik = as.numeric(ll),
             AIC = stats::AIC(ll), BIC = stats::BIC(ll), brier = loo_brier(x),
             kernel = x$kernel, degree = x$degree, bandwidth.method = x$bandwidth_method,
             n.classes = length(x$levels))
}

#' @rdname localmean-tidiers
#' @export
augment.local_classify <- function(x, data = NULL, newdata = NULL, ...) {
  check_dots(...)
  if (is.null(newdata)) {
    base <- augment_base(data, length(x$y), function() model_data(x))
    prob <- x$fitted
  } else {
    base <- as.data.frame(newdata)
    prob <- predict(x, newdata, type = "prob")
  }
  prob <- matrix(prob, ncol = length(x$levels))
  base$.fitted <- most_probable(prob, x$levels)
  for (j in seq_along(x$levels)) base[[paste0(".pred_", x$levels[j])]] <- prob[, j]
  as_tidy_frame(base)
}

#' @rdname localmean-tidiers
#' @param row.names,optional Ignored, as by [as.data.frame()] methods.
#' @export
as.data.frame.local_model <- function(x, row.names = NULL, optional = FALSE, ...) {
  check_dots(..., .known = "stringsAsFactors")
  as.data.frame(augment(x))
}

## densities -------------------------------------------------------------------------------------

# tidy() of the classes whose as.data.frame() is their tidy table.
tidy_table <- function(x, ...) {
  check_dots(...)
  as_tidy_frame(as.data.frame(x))
}

#' @rdname localmean-tidiers
#' @export
tidy.local_kde <- tidy_table

#' @rdname localmean-tidiers
#' @export
glance.local_kde <- function(x, ...) {
  check_dots(...)
  ll <- as.numeric(stats::logLik(x))
  h <- x$bandwidth$h
  glance_row(nobs = x$n, d = x$d, kernel = x$kernel,
             bandwidth = if (length(h) == 1L) h, bandwidth.method = x$bandwidth_method,
             logLik = ll, method = x$method)
}

#' @rdname localmean-tidiers
#' @export
tidy.local_cdens <- function(x, ...) {
  check_dots(...)
  kind <- c(x$predictors$kind, "response")
  bandwidth <- c(join_bandwidth(x$bandwidth$h, x$bandwidth$lambda, x$predictors), x$bandwidth$y)
  as_tidy_frame(data.frame(variable = c(x$predictors$names, x$response), kind = kind,
                           parameter = ifelse(kind == "numeric" | (kind == "response" &
                                                                   !cdens_discrete(x)),
                                              "h", "lambda"),
                           bandwidth = bandwidth, stringsAsFactors = FALSE))
}

#' @rdname localmean-tidiers
#' @export
glance.local_cdens <- function(x, ...) {
  check_dots(...)
  glance_row(nobs = x$n, kernel = x$kernel, degree = x$degree,
             bandwidth.method = x$bandwidth_method, logLik = as.numeric(stats::logLik(x)),
             cv.logLik = if (!is.null(x$cv_loglik)) x$n * x$cv_loglik)
}

#' @rdname localmean-tidiers
#' @export
augment.local_kde <- function(x, data = NULL, newdata = NULL,
                              interval = c("none", "bootstrap"), conf.level = 0.95, B = 999,
                              ...) {
  check_dots(...)
  interval <- match_choice(interval, c("none", "bootstrap"))
  if (is.null(newdata)) {
    base <- augment_base(data, x$n, function() kde_training_frame(x))
    dens <- kde_at_data(x)
  } else {
    base <- as.data.frame(newdata)
    dens <- predict(x, newdata)
  }
  base$.density <- as.vector(dens)
  if (interval == "bootstrap") {
    band <- predict(x, if (is.null(newdata)) kde_data(x) else newdata, interval = "bootstrap",
                    level = conf.level, B = B, verbose = FALSE)
    base$.lower <- band[, "lwr"]
    base$.upper <- band[, "upr"]
  }
  as_tidy_frame(base)
}

kde_training_frame <- function(x) {
  out <- as.data.frame(kde_data(x), optional = TRUE)
  if (!is.null(x$categorical)) {
    cat <- x$categorical
    for (j in colnames(cat$codes)) out[[j]] <- factor(cat$levels[[j]][cat$codes[, j]],
                                                      levels = cat$levels[[j]])
  }
  out
}

## modes -----------------------------------------------------------------------------------------

#' @rdname localmean-tidiers
#' @export
tidy.local_modes <- function(x, ...) {
  check_dots(...)
  modes <- as.data.frame(x$modes, optional = TRUE)
  names(modes) <- mode_vars(x)
  as_tidy_frame(cbind(data.frame(cluster = factor(seq_len(nrow(x$modes))), size = x$size,
                                 density = x$mode_density), modes))
}

mode_vars <- function(x) colnames(x$x) %||% paste0("x", seq_len(ncol(x$x)))

#' @rdname localmean-tidiers
#' @export
glance.local_modes <- function(x, ...) {
  check_dots(...)
  h <- x$bandwidth
  glance_row(nobs = nrow(x$x), n.clusters = nrow(x$modes), algorithm = x$algorithm,
             kernel = x$kernel, bandwidth = if (length(unique(h)) == 1L) h[1L],
             bandwidth.method = x$bandwidth_method, iterations = max(x$iterations),
             converged = all(x$converged))
}

#' @rdname localmean-tidiers
#' @export
augment.local_modes <- function(x, data = NULL, newdata = NULL, ...) {
  check_dots(...)
  if (is.null(newdata)) {
    base <- augment_base(data, nrow(x$x), function() {
      stats::setNames(as.data.frame(x$x, optional = TRUE), mode_vars(x))
    })
    cluster <- x$cluster
  } else {
    base <- as.data.frame(newdata)
    cluster <- predict(x, newdata)
  }
  base$.cluster <- factor(cluster, levels = seq_len(nrow(x$modes)))
  as_tidy_frame(base)
}

#' @rdname localmean-tidiers
#' @export
as.data.frame.local_modes <- as.data.frame.local_model

#' @export
fitted.local_modes <- function(object, ...) {
  check_dots(...)
  object$point_modes
}

#' @export
residuals.local_modes <- function(object, ...) {
  check_dots(...)
  object$x - object$point_modes
}

#' @export
nobs.local_modes <- function(object, ...) {
  check_dots(...)
  nrow(object$x)
}

#' @rdname localmean-tidiers
#' @export
tidy.local_ridges <- function(x, ...) {
  check_dots(...)
  as_tidy_frame(pc_points(x))
}

pc_points <- function(x) {
  stats::setNames(as.data.frame(x$points), colnames(x$x) %||% paste0("x", seq_len(ncol(x$x))))
}

#' @rdname localmean-tidiers
#' @export
glance.local_ridges <- function(x, ...) {
  check_dots(...)
  h <- x$bandwidth
  glance_row(nobs = nrow(x$x), ndim = x$ndim, kernel = x$kernel,
             bandwidth = if (length(unique(h)) == 1L) h[1L],
             bandwidth.method = x$bandwidth_method, iterations = max(x$iterations),
             converged = all(x$converged))
}

#' @rdname localmean-tidiers
#' @export
augment.local_ridges <- function(x, data = NULL, ...) {
  check_dots(...)
  base <- augment_base(data, nrow(x$x), function() {
    stats::setNames(as.data.frame(x$x), names(pc_points(x)))
  })
  ridge <- pc_points(x)
  for (j in names(ridge)) base[[paste0(".fitted_", j)]] <- ridge[[j]]
  as_tidy_frame(base)
}

#' @rdname localmean-tidiers
#' @export
as.data.frame.local_ridges <- as.data.frame.local_model

#' @export
fitted.local_ridges <- function(object, ...) {
  check_dots(...)
  object$points
}

#' @export
nobs.local_ridges <- nobs.local_modes

#' @export
nobs.local_pca <- nobs.local_modes

#' @export
nobs.local_propagation <- nobs.local_modes

## embeddings ------------------------------------------------------------------------------------

#' @rdname localmean-tidiers
#' @export
tidy.local_embedding <- tidy_table

#' @rdname localmean-tidiers
#' @export
glance.local_embedding <- function(x, ...) {
  check_dots(...)
  glance_row(nobs = nrow(x$layout), ndim = ncol(x$layout), method = x$method,
             violated = x$violated, final.loss = if (length(x$loss)) x$loss[length(x$loss)])
}

#' @rdname localmean-tidiers
#' @export
augment.local_embedding <- function(x, data = NULL, ...) {
  check_dots(...)
  base <- augment_base(data, nrow(x$layout), function() {
    # TriMap keeps its preprocessed data, not the user's
    if (x$method == "lle") as.data.frame(x$data) else data.frame(.row = seq_len(nrow(x$layout)))
  })
  for (j in seq_len(ncol(x$layout))) base[[paste0(".dim", j)]] <- x$layout[, j]
  as_tidy_frame(base)
}

#' @export
nobs.local_embedding <- function(object, ...) {
  check_dots(...)
  nrow(object$layout)
}

## imputation ------------------------------------------------------------------------------------

#' @rdname localmean-tidiers
#' @export
tidy.local_imputation <- function(x, ...) {
  check_dots(...)
  cells <- which(x$missing, arr.ind = TRUE)
  cells <- cells[order(cells[, 1L], cells[, 2L]), , drop = FALSE]
  column <- colnames(x$completed)[cells[, 2L]] %||% as.character(cells[, 2L])
  as_tidy_frame(data.frame(row = cells[, 1L], column = column,
                           value = x$completed[cells]))
}

#' @rdname localmean-tidiers
#' @export
glance.local_imputation <- function(x, ...) {
  check_dots(...)
  glance_row(nobs = nrow(x$completed), n.missing = sum(x$missing), iterations = x$iterations,
             converged = x$converged, mix = x$mix)
}

#' @rdname localmean-tidiers
#' @export
augment.local_imputation <- function(x, data = NULL, ...) {
  check_dots(...)
  base <- as.data.frame(x)
  if (!is.null(data)) {
    data <- augment_base(data, nrow(x$completed), NULL)
    extra <- setdiff(names(data), names(base))
    base <- cbind(data[extra], base)
  }
  base$.imputed <- as.integer(rowSums(x$missing))
  as_tidy_frame(base)
}

#' @rdname localmean-tidiers
#' @export
as.data.frame.local_imputation <- function(x, row.names = NULL, optional = FALSE, ...) {
  check_dots(..., .known = "stringsAsFactors")
  as.data.frame(x$completed, optional = TRUE)
}

#' @export
nobs.local_imputation <- function(object, ...) {
  check_dots(...)
  nrow(object$completed)
}

## sequence models -------------------------------------------------------------------------------

#' @rdname localmean-tidiers
#' @export
tidy.local_qkv <- tidy_table

#' @rdname localmean-tidiers
#' @export
glance.local_qkv <- function(x, ...) {
  check_dots(...)
  s <- x$shape
  last <- function(v) if (length(v)) v[length(v)]
  glance_row(nobs = x$n_tokens, vocab = s$vocab, dim = s$dim, window = s$window,
             layers = s$layers, heads = s$heads, hidden = s$hidden,
             train.loss = last(x$epoch_loss), validation.loss = last(x$valid_loss),
             unigram.loss = x$unigram_loss)
}

#' @rdname localmean-tidiers
#' @export
as.data.frame.local_qkv <- function(x, row.names = NULL, optional = FALSE, ...) {
  check_dots(..., .known = "stringsAsFactors")
  out <- data.frame(epoch = seq_along(x$epoch_loss), train.loss = x$epoch_loss)
  if (length(x$valid_loss) == nrow(out)) out$validation.loss <- x$valid_loss
  out
}

## fuzzy rule bases -----------------------------------------------------------------------------

#' @rdname localmean-tidiers
#' @export
tidy.local_fuzzy <- function(x, ...) {
  check_dots(...)
  as_tidy_frame(coefficient_rows(x))
}

#' @rdname localmean-tidiers
#' @export
glance.local_fuzzy <- function(x, ...) {
  check_dots(...)
  glance_row(nobs = stats::nobs(x), rules = nrow(x$centres), df = x$df, sigma = x$sigma,
             r.squared = x$r.squared, cv = x$cv, kernel = x$kernel, consequent = x$consequent,
             centres = x$centre_method, bandwidth.method = x$bandwidth_method)
}

#' @rdname localmean-tidiers
#' @export
augment.local_fuzzy <- function(x, data = NULL, newdata = NULL, se_fit = FALSE, ...) {
  check_dots(...)
  check_flag(se_fit)
  if (!is.null(newdata)) {
    base <- as.data.frame(newdata)
    pred <- predict(x, newdata, se.fit = se_fit)
    base$.fitted <- if (se_fit) pred$fit else pred
    if (se_fit) base$.se.fit <- pred$se.fit
    return(as_tidy_frame(base))
  }
  base <- augment_base(data, length(x$y), function() model_data(x))
  base$.fitted <- x$fitted
  base$.resid <- x$residuals
  if (!is.null(x$leverage)) base$.hat <- x$leverage
  if (se_fit) base$.se.fit <- predict(x, se.fit = TRUE)$se.fit
  as_tidy_frame(base)
}

#' @rdname localmean-tidiers
#' @export
as.data.frame.local_fuzzy <- as.data.frame.local_model

## generative ------------------------------------------------------------------------------------

#' @rdname localmean-tidiers
#' @export
tidy.local_score <- tidy_table

#' @rdname localmean-tidiers
#' @export
glance.local_score <- function(x, ...) {
  check_dots(...)
  glance_row(nobs = nrow(x$x), points = nrow(x$at), d = ncol(x$x), kernel = x$kernel,
             shadow = x$shadow, bandwidth.method = x$bandwidth_method)
}

#' @rdname localmean-tidiers
#' @export
glance.local_denoiser <- function(x, ...) {
  check_dots(...)
  glance_row(nobs = nrow(x$x), d = ncol(x$x), bandwidth = max(x$bandwidth))
}

#' @rdname localmean-tidiers
#' @param noise For a `local_denoiser`, the noise level of `newdata`.
#' @export
augment.local_denoiser <- function(x, newdata = NULL, noise = NULL, ...) {
  check_dots(...)
  if (is.null(newdata) || is.null(noise)) {
    abort("{.arg newdata} and {.arg noise} are required: the noisy points and their noise level.")
  }
  out <- as.data.frame(newdata)
  denoised <- predict(x, newdata, noise = noise)
  colnames(denoised) <- paste0(".denoised_", colnames(x$x))
  as_tidy_frame(cbind(out, as.data.frame(denoised, optional = TRUE)))
}

#' @rdname localmean-tidiers
#' @export
tidy.local_diffusion <- tidy_table

#' @rdname localmean-tidiers
#' @export
glance.local_diffusion <- function(x, ...) {
  check_dots(...)
  glance_row(nobs = nrow(x$x), samples = nrow(x$samples), d = ncol(x$x), sampler = x$sampler,
             n_iter = x$n_iter, max_noise = x$levels[1L], local_means = x$local_means,
             bandwidth.method = x$bandwidth_method)
}

## as.matrix() -----------------------------------------------------------------------------------

#' Result objects as numeric matrices
#'
#' `as.matrix()` of every result object of the package gives its numbers as a
#' numeric matrix: the numeric form of its [as.data.frame()] (factors and
#' labels as their integer codes, as [data.matrix()] gives them), except where
#' a matrix is the natural result:
#' * regression and classification fits: the data with the fitted values,
#'   residuals, leverages, class probabilities (the columns of [augment()]);
#' * [kde()]: the grid points and the density there;
#' * `kde(y ~ x)`: the data (level codes for categorical predictors) with the
#'   conditional density at each point, `.density`;
#' * [mean_shift()], [medoid_shift()]: the mode each point reached;
#'   [pc_shift()]: the points on the ridges;
#' * embeddings ([lle()], [trimap()], [ordinal_embed()], [asym_mds()]): the
#'   layout (for `asym_mds()` the senders'; the receivers' are in
#'   `$receivers`);
#' * [local_score()]: the scores at the points (one column per variable);
#' * [diffusion_sample()]: the samples; [local_denoiser()]: its data;
#' * [qkv_fit()]: the loss by epoch; [fuzzy_inference()]: as regression fits.
#'
#' @param x A result object.
#' @param ... Must be empty.
#' @return A numeric matrix.
#' @family ecosystem
#' @name localmean-as-matrix
#' @examples
#' head(as.matrix(lle(scale(iris[, 1:4]), k = 20, verbose = FALSE)))
#' head(as.matrix(local_poly(dist ~ speed, data = cars, bandwidth = 5)))
NULL

# The numeric form of a result's data frame.
numeric_frame <- function(x, ...) {
  check_dots(...)
  data.matrix(as.data.frame(x))
}

# An as.matrix() method that returns the result's element `name`.
matrix_element <- function(name) {
  force(name)
  function(x, ...) {
    check_dots(...)
    x[[name]]
  }
}

#' @rdname localmean-as-matrix
#' @export
as.matrix.local_model <- numeric_frame

#' @rdname localmean-as-matrix
#' @export
as.matrix.local_kde <- numeric_frame

#' @rdname localmean-as-matrix
#' @export
as.matrix.local_cdens <- function(x, ...) {
  check_dots(...)
  columns <- cbind(x$x, x$categorical$codes)[, x$predictors$names, drop = FALSE]
  out <- cbind(columns, x$y, predict(x, verbose = FALSE))
  colnames(out) <- c(x$predictors$names, x$response, ".density")
  out
}

#' @rdname localmean-as-matrix
#' @export
as.matrix.local_qkv <- numeric_frame

#' @rdname localmean-as-matrix
#' @export
as.matrix.local_fuzzy <- numeric_frame

#' @rdname localmean-as-matrix
#' @export
as.matrix.local_modes <- matrix_element("point_modes")

#' @rdname localmean-as-matrix
#' @export
as.matrix.local_ridges <- function(x, ...) {
  check_dots(...)
  as.matrix(pc_points(x))
}

#' @rdname localmean-as-matrix
#' @export
as.matrix.local_embedding <- matrix_element("layout")

#' @rdname localmean-as-matrix
#' @export
as.matrix.local_score <- matrix_element("score")

#' @rdname localmean-as-matrix
#' @export
as.matrix.local_diffusion <- matrix_element("samples")

#' @rdname localmean-as-matrix
#' @export
as.matrix.local_denoiser <- matrix_element("x")
