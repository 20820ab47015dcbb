# Errors, argument checks and thread counts shared by every family.

abort <- function(message, ..., call = rlang::caller_env()) {
  cli::cli_abort(message, ..., class = "localmean_error", call = call, .envir = parent.frame())
}

warn <- function(message, ...) {
  cli::cli_warn(message, ..., class = "localmean_warning", .envir = parent.frame())
}

# A criterion value for stats::optimize(), which warns when it meets NA or Inf: an unusable
# bandwidth scores worst.
finite_or_max <- function(value) if (is.finite(value)) value else .Machine$double.xmax

check_flag <- function(x, arg = rlang::caller_arg(x), call = rlang::caller_env()) {
  force(arg)
  if (!is.logical(x) || length(x) != 1L || is.na(x)) {
    abort("{.arg {arg}} must be TRUE or FALSE.", call = call)
  }
  invisible(x)
}

check_count <- function(x, arg = rlang::caller_arg(x), min = 1, call = rlang::caller_env()) {
  force(arg)
  if (!is.numeric(x) || length(x) != 1L || !is.finite(x) || x != round(x) || x < min) {
    abort("{.arg {arg}} must be a whole number of at least {min}.", call = call)
  }
  as.integer(x)
}

check_positive <- function(x, zero = FALSE, arg = rlang::caller_arg(x),
                           call = rlang::caller_env()) {
  force(arg)
  if (!is.numeric(x) || length(x) != 1L || !is.finite(x) || x < 0 || (!zero && x == 0)) {
    abort("{.arg {arg}} must be a {if (zero) 'non-negative' else 'positive'} number.",
          call = call)
  }
  as.double(x)
}

check_choice <- function(x, choices, arg = rlang::caller_arg(x), call = rlang::caller_env()) {
  force(arg)
  if (!is.character(x) || length(x) != 1L || !x %in% choices) {
    abort("{.arg {arg}} must be one of {.val {choices}}.", call = call)
  }
  x
}

# A numeric predictor matrix with finite entries and column names.
check_predictors <- function(x, arg = rlang::caller_arg(x), call = rlang::caller_env()) {
  force(arg)
  checked_predictors(x, arg, call)$x
}

