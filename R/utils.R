# Errors, argument checks and thread counts shared by every family.

abort <- function(message, ..., call = rlang::caller_env()) {
  cli::cli_abort(message, ..., class = "localmean_error", call = call, .envir = parent.frame())
}

# `class`: a more specific class first (so that a caller can muffle that warning alone).
warn <- function(message, ..., class = NULL) {
  cli::cli_warn(message, ..., class = c(class, "localmean_warning"), .envir = parent.frame())
}

# A criterion value for stats::optimize(), which warns when it meets NA or Inf: an unusable
# bandwidth scores worst.
finite_or_max <- function(value) if (is.finite(value)) value else .Machine$double.xmax

check_flag <- function(x, arg = rlang::caller_arg(x), call = rlang::caller_env()) {
  # `x` is never reassigned, so `arg` stays lazy: naming it costs ~25 us, paid only on error
  if (!is.logical(x) || length(x) != 1L || is.na(x)) {
    abort("{.arg {arg}} must be TRUE or FALSE.", call = call)
  }
  invisible(x)
}

check_count <- function(x, arg = rlang::caller_arg(x), min = 1, call = rlang::caller_env()) {
  # `x` is never reassigned, so `arg` stays lazy: naming it costs ~25 us, paid only on error
  if (!is.numeric(x) || length(x) != 1L || !is.finite(x) || x != round(x) || x < min) {
    abort("{.arg {arg}} must be a whole number of at least {min}.", call = call)
  }
  largest <- .Machine$integer.max
  if (x > largest) abort("{.arg {arg}} must be at most {largest}.", call = call)
  as.integer(x)
}

check_positive <- function(x, zero = FALSE, arg = rlang::caller_arg(x),
                           call = rlang::caller_env()) {
  # `x` is never reassigned, so `arg` stays lazy: naming it costs ~25 us, paid only on error
  if (!is.numeric(x) || length(x) != 1L || !is.finite(x) || x < 0 || (!zero && x == 0)) {
    abort("{.arg {arg}} must be a {if (zero) 'non-negative' else 'positive'} number.",
          call = call)
  }
  as.double(x)
}

# Sizes refused up front, before any work (documented where the arguments are): requests this
# large would run for minutes or exhaust memory on an ordinary machine.
size_limits <- list(
  grid_nodes_per_dim = 1e5,  # local_control(gridsize =)
  grid_nodes = 4e6,          # binning grid nodes in all (32 MB per smoothed array)
  binning_work = 5e10,       # multiply-adds of one binned pass (binning_cost(), ~20 s)
  kde_grid_points = 2^20,    # kde(gridsize =): output grid points in all (1024 x 1024)
  simulated_values = 5e7,    # simulate(): nsim times the dimension (400 MB)
  iterations = 1e7,          # iterations, batches and steps (optimisers, hopfield(), ...)
  layout_values = 1e8,       # ordinal_embed(): n times ndim coordinates (800 MB)
  triplets = 1e8,            # trimap(): sampled triplets (1.2 GB with their weights)
  rules = 1000,              # fuzzy_inference(): rules (memberships cost n rules^2)
  design_values = 5e7,       # fuzzy_inference(): n x rules x (terms + 1) design (400 MB)
  response = 1e150           # |y|: larger values overflow the sums of squares
)

# Refuses `size` above `limit`, naming the argument and the limit.
check_size <- function(size, limit, what, arg, call = rlang::caller_env()) {
  show <- function(v) {
    if (v < 1e15) format(v, big.mark = ",", scientific = FALSE) else format(v, digits = 3)
  }
  if (size > limit) {
    abort("{.arg {arg}} asks for {show(size)} {what}; the limit is {show(limit)}.", call = call)
  }
  invisible(size)
}

# An optimiser's result must be finite: a step size too large for the problem makes it diverge,
# which is the user's setting to change, not a silent NaN to return.
check_diverged <- function(x, args, call = rlang::caller_env()) {
  if (!cpp_all_finite(x)) {
    abort(c("The optimisation diverged to non-finite values.",
            i = "Try a smaller {.arg {args}}."), call = call)
  }
  invisible(x)
}

