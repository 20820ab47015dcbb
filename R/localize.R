# The localization trick for any model: localize() refits a model that takes `weights` at every
# point with the engine's kernel weights, and the methods of its result.

#' Localize any model
#'
#' `localize()` turns a fitted model into a local one: at every point \eqn{z^*}{z*} of `at` it
#' refits the model with the kernel weights \eqn{K((z_i - z^*) / h)}{K((z_i - z*) / h)} of the
#' data rows, minimising \eqn{\sum_i K(z^*, z_i)\, \ell(y_i, x_i; \theta)}{sum_i K(z*, z_i)
#' l(y_i, x_i; theta)} with the model's own loss. Any model function that takes `weights` and
#' follows R's modelling conventions (a formula, `data`, `weights`), such as [stats::lm()],
#' [stats::glm()], `MASS::rlm()` or `quantreg::rq()`, can be localized.
#'
#' **Localization variables.** The kernel acts on the variables named by `over`, which need not
#' be the model's covariates. Localizing `y ~ x` over `x` gives a local linear fit in `x`;
#' localizing `y ~ x` over another variable `z` gives the *varying-coefficient model*
#' \eqn{y = \beta_0(z) + \beta_1(z) x}{y = beta0(z) + beta1(z) x}, whose coefficients are the
#' local fits at each `z`. Numeric variables are localized by `kernel`; factors, character and
#' logical variables enter through the generalized product kernel with a smoothing parameter
#' lambda, as in [local_poly()].
#'
#' **Windows.** The weights and windows come from the engine: only the rows of positive weight
#' enter each local fit (for compact kernels the rows within the bandwidth, for the Gaussian
#' those within the engine's cut-off, see [kernels()] and [local_control()]). The weights are
#' the kernel's profile, 1 at the point itself, times the model's own `weights` where its call
#' has them (its `subset` and `offset` are kept as well). Rows with missing localization
#' variables, and the rows the model drops for missing values in its variables, weights or
#' offset, are left out of every window; the number of observations counts the other rows of
#' positive weight.
#'
#' **Standard errors** come from [stats::vcov()] of each local fit (`NA` for models without
#' one, such as `quantreg::rq()`). They treat the kernel weights as given weights and so are
#' conditional on the bandwidth: they do not account for the smoothing bias, and for models
#' whose weights count observations (binomial and Poisson [stats::glm()]) they depend on the
#' scale of the kernel weights. Read them as pointwise guides, not as exact intervals.
#'
#' **Failures.** A local fit that fails (an error, e.g. too few rows in the window) gives `NA`
#' coefficients at its point; one warning of class `localmean_localize_warning` says at how many
#' points fits failed or warned, with the first message. The warnings that kernel weights cause
#' by design (non-integer binomial or Poisson counts) are not counted.
#'
#' **Bandwidth selection** (`bandwidth = "cv"`, numeric localization variables): each
#' candidate is scored by cross-validation. Leave-one-out (the default): every data row is
#' predicted by the model localized at its own localization values without it. K-fold
#' (`folds = k`): the rows are split at random into k folds (reproducible with [set.seed()]; the
#' same folds for every candidate) and every row is predicted by the model localized at its own
#' localization values without its fold. The loss of a prediction is the model's own:
#' the check loss at `tau` for `quantreg::rq()`, the unit deviance of the family for models with
#' a [stats::family()] other than the Gaussian ([stats::glm()]), the squared error otherwise.
#' The score is the mean loss; a candidate at which any fit fails scores `Inf`. Candidates are
#' `local_control(candidates =)` (one column per variable), by default the rule-of-thumb
#' bandwidth times \eqn{2^{-1.5}, 2^{-1}, \ldots, 2^{1.5}}{2^-1.5, 2^-1, ..., 2^1.5}. The cost,
#' in refits of the model: leave-one-out, one per data row and candidate (7 n fits by default);
#' k-fold, one per distinct localization point of each fold and candidate, which is also n per
#' candidate when the points are all distinct, and fewer when they repeat (a discrete `over`
#' variable: at most k times its number of values). The fits run on the `future` plan when one
#' is set; the curve is kept as `cv_curve`.
#'
#' **Scale-out.** When a `future` plan other than sequential is set (e.g.
#' `future::plan("multisession")`), the local fits run on its workers (the future.apply
#' package), with results identical to a sequential run. With `verbose = TRUE` a progress bar
#' counts the fits.
#'
#' @param model A fitted model whose call has `data` and whose model function takes `weights`,
#'   e.g. `lm(dist ~ speed, data = cars)`. It is refitted from its call ([stats::getCall()]).
#' @param over The localization variables: a one-sided formula (`~ z` or `~ z1 + z2`) or a
#'   character vector of variable names of the model's data.
#' @param kernel A kernel: a name (see [kernels()]), a function of the scaled distance or a
#'   [user_kernel()].
#' @param bandwidth A positive number (the same for every numeric localization variable, when
#'   all are numeric), one value per variable of `over` in its order (h for a numeric variable,
#'   lambda for a categorical one, as in [local_poly()]), or [nn()]`(k)` for adaptive
#'   nearest-neighbour bandwidths, or `"cv"`: cross-validation of the model's own loss,
#'   leave-one-out or k-fold (see `folds` and Details).
#' @param at The points at which to localize: a data frame holding the variables of `over`
#'   (or, for one variable, a vector). By default the distinct rows of the localization
#'   variables in the data.
#' @param data The data to refit the model on; by default the `data` of the model's call.
#' @param folds With `bandwidth = "cv"`: `NULL` for leave-one-out cross-validation, or a whole
#'   number k >= 2 for k-fold cross-validation with random folds (see Details).
#' @param fast Fit models that the engine solves itself in C++ instead of refitting them in R,
#'   with the same estimates (to about 1e-10 for least squares, and to the convergence
#'   tolerance of the iterative fits), far faster: [stats::lm()] models (formula, data, weights,
#'   subset and na.action alone) from the engine's local moment sums; and, by the engine's
#'   varying-coefficient fit (linear in the columns of the model matrix, with the kernel weights
#'   of the localization variables), models with an intercept and no offset fitted by
#'   [stats::glm()] with a likelihood family of [losses()] and its link (the engine's tolerance
#'   is the smaller of `glm.control()`'s `epsilon` and 1e-10), by `MASS::rlm()` with either
#'   `wt.method` (`"inv.var"`, its default, scales each row by the square root of its weight;
#'   `"case"` weights each row's loss), the Huber or bisquare psi, any tuning constant and the
#'   MAD scale (standard errors as its `vcov()` computes them), or by `quantreg::rq()` at one
#'   `tau` with its default method (the exact check-loss optimum); any localization variables.
#'   Points the engine cannot fit (a singular window, no convergence) are refitted by the
#'   model's own function.
#' @param method Strategy of the engine's window search: `"auto"`, `"exact"` or `"tree"` (see
#'   [local_poly()]).
#' @param n_threads Number of threads of the engine, see [n_threads()].
#' @param verbose Show a progress bar of the local fits.
#' @param control Engine settings from [local_control()] (its `cutoff` truncates unbounded
#'   kernels).
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return An object of class `local_refits`: `coefficients` and `std.error` (one row per point
#'   of `at`, one column per coefficient), `at`, `n_window` (rows with positive weight at each
#'   point), `weight_sum`, `failed` (points whose fit failed), `engine_fitted` (points fitted
#'   by the fast path, see `fast`), the global model's coefficients
#'   (`global`), the kernel and bandwidth. Methods: `print()`, `summary()`, `coef()`,
#'   `predict()`, `plot()`, `autoplot()`, `tidy()`, `glance()`, `nobs()`.
#' @references
#' Hastie, T. and Tibshirani, R. (1993). Varying-coefficient models. *JRSS B* 55, 757-796.
#'
#' Loader, C. (1999). *Local Regression and Likelihood*. Springer.
#' @family regression
#' @export
#' @examples
#' # a local linear fit of dist on speed, refitting lm() at 5 speeds
#' loc <- localize(lm(dist ~ speed, data = cars), over = ~speed, bandwidth = 4,
#'                 at = c(8, 12, 16, 20, 24))
#' loc
#' # the varying-coefficient model: the effect of weight on mpg as horsepower changes
#' vc <- localize(lm(mpg ~ wt, data = mtcars), over = ~hp, kernel = "epanechnikov",
#'                bandwidth = 100, at = data.frame(hp = seq(80, 240, by = 40)))
#' summary(vc)
#' plot(vc)
#' predict(vc, data.frame(wt = 3, hp = c(100, 200)))
#' # a local logistic model with a covariate
#' localize(glm(am ~ wt, family = binomial, data = mtcars), over = "hp", bandwidth = 80,
#'          at = c(100, 150, 200))
localize <- function(model, over, kernel = "gaussian", bandwidth, at = NULL, data = NULL,
                     folds = NULL, fast = TRUE, method = "auto", n_threads = NULL,
                     verbose = interactive(), control = local_control(), ...) {
  check_dots(...)
  recipe <- model_recipe(model, data, parent.frame())
  vars <- localization_vars(over, recipe$data)
  if (missing(bandwidth)) {
    abort("{.arg bandwidth} is missing: give a number, {.fn nn} or {.val cv}.")
  }
  check_flag(verbose)
  n_threads <- n_threads(n_threads)
  selection <- NULL
  if (identical(bandwidth, "cv")) {
    if (!is.null(folds)) folds <- check_count(folds, min = 2)
    selection <- cv_localize_bandwidth(recipe, vars, kernel, method, control, n_threads,
                                       verbose, folds)
    bandwidth <- selection$bandwidth
  } else if (!is.null(folds)) {
    abort("{.arg folds} applies to {.code bandwidth = \"cv\"}.")
  }
  local <- localization_spec(recipe$data, vars, kernel, bandwidth, method, control, n_threads,
                             verbose)
  at <- localization_points(at, local, recipe$data)
  queries <- point_queries(local, at)
  m <- nrow(at)
  engine <- if (check_flag(fast)) engine_estimates(recipe, model, local, queries)
  sizes <- engine$sizes %||%
    engine_windows(local$spec, queries$x, queries$codes, sizes_only = TRUE)
  engine_fitted <- if (is.null(engine)) rep(FALSE, m) else engine$fitted
  todo <- which(!engine_fitted)
  fits <- list()
  if (length(todo)) {
    windows <- point_windows(local, some_queries(queries, todo))
    fits <- fit_windows(recipe, windows, local_estimates, verbose)
  }
  est <- merge_estimates(engine, fits, todo, m)
  warn_local_failures(fits, "point")
  failed <- rep(FALSE, m)
  failed[todo] <- !vapply(fits, function(f) is.null(f$error), TRUE)
  structure(list(coefficients = est$coef, std.error = est$se, at = at,
                 n_window = sizes$size, weight_sum = sizes$wsum,
                 failed = failed, engine_fitted = engine_fitted,
                 global = stats::coef(model), over = vars, kernel = local$kernel,
                 bandwidth = local$bandwidth, bandwidth_label = local$label,
                 bandwidth_method = if (is.null(selection)) "user" else "cv",
                 cv_curve = selection$curve, cv_folds = folds,
                 model_call = stats::getCall(model), nobs = model_nobs(recipe, local$rows),
                 recipe = recipe, local = local, linear_model = linear_model_parts(model),
                 call = match.call()),
            class = "local_refits")
}

# ---- The model's recipe: its function, arguments and data ---------------------------------------

# Arguments of a model call that are evaluated within its data (non-standard evaluation).
data_arguments <- c("weights", "subset", "offset")

# What refitting the model needs, evaluated once on the main process so that workers need no
# environment: the model function, its other arguments, the data (after `subset`), the model's
# own weights (NULL: none) and offset.
model_recipe <- function(model, data, env, call = rlang::caller_env()) {
  mcall <- tryCatch(stats::getCall(model), error = function(e) NULL)
  if (!is.call(mcall)) {
    abort("{.arg model} must be a fitted model that keeps its call, as {.fn lm} and {.fn glm}
           fits do.", call = call)
  }
  fun <- model_function(mcall[[1L]], env)
  if (!is.function(fun)) {
    abort("{.arg model}'s call {.code {deparse_short(mcall)}} does not name a function here.",
          call = call)
  }
  mcall <- tryCatch(match.call(fun, mcall), error = function(e) mcall)
  args <- as.list(mcall)[-1L]
  if (!takes_weights(fun, args, env)) {
    abort(c("{.arg model} must come from a model function that takes {.arg weights}.",
            x = "{.code {deparse_short(mcall[[1L]])}} has no {.arg weights} argument."),
          call = call)
  }
  data <- data %||% (if (!is.null(args$data)) eval(args$data, env))
  if (is.null(data)) {
    abort("{.arg model}'s call has no {.arg data}; give the data as {.arg data}.", call = call)
  }
  data <- as.data.frame(data)
  in_data <- lapply(args[intersect(names(args), data_arguments)], eval, data, env)
  if (!is.null(in_data$subset)) {
    keep <- in_data$subset
    if (is.logical(keep)) keep <- which(keep)
    data <- data[keep, , drop = FALSE]
    in_data$weights <- in_data$weights[keep]
    in_data$offset <- in_data$offset[keep]
  }
  # the rows the model uses: those it drops for missing values enter no window
  used <- model_rows(model, data, in_data)
  if (!all(used)) data <- data[used, , drop = FALSE]
  # (automatic row names: no copy)
  if (.row_names_info(data) > 0L) rownames(data) <- NULL
  other <- setdiff(names(args), c("data", data_arguments))
  list(fun = fun, args = lapply(args[other], eval, env), data = data,
       prior = in_data$weights[used], offset = in_data$offset[used], env = env, call = mcall)
}

# The rows of `data` (after `subset`) without missing values in the model's variables, its
# weights or its offset: the rows a model fitted with R's default na.action (na.omit) uses.
model_rows <- function(model, data, in_data) {
  form <- tryCatch(stats::formula(model), error = function(e) NULL)
  vars <- if (inherits(form, "formula")) all.vars(form) else character(0)
  vars <- if ("." %in% vars) names(data) else intersect(vars, names(data))
  used <- if (length(vars)) stats::complete.cases(data[vars]) else rep(TRUE, nrow(data))
  for (v in in_data[c("weights", "offset")]) if (!is.null(v)) used <- used & !is.na(v)
  used
}

# The number of observations: the `rows` of the model's data (those with every localization
# variable) with a positive prior weight.
model_nobs <- function(recipe, rows) {
  if (is.null(recipe$prior)) length(rows) else sum(recipe$prior[rows] > 0)
}

# The function a model call names, found from `env` or, when the call names a function of a
# package that is loaded but not attached (as `MASS::rlm()` records `rlm(...)`), among the
# exports of the loaded namespaces.
model_function <- function(name, env) {
  fun <- tryCatch(eval(name, env), error = function(e) NULL)
  if (is.function(fun) || !is.name(name)) return(fun)
  name <- as.character(name)
  for (ns in loadedNamespaces()) {
    if (name %in% getNamespaceExports(ns)) return(getExportedValue(ns, name))
  }
  NULL
}

deparse_short <- function(expr) {
  lines <- deparse(expr, width.cutoff = 60L)
  if (length(lines) > 1L) paste0(trimws(lines[1L], "right"), " ...") else lines
}

# Whether a model function (or, for a generic, its method for the first argument) takes
# `weights`.
takes_weights <- function(fun, args, env) {
  if ("weights" %in% names(formals(fun))) return(TRUE)
  generic <- tryCatch(utils::isS3stdGeneric(fun), error = function(e) FALSE)
  if (!isTRUE(generic) || !length(args)) return(FALSE)
  first <- tryCatch(eval(args[[1L]], env), error = function(e) NULL)
  for (cls in c(class(first), "default")) {
    method <- utils::getS3method(names(generic), cls, optional = TRUE,
                                 envir = environment(fun) %||% env)
    if (!is.null(method)) return("weights" %in% names(formals(method)))
  }
  FALSE
}

# The localization variables named by `over` (a one-sided formula or names), checked in `data`.
localization_vars <- function(over, data, call = rlang::caller_env()) {
  if (missing(over)) abort("{.arg over} is missing: name the localization variables.", call = call)
  vars <- if (inherits(over, "formula")) {
    if (length(over) != 2L) abort("{.arg over} must be a one-sided formula such as {.code ~ z}.",
                                  call = call)
    all.vars(over)
  } else if (is.character(over) && length(over) && !anyNA(over)) {
    over
  } else {
    abort("{.arg over} must be a one-sided formula or variable names.", call = call)
  }
  missing <- setdiff(vars, names(data))
  if (length(missing)) {
    abort("{.arg over} names {.field {missing}}, not in the model's data.", call = call)
  }
  unique(vars)
}

# ---- Kernel windows from the engine -----------------------------------------------------------

# The engine specification of the localization variables of `data` (rows with any of them
# missing are left out: `rows` maps the engine's data points to rows of `data`).
localization_spec <- function(data, vars, kernel, bandwidth, method, control, n_threads,
                              verbose, call = rlang::caller_env()) {
  ok <- stats::complete.cases(data[vars])
  if (!any(ok)) abort("The variables of {.arg over} have no complete rows.", call = call)
  # (every row complete, the usual case: the columns alone, without a data frame row subset)
  frame <- if (all(ok)) data[vars] else data[ok, vars, drop = FALSE]
  predictors <- split_predictors(frame, arg = "over", call = call)
  x <- predictors$x
  kernel <- check_kernel(kernel, call = call)
  control <- check_control(control, call = call)
  method <- check_choice(method, c("auto", "exact", "tree"), call = call)
  spec_for <- function(h, nn = NULL, lambda = NULL) {
    engine_spec(x, kernel, h, nn = nn, method = method, control = control,
                categorical = predictors$categorical, lambda = lambda, n_threads = n_threads,
                verbose = verbose, call = call)
  }
  if (inherits(bandwidth, "local_nn")) {
    if (!is.null(predictors$categorical)) {
      abort("{.fn nn} bandwidths are for numeric localization variables only.", call = call)
    }
    if (identical(bandwidth$k, "cv")) {
      abort("{.arg bandwidth}: {.code nn(\"cv\")} is not available in {.fn localize}; give k.",
            call = call)
    }
    spec <- resolve_nn(bandwidth, x, spec_for, FALSE, call)$spec
    label <- sprintf("nn(%d)", bandwidth$k)
    bw <- NULL
  } else if (is.numeric(bandwidth)) {
    split <- split_bandwidth(bandwidth, predictors, call = call)
    spec <- spec_for(split$h, lambda = split$lambda)
    bw <- join_bandwidth(split$h, split$lambda, predictors)
    label <- named_values(bw, predictors$names)
  } else {
    abort("{.arg bandwidth} must be a positive number, one per variable of {.arg over},
           {.fn nn} or {.val cv}.", call = call)
  }
  list(spec = spec, predictors = predictors, vars = vars, rows = which(ok), kernel = kernel,
       bandwidth = bw, label = label)
}

# The points `at` as a data frame of the localization variables (default: their distinct rows
# in the data).
localization_points <- function(at, local, data, arg = "at", call = rlang::caller_env()) {
  vars <- local$vars
  if (is.null(at)) {
    at <- unique(data[local$rows, vars, drop = FALSE])
    at <- at[do.call(order, unname(as.list(at))), , drop = FALSE]
  } else if (!is.data.frame(at)) {
    if (length(vars) != 1L || !is.atomic(at) || !is.null(dim(at))) {
      abort("{.arg {arg}} must be a data frame holding {.field {vars}}.", call = call)
    }
    at <- stats::setNames(data.frame(at, stringsAsFactors = FALSE), vars)
  }
  missing <- setdiff(vars, names(at))
  if (length(missing)) abort("{.arg {arg}} lacks the variable{?s} {.field {missing}}.", call = call)
  if (nrow(at) == 0L) abort("{.arg {arg}} has no rows.", call = call)
  if (!all(stats::complete.cases(at[vars]))) {
    abort("{.arg {arg}} has missing values in {.field {vars}}.", call = call)
  }
  rownames(at) <- NULL
  at
}

# The points `at` (a data frame) as engine queries: numeric coordinates `x` and categorical
# level codes `codes` (NULL without categorical variables).
point_queries <- function(local, at, arg = "at", call = rlang::caller_env()) {
  predictors <- local$predictors
  numeric_vars <- predictors$names[predictors$kind == "numeric"]
  x <- if (length(numeric_vars)) {
    check_predictors(at[numeric_vars], arg = arg, call = call)
  } else {
    matrix(numeric(0), nrow(at), 0L)
  }
  codes <- if (!is.null(predictors$categorical)) {
    categorical_codes(predictors$categorical, at, arg = arg, call = call)
  }
  list(x = x, codes = codes)
}

# The queries `idx` alone.
some_queries <- function(queries, idx) {
  list(x = queries$x[idx, , drop = FALSE],
       codes = if (!is.null(queries$codes)) queries$codes[idx, , drop = FALSE])
}

# The kernel windows of the queries (point_queries()): rows of the model's data and weights.
point_windows <- function(local, queries) {
  win <- engine_windows(local$spec, queries$x, queries$codes)
  win$rows <- lapply(win$rows, function(r) local$rows[r])
  win
}

# ---- Bandwidth selection --------------------------------------------------------------------

# Cross-validated choice of the bandwidth among candidates (see localize()): leave-one-out
# (folds = NULL) or k-fold with folds drawn from R's random numbers once for every candidate.
# list(bandwidth, curve).
cv_localize_bandwidth <- function(recipe, vars, kernel, method, control, n_threads, verbose,
                                  folds = NULL, call = rlang::caller_env()) {
  control <- check_control(control, call = call)
  base <- localization_spec(recipe$data, vars, kernel, 1, method, control, n_threads, FALSE,
                            call)
  if (!is.null(base$predictors$categorical)) {
    abort("{.code bandwidth = \"cv\"} needs numeric localization variables; give the
           bandwidths of categorical ones.", call = call)
  }
  x <- base$predictors$x
  candidates <- control$candidates
  candidates <- if (is.null(candidates)) {
    outer(2^seq(-1.5, 1.5, by = 0.5), bw_rot(x, base$kernel))
  } else {
    matrix(candidates, ncol = ncol(x))
  }
  rows <- base$rows
  groups <- cv_groups(x, folds)
  queries <- list(x = x[groups$first, , drop = FALSE], codes = NULL)
  # the data rows of each fold, which leave the windows of its groups
  fold_rows <- split(rows, groups$fold)
  group_fold <- as.character(groups$fold[groups$first])
  if (verbose) cli::cli_progress_step("Bandwidth search: {nrow(candidates)} candidates")
  scores <- vapply(seq_len(nrow(candidates)), function(k) {
    local <- localization_spec(recipe$data, vars, kernel, candidates[k, ], method, control,
                               n_threads, FALSE, call)
    windows <- point_windows(local, queries)
    for (g in seq_along(groups$first)) {
      keep <- !windows$rows[[g]] %in% fold_rows[[group_fold[g]]]
      windows$rows[[g]] <- windows$rows[[g]][keep]
      windows$weights[[g]] <- windows$weights[[g]][keep]
    }
    fits <- fit_windows(recipe, windows, function(fit, g) {
      heldout_loss(fit, recipe$data[rows[groups$members[[g]]], , drop = FALSE])
    }, verbose = FALSE)
    if (any(!vapply(fits, function(f) is.null(f$error), TRUE))) return(Inf)
    loss <- unlist(lapply(fits, `[[`, "value"))
    if (all(is.na(loss))) Inf else mean(loss, na.rm = TRUE)
  }, 0)
  if (!any(is.finite(scores))) {
    abort("No candidate bandwidth gives a local fit at every data row; give larger
           {.arg candidates} in {.fn local_control}.", call = call)
  }
  best <- which.min(scores)
  list(bandwidth = candidates[best, ],
       curve = data.frame(stats::setNames(as.data.frame(candidates), vars), score = scores))
}

# The held-out groups of a cross-validation over the data points x (n x d): leave-one-out
# (folds = NULL), one group per point; k-fold, the points of each fold grouped by their
# coordinates (one local fit predicts every point of a group). list(fold: each point's fold,
# members: the points of each group, first: each group's first point).
cv_groups <- function(x, folds) {
  n <- nrow(x)
  if (is.null(folds)) {
    return(list(fold = seq_len(n), members = as.list(seq_len(n)), first = seq_len(n)))
  }
  fold <- sample(rep_len(seq_len(folds), n))
  key <- do.call(paste, c(list(fold), lapply(seq_len(ncol(x)), function(j) {
    sprintf("%.17g", x[, j])
  })))
  group <- match(key, unique(key))
  members <- unname(split(seq_len(n), group))
  list(fold = fold, members = members, first = vapply(members, `[[`, 1L, 1L))
}

# The losses of held-out data rows under a local fit: the check loss for quantreg::rq(), the
# family's unit deviance for non-Gaussian families, the squared error otherwise (NA where a
# row lacks a variable of the model).
heldout_loss <- function(fit, rows) {
  mf <- stats::model.frame(stats::terms(fit), rows, na.action = stats::na.pass)
  y <- stats::model.response(mf)
  if (is.factor(y)) y <- as.numeric(y != levels(y)[1L])
  if (inherits(fit, "rq")) {
    r <- y - stats::predict(fit, newdata = rows)
    return(unname(r * (fit$tau - (r < 0))))
  }
  family <- tryCatch(stats::family(fit), error = function(e) NULL)
  if (!is.null(family) && family$family != "gaussian") {
    mu <- stats::predict(fit, newdata = rows, type = "response")
    return(unname(family$dev.resids(y, mu, 1)))
  }
  unname((y - stats::predict(fit, newdata = rows))^2)
}

# ---- The fast path: least squares from the engine's moment sums ----------------------------

# Whether lm_moment_fits() can fit the model: lm() with a formula, data, weights, subset and
# na.action alone (no offset, contrasts or other options).
moment_fit_applies <- function(recipe) {
  identical(recipe$fun, stats::lm) && is.null(recipe$offset) &&
    all(names(recipe$args) %in% c("formula", "na.action")) &&
    inherits(recipe$args$formula, "formula") &&
    (is.null(recipe$args$na.action) || identical(recipe$args$na.action, stats::na.omit) ||
       identical(recipe$args$na.action, stats::na.exclude))
}

# The fits of the engine's fast paths (see `fast` in localize()): list(coef, se, fitted, sizes)
# with coefficient and standard error matrices (points x coefficients, NA where `fitted` is
# FALSE: points refitted by the model's own function) and the windows' sizes
# (engine_windows()), or NULL when no fast path applies.
engine_estimates <- function(recipe, model, local, queries) {
  if (moment_fit_applies(recipe)) return(lm_moment_fits(recipe, local, queries))
  loss <- registry_loss(recipe, model, local)
  if (!is.null(loss)) registry_fits(recipe, local, queries, loss)
}

# The estimates of localize(): the engine's (engine_estimates(), NULL: none) with the fits of
# the points `todo` (fit_windows() of local_estimates()) in their rows, matched by name.
merge_estimates <- function(engine, fits, todo, m) {
  if (is.null(engine)) return(estimate_matrices(fits))
  if (!length(todo)) return(engine[c("coef", "se")])
  refits <- estimate_matrices(fits)
  terms <- union(colnames(engine$coef), colnames(refits$coef))
  coef <- se <- matrix(NA_real_, m, length(terms), dimnames = list(NULL, terms))
  coef[, colnames(engine$coef)] <- engine$coef
  se[, colnames(engine$se)] <- engine$se
  coef[todo, colnames(refits$coef)] <- refits$coef
  se[todo, colnames(refits$se)] <- refits$se
  list(coef = coef, se = se)
}

# The kernel windows' sizes (n_window, weight_sum of localize()) from `spec`, the localization's
# specification with a fast path's values and prior weights, whose engine data a later
# engine_run() of `spec` reuses; by the localization's own specification (kernel weights alone)
# when some prior weight is 0. `counts`: the rows of positive weight, kernel times prior.
fast_path_sizes <- function(spec, local, queries) {
  sizes <- engine_windows(spec, queries$x, queries$codes, sizes_only = TRUE)
  if (all(spec$prior > 0)) return(c(sizes, list(counts = sizes$size)))
  kernel_only <- engine_windows(local$spec, queries$x, queries$codes, sizes_only = TRUE)
  c(kernel_only, list(counts = sizes$size))
}

# Weighted least squares at every point from one engine pass: the local means of the products
# of the design's columns and the response (the design centred at its global means, which keeps
# the normal equations well conditioned), times the weight sums, give X'WX, X'Wy and y'Wy,
# solved at all points at once (batch_cholesky()); the standard errors follow as vcov.lm()
# computes them, with the window's rows of positive weight as the observations. As
# engine_estimates(); points whose local design is nearly singular, or has no residual degrees
# of freedom, are left to lm() itself, and the whole model when its frame is not a plain design
# (a matrix response, say).
lm_moment_fits <- function(recipe, local, queries) {
  m <- nrow(queries$x)
  mf <- stats::model.frame(recipe$args$formula, data = recipe$data, na.action = stats::na.pass)
  y <- stats::model.response(mf)
  X <- stats::model.matrix(attr(mf, "terms"), mf)
  if (!is.numeric(y) || !is.null(dim(y)) || nrow(X) != nrow(recipe$data)) return(NULL)
  p <- ncol(X)
  prior <- (recipe$prior %||% rep(1, length(y))) * stats::complete.cases(X, y)
  prior[is.na(prior)] <- 0
  zero <- prior == 0
  if (any(zero)) {
    X[zero, ] <- 0
    y[zero] <- 0
  }
  intercept <- attr(attr(mf, "terms"), "intercept") == 1L && colnames(X)[1L] == "(Intercept)"
  centre <- rep(0, p)
  if (intercept && p > 1L) centre[-1L] <- colSums(X[, -1L, drop = FALSE] * prior) / sum(prior)
  ymean <- if (intercept) sum(y * prior) / sum(prior) else 0
  Xc <- X - rep(centre, each = nrow(X))
  yc <- y - ymean
  pairs <- which(upper.tri(diag(p), diag = TRUE), arr.ind = TRUE)
  values <- cbind(Xc[, pairs[, 1L], drop = FALSE] * Xc[, pairs[, 2L], drop = FALSE], Xc * yc,
                  yc * yc)
  if (length(local$rows) < nrow(values)) values <- values[local$rows, , drop = FALSE]
  spec <- local$spec
  spec$values <- values
  spec$prior <- prior[local$rows]
  if (identical(spec$method, "binned")) spec$method <- "tree"
  sizes <- fast_path_sizes(spec, local, queries)
  res <- engine_run(spec, queries$x, query_codes = queries$codes)
  sums <- matrix(res$coef[, 1L, ], m) * res$wsum
  npairs <- nrow(pairs)
  S <- matrix(0, p, p)
  S[pairs] <- seq_len(npairs)
  S[lower.tri(S)] <- t(S)[lower.tri(S)]
  chol <- batch_cholesky(sums[, seq_len(npairs), drop = FALSE], S)
  ok <- chol$ok & sizes$counts > p & !is.na(chol$ok)
  # L w = X'y, L' beta = w; rss = y'y - |w|^2
  w <- batch_forward(chol$L, sums[, npairs + seq_len(p), drop = FALSE])
  beta <- batch_backward(chol$L, w)
  rss <- pmax(sums[, ncol(sums)] - rowSums(w^2), 0)
  # the variances: sigma^2 |L^-1 b_j|^2 for the rows b_j of the map back from the centred
  # design, e_j, and for the intercept e_1 - centre (beta_0 = beta_0c - sum_j beta_j centre_j)
  unit <- diag(p)
  unit[1L, ] <- unit[1L, ] - centre
  quad <- matrix(vapply(seq_len(p), function(j) {
    rowSums(batch_forward(chol$L, matrix(unit[j, ], m, p, byrow = TRUE))^2)
  }, numeric(m)), m, p)
  sigma2 <- rss / (sizes$counts - p)
  coef <- beta
  coef[, 1L] <- drop(beta %*% unit[1L, ]) + ymean
  se <- sqrt(pmax(quad * sigma2, 0))
  coef[!ok, ] <- NA_real_
  se[!ok, ] <- NA_real_
  colnames(coef) <- colnames(se) <- colnames(X)
  list(coef = coef, se = se, fitted = ok, sizes = sizes[c("size", "wsum")])
}

# Cholesky factors L (S = L L') of m symmetric p x p matrices at once: `sums` (m x k) holds
# their distinct entries, `index` (p x p) the column of sums of each entry. list(L: a p x p list
# of length-m columns (lower triangle), ok: the pivots above 1e-10 of their diagonal entries,
# the well-conditioned matrices).
batch_cholesky <- function(sums, index) {
  p <- nrow(index)
  m <- nrow(sums)
  L <- matrix(list(), p, p)
  ok <- rep(TRUE, m)
  for (k in seq_len(p)) {
    pivot <- sums[, index[k, k]]
    for (c in seq_len(k - 1L)) pivot <- pivot - L[[k, c]]^2
    ok <- ok & pivot > 1e-10 * sums[, index[k, k]]
    L[[k, k]] <- sqrt(pmax(pivot, 0))
    for (r in seq_len(p - k) + k) {
      v <- sums[, index[r, k]]
      for (c in seq_len(k - 1L)) v <- v - L[[r, c]] * L[[k, c]]
      L[[r, k]] <- v / L[[k, k]]
    }
  }
  list(L = L, ok = ok)
}

# Solves L w = b (batch_forward) and L' x = b (batch_backward) at m points at once: b and the
# result m x p.
batch_forward <- function(L, b) {
  p <- ncol(b)
  for (r in seq_len(p)) {
    v <- b[, r]
    for (c in seq_len(r - 1L)) v <- v - L[[r, c]] * b[, c]
    b[, r] <- v / L[[r, r]]
  }
  b
}

batch_backward <- function(L, b) {
  p <- ncol(b)
  for (r in rev(seq_len(p))) {
    v <- b[, r]
    for (c in seq_len(p - r) + r) v <- v - L[[c, r]] * b[, c]
    b[, r] <- v / L[[r, r]]
  }
  b
}

# ---- The fast path: losses of the registry fitted by the engine -----------------------------

# The loss of the registry (losses()) that fits the model in the engine, or NULL: a model with
# an intercept and no offset, any localization variables (the engine's varying-coefficient fit,
# linear in the columns of the model matrix, local constant in the localization variables), by
# glm() with a likelihood family of the registry and its link (arguments formula, family,
# control, na.action), by MASS::rlm() with case weights (rlm_loss()), or by quantreg::rq() at
# one tau with the default method (arguments formula, tau, method "br", na.action).
# list(family, loss_param, tol, max_iter), and for rlm() its psi.
registry_loss <- function(recipe, model, local) {
  args <- recipe$args
  if (!is.null(recipe$offset) || !inherits(args$formula, "formula") ||
      length(args$formula) != 3L || attr(stats::terms(args$formula), "intercept") != 1L) {
    return(NULL)
  }
  if (identical(recipe$fun, stats::glm)) {
    if (!all(names(args) %in% c("formula", "family", "control", "na.action"))) return(NULL)
    family <- tryCatch(stats::family(model), error = function(e) NULL)
    tab <- loss_table()
    row <- if (!is.null(family)) which(tab$family == family$family & tab$kind == "likelihood")
    if (length(row) != 1L || !identical(family$link, tab$link[row])) return(NULL)
    control <- do.call(stats::glm.control, as.list(args$control))
    return(list(family = tab$loss[row], loss_param = NA_real_,
                tol = min(control$epsilon, 1e-10), max_iter = max(control$maxit, 50L)))
  }
  rlm <- if (isNamespaceLoaded("MASS")) getExportedValue("MASS", "rlm")
  if (!is.null(rlm) && identical(recipe$fun, rlm)) return(rlm_loss(args))
  rq <- if (isNamespaceLoaded("quantreg")) getExportedValue("quantreg", "rq")
  if (!is.null(rq) && identical(recipe$fun, rq)) {
    if (!all(names(args) %in% c("formula", "tau", "method", "na.action"))) return(NULL)
    tau <- args$tau %||% 0.5
    if (!is.numeric(tau) || length(tau) != 1L || !(tau > 0 && tau < 1) ||
        !identical(args$method %||% "br", "br")) {
      return(NULL)
    }
    return(list(family = "quantile", loss_param = as.double(tau), tol = local$spec$tol,
                max_iter = local$spec$max_iter))
  }
  NULL
}

# The registry's loss of a MASS::rlm() model: M-estimation with case weights (wt.method =
# "case": the kernel weights multiply each row's loss) or inverse-variance weights (the
# default "inv.var": the rows scaled by the square roots of the weights, their residuals'
# plain MAD), the Huber or bisquare psi with its tuning constant (`k` or `c`), the MAD scale
# and the least-squares start; else NULL.
rlm_loss <- function(args) {
  known <- c("formula", "wt.method", "psi", "k", "c", "maxit", "acc", "scale.est", "method",
             "na.action")
  wt_method <- args$wt.method %||% "inv.var"
  if (!all(names(args) %in% known) || !is.character(wt_method) || length(wt_method) != 1L ||
      !wt_method %in% c("case", "inv.var") ||
      !identical(args$scale.est %||% "MAD", "MAD") || !identical(args$method %||% "M", "M")) {
    return(NULL)
  }
  psi <- args$psi %||% getExportedValue("MASS", "psi.huber")
  family <- if (identical(psi, getExportedValue("MASS", "psi.huber"))) "huber" else
    if (identical(psi, getExportedValue("MASS", "psi.bisquare"))) "bisquare"
  if (is.null(family)) return(NULL)
  tuning <- args[[if (family == "huber") "k" else "c"]] %||% loss_row(family)$tuning
  if (!is.numeric(tuning) || length(tuning) != 1L || !(tuning > 0)) return(NULL)
  list(family = family, loss_param = as.double(tuning), tol = min(args$acc %||% 1e-4, 1e-10),
       max_iter = max(args$maxit %||% 20, 100L), psi = psi,
       psi_args = stats::setNames(list(tuning), if (family == "huber") "k" else "c"),
       inverse_variance = wt_method == "inv.var")
}

# Standard errors of a local M-estimate as vcov() of MASS::rlm() gives them with weights `w`
# (summary.rlm()): the scale s, the psi function's first two moments and kappa's correction
# times the inverse of the weighted cross-product of the design X; with case weights the
# moments are weighted, with inverse-variance weights (loss$inverse_variance) they are plain
# means over the rows of the residuals scaled by sqrt(w).
rlm_standard_errors <- function(X, r, w, loss) {
  p <- ncol(X)
  psi <- function(u, deriv) do.call(loss$psi, c(list(u, deriv = deriv), loss$psi_args))
  info <- crossprod(X * w, X)
  if (isTRUE(loss$inverse_variance)) {
    r <- r * sqrt(w)
    w <- rep(1, length(r))
    s <- stats::median(abs(r)) / 0.6745
  } else {
    s <- weighted_mad(r, w)
  }
  u <- r / s
  nn <- sum(w)
  S <- sum(w * (r * psi(u, 0))^2) / (nn - p)
  slope <- psi(u, 1)
  m1 <- sum(w * slope)
  m2 <- sum(w * slope^2)
  mn <- m1 / nn
  kappa <- 1 + p * (m2 - m1^2 / nn) / (nn - 1) / (nn * mn^2)
  if (rcond(info) < 1e-10) return(NULL)
  sqrt(pmax(diag(solve(info)), 0)) * sqrt(S) * kappa / mn
}

# The local fits by the engine's varying-coefficient fit (registry_loss()), as
# engine_estimates(): the response and the model matrix (its columns other than the intercept
# centred at their weighted means, which keeps the local designs well conditioned, the
# intercept restored afterwards), local constant in the localization variables, as the model
# refitted with the kernel weights; standard errors as vcov() computes them for glm() (from the
# working weights at the fit, the dispersion 1 or the Pearson estimate), as summary.rlm() for
# rlm() (rlm_standard_errors()) and NA for rq(); points where the engine finds no fit are left
# to the model's function itself.
registry_fits <- function(recipe, local, queries, loss) {
  m <- nrow(queries$x)
  mf <- stats::model.frame(recipe$args$formula, data = recipe$data, na.action = stats::na.pass)
  y <- stats::model.response(mf)
  if (is.factor(y)) y <- as.numeric(y != levels(y)[1L])
  if (is.logical(y)) y <- as.numeric(y)
  X <- stats::model.matrix(attr(mf, "terms"), mf)
  if (!is.numeric(y) || !is.null(dim(y)) || nrow(X) != length(y) ||
      colnames(X)[1L] != "(Intercept)" || anyNA(X)) {
    return(NULL)
  }
  p <- ncol(X)
  prior <- recipe$prior %||% rep(1, length(y))
  rows <- local$rows
  centre <- c(0, colSums(X[rows, -1L, drop = FALSE] * prior[rows]) / sum(prior[rows]))
  if (!all(is.finite(centre))) centre[] <- 0
  spec <- local$spec
  values <- cbind(as.double(y), X - rep(centre, each = nrow(X)))
  spec$values <- if (length(rows) < nrow(values)) values[rows, , drop = FALSE] else values
  spec$prior <- as.double(prior[rows])
  spec$design <- p
  spec$inverse_variance <- isTRUE(loss$inverse_variance)
  spec$family <- loss$family
  spec$loss_param <- loss$loss_param
  spec$tol <- loss$tol
  spec$max_iter <- loss$max_iter
  if (identical(spec$method, "binned")) spec$method <- "tree"
  # binomial and Poisson fits (canonical links, dispersion 1): the standard errors from the
  # engine's inverse information of each fit's last step
  engine_se <- loss_row(loss$family)$scale == "fixed" && is.null(loss$psi)
  res <- engine_run(spec, queries$x, query_codes = queries$codes, want_inverse = engine_se,
                    want_window = TRUE)
  # the windows' sizes from the fit itself, unless a prior weight of 0 leaves rows out of them
  sizes <- if (all(spec$prior > 0)) {
    list(size = as.integer(res$window[, 1L]), wsum = res$window[, 2L])
  } else {
    engine_windows(local$spec, queries$x, queries$codes, sizes_only = TRUE)
  }
  # back from the centred design: beta_0 = b_0 - sum_j centre_j b_j
  unit <- diag(p)
  unit[1L, ] <- unit[1L, ] - centre
  coef <- matrix(res$coef[, , 1L], m, p) %*% t(unit)
  fitted <- res$status == 0L & rowSums(!is.finite(coef)) == 0L
  se <- matrix(NA_real_, m, p)
  if (engine_se) {
    se <- design_standard_errors(res$inverse, unit)
    fitted <- fitted & rowSums(is.na(se)) == 0L
  } else if (loss$family != "quantile") {
    windows <- point_windows(local, queries)
    family <- family_of(loss$family)
    fixed_dispersion <- loss_row(loss$family)$scale == "fixed"
    for (i in which(fitted)) {
      win <- windows$rows[[i]]
      Xi <- X[win, , drop = FALSE]
      w <- windows$weights[[i]] * prior[win]
      se_i <- if (!is.null(loss$psi)) {
        rlm_standard_errors(Xi, y[win] - drop(Xi %*% coef[i, ]), w, loss)
      } else {
        glm_standard_errors(Xi, y[win], w, coef[i, ], family, fixed_dispersion)
      }
      if (is.null(se_i)) fitted[i] <- FALSE else se[i, ] <- se_i
    }
  }
  coef[!fitted, ] <- NA_real_
  dimnames(coef) <- dimnames(se) <- list(NULL, colnames(X))
  list(coef = coef, se = se, fitted = fitted, sizes = sizes[c("size", "wsum")])
}

# Standard errors of the coefficients unit %*% b from the inverse information `inverse`
# (m x p x p) of the engine's fits b: sqrt(u_j' V u_j) for the rows u_j of unit. m x p.
design_standard_errors <- function(inverse, unit) {
  p <- nrow(unit)
  m <- dim(inverse)[1L]
  matrix(vapply(seq_len(p), function(j) {
    v <- 0
    for (a in seq_len(p)) for (b in seq_len(p)) {
      if (unit[j, a] != 0 && unit[j, b] != 0) v <- v + unit[j, a] * unit[j, b] * inverse[, a, b]
    }
    sqrt(pmax(v, 0))
  }, numeric(m)), m, p)
}

# Standard errors of a local glm() fit `coef` as its vcov() computes them: from the working
# weights at the fit of the window's design X, responses y and weights w (kernel times prior),
# the dispersion 1 or the Pearson estimate; NULL when the information is nearly singular.
glm_standard_errors <- function(X, y, w, coef, family, fixed_dispersion) {
  eta <- drop(X %*% coef)
  mu <- family$linkinv(eta)
  working <- w * family$mu.eta(eta)^2 / family$variance(mu)
  info <- crossprod(X * working, X)
  if (rcond(info) < 1e-10) return(NULL)
  dispersion <- if (fixed_dispersion) 1 else {
    sum((w * (y - mu)^2 / family$variance(mu))[w > 0]) / (sum(w > 0) - ncol(X))
  }
  sqrt(pmax(diag(solve(info)) * dispersion, 0))
}

# ---- Local fits ------------------------------------------------------------------------------

# Runs `task(fit, i)` on the model refitted in every window i, sequentially or on the user's
# future plan (the same fits either way): a list per window with the task's `value`, or `error`
# (the fit or task failed) and `warning` (the first warning of the fit). Warnings that kernel
# weights cause by design are muffled.
fit_windows <- function(recipe, windows, task, verbose) {
  m <- length(windows$rows)
  one <- function(i) fit_window(recipe, windows$rows[[i]], windows$weights[[i]], task, i)
  if (future_plan_active()) {
    if (verbose) cli::cli_progress_step("Fitting {m} local model{?s} on the future plan")
    chunks <- split(seq_len(m), ceiling(seq_len(m) / max(1, ceiling(m / 64))))
    parts <- future.apply::future_lapply(chunks, function(idx) lapply(idx, one),
                                         future.seed = NULL)
    return(unlist(parts, recursive = FALSE, use.names = FALSE))
  }
  if (verbose) cli::cli_progress_bar("local fits", total = m)
  out <- vector("list", m)
  for (i in seq_len(m)) {
    out[[i]] <- one(i)
    if (verbose) cli::cli_progress_update()
  }
  if (verbose) cli::cli_progress_done()
  out
}

# Warnings that kernel weights (not counts) raise in models whose weights count trials.
expected_warning <- function(message) {
  grepl("non-integer #successes|non-integer x = ", message)
}

fit_window <- function(recipe, rows, weights, task, i) {
  first_warning <- NULL
  result <- tryCatch(withCallingHandlers({
    fit <- refit(recipe, rows, weights)
    list(value = task(fit, i))
  }, warning = function(w) {
    if (!expected_warning(conditionMessage(w)) && is.null(first_warning)) {
      first_warning <<- conditionMessage(w)
    }
    invokeRestart("muffleWarning")
  }), error = function(e) list(error = conditionMessage(e)))
  result$warning <- first_warning
  result
}

# The model refitted on `rows` of the data with the kernel `weights` (times its own).
refit <- function(recipe, rows, weights) {
  if (!length(rows)) stop("the kernel window holds no data", call. = FALSE)
  data <- recipe$data[rows, , drop = FALSE]
  data$.localize_weights <- weights * (recipe$prior[rows] %||% 1)
  # (the global environment: model functions may look up model.frame() and the like there)
  env <- new.env(parent = globalenv())
  env$.localize_fun <- recipe$fun
  env$.localize_data <- data
  args <- list(data = quote(.localize_data), weights = quote(.localize_weights))
  if (!is.null(recipe$offset)) {
    data$.localize_offset <- recipe$offset[rows]
    env$.localize_data <- data
    args$offset <- quote(.localize_offset)
  }
  # every other argument by a name bound in env, so that the call stays short, but single
  # strings, numbers and flags as they are (summaries such as MASS's read them from the call)
  given <- recipe$args
  symbols <- lapply(seq_along(given), function(j) {
    if (is.atomic(given[[j]]) && length(given[[j]]) == 1L && is.null(attributes(given[[j]]))) {
      return(given[[j]])
    }
    name <- paste0(".localize_arg", j)
    assign(name, given[[j]], envir = env)
    as.name(name)
  })
  names(symbols) <- names(given)
  eval(as.call(c(list(as.name(".localize_fun")), symbols, args)), env)
}

# The coefficients of a local fit and their standard errors from vcov() (NA without one).
local_estimates <- function(fit, i) {
  coef <- stats::coef(fit)
  if (is.matrix(coef)) {
    coef <- stats::setNames(as.vector(coef),
                            outer(rownames(coef), colnames(coef), paste, sep = ":"))
  }
  v <- tryCatch(stats::vcov(fit), error = function(e) NULL)
  se <- rep(NA_real_, length(coef))
  if (is.matrix(v) && nrow(v) == length(coef)) se <- sqrt(pmax(diag(v), 0))
  if (is.matrix(v) && !is.null(rownames(v)) && all(names(coef) %in% rownames(v))) {
    se <- sqrt(pmax(diag(v)[names(coef)], 0))
  }
  list(coef = coef, se = unname(se))
}

# Coefficient and standard error matrices (points x coefficients) from local_estimates() values,
# matched by name; NA where a fit failed or lacks a coefficient.
estimate_matrices <- function(fits) {
  values <- lapply(fits, `[[`, "value")
  terms <- unique(unlist(lapply(values, function(v) names(v$coef))))
  m <- length(fits)
  coef <- se <- matrix(NA_real_, m, length(terms), dimnames = list(NULL, terms))
  for (i in seq_len(m)) {
    v <- values[[i]]
    if (is.null(v)) next
    coef[i, names(v$coef)] <- v$coef
    se[i, names(v$coef)] <- v$se
  }
  list(coef = coef, se = se)
}

# One warning for the points whose local fit failed or warned, with the first message of each.
warn_local_failures <- function(fits, what) {
  errors <- Filter(Negate(is.null), lapply(fits, `[[`, "error"))
  warnings <- Filter(Negate(is.null), lapply(fits, `[[`, "warning"))
  if (!length(errors) && !length(warnings)) return(invisible())
  nf <- length(errors)
  nw <- length(warnings)
  warn(c(if (nf) "The local fit failed at {nf} {what}{cli::qty(nf)}{?s}, which {?is/are} NA.",
         if (nw) "The local fit warned at {nw} {what}{cli::qty(nw)}{?s}.",
         i = if (nf) "First error: {errors[[1]]}",
         i = if (nw) "First warning: {warnings[[1]]}",
         i = if (nf) "Increase the bandwidth so that each window holds enough rows."),
       class = "localmean_localize_warning")
}

# ---- Methods -----------------------------------------------------------------------------------

#' @rdname localize
#' @param x,object A `local_refits` fit.
#' @param digits Significant digits to print (default: the package's, see
#'   [localmean-package]).
#' @export
print.local_refits <- function(x, ..., digits = NULL) {
  check_dots(...)
  digits <- check_digits(digits)
  m <- nrow(x$coefficients)
  print_fields(sprintf("<local_refits> %s, over %s", deparse_short(x$model_call),
                       paste(x$over, collapse = ", ")),
               list(Kernel = as.character(x$kernel), Bandwidth = localized_bandwidth(x),
                    Points = m, Observations = x$nobs,
                    `Failed fits` = if (any(x$failed)) sum(x$failed)))
  cat("\nLocal coefficients", if (m > 6L) " (first 6 points)", ":\n", sep = "")
  shown <- cbind(x$at, signif(x$coefficients, digits))[seq_len(min(m, 6L)), , drop = FALSE]
  print_trimmed(shown, row.names = FALSE)
  invisible(x)
}

localized_bandwidth <- function(x) sprintf("%s (%s)", x$bandwidth_label, x$bandwidth_method)

#' @rdname localize
#' @export
summary.local_refits <- function(object, ..., digits = NULL) {
  check_dots(...)
  digits <- check_digits(digits)
  coef <- object$coefficients
  global <- object$global[colnames(coef)]
  quant <- function(v, p) if (all(is.na(v))) NA_real_ else stats::quantile(v, p, na.rm = TRUE,
                                                                           names = FALSE)
  table <- data.frame(term = colnames(coef), global = unname(global),
                      min = apply(coef, 2L, quant, 0), median = apply(coef, 2L, quant, 0.5),
                      max = apply(coef, 2L, quant, 1),
                      median.se = apply(object$std.error, 2L, quant, 0.5))
  structure(list(fit = object, coefficients = table, window = summary(object$n_window),
                 digits = digits), class = "summary.local_refits")
}

#' @export
print.summary.local_refits <- function(x, ..., digits = x$digits) {
  check_dots(...)
  digits <- check_digits(digits)
  fit <- x$fit
  print_fields(sprintf("<local_refits> %s, over %s", deparse_short(fit$model_call),
                       paste(fit$over, collapse = ", ")),
               list(Kernel = as.character(fit$kernel), Bandwidth = localized_bandwidth(fit),
                    Points = nrow(fit$coefficients), Observations = fit$nobs,
                    `Rows per window` = sprintf("%s to %s (median %s)", min(fit$n_window),
                                                max(fit$n_window), stats::median(fit$n_window)),
                    `Failed fits` = sum(fit$failed)))
  cat("\nLocal coefficients over the points (global: the model's own fit; median.se: the",
      "median\nstandard error of the local fits, conditional on the bandwidth):\n")
  tab <- x$coefficients
  tab[-1L] <- lapply(tab[-1L], signif, digits)
  print_trimmed(tab, row.names = FALSE)
  invisible(x)
}

#' @rdname localize
#' @export
coef.local_refits <- function(object, ...) {
  check_dots(...)
  object$coefficients
}

#' @rdname localize
#' @export
nobs.local_refits <- function(object, ...) {
  check_dots(...)
  object$nobs
}

#' @rdname localize
#' @param newdata A data frame of new rows holding the model's variables and those of `over`;
#'   by default the model's data.
#' @param type Passed to the model's `predict()` method (e.g. `"response"` for a [stats::glm()]);
#'   `NULL`: its default.
#' @param interpolate Predict from the local coefficients at the points `at`, interpolated
#'   linearly between neighbouring points, instead of refitting the model at every row.
#' @details `predict()` localizes the model at each row of `newdata` (the kernel centred on the
#'   row's localization variables) and predicts that row with the local fit: one refit per row.
#'   Rows whose fit fails predict `NA`. With `interpolate = TRUE` no model is refitted: each
#'   coefficient is interpolated linearly in the localization variable between the two points
#'   of `at` around the row, and the row is predicted by its linear predictor \eqn{x^T
#'   \beta(z)}{x' beta(z)} (through the inverse link of the model's family for `type =
#'   "response"`). This is defined for one numeric localization variable, rows within the range
#'   of `at`, and models whose coefficients multiply the columns of their model matrix (lm,
#'   glm, rlm, rq; not multinom or polr); elsewhere it is an error. Next to a fitted point with
#'   `NA` coefficients the prediction is `NA`.
#' @export
predict.local_refits <- function(object, newdata = NULL, type = NULL, interpolate = FALSE, ...) {
  check_dots(...)
  recipe <- object$recipe
  newdata <- if (is.null(newdata)) recipe$data else as.data.frame(newdata)
  if (check_flag(interpolate)) return(interpolated_prediction(object, newdata, type))
  over <- newdata[intersect(object$over, names(newdata))]
  # rows missing a localization variable predict NA (a missing column is an error below)
  ok <- if (ncol(over)) stats::complete.cases(over) else rep(TRUE, nrow(newdata))
  if (!any(ok)) return(rep(NA_real_, nrow(newdata)))
  at <- localization_points(over[ok, , drop = FALSE], object$local, recipe$data, arg = "newdata")
  windows <- point_windows(object$local, point_queries(object$local, at, arg = "newdata"))
  complete <- newdata[ok, , drop = FALSE]
  predict_row <- function(fit, i) {
    row <- complete[i, , drop = FALSE]
    value <- if (is.null(type)) stats::predict(fit, newdata = row) else
      stats::predict(fit, newdata = row, type = type)
    as.vector(value)[1L]
  }
  fits <- fit_windows(recipe, windows, predict_row, verbose = FALSE)
  warn_local_failures(fits, "row")
  expand_rows(vapply(fits, function(f) f$value %||% NA_real_, 0), ok)
}

# Predictions of `newdata` from the local coefficients interpolated linearly between the
# points `at` (predict(interpolate = TRUE)).
interpolated_prediction <- function(object, newdata, type, call = rlang::caller_env()) {
  var <- object$over
  z_at <- object$at[[var[1L]]]
  if (length(var) != 1L || !is.numeric(z_at)) {
    abort("{.arg interpolate} needs one numeric localization variable; {.fn localize} was
           over {.field {var}}.", call = call)
  }
  if (!is.null(type) && !type %in% c("link", "response")) {
    abort("{.arg interpolate} predicts {.arg type} {.val link} or {.val response}.",
          call = call)
  }
  model <- object$linear_model
  coef <- object$coefficients
  not_linear <- function() {
    abort(c("{.arg interpolate} needs a model whose coefficients multiply the columns of its
             model matrix.",
            i = "Predict without {.arg interpolate}: the model is refitted at every row."),
          call = call)
  }
  if (is.null(model$columns) || !is.null(object$recipe$offset) ||
      !setequal(colnames(coef), model$columns)) {
    not_linear()
  }
  if (!var %in% names(newdata)) abort("{.arg newdata} lacks {.field {var}}.", call = call)
  z <- newdata[[var]]
  o <- order(z_at)
  z_at <- z_at[o]
  if (length(unique(z_at)) < 2L) {
    abort("{.arg interpolate} needs at least two distinct points {.arg at}.", call = call)
  }
  outside <- !is.na(z) & (z < z_at[1L] | z > z_at[length(z_at)])
  if (any(outside)) {
    abort(c("{.arg newdata} has {sum(outside)} row{?s} with {.field {var}} outside the points
             {.arg at} ({z_at[1L]} to {z_at[length(z_at)]}), where interpolation is not
             defined.", i = "Predict them without {.arg interpolate}."), call = call)
  }
  # the interval of each row and its share t of the way from the lower point to the upper one
  j <- findInterval(z, z_at, rightmost.closed = TRUE, all.inside = TRUE)
  gap <- z_at[j + 1L] - z_at[j]
  t <- ifelse(gap > 0, (z - z_at[j]) / gap, 0)
  B <- coef[o, model$columns, drop = FALSE]
  beta <- (1 - t) * B[j, , drop = FALSE] + t * B[j + 1L, , drop = FALSE]
  mf <- stats::model.frame(model$terms, newdata, xlev = model$xlevels,
                           na.action = stats::na.pass)
  X <- stats::model.matrix(model$terms, mf, contrasts.arg = model$contrasts)
  if (!setequal(colnames(X), model$columns)) not_linear()
  eta <- rowSums(X[, model$columns, drop = FALSE] * beta)
  offset <- stats::model.offset(mf)
  if (!is.null(offset)) eta <- eta + offset
  if (identical(type, "response") && !is.null(model$family)) eta <- model$family$linkinv(eta)
  unname(eta)
}

# What interpolated predictions need of the model: its terms without the response, factor
# levels, contrasts, the columns of its model matrix and its family (NULL where it has none).
linear_model_parts <- function(model) {
  terms <- tryCatch(stats::delete.response(stats::terms(model)), error = function(e) NULL)
  if (is.null(terms)) return(NULL)
  xlevels <- model$xlevels %||% tryCatch(stats::.getXlevels(terms, stats::model.frame(model)),
                                         error = function(e) NULL)
  coef <- stats::coef(model)
  columns <- if (is.numeric(coef) && is.null(dim(coef))) names(coef)
  list(terms = terms, xlevels = xlevels, contrasts = model$contrasts, columns = columns,
       family = tryCatch(stats::family(model), error = function(e) NULL))
}

#' @rdname localize
#' @param which The coefficients to plot (names or indices); default all.
#' @param bands Draw pointwise bands of two standard errors where they exist.
#' @details `plot()` draws each coefficient against the first localization variable, one panel
#'   per coefficient, with the global model's coefficient as a dashed line; with several
#'   localization variables, one curve per combination of the others' values at the points.
#' @export
plot.local_refits <- function(x, which = NULL, bands = TRUE, ...) {
  check_graphics_dots(...)
  check_flag(bands)
  coef <- x$coefficients
  which <- which %||% seq_len(ncol(coef))
  if (is.character(which)) which <- match(which, colnames(coef))
  if (anyNA(which) || any(which < 1 | which > ncol(coef))) {
    abort("{.arg which} must name coefficients: {.val {colnames(coef)}}.")
  }
  var <- x$over[1L]
  z <- x$at[[var]]
  numeric_z <- is.numeric(z)
  zx <- if (numeric_z) z else as.integer(factor(z))
  others <- setdiff(x$over, var)
  group <- if (length(others)) interaction(x$at[others], drop = TRUE, lex.order = TRUE) else
    factor(rep("all", length(z)))
  cols <- if (nlevels(group) > 1L) group_colours(nlevels(group)) else "black"
  k <- length(which)
  old <- graphics::par(mfrow = if (k <= 3L) c(1L, k) else grDevices::n2mfrow(k))
  on.exit(graphics::par(old))
  for (j in which) {
    term <- colnames(coef)[j]
    est <- coef[, j]
    lo <- est - 2 * x$std.error[, j]
    hi <- est + 2 * x$std.error[, j]
    has_band <- bands && any(is.finite(lo))
    ylim <- range(c(est, if (has_band) c(lo, hi), x$global[term]), finite = TRUE)
    if (!all(is.finite(ylim))) ylim <- c(0, 1)
    xlim <- range(zx) + if (numeric_z) 0 else c(-0.5, 0.5)
    graphics::plot(xlim, ylim, type = "n", xlab = var, ylab = term,
                   xaxt = if (numeric_z) "s" else "n", ...)
    if (!numeric_z) graphics::axis(1, at = unique(zx), labels = as.character(unique(z)))
    for (g in seq_len(nlevels(group))) {
      idx <- which(group == levels(group)[g])
      idx <- idx[order(zx[idx])]
      band <- idx[is.finite(lo[idx]) & is.finite(hi[idx])]
      if (has_band && numeric_z && length(band) > 1L) {
        graphics::polygon(c(zx[band], rev(zx[band])), c(lo[band], rev(hi[band])), border = NA,
                          col = grDevices::adjustcolor(cols[g], alpha.f = 0.2))
      } else if (has_band) {
        graphics::segments(zx[band], lo[band], zx[band], hi[band], col = cols[g])
      }
      if (numeric_z) graphics::lines(zx[idx], est[idx], lwd = 2, col = cols[g]) else
        graphics::points(zx[idx], est[idx], pch = 19, col = cols[g])
    }
    graphics::abline(h = x$global[term], lty = 2, col = "grey40")
    if (nlevels(group) > 1L) {
      graphics::legend(emptiest_corner(zx, est), legend = levels(group), col = cols, lwd = 2,
                       title = paste(others, collapse = "."), bty = "n", cex = 0.8)
    }
  }
  invisible(x)
}

#' @rdname localize
#' @details `autoplot()` (with ggplot2 installed) draws the same panels as `plot()` with
#'   ggplot2: one facet per coefficient, from `tidy()`.
#' @exportS3Method ggplot2::autoplot
autoplot.local_refits <- function(object, which = NULL, bands = TRUE, ...) {
  check_dots(...)
  check_ggplot2()
  check_flag(bands)
  terms <- colnames(object$coefficients)
  which <- which %||% terms
  if (is.numeric(which)) which <- terms[which]
  if (anyNA(which) || !all(which %in% terms)) {
    abort("{.arg which} must name coefficients: {.val {terms}}.")
  }
  td <- tidy(object)
  td <- td[td$term %in% which, , drop = FALSE]
  td$term <- factor(td$term, levels = which)
  var <- object$over[1L]
  others <- setdiff(object$over, var)
  td$.x <- td[[var]]
  td$.group <- if (length(others)) interaction(td[others], drop = TRUE) else factor("all")
  global <- data.frame(term = factor(which, levels = which), value = object$global[which])
  aes_line <- if (length(others)) {
    ggplot2::aes(x = .data$.x, y = .data$estimate, colour = .data$.group, group = .data$.group)
  } else {
    ggplot2::aes(x = .data$.x, y = .data$estimate)
  }
  p <- ggplot2::ggplot(td, aes_line)
  if (bands && any(is.finite(td$std.error))) {
    p <- p + ggplot2::geom_ribbon(ggplot2::aes(ymin = .data$estimate - 2 * .data$std.error,
                                               ymax = .data$estimate + 2 * .data$std.error),
                                  alpha = 0.2, colour = NA)
  }
  p <- p + if (is.numeric(td$.x)) ggplot2::geom_line(linewidth = 1) else ggplot2::geom_point()
  p + ggplot2::geom_hline(data = global, ggplot2::aes(yintercept = .data$value),
                          linetype = 2, colour = "grey40") +
    ggplot2::facet_wrap(~term, scales = "free_y") +
    ggplot2::labs(x = var, y = "local coefficient",
                  colour = if (length(others)) paste(others, collapse = "."))
}

#' @rdname localize
#' @export
tidy.local_refits <- function(x, ...) {
  check_dots(...)
  coef <- x$coefficients
  m <- nrow(coef)
  p <- ncol(coef)
  at <- x$at[rep(seq_len(m), times = p), , drop = FALSE]
  as_tidy_frame(cbind(at, term = rep(colnames(coef), each = m), estimate = as.vector(coef),
                      std.error = as.vector(x$std.error)))
}

# The points with their local coefficients, one row per point.
#' @rdname localmean-tidiers
#' @export
as.data.frame.local_refits <- function(x, row.names = NULL, optional = FALSE, ...) {
  check_dots(..., .known = "stringsAsFactors")
  cbind(x$at, as.data.frame(x$coefficients, optional = TRUE))
}

#' @rdname localmean-as-matrix
#' @export
as.matrix.local_refits <- function(x, ...) numeric_frame(x, ...)

#' @rdname localize
#' @export
glance.local_refits <- function(x, ...) {
  check_dots(...)
  glance_row(nobs = x$nobs, points = nrow(x$coefficients), failed = sum(x$failed),
             kernel = as.character(x$kernel), bandwidth = x$bandwidth_label,
             median_window = stats::median(x$n_window))
}