# check_predictors() with the column ranges (2 x d) found on the way: list(x, range).
checked_predictors <- function(x, arg, call) {
  if (is.data.frame(x)) {
    bad <- names(x)[!vapply(x, function(col) is.numeric(col) && !is.object(col), TRUE)]
    if (length(bad)) {
      abort(c("{.arg {arg}} must have numeric columns only.",
              x = "Not numeric: {.field {bad}}.",
              i = "Factors and character columns are not supported as predictors;
                   recode them as numbers or fit one model per level."), call = call)
    }
    x <- as.matrix(x)
  }
  if (is.numeric(x) && is.null(dim(x))) x <- one_column(as.double(x))
  if (!is.matrix(x) || !is.numeric(x)) {
    abort("{.arg {arg}} must be a numeric vector, matrix or data frame.", call = call)
  }
  storage.mode(x) <- "double"
  if (nrow(x) == 0L) abort("{.arg {arg}} has no rows.", call = call)
  if (ncol(x) == 0L) abort("{.arg {arg}} has no columns.", call = call)
  if (is.null(colnames(x))) colnames(x) <- if (ncol(x) == 1L) "x" else paste0("x", seq_len(ncol(x)))
  ranges <- cpp_column_ranges(x)
  bad <- colnames(x)[!ranges$finite]
  if (length(bad)) {
    abort("{.arg {arg}} has missing or non-finite values in column{?s} {.field {bad}}.",
          call = call)
  }
  list(x = x, range = ranges$range)
}

# A vector as a one-column matrix without copying it: dim<- wraps a vector that is referenced
# elsewhere (the caller's data) instead of duplicating it, as long as C++ reads it read-only
# (see read_only() in src/engine.cpp).
one_column <- function(v) {
  dim(v) <- c(length(v), 1L)
  v
}

check_response <- function(y, n, arg = rlang::caller_arg(y), call = rlang::caller_env()) {
  force(arg)
  if (!is.numeric(y) || is.object(y)) abort("{.arg {arg}} must be a numeric vector.", call = call)
  y <- as.double(y)
  if (length(y) != n) {
    abort("{.arg {arg}} has length {length(y)} but the predictors have {n} rows.", call = call)
  }
  if (!cpp_all_finite(y)) abort("{.arg {arg}} has missing or non-finite values.", call = call)
  y
}

check_weights <- function(weights, n, arg = rlang::caller_arg(weights),
                          call = rlang::caller_env()) {
  force(arg)
  if (is.null(weights)) return(NULL)
  if (!is.numeric(weights) || length(weights) != n) {
    abort("{.arg {arg}} must be a numeric vector of length {n}.", call = call)
  }
  if (any(!is.finite(weights)) || any(weights < 0)) {
    abort("{.arg {arg}} must be finite and non-negative.", call = call)
  }
  if (!any(weights > 0)) abort("{.arg {arg}} are all zero.", call = call)
  as.double(weights)
}

#' Number of threads
#'
#' The number of threads a computation uses: the `n_threads` argument, else
#' the option `localmean.threads`, else the environment variable
#' `LOCALMEAN_THREADS`, else half the available cores. It is capped by
#' `OMP_THREAD_LIMIT` and at 2 under `R CMD check`. Results never depend on
#' it. The package never changes the thread settings of other packages.
#'
#' @param n_threads `NULL` or a whole number of threads.
#' @return A whole number of threads.
#' @export
#' @examples
#' n_threads()
#' n_threads(1)
n_threads <- function(n_threads = NULL) {
  if (is.null(n_threads)) n_threads <- getOption("localmean.threads")
  if (is.null(n_threads)) {
    env <- Sys.getenv("LOCALMEAN_THREADS")
    if (nzchar(env)) n_threads <- suppressWarnings(as.integer(env))
  }
  if (is.null(n_threads)) {
    n_threads <- max(1L, RcppParallel::defaultNumThreads() %/% 2L)
  }
  n_threads <- check_count(n_threads, "n_threads")
  limit <- suppressWarnings(as.integer(Sys.getenv("OMP_THREAD_LIMIT")))
  if (!is.na(limit) && limit > 0L) n_threads <- min(n_threads, limit)
  if (nzchar(Sys.getenv("_R_CHECK_LIMIT_CORES_"))) n_threads <- min(n_threads, 2L)
  n_threads
}

# Rejects whatever reached a function's `...` unused. `...` exists so that methods share their
# generic's signature and later arguments must be named, never to swallow a misspelt argument:
# call check_dots(...) first thing. `.known` names arguments that `...` may carry (those a
# method forwards, or that base R passes, as data.frame() passes `stringsAsFactors`). The hint
# compares each unknown name with the calling function's own arguments and `.known`.
check_dots <- function(..., .known = NULL, .call = rlang::caller_env()) {
  if (...length() == 0L) return(invisible())
  given <- ...names() %||% character(...length())
  given[is.na(given)] <- ""
  unknown <- unique(setdiff(given[nzchar(given)], .known))
  unnamed <- sum(!nzchar(given))
  if (!length(unknown) && !unnamed) return(invisible())
  candidates <- setdiff(c(names(formals(sys.function(sys.parent()))), .known), "...")
  hints <- vapply(unknown, closest_name, "", candidates = candidates)
  close <- nzchar(hints)
  bullets <- c(
    if (length(unknown)) c(x = "Unknown argument{?s}: {.arg {unknown}}."),
    if (unnamed) c(x = "{unnamed} unnamed argument{?s} that match{?es/} no argument."),
    stats::setNames(sprintf("Did you mean {.arg %s} instead of {.arg %s}?", hints[close],
                            unknown[close]), rep("i", sum(close)))
  )
  abort(c("Arguments in {.arg ...} must be used.", bullets), call = .call)
}

# The argument a misspelt or foreign name most likely meant: a common alias (`bw`, `h`), an
# unambiguous prefix, or the nearest name within a small edit distance; "" when none is close.
closest_name <- function(name, candidates) {
  aliases <- c(bw = "bandwidth", h = "bandwidth", threads = "n_threads", cores = "n_threads",
               iter = "max_iter", maxit = "max_iter")
  alias <- aliases[tolower(name)]
  if (!is.na(alias) && alias %in% candidates) return(unname(alias))
  prefixed <- candidates[startsWith(candidates, name)]
  if (length(prefixed) == 1L) return(prefixed)
  if (!length(candidates)) return("")
  distance <- drop(utils::adist(name, candidates, ignore.case = TRUE))
  limit <- if (nchar(name) >= 5L) 2L else 1L
  if (min(distance) > limit) return("")
  candidates[which.min(distance)]
}

# The one print style of the package: a "<class> what it is" header, then one "Name : value"
# field per line with the colons aligned (as the summaries print). NULL fields are left out and
# no line ends in a space.
print_fields <- function(header, fields) {
  fields <- Filter(Negate(is.null), fields)
  values <- vapply(fields, function(v) paste(v, collapse = " "), "")
  lines <- c(header, if (length(values)) paste0(format(names(values)), " : ", values))
  cat(sub("[[:space:]]+$", "", lines), sep = "\n")
}

# Values labelled with their variables ("a = 0.4, b = 0.4"); plain when the names are missing.
named_values <- function(values, names) {
  shown <- vapply(signif(values, 4), format, "")
  if (length(names) != length(shown)) return(paste(shown, collapse = ", "))
  paste(names, "=", shown, collapse = ", ")
}

# print() of a call, data frame or table without the trailing spaces that base R pads with.
print_trimmed <- function(x, ...) {
  cat(sub("[[:space:]]+$", "", utils::capture.output(print(x, ...))), sep = "\n")
}