# Results that overflowed (data far too large or small for the bandwidth) are refused.
check_overflow <- function(x, arg, call = rlang::caller_env()) {
  if (!cpp_all_finite(x)) {
    abort(c("The computation overflowed: {.arg {arg}} holds values too large or too small for
             the bandwidth.", i = "Rescale {.arg {arg}}."), call = call)
  }
  invisible(x)
}

# Plot grids: at least 2 points per variable and at most 1e6 in all (d variables).
check_n_grid <- function(n_grid, d, call = rlang::caller_env()) {
  n_grid <- check_count(n_grid, "n_grid", min = 2, call = call)
  check_size(as.double(n_grid)^d, 1e6, "plot grid points", "n_grid", call = call)
  n_grid
}

# Probabilities strictly between 0 and 1 (highest-density regions).
check_probs <- function(probs, call = rlang::caller_env()) {
  if (!is.numeric(probs) || !length(probs) || any(!is.finite(probs)) || any(probs <= 0) ||
      any(probs >= 1)) {
    abort("{.arg probs} must be probabilities strictly between 0 and 1.", call = call)
  }
  probs
}

check_choice <- function(x, choices, arg = rlang::caller_arg(x), call = rlang::caller_env()) {
  # `x` is never reassigned, so `arg` stays lazy: naming it costs ~25 us, paid only on error
  if (!is.character(x) || length(x) != 1L || is.na(match(x, choices))) {
    abort("{.arg {arg}} must be one of {.val {choices}}.", call = call)
  }
  x
}

# A numeric predictor matrix with finite entries and column names.
check_predictors <- function(x, arg = rlang::caller_arg(x), call = rlang::caller_env()) {
  checked_predictors(x, arg, call)$x
}

# check_predictors() with the column ranges (2 x d) found on the way: list(x, range).
checked_predictors <- function(x, arg, call) {
  if (is.data.frame(x)) {
    bad <- names(x)[!vapply(unclass(x), function(col) is.numeric(col) && !is.object(col), TRUE)]
    if (length(bad)) {
      abort(c("{.arg {arg}} must have numeric columns only.",
              x = "Not numeric: {.field {bad}}.",
              i = "This method works on numeric variables only: drop these columns, or code
                   them as numbers (e.g. dummy columns from {.fn stats::model.matrix})."),
            call = call)
    }
    x <- frame_matrix(x)
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

# as.matrix() of a data frame of numeric columns, without the data frame method's general
# handling where every column is a plain vector (matrix columns and empty frames take it).
frame_matrix <- function(x) {
  plain <- length(x) && nrow(x) && all(vapply(unclass(x), function(col) is.null(dim(col)), TRUE))
  if (!plain) return(as.matrix(x))
  rows <- if (.row_names_info(x) > 0L) row.names(x)
  matrix(unlist(x, use.names = FALSE), nrow(x), length(x), dimnames = list(rows, names(x)))
}

# A vector as a one-column matrix without copying it: dim<- wraps a vector that is referenced
# elsewhere (the caller's data) instead of duplicating it, as long as C++ reads it read-only
# (see read_only() in src/engine.cpp).
one_column <- function(v) {
  dim(v) <- c(length(v), 1L)
  v
}

check_response <- function(y, n, arg = rlang::caller_arg(y), call = rlang::caller_env()) {
  # `y` is never reassigned, so that `arg` can stay lazy (naming a long argument is slow)
  if (!is.numeric(y) || is.object(y)) abort("{.arg {arg}} must be a numeric vector.", call = call)
  if (length(y) != n) {
    abort("{.arg {arg}} has length {length(y)} but the predictors have {n} rows.", call = call)
  }
  values <- as.double(y)
  extent <- cpp_column_ranges(values)  # finiteness and range in one pass
  if (!all(extent$finite)) abort("{.arg {arg}} has missing or non-finite values.", call = call)
  if (n && max(abs(extent$range)) > size_limits$response) {
    abort("{.arg {arg}} has values beyond {size_limits$response} in absolute value, whose squares
           overflow; rescale it.", call = call)
  }
  values
}

check_weights <- function(weights, n, arg = rlang::caller_arg(weights),
                          call = rlang::caller_env()) {
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
#' `LOCALMEAN_THREADS`, else half the available cores. It must be a positive
#' whole number; larger requests are capped at the available cores (as
#' [RcppParallel::defaultNumThreads()] reports them), at
#' `RCPP_PARALLEL_NUM_THREADS` and `OMP_THREAD_LIMIT` when set, and at 2
#' under `R CMD check`. Results never depend on it. The package never changes
#' the thread settings of other packages.
#'
#' @param n_threads `NULL` or a whole number of threads.
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return A whole number of threads.
#' @export
#' @examples
#' n_threads()
#' n_threads(1)
n_threads <- function(n_threads = NULL, ...) {
  check_dots(...)
  if (is.null(n_threads)) n_threads <- getOption("localmean.threads")
  # the environment's settings in one read (each Sys.getenv() call costs a microsecond or two)
  env <- if (is.null(n_threads)) Sys.getenv(thread_variables, names = FALSE)
  if (is.null(n_threads) && nzchar(env[1L])) n_threads <- suppressWarnings(as.numeric(env[1L]))
  cores <- if (is.null(n_threads)) default_cores()
  if (is.null(n_threads)) n_threads <- max(1L, cores %/% 2L)
  if (!is.numeric(n_threads) || is.object(n_threads) || length(n_threads) != 1L ||
      !is.finite(n_threads) || n_threads != round(n_threads) || n_threads < 1) {
    abort("{.arg n_threads} must be a whole number of at least 1.")
  }
  # (every limit is at least 1: one thread needs none of them)
  if (n_threads == 1) return(1L)
  as.integer(min(n_threads, thread_limit(cores, env)))
}

# The cores RcppParallel sees, read once per session (every fit asks).
default_cores <- function() {
  thread_cache$cores %||% (thread_cache$cores <- RcppParallel::defaultNumThreads())
}
thread_cache <- new.env(parent = emptyenv())

# The environment variables n_threads() reads: its own default, then the limits users set.
thread_variables <- c("LOCALMEAN_THREADS", "RCPP_PARALLEL_NUM_THREADS", "OMP_THREAD_LIMIT",
                      "_R_CHECK_LIMIT_CORES_")

# The most threads worth asking for: the cores RcppParallel sees, and the limits users set
# (`env`: the values of thread_variables; NULL: read here, as `cores`).
thread_limit <- function(cores = NULL, env = NULL) {
  env <- env %||% Sys.getenv(thread_variables, names = FALSE)
  limit <- max(1L, cores %||% default_cores())
  for (value in env[2:3]) {
    if (!nzchar(value)) next
    value <- suppressWarnings(as.numeric(value))
    if (!is.na(value) && value >= 1) limit <- min(limit, floor(value))
  }
  if (nzchar(env[4L])) limit <- min(limit, 2)
  limit
}

# Rejects whatever reached a function's `...` unused. `...` exists so that methods share their
# generic's signature and later arguments must be named, never to swallow a misspelt argument:
# call check_dots(...) first thing. `.known` names arguments that `...` may carry (those a
# method forwards, or that base R passes, as data.frame() passes `stringsAsFactors`). The hint
# compares each unknown name with the calling function's own arguments and `.known`.
check_dots <- function(..., .known = NULL, .call = rlang::caller_env(), .own = NULL) {
  if (...length() == 0L) return(invisible())
  given <- ...names() %||% character(...length())
  given[is.na(given)] <- ""
  unknown <- unique(setdiff(given[nzchar(given)], .known))
  unnamed <- sum(!nzchar(given))
  if (!length(unknown) && !unnamed) return(invisible())
  own <- .own %||% names(formals(sys.function(sys.parent())))
  candidates <- setdiff(c(own, .known), "...")
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

# check_dots() for plot methods, whose `...` carries graphical parameters to base graphics: a
# name is accepted when it is one of par()'s or an argument of plot.default(), title(),
# plot.window() or axis() (or in `.known`); anything else, which base graphics would ignore or
# only warn about, is a localmean_error with a hint.
check_graphics_dots <- function(..., .known = NULL, .call = rlang::caller_env()) {
  if (...length() == 0L) return(invisible())
  own <- names(formals(sys.function(sys.parent())))
  graphical <- c(par_names(), names(formals(graphics::plot.default)),
                 names(formals(graphics::title)), names(formals(graphics::plot.window)),
                 names(formals(graphics::axis)), .known)
  check_dots(..., .known = setdiff(graphical, "..."), .call = .call, .own = own)
}

# The names of par()'s parameters, read once. Without an open device par() would open one (and
# write Rplots.pdf), so they are read on a null PDF device, closed again.
par_names <- local({
  known <- NULL
  function() {
    if (is.null(known)) {
      if (grDevices::dev.cur() == 1L) {
        grDevices::pdf(NULL)
        on.exit(grDevices::dev.off())
      }
      known <<- names(graphics::par(no.readonly = FALSE))
    }
    known
  }
})

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
named_values <- function(values, names, digits = 4L) {
  shown <- vapply(signif(values, digits), format, "", digits = digits)
  if (length(names) != length(shown)) return(paste(shown, collapse = ", "))
  paste(names, "=", shown, collapse = ", ")
}

# print() of a call, data frame or table without the trailing spaces that base R pads with.
print_trimmed <- function(x, ...) {
  cat(sub("[[:space:]]+$", "", utils::capture.output(print(x, ...))), sep = "\n")
}

# A summary's print: the fit, then each non-NULL section under its title.
print_summary_sections <- function(x, fit, sections, digits = NULL) {
  digits <- check_digits(digits)
  print(fit, digits = digits)
  for (title in names(sections)) {
    if (is.null(sections[[title]])) next
    cat("\n", title, ":\n", sep = "")
    print_trimmed(sections[[title]], digits = digits)
  }
  invisible(x)
}
