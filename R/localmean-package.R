#' localmean: localization methods
#'
#' A localization kernel \eqn{K(x^*, x)}{K(x^*, x)} and the local mean
#' \deqn{m(x^*) = \sum_i K(x^*, x_i) y_i / \sum_i K(x^*, x_i)}{
#'  m(x^*) = sum_i K(x^*, x_i) y_i / sum_i K(x^*, x_i)}
#' are the two ideas behind Nadaraya-Watson and local polynomial regression,
#' nearest-neighbour and local-mode classification, kernel density estimation and much more (Song,
#' 2026). The package computes all of them with one engine: see `vignette("localmean")` for the map.
#'
#' @section Conventions:
#' * Arguments come in one order: the data, `kernel`, `bandwidth`, the
#'   method's own arguments, `weights`, `method` (the engine strategy:
#'   "auto", "exact", "tree", "binned"), `n_threads`, `verbose`, `control`.
#'   Every function that computes takes `n_threads` (see [n_threads()]) and
#'   `verbose`. An unknown or misspelt argument is an error of class
#'   `localmean_error` with a "did you mean" hint; `plot()` methods accept
#'   graphical parameters (those of [graphics::par()] and
#'   [graphics::plot.default()]) and refuse other names.
#' * One name per meaning: `bandwidth` (a number, one per variable, a matrix,
#'   [nn()] or a selector name such as "cv" or "plugin", also in
#'   [kde_bandwidth()]); `k` a number of neighbours; `n_iter` a fixed number
#'   of iterations; `max_iter` an upper bound with a tolerance `tol`; `ndim`
#'   the dimension of a result. Fits record how their bandwidth was chosen in
#'   `bandwidth_method`: the selector's name, "nn", or "user" for numbers
#'   given by the user.
#' * Every class is named `local_<what it holds>`: `local_model` (with
#'   `local_poly`, `local_mean`, `local_classify`), `local_kde`, `local_modes`
#'   ([mean_shift()], [medoid_shift()]), `local_ridges` ([pc_shift()]),
#'   `local_embedding`, `local_imputation`, `local_qkv` ([qkv_fit()]), and the
#'   settings `local_nn` ([nn()]) and `local_control`.
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
