#' localmean: localization methods
#'
#' A localization kernel \eqn{K(x^*, x)}{K(x^*, x)} and the local mean
#' \deqn{m(x^*) = \sum_i K(x^*, x_i) y_i / \sum_i K(x^*, x_i)}{
#'  m(x^*) = sum_i K(x^*, x_i) y_i / sum_i K(x^*, x_i)}
#' are the two ideas behind Nadaraya-Watson and local polynomial regression,
#' nearest-neighbour and local-mode classification, kernel density estimation and much more (Song,
#' 2026). The package computes all of them with one engine: see `vignette("localmean")` for the map.
#'
#' @section Options:
#' * `localmean.threads`: the default number of threads (else the environment
#'   variable `LOCALMEAN_THREADS`, else half the cores).
#' * `localmean.chunk_size`: rows of `newdata` per chunk in [predict()] (default 1e6).
#'
#' @references Song, C. (2026). The general theory of localization methods.
#'   arXiv:2605.20635. \doi{10.48550/arXiv.2605.20635}
#' @keywords internal
#' @useDynLib localmean, .registration = TRUE
#' @importFrom Rcpp sourceCpp
#' @importFrom RcppParallel RcppParallelLibs
#' @importFrom rlang caller_env caller_arg .data
#' @importFrom cli cli_abort cli_warn cli_progress_bar
#' @importFrom stats predict fitted residuals nobs formula logLik model.frame simulate
#' @importFrom stats sigma deviance df.residual
#'   model.response na.omit sd quantile terms delete.response
"_PACKAGE"
