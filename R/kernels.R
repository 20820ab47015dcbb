#' The kernel registry
#'
#' Every method of the package accepts the same localization kernels. A kernel
#' is given in its standard form \eqn{k(u)}{k(u)}: the compact kernels live on
#' \eqn{[-1, 1]}{[-1, 1]}, the Gaussian is the standard normal density, the Laplace is
#' \eqn{e^{-|u|}/2}{e^(-|u|)/2} and the Cauchy \eqn{1/(\pi(1 + u^2))}{1/(pi (1 + u^2))}.
#'
#' **Bandwidth convention.** A bandwidth \eqn{h}{h} is the kernel's scale
#' parameter: \eqn{K_h(t) = k(t/h)/h}{K_h(t) = k(t/h)/h}. So `bandwidth = 0.1` means a standard
#' deviation of 0.1 for the Gaussian and a half-width of 0.1 for the compact
#' kernels. Two kernels smooth about equally when their bandwidths are in the
#' ratio of their canonical bandwidths \eqn{(R(k)/\mu_2^2)^{1/5}}{(R(k)/mu_2^2)^(1/5)}; the
#' bandwidth selectors make this conversion for you. In several dimensions the
#' kernel is radial in the scaled distance \eqn{\|(x - x^*)/h\|}{||(x - x^*)/h||} (so the
#' uniform kernel is a ball and the Gaussian a product kernel).
#'
#' Kernels with unbounded support are truncated by the kd-tree and binned
#' strategies at `cutoff` scales (8 for the Gaussian, 32 for the Laplace: the
#' neglected weights are below \eqn{e^{-32}}{e^(-32)} of the peak); a query with no
#' data within the cut-off is computed untruncated by the kd-tree strategy. The
#' exact strategy never truncates (unless `local_control(cutoff =)` asks it
#' to), and the Cauchy is never truncated and always uses the exact strategy.
#'
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return `kernels()`: a data frame with one row per kernel: `kernel`,
#'   `compact`, `cutoff`, `constant` (the normalising constant \eqn{c}{c} of
#'   \eqn{k(u) = c\,\kappa(u^2)}{k(u) = c kappa(u^2)}), `mu2` (the second moment
#'   \eqn{\int u^2 k}{int u^2 k}), `roughness` (\eqn{\int k^2}{int k^2}) and `canonical` (the
#'   canonical bandwidth \eqn{(R/\mu_2^2)^{1/5}}{(R/mu_2^2)^(1/5)}, NA for the Cauchy, which has no
#'   second moment) and `shadow`: the kernel \eqn{g}{g} with
#'   \eqn{-\kappa'(r^2) \propto g(r^2)}{-kappa'(r^2) proportional to g(r^2)} (the profile's
#'   derivative), under which the gradient of a kernel density estimate is a local mean (see
#'   [local_score()]); NA where that derivative is no registry kernel.
#' @family kernels
#' @export
#' @examples
#' kernels()
#' curve(kernel_value(x, "epanechnikov"), -1.5, 1.5)
kernels <- function(...) {
  check_dots(...)
  registry_table()[c("kernel", "compact", "cutoff", "constant", "mu2", "roughness", "canonical",
                     "shadow")]
}

#' @rdname kernels
#' @param u Numeric vector of scaled distances.
#' @param kernel A kernel name, see `kernels()$kernel`.
#' @return `kernel_value()`: the kernel density \eqn{k(u)}{k(u)}.
#' @export
kernel_value <- function(u, kernel = "gaussian", ...) {
  check_dots(...)
  kernel <- check_kernel(kernel)
  if (!is.numeric(u)) abort("{.arg u} must be numeric.")
  cpp_kernel_value(kernel, as.double(u))
}

# Every fact of the C++ registry table (kernels.hpp), read once per session: the single source of
# kernel facts in R. Besides the columns of kernels(): `multivariate` (a density exists in d >= 2),
# `reach` (how far a density grid extends beyond the data, in scales), `quartile`, `truncated`
# (a finite cut-off, so the tree and binned strategies apply) and `equivalent` (the factor that
# turns a Gaussian-scale bandwidth into one that smooths about equally: the ratio of canonical
# bandwidths, or of quartiles when the second moment is infinite).
registry_table <- function() {
  if (is.null(registry$table)) {
    tab <- cpp_kernel_table()
    tab$canonical <- ifelse(is.finite(tab$mu2), (tab$roughness / tab$mu2^2)^(1 / 5), NA_real_)
    tab$truncated <- is.finite(tab$cutoff)
    gaussian <- tab[tab$kernel == "gaussian", ]
    tab$equivalent <- ifelse(is.finite(tab$mu2), tab$canonical / gaussian$canonical,
                             gaussian$quartile / tab$quartile)
    registry$table <- tab
    registry$rows <- list()
  }
  registry$table
}
registry <- new.env(parent = emptyenv())

# The registry's row for one kernel, as a list (kept: bandwidth searches ask thousands of times).
kernel_row <- function(kernel) {
  registry$rows[[kernel]] %||% {
    tab <- registry_table()
    registry$rows[[kernel]] <- as.list(tab[tab$kernel == kernel, ])
  }
}

# Registry kernels, optionally only those with a property (e.g. "multivariate", "compact").
kernel_names <- function(having = NULL) {
  tab <- registry_table()
  if (is.null(having)) tab$kernel else tab$kernel[tab[[having]]]
}

check_kernel <- function(kernel, having = NULL, arg = rlang::caller_arg(kernel),
                         call = rlang::caller_env()) {
  check_choice(kernel, kernel_names(having), arg = arg, call = call)
}

# Factor that turns a Gaussian-scale bandwidth into an equivalent one for `kernel`.
kernel_scale_factor <- function(kernel) kernel_row(kernel)$equivalent
