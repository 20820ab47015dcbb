# Predictors of the local models: numeric columns, which the kernel of the registry localizes
# and the local polynomial spans, and categorical columns (factors, ordered factors, character
# and logical), which enter through the generalized product kernel with discrete kernels
# (Aitchison-Aitken for unordered levels, Li-Racine for ordered ones; see kernels.hpp).

# The predictors of a model frame as a data frame of plain columns: transformations such as
# I(x^2) lose their class and matrix terms such as poly(x, 2) become one column each.
formula_parts <- function(mf, call = rlang::caller_env()) {
  tt <- attr(mf, "terms")
  if (nrow(mf) == 0L) abort("{.arg data} has no complete rows.", call = call)
  if (any(attr(tt, "order") > 1L)) {
    abort("Interaction terms are not supported in {.arg formula}; the kernel already
           localizes in all predictors jointly.", call = call)
  }
  labels <- attr(tt, "term.labels")
  if (length(labels) == 0L) abort("{.arg formula} has no predictors.", call = call)
  list(x = plain_columns(unclass(mf)[labels], nrow(mf), call))
}

# The columns `frame` (a list of a model frame's columns, n rows) as a data frame.
plain_columns <- function(frame, n, call) {
  cols <- lapply(names(frame), function(name) {
    col <- frame[[name]]
    if (inherits(col, "AsIs")) col <- unclass(col)
    if (is.matrix(col)) {
      if (!is.numeric(col)) abort("Predictor {.field {name}} is a non-numeric matrix.", call = call)
      suffix <- colnames(col) %||% seq_len(ncol(col))
      return(stats::setNames(as.data.frame(unclass(col)), paste0(name, suffix)))
    }
    stats::setNames(list(col), name)
  })
  out <- do.call(c, cols)
  attr(out, "row.names") <- .set_row_names(n)
  class(out) <- "data.frame"
  out
}

is_categorical <- function(col) is.factor(col) || is.character(col) || is.logical(col)

# Splits predictors (a data frame, matrix or vector) into list(x = numeric matrix, categorical =
# NULL or list(codes = integer n x dc matrix of level codes, levels = list of level labels,
# ordered = logical), names = every predictor's name in the given order, kind = "numeric",
# "unordered" or "ordered" per predictor, and for numeric predictors alone range = their
# column ranges).
split_predictors <- function(x, arg = rlang::caller_arg(x), call = rlang::caller_env()) {
  if (inherits(x, "local_predictors")) return(unclass(x))  # split already (plain_model_parts())
  if (!is.data.frame(x) && !is_categorical(x)) {
    # `arg` stays lazy (naming a long argument costs a millisecond): only an error needs it
    checked <- checked_predictors(x, arg, call)
    return(list(x = checked$x, categorical = NULL, names = colnames(checked$x),
                kind = rep("numeric", ncol(checked$x)), range = checked$range))
  }
  if (!is.data.frame(x)) {
    force(arg)  # before `x` changes
    x <- stats::setNames(data.frame(x, stringsAsFactors = FALSE), "x")
  }
  if (ncol(x) == 0L) abort("{.arg {arg}} has no columns.", call = call)
  if (nrow(x) == 0L) abort("{.arg {arg}} has no rows.", call = call)
  cat <- vapply(unclass(x), is_categorical, TRUE)
  if (!any(cat)) {
    checked <- checked_predictors(x, arg, call)
    return(list(x = checked$x, categorical = NULL, names = names(x),
                kind = rep("numeric", ncol(x)), range = checked$range))
  }
  num <- if (any(!cat)) check_predictors(x[!cat], arg = arg, call = call) else
    matrix(numeric(0), nrow(x), 0L)
  categorical <- categorical_columns(x[cat], arg, call)
  kind <- ifelse(cat, "unordered", "numeric")
  kind[cat][categorical$ordered] <- "ordered"
  list(x = num, categorical = categorical, names = names(x), kind = unname(kind))
}

categorical_columns <- function(frame, arg, call) {
  missing <- names(frame)[vapply(frame, anyNA, TRUE)]
  if (length(missing)) {
    abort("{.arg {arg}} has missing values in column{?s} {.field {missing}}.", call = call)
  }
  factors <- lapply(frame, function(col) droplevels(if (is.factor(col)) col else factor(col)))
  levels <- lapply(factors, levels)
  constant <- names(frame)[lengths(levels) < 2L]
  if (length(constant)) abort("Predictor{?s} {.field {constant}} {?is/are} constant.", call = call)
  codes <- vapply(factors, as.integer, integer(nrow(frame)))
  codes <- matrix(codes, nrow = nrow(frame), dimnames = list(NULL, names(frame)))
  list(codes = codes, levels = levels, ordered = unname(vapply(factors, is.ordered, TRUE)))
}

# Level codes of new categorical columns in the model's levels; unseen levels are refused.
categorical_codes <- function(categorical, frame, arg = "newdata", call = rlang::caller_env()) {
  vars <- colnames(categorical$codes)
  codes <- vapply(seq_along(vars), function(j) {
    col <- frame[[vars[j]]]
    value <- as.character(col)
    code <- match(value, categorical$levels[[j]])
    unseen <- unique(value[is.na(code) & !is.na(value)])
    if (length(unseen)) {
      abort(c("{.arg {arg}} has level{?s} {.val {unseen}} of {.field {vars[j]}} that the model
               has not seen.", i = "Known levels: {.val {categorical$levels[[j]]}}."),
            call = call)
    }
    code
  }, integer(length(frame[[vars[1L]]])))
  matrix(codes, ncol = length(vars), dimnames = list(NULL, vars))
}

# Splits a bandwidth vector given per predictor (in the predictors' order or by name) into the
# numeric bandwidths h and the categorical lambdas, checking each against its range.
split_bandwidth <- function(bandwidth, predictors, call = rlang::caller_env()) {
  names_all <- predictors$names
  kind <- predictors$kind
  numeric_only <- all(kind == "numeric")
  if (numeric_only && length(bandwidth) == 1L) bandwidth <- rep(bandwidth, length(kind))
  if (length(bandwidth) != length(kind)) {
    abort(c("{.arg bandwidth} needs one value per predictor ({length(kind)}), in the order
             {.field {names_all}}{if (!numeric_only) ': h for numeric, lambda for categorical ones'}.",
            x = "Got {length(bandwidth)} value{?s}."), call = call)
  }
  if (!is.null(names(bandwidth)) && all(nzchar(names(bandwidth)))) {
    unknown <- setdiff(names(bandwidth), names_all)
    if (length(unknown) || anyDuplicated(names(bandwidth))) {
      abort("{.arg bandwidth} names must be the predictors {.field {names_all}}.", call = call)
    }
    bandwidth <- bandwidth[names_all]
  }
  bandwidth <- unname(as.double(bandwidth))
  h <- bandwidth[kind == "numeric"]
  if (any(!is.finite(h)) || any(h <= 0)) {
    abort(c("{.arg bandwidth} must be positive and finite for numeric predictors.",
            x = "Got {.val {h}}."), call = call)
  }
  lambda <- bandwidth[kind != "numeric"]
  upper <- lambda_upper(predictors$categorical)
  bad <- !is.finite(lambda) | lambda < 0 | lambda > upper + 1e-12
  if (any(bad)) {
    vars <- names_all[kind != "numeric"][bad]
    abort(c("{.arg bandwidth} of categorical predictor{?s} {.field {vars}} must lie in [0, upper]:
             (c - 1) / c for c unordered levels, 1 for ordered ones.",
            x = "Got {.val {lambda[bad]}}."), call = call)
  }
  list(h = h, lambda = if (length(lambda)) pmin(lambda, upper) else lambda)
}

# The largest useful lambda of each categorical predictor: (c - 1) / c for c unordered levels
# (all levels weigh the same), 1 for ordered ones.
lambda_upper <- function(categorical) {
  if (is.null(categorical)) return(numeric(0))
  c <- lengths(categorical$levels)
  ifelse(categorical$ordered, 1, (c - 1) / c)
}

# Bandwidths of all predictors in their order: h for numeric ones, lambda for the others (NULL
# for nn() bandwidths).
join_bandwidth <- function(h, lambda, predictors) {
  if (is.null(h) && is.null(lambda)) return(NULL)
  out <- numeric(length(predictors$kind))
  out[predictors$kind == "numeric"] <- h %||% numeric(0)
  out[predictors$kind != "numeric"] <- lambda %||% numeric(0)
  out
}

# The weight of a data point in its own window relative to its prior weight: the kernel is 1 at
# distance 0, and a point's own levels weigh 1 - lambda (unordered, Wang-van Ryzin) or 1
# (Li-Racine).
self_weight <- function(spec) {
  w <- spec$prior %||% 1
  cat <- spec$categorical
  if (is.null(cat)) return(w)
  w * prod(ifelse(cat$ordered & !isTRUE(cat$wang_van_ryzin), 1, 1 - cat$lambda))
}

# Predictors of new data with the model's columns in the model's order: list(x = numeric
# matrix, codes = level codes or NULL, ok = the rows without missing predictors, which alone x
# and codes hold; predictions are NA in the others, as predict.lm's).
new_predictors <- function(object, newdata, arg = "newdata", call = rlang::caller_env()) {
  vars <- object$predictors$names %||% colnames(object$x)
  if (is.null(object$terms)) {
    nd <- newdata
    if (is.data.frame(nd) || is.matrix(nd)) {
      if (!is.null(colnames(nd)) && all(vars %in% colnames(nd))) nd <- nd[, vars, drop = FALSE]
    }
  } else {
    if (!is.data.frame(newdata)) newdata <- as.data.frame(newdata)
    plain <- plain_variables(object$terms, newdata)
    if (is.null(object$categorical) && !is.null(plain)) {
      queries <- plain_queries(plain, colnames(object$x))
      if (!is.null(queries)) return(queries)
    }
    nd <- if (!is.null(plain)) {
      structure(plain, row.names = .set_row_names(length(plain[[1L]])), class = "data.frame")
    } else {
      tt <- stats::delete.response(object$terms)
      missing <- setdiff(all.vars(tt), names(newdata))
      if (length(missing)) {
        abort("{.arg {arg}} lacks the predictor{?s} {.field {missing}}.", call = call)
      }
      mf <- stats::model.frame(tt, newdata, na.action = stats::na.pass)
      plain_columns(unclass(mf)[attr(tt, "term.labels")], nrow(mf), call)
    }
  }
  if (is.null(object$categorical)) {
    ok <- rep(TRUE, NROW(nd))
    if (is.data.frame(nd) || is.matrix(nd) || is.numeric(nd)) {
      ok <- stats::complete.cases(nd)
      if (!all(ok)) nd <- if (is.null(dim(nd))) nd[ok] else nd[ok, , drop = FALSE]
    }
    x <- check_predictors(nd, arg = arg, call = call)
    if (ncol(x) != ncol(object$x)) {
      abort("{.arg {arg}} has {ncol(x)} predictor{?s}; the model has {ncol(object$x)}.",
            call = call)
    }
    colnames(x) <- colnames(object$x)
    return(list(x = x, codes = NULL, ok = ok))
  }
  if (!is.data.frame(nd)) abort("{.arg {arg}} must be a data frame.", call = call)
  missing <- setdiff(vars, names(nd))
  if (length(missing)) {
    abort("{.arg {arg}} lacks the predictor{?s} {.field {missing}}.", call = call)
  }
  ok <- stats::complete.cases(nd[vars])
  nd <- nd[ok, vars, drop = FALSE]
  numeric_vars <- colnames(object$x)
  x <- if (length(numeric_vars)) {
    check_predictors(nd[numeric_vars], arg = arg, call = call)
  } else {
    matrix(numeric(0), nrow(nd), 0L)
  }
  list(x = x, codes = categorical_codes(object$categorical, nd, arg = arg, call = call), ok = ok)
}

# The parts of a formula method's model frame, list(x = the predictors (formula_parts() gives
# them as a data frame, this as the numeric matrix split_predictors() makes of it), y = the
# response, weights = NULL, terms (with the model frame's predvars and dataClasses),
# na.action = NULL), taken straight from `data` for the common plain case: no subset, weights or
# na.action in the `call`, `data` a data frame, and a formula `y ~ x1 + x2` (or `y ~ .`) whose
# response and terms are its columns, each a plain numeric vector (no attributes) without missing
# values. model.frame() would return these columns unchanged and drop no row, and costs more
# than the rest of a small fit. NULL otherwise: the caller builds the model frame.
plain_model_parts <- function(call, formula, data) {
  if (!is.data.frame(data) || !inherits(formula, "formula") || length(formula) != 3L ||
      any(c("subset", "weights", "na.action") %in% names(call))) {
    return(NULL)
  }
  plan <- plain_formula(formula, names(data))
  if (is.null(plan)) return(NULL)
  tt <- plan$terms
  labels <- plan$labels
  cols <- unclass(data)[plan$vars]
  for (col in cols) {
    if (!is.numeric(col) || !is.null(attributes(col)) || anyNA(col)) return(NULL)
  }
  n <- length(cols[[1L]])
  if (n == 0L) return(NULL)
  # the predictors as split_predictors() makes them of their data frame (with non-finite
  # values, the matrix, for its error)
  x <- matrix(as.double(unlist(cols[-1L], use.names = FALSE)), n, length(labels),
              dimnames = list(NULL, labels))
  ranges <- cpp_column_ranges(x)
  if (all(ranges$finite)) {
    x <- list(x = x, categorical = NULL, names = labels, kind = rep("numeric", length(labels)),
              range = ranges$range)
    class(x) <- "local_predictors"
  }
  list(x = x, y = cols[[1L]], weights = NULL, terms = tt, na.action = NULL)
}

# What plain_model_parts() reads from a formula over data with columns `data_names`: the terms
# of the model frame (with its predvars and dataClasses, in the formula's environment), the
# response and predictor names `vars` and the term `labels`; NULL unless the formula is `y ~ x1 +
# x2` (or `y ~ .`) of distinct columns. Kept for the last formula and column names asked for
# (terms() costs as much as a small fit's engine call, and a fitting loop asks for the same).
plain_formula <- function(formula, data_names) {
  bare <- formula
  attr(bare, ".Environment") <- NULL
  last <- formula_cache$last
  if (is.null(last) || !identical(last$formula, bare) || !identical(last$data_names, data_names)) {
    last <- list(formula = bare, data_names = data_names,
                 plan = plain_formula_plan(formula, data_names))
    formula_cache$last <- last
  }
  plan <- last$plan
  if (!is.null(plan)) attr(plan$terms, ".Environment") <- environment(formula)
  plan
}
formula_cache <- new.env(parent = emptyenv())

plain_formula_plan <- function(formula, data_names) {
  # (terms() reads only the names of `data`, to expand a dot)
  frame <- structure(rep(list(logical(0)), length(data_names)), names = data_names,
                     row.names = integer(0), class = "data.frame")
  tt <- stats::terms(formula, data = frame)
  variables <- attr(tt, "variables")
  labels <- attr(tt, "term.labels")
  response <- variables[[2L]]
  if (attr(tt, "response") != 1L || !is.null(attr(tt, "offset")) || !length(labels) ||
      !is.name(response) || length(variables) != length(labels) + 2L) {
    return(NULL)
  }
  vars <- c(as.character(response), labels)
  # (a label that is a variable's name is that variable itself: any other term is a call)
  if (!all(labels %in% all.vars(variables)) || anyDuplicated(vars) ||
      sum(data_names %in% vars) != length(vars)) {
    return(NULL)
  }
  attr(tt, "predvars") <- variables
  attr(tt, "dataClasses") <- stats::setNames(rep("numeric", length(vars)), vars)
  # (the cache keeps no caller's environment alive: plain_formula() sets the formula's)
  attr(tt, ".Environment") <- emptyenv()
  list(terms = tt, vars = vars, labels = labels)
}

# The predictors of `terms` (a model's, the response aside) from `data` as plain_columns() gives
# them from the model frame (a list of the columns), when every term is a variable of `data` holding a plain numeric
# vector: then these are all the variables the predictors need, and the model frame would hold
# them unchanged (model.frame() costs more than the rest of a small prediction). NULL otherwise
# (transformations, factors, matrix columns, offsets, variables missing from `data`).
plain_variables <- function(terms, data) {
  labels <- attr(terms, "term.labels")
  # (a label that is a variable's name is that variable itself: any other term is a call)
  variables <- labels %in% all.vars(terms) & labels %in% names(data)
  if (!is.null(attr(terms, "offset")) || !all(variables)) return(NULL)
  cols <- unclass(data)[labels]
  for (col in cols) if (!is.numeric(col) || is.object(col) || !is.null(dim(col))) return(NULL)
  cols
}

# new_predictors() of the columns `plain` (from plain_variables(), named as the model's numeric
# predictors `vars`) when every value is finite: then no row is incomplete and no check can fail,
# and the queries' column ranges come with them (`range`, for warn_outside_range()). NULL
# otherwise (no rows, missing or infinite values), for the general path and its errors.
plain_queries <- function(plain, vars) {
  n <- length(plain[[1L]])
  if (n == 0L || length(plain) != length(vars)) return(NULL)
  x <- matrix(as.double(unlist(plain, use.names = FALSE)), n, length(plain),
              dimnames = list(NULL, vars))
  ranges <- cpp_column_ranges(x)
  if (!all(ranges$finite)) return(NULL)
  list(x = x, codes = NULL, ok = rep(TRUE, n), range = ranges$range)
}

# Values computed for the complete rows `ok` spread to all rows, NA elsewhere (vectors and
# matrices by row).
expand_rows <- function(value, ok) {
  if (all(ok) || is.null(value)) return(value)
  if (is.null(dim(value))) {
    out <- rep(value[1L][NA], length(ok))
    out[ok] <- value
    return(out)
  }
  out <- matrix(value[1L][NA], length(ok), ncol(value), dimnames = list(NULL, colnames(value)))
  out[ok, ] <- value
  out
}
