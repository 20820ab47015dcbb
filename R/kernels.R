#' The kernel registry
#'
#' Every method of the package accepts the same localization kernels. A kernel
#' is given in its standard form \eqn{k(u)}: the compact kernels live on
#' \eqn{[-1, 1]}, the Gaussian is the standard normal density, the Laplace is
#' \eqn{e^{-|u|}/2} and the Cauchy \eqn{1/(\pi(1 + u^2))}.
#'
#' **Bandwidth convention.** A bandwidth \eqn{h} is the kernel's scale
#' parameter: \eqn{K_h(t) = k(t/h)/h}. So `bandwidth = 0.1` means a standard
#' deviation of 0.1 for the Gaussian and a half-width of 0.1 for the compact
#' kernels. Two kernels smooth about equally when their bandwidths are in the
#' ratio of their canonical bandwidths \eqn{(R(k)/\mu_2^2)^{1/5}}; the
#' bandwidth selectors make this conversion for you. In several dimensions the
#' kernel is radial in the scaled distance \eqn{\|(x - x^*)/h\|} (so the
#' uniform kernel is a ball and the Gaussian a product kernel).
#'
#' Kernels with unbounded support are truncated by the kd-tree and binned
#' strategies at `cutoff` scales (8 for the Gaussian, 32 for the Laplace: the
#' neglected weights are below \eqn{e^{-32}} of the peak); a query with no
#' data within the cut-off is computed untruncated by the kd-tree strategy. The
#' exact strategy never truncates (unless `local_control(cutoff =)` asks it
#' to), and the Cauchy is never truncated and always uses the exact strategy.
#'
#' @return `kernels()`: a data frame with one row per kernel: `kernel`,
#'   `compact`, `cutoff`, `constant` (the normalising constant \eqn{c} of
#'   \eqn{k(u) = c\,\kappa(u^2)}), `mu2` (the second moment \eqn{\int u^2 k}),
#'   `roughness` (\eqn{\int k^2}) and `canonical` (the canonical bandwidth
#'   \eqn{(R/\mu_2^2)^{1/5}}, NA for the Cauchy, which has no second moment).
#' @family kernels
#' @export
#' @examples
#' kernels()
#' curve(kernel_value(x, "epanechnikov"), -1.5, 1.5)
kernels <- function() {
  tab <- cpp_kernel_table()
  tab$canonical <- ifelse(is.finite(tab$mu2), (tab$roughness / tab$mu2^2)^(1 / 5), NA_real_)
  tab
}

#' @rdname kernels
#' @param u Numeric vector of scaled distances.
#' @param kernel A kernel name, see `kernels()$kernel`.
#' @return `kernel_value()`: the kernel density \eqn{k(u)}.
#' @export
kernel_value <- function(u, kernel = "gaussian") {
  kernel <- check_kernel(kernel)
  if (!is.numeric(u)) abort("{.arg u} must be numeric.")
  cpp_kernel_value(kernel, as.double(u))
}

# The registry's row for one kernel, from a table built once per session.
kernel_row <- function(kernel) {
  if (is.null(registry$table)) registry$table <- kernels()
  registry$table[registry$table$kernel == kernel, ]
}
registry <- new.env(parent = emptyenv())

kernel_names <- c("gaussian", "epanechnikov", "uniform", "triangular", "biweight",
                  "triweight", "tricube", "cosine", "laplace", "cauchy")

check_kernel <- function(kernel, arg = rlang::caller_arg(kernel), call = rlang::caller_env()) {
  check_choice(kernel, kernel_names, arg = arg, call = call)
}

# Factor that turns a Gaussian-scale bandwidth into an equivalent one for `kernel`: the ratio of
# canonical bandwidths; the Cauchy (no second moment) matches the Gaussian's interquartile range.
kernel_scale_factor <- function(kernel) {
  if (kernel == "cauchy") return(stats::qnorm(0.75))
  kernel_row(kernel)$canonical / kernel_row("gaussian")$canonical
}
