# print(), summary() and format() of every result object take `digits`, the significant digits
# of the numbers they show; format() gives the lines print() writes.

# The default `digits`: R's digits option less 3, as print.lm() and print.summary.lm() use.
default_digits <- function() max(3L, getOption("digits") - 3L)

# Numbers as strings with `digits` significant digits, one string per value.
show_num <- function(v, digits) {
  vapply(v, function(u) format(signif(u, digits), digits = digits), "", USE.NAMES = FALSE)
}

# Checks `digits` (NULL: the default) and returns it as an integer.
check_digits <- function(digits, call = rlang::caller_env()) {
  if (is.null(digits)) return(default_digits())
  if (!is.numeric(digits) || length(digits) != 1L || !is.finite(digits) || digits < 1 ||
      digits > 22) {
    abort("{.arg digits} must be a whole number from 1 to 22.", call = call)
  }
  as.integer(digits)
}

# The lines that print() writes (without trailing spaces).
printed_lines <- function(x, digits, ...) {
  check_dots(...)
  lines <- utils::capture.output(print(x, digits = check_digits(digits)))
  sub("[[:space:]]+$", "", lines)
}

# The first lines of a summary's print: checks `digits`, prints the fit the summary is of, and
# returns the digits.
print_summary_fit <- function(x, digits) {
  digits <- check_digits(digits, call = rlang::caller_env())
  print(x$fit, digits = digits)
  digits
}

#' Format a result object
#'
#' `format()` of every result object of the package returns the lines its
#' [print()] method writes, as a character vector; `print()`, `summary()`
#' and the print of a summary take the same `digits`.
#'
#' @param x A result object (a fit of [local_poly()], [local_classify()],
#'   [kde()], [mean_shift()], [lle()], [local_impute()], [qkv_fit()],
#'   [fuzzy_inference()], [local_score()], [local_denoiser()],
#'   [diffusion_sample()], ...).
#' @param digits Significant digits of the numbers shown; `NULL` for
#'   `max(3, getOption("digits") - 3)`.
#' @param ... Must be empty.
#' @return A character vector, one element per line.
#' @family ecosystem
#' @name localmean-format
#' @examples
#' fit <- local_poly(dist ~ speed, data = cars, bandwidth = 5)
#' format(fit, digits = 3)
#' print(fit, digits = 6)
NULL

#' @rdname localmean-format
#' @export
format.local_model <- function(x, digits = NULL, ...) printed_lines(x, digits, ...)

#' @rdname localmean-format
#' @export
format.local_refits <- function(x, digits = NULL, ...) printed_lines(x, digits, ...)

#' @rdname localmean-format
#' @export
format.local_kde <- function(x, digits = NULL, ...) printed_lines(x, digits, ...)

#' @rdname localmean-format
#' @export
format.local_cdens <- function(x, digits = NULL, ...) printed_lines(x, digits, ...)

#' @rdname localmean-format
#' @export
format.local_modes <- function(x, digits = NULL, ...) printed_lines(x, digits, ...)

#' @rdname localmean-format
#' @export
format.local_ridges <- function(x, digits = NULL, ...) printed_lines(x, digits, ...)

#' @rdname localmean-format
#' @export
format.local_pca <- function(x, digits = NULL, ...) printed_lines(x, digits, ...)

#' @rdname localmean-format
#' @export
format.local_propagation <- function(x, digits = NULL, ...) printed_lines(x, digits, ...)

#' @rdname localmean-format
#' @export
format.local_embedding <- function(x, digits = NULL, ...) printed_lines(x, digits, ...)

#' @rdname localmean-format
#' @export
format.local_imputation <- function(x, digits = NULL, ...) printed_lines(x, digits, ...)

#' @rdname localmean-format
#' @export
format.local_qkv <- function(x, digits = NULL, ...) printed_lines(x, digits, ...)

#' @rdname localmean-format
#' @export
format.local_fuzzy <- function(x, digits = NULL, ...) printed_lines(x, digits, ...)

#' @rdname localmean-format
#' @export
format.local_score <- function(x, digits = NULL, ...) printed_lines(x, digits, ...)

#' @rdname localmean-format
#' @export
format.local_denoiser <- function(x, digits = NULL, ...) printed_lines(x, digits, ...)

#' @rdname localmean-format
#' @export
format.local_diffusion <- function(x, digits = NULL, ...) printed_lines(x, digits, ...)
