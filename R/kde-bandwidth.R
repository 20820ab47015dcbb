# Bandwidth selectors for kernel density estimation.
#
# Every selector works with the Gaussian kernel and returns a Gaussian-scale bandwidth, which
# kde_bandwidth() converts to the requested kernel. Most of them need the density functionals
# psi_r = integral of f^(r) f, estimated by double sums over pairs of points,
#   psi_r(g) = sum_i sum_j w_i w_j D^r phi_g(X_i - X_j)          (weights summing to one),
# computed from lags of binned data (1-D always, 2-D for large n) or pair by pair.

#' Bandwidth selectors for kernel density estimation
#'
#' `kde_bandwidth()` computes the bandwidth that [kde()] uses for a selector
#' name. All selectors work on the Gaussian scale and convert the result to
#' `kernel` by the ratio of canonical bandwidths (see [kernels()]).
#'
#' - "rot": Silverman's rule \eqn{0.9 \min(s, IQR/1.34) n^{-1/5}}{0.9 min(s, IQR/1.34) n^(-1/5)} in
#'   one dimension (`stats::bw.nrd0()`), Scott's rule \eqn{s_j n^{-1/(d+4)}}{s_j n^(-1/(d+4))} per
#'   variable in more.
#' - "plugin": in one dimension, by default (`plugin = "ste"`), the
#'   solve-the-equation plug-in of Sheather & Jones (1991), as
#'   `stats::bw.SJ(method = "ste")`, with the scale
#'   \eqn{\min(s, IQR/1.349)}{min(s, IQR/1.349)} in its pilot bandwidths; `plugin = "dpi"` gives
#'   the two-stage direct plug-in of Wand & Jones (1995, section 3.6), as
#'   `ks::hpi()`. In more dimensions (always "dpi") a diagonal bandwidth, one
#'   scale per variable, by the two-stage plug-in of Wand & Jones (1994) and
#'   Duong & Hazelton (2003): the data divided by their standard deviations;
#'   normal-reference functionals of order 8 (covariance of the scaled data);
#'   one SAMSE pilot bandwidth \eqn{g^2 I}{g^2 I} for all functionals of order 6,
#'   then for order 4, minimising the summed squared asymptotic biases of the
#'   functionals whose indices are all even (each counted once); the AMISE of
#'   a diagonal \eqn{H}{H} minimised numerically; the scales multiplied back.
#'   This is the documented default of `ks::Hpi.diag()` in two dimensions
#'   (`pilot = "samse"`, `nstage = 2`), and ks 1.14 gives the same pilot from
#'   the same functionals, but its results are about 2-4% larger (its second
#'   pilot is not computed from the order-6 estimates as the formula states).
#'   For \eqn{d > 2}{d > 2} the bandwidths are 8-14% smaller than those of
#'   `ks::Hpi.diag(pilot = "samse")` (measured on `trees` and three columns
#'   of `iris`), and 35-55% larger than those of `ks::Hpi.diag()` with its
#'   default there, the `"dscalar"` pilot of Chacon & Duong (2010), which is
#'   not implemented here. The density
#'   functionals come from a binned grid (256 x 256) in two dimensions when
#'   n > 2000 and from every pair otherwise (on an evenly spaced subsample of
#'   3000 points when d > 2 and n is larger).
#' - "lscv": least-squares (unbiased) cross-validation (Rudemo 1982;
#'   Bowman 1984; Duong & Hazelton 2005 for the diagonal matrix), minimising
#'   \eqn{\int \hat f^2 - 2 n^{-1} \sum_i
#'   \hat f_{-i}(X_i)}{int fhat^2 - 2 n^-1 sum_i fhat_(-i)(X_i)} over a grid of bandwidths and then
#'   locally; as `stats::bw.ucv()` in one dimension (on a wider search interval), and over a
#'   diagonal bandwidth (one scale per variable) in more, as `ks::Hlscv.diag()`. A warning says when
#'   the minimum is at an end of the search interval. On tied or rounded data the criterion
#'   decreases without bound as the bandwidth shrinks, so every bandwidth stays at or above the
#'   larger of 1/20 of its normal-reference scale and the resolution of its variable (the
#'   smallest gap between distinct values: the rounding unit of rounded data); a warning names
#'   the tied variables whose bandwidth ends there.
#' - "mlcv": likelihood cross-validation (Habbema, Hermans & van den Broek 1974;
#'   Duin 1976; np's `bwmethod = "cv.ml"`), maximising the leave-one-out
#'   log-likelihood \eqn{\sum_i w_i \log \hat f_{-i}(X_i)}{sum_i w_i log fhat_(-i)(X_i)} over one
#'   scale per variable, searched and bounded as "lscv" (it too undersmooths tied or rounded
#'   data; a warning says so). It suits densities with light tails; a heavy tail draws it
#'   towards large bandwidths.
#' - "scv": smoothed cross-validation (Hall, Marron & Park 1992; Jones,
#'   Marron & Park 1991) in one dimension: the criterion of `ks::hscv()` with
#'   the diagonal terms kept, and a Gaussian pilot \eqn{g}{g} that cancels the
#'   leading bias of the embedded estimate of \eqn{\psi_4}{psi_4},
#'   \eqn{g = 2^{-1/2} [-2\phi^{(4)}(0)/(\hat\psi_6 n)]^{1/7}}{g = 2^(-1/2) [-2 phi^(4)(0) /
#'   (psihat_6 n)]^(1/7)}, with \eqn{\hat\psi_6}{psihat_6} from a two-stage plug-in. `ks::hscv()`
#'   chooses its pilot differently, so the two differ by up to about 20%. One dimension only.
#' - "isj": the improved Sheather-Jones (diffusion) selector of Botev,
#'   Grotowski & Kroese (2010): the data binned on \eqn{2^{14}}{2^14} cells over
#'   their range widened by a tenth on each side, a discrete cosine
#'   transform, and the fixed point of \eqn{t = \xi\gamma^{[7]}(t)}{t = xi gamma^[7](t)} (the
#'   largest one, found on a grid of \eqn{t}{t}: rounded data add spurious tiny
#'   solutions at the scale of the rounding); the bandwidth is
#'   \eqn{\sqrt{t}}{sqrt(t)} times the width of that range. It does not
#'   assume a normal reference at any stage, so it suits multimodal data. One
#'   dimension only.
#'
#' **Gradient.** For estimating the density gradient (`mean_shift(bandwidth =
#' "plugin")`; its default "auto" is the normal-scale rule) the package uses
#' the same two-stage diagonal plug-in with derivative order 1 (SAMSE pilots
#' as above; `ks::Hpi.diag(x, deriv.order = 1)` uses its `"dscalar"` pilot and
#' differs by a few percent):
#' the AMISE of the gradient estimate (Chacon, Duong & Wand 2011),
#' \eqn{n^{-1}(4\pi)^{-d/2}\prod_j h_j^{-1} \sum_j h_j^{-2}/2 -
#' \frac14\sum_{j,k} h_j^2 h_k^2 \sum_i \psi_{2e_i+2e_j+2e_k}}{n^-1 (4 pi)^(-d/2) prod_j h_j^-1
#' sum_j h_j^-2 / 2 - 1/4 sum_(j,k) h_j^2 h_k^2 sum_i psi_(2e_i + 2e_j + 2e_k)}, with functionals of
#' order 6 estimated after a stage of order 8 and a normal-reference start of order 10. It needs
#' more smoothing than the density and is returned on the Gaussian scale, one scale per variable.
#'
#' With `weights`, the pair sums are weighted and \eqn{n}{n} is the effective
#' sample size \eqn{1/\sum w_i^2}{1/sum w_i^2} (weights normalised to sum one).
#'
#' **Categorical columns** (a data frame with factor, ordered, logical or
#' character columns; see "Mixed data" in [kde()]): "rot" and "lscv" only,
#' with one value per column: \eqn{h}{h} for numeric columns, \eqn{\lambda}{lambda} for
#' categorical ones. "rot" takes \eqn{h}{h} from the rule above for the numeric
#' columns alone and \eqn{\lambda = n^{-2/(4 + d)}}{lambda = n^(-2/(4 + d))} (at most its upper
#' bound; \eqn{d}{d} numeric columns). "lscv" minimises \eqn{\sum_z \int \hat f(x, z)^2 dx - 2
#' \sum_i w_i \hat f_{-i}(x_i, z_i)}{sum_z int fhat(x, z)^2 dx - 2 sum_i w_i fhat_(-i)(x_i, z_i)}
#' jointly over every \eqn{h}{h} and \eqn{\lambda}{lambda}, as `np::npudensbw(bwmethod = "cv.ls")`:
#' for the categorical columns the integral of the squared estimate is a sum over every combination
#' \eqn{z}{z} of levels, so that with the Gaussian kernel the pairs \eqn{(i, j)}{(i, j)} weigh
#' \eqn{\phi_{\sqrt 2 h}(x_i - x_j) \prod_k \sum_{z_k} L_k(z_k, z_{ik}) L_k(z_k,
#' z_{jk})}{phi_(sqrt(2) h)(x_i - x_j) prod_k sum_(z_k) L_k(z_k, z_ik) L_k(z_k, z_jk)}. The search
#' starts from the normal-reference scales (the best common multiple of them on a grid) and the
#' \eqn{\lambda}{lambda} rule above, then moves every bandwidth jointly as the regression selectors
#' do (Nelder-Mead on \eqn{\log h}{log h} and the logit of \eqn{\lambda}{lambda} over its upper
#' bound, so \eqn{\lambda}{lambda} stays between 3e-4 and 1 times that bound, with a coordinate
#' sweep and restarts); a lone categorical column without numeric ones gets a golden-section search
#' over \eqn{[0, upper]}{[0, upper]}. For kernels other than the Gaussian \eqn{h}{h} is converted by
#' the ratio of canonical bandwidths, as above. As for numeric data, \eqn{h}{h} stays above 1/20 of
#' the normal-reference scale and above the resolution of the data, since LSCV collapses towards
#' zero on rounded or tied data; a warning says when the minimum is there.
#'
#' @references
#' Botev, Z. I., Grotowski, J. F. and Kroese, D. P. (2010). Kernel density
#' estimation via diffusion. *Annals of Statistics* 38, 2916-2957.
#' \doi{10.1214/10-AOS799}
#'
#' Chacon, J. E. and Duong, T. (2010). Multivariate plug-in bandwidth
#' selection with unconstrained pilot bandwidth matrices. *Test* 19, 375-398.
#'
#' Chacon, J. E., Duong, T. and Wand, M. P. (2011). Asymptotics for general
#' multivariate kernel density derivative estimators. *Statistica Sinica* 21,
#' 807-840.
#'
#' Duin, R. P. W. (1976). On the choice of smoothing parameters for Parzen
#' estimators of probability density functions. *IEEE Transactions on
#' Computers* C-25, 1175-1179.
#'
#' Habbema, J. D. F., Hermans, J. and van den Broek, K. (1974). A stepwise
#' discriminant analysis program using density estimation. *COMPSTAT 1974*,
#' 101-110.
#'
#' Duong, T. and Hazelton, M. L. (2003). Plug-in bandwidth matrices for
#' bivariate kernel density estimation. *Journal of Nonparametric Statistics*
#' 15, 17-30. \doi{10.1080/10485250306039}
#'
#' Duong, T. and Hazelton, M. L. (2005). Cross-validation bandwidth matrices
#' for multivariate kernel density estimation. *Scandinavian Journal of
#' Statistics* 32, 485-506. \doi{10.1111/j.1467-9469.2005.00445.x}
#'
#' Hall, P., Marron, J. S. and Park, B. U. (1992). Smoothed cross-validation.
#' *Probability Theory and Related Fields* 92, 1-20.
#'
#' Jones, M. C., Marron, J. S. and Park, B. U. (1991). A simple root n
#' bandwidth selector. *Annals of Statistics* 19, 1919-1932.
#'
#' Sheather, S. J. and Jones, M. C. (1991). A reliable data-based bandwidth
#' selection method for kernel density estimation. *Journal of the Royal
#' Statistical Society B* 53, 683-690. \doi{10.1111/j.2517-6161.1991.tb01857.x}
#'
#' Wand, M. P. and Jones, M. C. (1994). Multivariate plug-in bandwidth
#' selection. *Computational Statistics* 9, 97-116.
#'
#' Wand, M. P. and Jones, M. C. (1995). *Kernel Smoothing*. Chapman & Hall.
#'
#' @param x A numeric vector or matrix, or a data frame (which may have
#'   categorical columns).
#' @param bandwidth The selector: "rot", "plugin", "lscv", "scv" or "isj"
#'   (with categorical columns "rot" or "lscv"), as [kde()]'s `bandwidth`.
#' @param plugin The one-dimensional plug-in: "ste" (Sheather-Jones
#'   solve-the-equation) or "dpi" (two-stage direct plug-in). `NULL` means
#'   "ste" in one dimension and "dpi", the only one available, in more.
#' @param verbose Show the selector's progress (a status line with the time
#'   taken).
#' @inheritParams kde
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return A bandwidth in the package convention: a number (1-D), a vector
#'   (one scale per variable) or a bandwidth matrix; with categorical columns
#'   a named vector with one value per column (\eqn{h}{h} or \eqn{\lambda}{lambda}).
#' @family density
#' @export
#' @examples
#' kde_bandwidth(faithful$eruptions)
#' kde_bandwidth(faithful$eruptions, bandwidth = "plugin")
#' kde_bandwidth(faithful$eruptions, bandwidth = "isj")
#' kde_bandwidth(faithful, bandwidth = "plugin")
#' kde_bandwidth(data.frame(eruptions = faithful$eruptions,
#'                          long_wait = faithful$waiting > 70), bandwidth = "lscv")
kde_bandwidth <- function(x, kernel = "gaussian", bandwidth = "rot", plugin = NULL,
                          weights = NULL, n_threads = NULL, verbose = interactive(), ...) {
  check_dots(...)
  selector <- check_choice(bandwidth, selector_names("density"), arg = "bandwidth")
  threads <- n_threads(n_threads)
  if (check_flag(verbose)) cli::cli_progress_step("bandwidth selection ({selector})")
  if (has_categorical(x)) {
    predictors <- split_predictors(x)
    if (!selector %in% mixed_kde_selectors) {
      abort(c("{.arg bandwidth} {.val {selector}} is for numeric data only.",
              i = "With categorical columns choose {.val {mixed_kde_selectors}}."))
    }
    if (nrow(predictors$x) < 2L) abort("{.arg x} needs at least 2 points to choose a bandwidth.")
    return(kde_mixed_bandwidth(predictors, selector, check_kernel(kernel),
                               check_weights(weights, nrow(predictors$x)), threads))
  }
  x <- check_predictors(x)
  problem <- list(x = x, kernel = check_kernel(kernel), weights = check_weights(weights, nrow(x)),
                  n_threads = threads, plugin = check_plugin(plugin, ncol(x)))
  if (nrow(x) < 2L) abort("{.arg x} needs at least 2 points to choose a bandwidth.")
  run_selector(selector, "density", problem, arg = "bandwidth")$bandwidth
}

check_plugin <- function(plugin, d, call = rlang::caller_env()) {
  if (is.null(plugin)) return(if (d == 1L) "ste" else "dpi")
  plugin <- check_choice(plugin, c("ste", "dpi"), call = call)
  if (plugin == "ste" && d > 1L) {
    abort("{.arg plugin} {.val ste} is one-dimensional; use {.val dpi} for {d} variables.",
          call = call)
  }
  plugin
}

# ---- Scales ---------------------------------------------------------------------------------

# The robust scale min(s, IQR / iqr_divisor) of v, or s when the IQR is zero; with weights, the
# weighted standard deviation and weighted quartiles. Each caller passes its published divisor:
# 1.349 = 2 qnorm(0.75), the IQR of the standard normal (Sheather & Jones 1991, Wand & Jones 1995;
# the regression rule of thumb), or Silverman's (1986, section 3.4.2) rounded 1.34 (as stats::bw.nrd0()).
robust_scale <- function(v, iqr_divisor, weights = NULL) {
  s <- weighted_sd(v, weights)
  iqr <- if (is.null(weights)) stats::IQR(v) else weighted_iqr(v, weights / sum(weights))
  if (iqr > 0) min(s, iqr / iqr_divisor) else s
}

# The standard deviation of v; with weights normalised to w, sum w (v - mean)^2 / (1 - sum w^2)
# (reliability weights: n - 1 in the denominator when they are equal). When the squares underflow
# (data near 1e-300) or overflow (near 1e300), it is computed on v / max|v| and scaled back.
weighted_sd <- function(v, weights = NULL) {
  s <- plain_weighted_sd(v, weights)
  size <- max(abs(v))
  if (!isTRUE(s > 0 && is.finite(s)) && isTRUE(size > 0 && is.finite(size))) {
    s <- size * plain_weighted_sd(v / size, weights)
  }
  s
}

plain_weighted_sd <- function(v, weights) {
  if (is.null(weights)) return(stats::sd(v))
  w <- weights / sum(weights)
  sqrt(sum(w * (v - sum(w * v))^2) / (1 - sum(w^2)))
}

weighted_iqr <- function(v, w) {
  ord <- order(v)
  cw <- cumsum(w[ord])
  v[ord][which(cw >= 0.75)[1L]] - v[ord][which(cw >= 0.25)[1L]]
}

# Silverman's (1986, section 3.4.2) rule 0.9 min(s, IQR / 1.34) n^(-1/5) in one dimension, Scott's
# s n^(-1/(d + 4)) per variable (with the same robust s) in more.
bw_kde_rot <- function(x, weights) {
  spread <- apply(x, 2L, robust_scale, iqr_divisor = 1.34, weights = weights)
  n <- weight_summary(weights, nrow(x))$n
  if (!isTRUE(all(spread > 0))) {
    abort(c("{.arg x} has a column with no spread: the rule of thumb gives a zero bandwidth.",
            i = "Give {.arg bandwidth} as a number."), call = rlang::caller_env(2L))
  }
  d <- ncol(x)
  if (d == 1L) 0.9 * spread * n^(-1 / 5) else spread * n^(-1 / (d + 4))
}

# Data-driven selectors need at least two distinct values per variable and two points with
# weight; otherwise every functional degenerates (zero spread, infinite curvature).
check_spread <- function(x, weights, method, call = rlang::caller_env()) {
  w <- weights %||% rep(1, nrow(x))
  if (sum(w > 0) < 2L) {
    abort("{.arg weights} must give positive weight to at least 2 points to choose a bandwidth.",
          call = call)
  }
  used <- if (is.null(weights)) x else x[w > 0, , drop = FALSE]
  flat <- colnames(x)[apply(used, 2L, function(v) min(v) == max(v))]
  if (length(flat)) {
    abort(c("{.arg x} has no spread in {.field {flat}}: selector {.val {method}} cannot choose
             a {.arg bandwidth}.", i = "Give {.arg bandwidth} as a number."), call = call)
  }
}

# Normalised weights, their sum of squares (the weight of the i = j pairs) and the effective n.
weight_summary <- function(weights, n) {
  w <- if (is.null(weights)) rep(1 / n, n) else weights / sum(weights)
  self <- sum(w^2)
  list(w = w, self = self, n = 1 / self)
}

# ---- Gaussian derivatives --------------------------------------------------------------------

# Probabilists' Hermite polynomials He_0, ..., He_r at u (a list), from the recursion
# He_{k+1} = u He_k - k He_{k-1}; D^r phi(u) = (-1)^r He_r(u) phi(u).
hermite_list <- function(u, r) {
  he <- vector("list", r + 1L)
  he[[1L]] <- 1
  if (r >= 1L) he[[2L]] <- u
  for (k in seq_len(max(r - 1L, 0L))) he[[k + 2L]] <- u * he[[k + 1L]] - k * he[[k]]
  he
}

# The r-th derivative of the standard normal density, r even or odd.
dnorm_deriv <- function(u, r) {
  (-1)^r * hermite_list(u, r)[[r + 1L]] * stats::dnorm(u)
}

# ---- One-dimensional pair sums on a grid ---------------------------------------------------

# Every ordered pair (i, j) of binned points by lag: mass[l + 1] = sum of w_i w_j over pairs at
# lag l * delta (both signs counted), from the autocorrelation of the bin masses. A functional is
# then one sum over m lags, whatever n. m = 2^14 nodes keep the binned psi_4 and psi_6 within
# 1e-4 (relative) of the pairwise sums in test-kde-bandwidth.R, for one FFT pair of 2^15 values.
pair_lags_1d <- function(v, w, m = 2^14) {
  lo <- min(v)
  delta <- (max(v) - lo) / (m - 1)
  mass <- linear_bin(v, w, lo, max(v), m)
  acf <- mass_autocorrelation(mass)[seq_len(m)]
  acf[-1L] <- 2 * acf[-1L]
  list(lag = (seq_len(m) - 1) * delta, mass = acf, self = sum(w^2), n = 1 / sum(w^2))
}

# The autocorrelation sum_k a[k] a[k + l] of bin masses a (a vector or a matrix) at every lag l,
# by one FFT pair zero padded to twice the size in every dimension, so that it does not wrap:
# lags 0, 1, ... in the first half of each dimension, the negative ones in the second half.
# Rounding leaves tiny negative values where no pair exists: they become zero.
mass_autocorrelation <- function(a) {
  if (is.matrix(a)) {
    padded <- matrix(0, 2L * nrow(a), 2L * ncol(a))
    padded[seq_len(nrow(a)), seq_len(ncol(a))] <- a
  } else {
    padded <- c(a, numeric(length(a)))
  }
  acf <- Re(stats::fft(Mod(stats::fft(padded))^2, inverse = TRUE)) / length(padded)
  acf[acf < 0] <- 0
  acf
}

# sum_i sum_j w_i w_j k(X_i - X_j) for a kernel k that vanishes beyond `reach`.
lag_sum <- function(pairs, kern, reach) {
  keep <- seq_len(findInterval(reach, pairs$lag))
  sum(pairs$mass[keep] * kern(pairs$lag[keep]))
}

# Beyond 40 standard deviations the Gaussian underflows to zero in double precision: a lag sum
# cut there is exact.
gaussian_reach <- 40

# psi_r estimated with the Gaussian pilot g, all pairs (the diagonal included).
psi_1d <- function(pairs, r, g) {
  lag_sum(pairs, function(u) dnorm_deriv(u / g, r), gaussian_reach * g) / g^(r + 1)
}

# ---- Sheather-Jones solve-the-equation ---------------------------------------------------------

# Sheather & Jones (1991): h solves h = [R(phi) / (n S_D(alpha_2(h)))]^(1/5) with
# alpha_2(h) = 1.357 [S_D(a) / T_D(b)]^(1/7) h^(5/7), where S_D and T_D estimate psi_4 and -psi_6
# with the diagonal kept and the sums divided by n (n - 1); a and b are their normal-scale
# pilots 0.920 and 0.912 times the IQR (here 1.349 min(s, IQR / 1.349)) times n^(-1/7), n^(-1/9).
bw_sj_ste <- function(v, weights) {
  ws <- weight_summary(weights, length(v))
  pairs <- pair_lags_1d(v, ws$w)
  n <- ws$n
  scale <- robust_scale(v, 1.349, weights)
  unbiased <- 1 / (1 - ws$self)
  s_d <- function(alpha) psi_1d(pairs, 4L, alpha) * unbiased
  t_d <- -psi_1d(pairs, 6L, 1.23 * scale * n^(-1 / 9)) * unbiased
  s_a <- s_d(1.24 * scale * n^(-1 / 7))
  if (!(t_d > 0) || !(s_a > 0)) {
    abort(c("The Sheather-Jones pilot estimates are not positive for these data.",
            i = "Choose another {.arg method}, such as {.val isj} or {.val rot}."),
          call = rlang::caller_env(2L))
  }
  ratio <- 1.357 * (s_a / t_d)^(1 / 7)
  equation <- function(h) (1 / (2 * sqrt(pi) * n * s_d(ratio * h^(5 / 7))))^(1 / 5) - h
  h_max <- oversmoothed(scale, n)
  find_root(equation, c(0.1, 1) * h_max, "Sheather-Jones equation")
}

# Terrell's (1990) oversmoothed bandwidth 1.144 s n^(-1/5), an upper bound on the AMISE-optimal
# one for the scale s; stats::bw.SJ() and stats::bw.ucv() also search below it.
oversmoothed <- function(scale, n) 1.144 * scale * n^(-1 / 5)

# The root of a function that is positive at small and negative at large arguments, widening
# the bracket geometrically when needed.
find_root <- function(fun, interval, what, call = rlang::caller_env(2L)) {
  lo <- interval[1L]
  hi <- interval[2L]
  f_lo <- fun(lo)
  f_hi <- fun(hi)
  for (i in seq_len(60L)) {  # 60 halvings or doublings move an end by 2^60, about 1e18
    if (is.finite(f_lo) && is.finite(f_hi) && f_lo * f_hi <= 0) break
    if (!(f_lo > 0) || !is.finite(f_lo)) {
      lo <- lo / 2
      f_lo <- fun(lo)
    } else {
      hi <- hi * 2
      f_hi <- fun(hi)
    }
  }
  if (!(is.finite(f_lo) && is.finite(f_hi) && f_lo * f_hi <= 0)) {
    abort(c("The {what} has no solution for these data.",
            i = "Choose another {.arg method} or give {.arg bandwidth} as a number."),
          call = call)
  }
  stats::uniroot(fun, c(lo, hi), f.lower = f_lo, f.upper = f_hi, tol = 1e-10 * hi)$root
}

# ---- Multivariate functionals -------------------------------------------------------------------

# All multi-indices (rows) of total order r in d variables.
multi_indices <- function(d, r) {
  if (d == 1L) return(matrix(r, 1L, 1L))
  do.call(rbind, lapply(r:0, function(first) cbind(first, multi_indices(d - 1L, r - first))))
}

# Estimates of psi_r for the rows r of `orders` with the pilot G = g^2 I: a weighted sum over
# pair differences u (a list, one vector or matrix per variable, already divided by g) of
# prod_k He_{r_k}(u_k) phi(u), times g^-(d + |r|) (|r| even, so D^r phi = prod He phi).
psi_pair_terms <- function(u, mass, orders) {
  d <- length(u)
  he <- lapply(u, hermite_list, r = max(orders))
  e <- Reduce(`+`, lapply(u, function(ui) ui^2))
  base <- mass * exp(-e / 2)
  vapply(seq_len(nrow(orders)), function(q) {
    term <- base
    for (k in seq_len(d)) if (orders[q, k] > 0) term <- term * he[[k]][[orders[q, k] + 1L]]
    sum(term)
  }, numeric(1))
}

# A source of pairs for psi functionals in d >= 1 dimensions: lags of binned data, or the data
# themselves (every pair, summed in C++ in O(n) memory). Up to `binned_from` points in 2-D the
# exact pair sums (2e6 pairs) take a few milliseconds; above, the 256 x 256 grid of
# pair_lags_2d() is faster and its error (under 1% in test-kde-bandwidth.R) shrinks with n.
pair_source <- function(z, w, n_threads = 1L, binned_from = 2000L) {
  n <- nrow(z)
  d <- ncol(z)
  if (d == 1L) {
    p <- pair_lags_1d(z[, 1L], w)
    return(list(type = "lags", lag = list(c(-rev(p$lag[-1L]), p$lag)),
                mass = c(rev(p$mass[-1L]) / 2, p$mass[1L], p$mass[-1L] / 2)))
  }
  if (d == 2L && n > binned_from) return(pair_lags_2d(z, w))
  list(type = "pairs", z = z, w = w, n_threads = n_threads)
}

psi_multi <- function(src, g, orders) {
  d <- ncol(orders)
  scale <- (2 * pi)^(-d / 2) * g^(-d - rowSums(orders))
  total <- if (src$type == "lags") {
    psi_pair_terms(lapply(src$lag, `/`, g), src$mass, orders)
  } else {
    hermite_pair_sums(src$z, src$w, g, orders, src$n_threads %||% 1L)
  }
  scale * total
}

# 2-D linear binning on an m x m grid and the autocorrelation of the masses by a 2-D FFT:
# the mass of every lag vector, as for one dimension. m = 256 nodes a side keeps the binned
# functionals within 1% of the pair sums at pilot 0.5 (scaled data, test-kde-bandwidth.R), for
# one FFT pair of 512 x 512 values.
pair_lags_2d <- function(z, w, m = 256L) {
  lo <- apply(z, 2L, min)
  hi <- apply(z, 2L, max)
  delta <- (hi - lo) / (m - 1)
  mass <- matrix(linear_bin(z, w, lo, hi, c(m, m)), m, m)
  acf <- mass_autocorrelation(mass)
  lag_index <- c(0:(m - 1L), -m:-1)
  keep <- acf > 0
  list(type = "lags",
       lag = list(outer(lag_index * delta[1L], rep(1, 2L * m))[keep],
                  outer(rep(1, 2L * m), lag_index * delta[2L])[keep]),
       mass = acf[keep])
}

# Normal-reference psi_r for N(0, sigma): D^r phi_{2 sigma}(0). The derivative of
# exp(-x' P x / 2) at 0 for the indices i_1..i_2k is (-1)^k times the sum over perfect matchings
# of the indices of prod P_ab (Isserlis), P = (2 sigma)^-1.
psi_normal <- function(orders, sigma) {
  d <- ncol(orders)
  p <- solve(2 * sigma)
  const <- (2 * pi)^(-d / 2) / sqrt(det(2 * sigma))
  vapply(seq_len(nrow(orders)), function(q) {
    idx <- rep(seq_len(d), orders[q, ])
    (-1)^(length(idx) / 2) * const * matching_sum(idx, p)
  }, numeric(1))
}

matching_sum <- function(idx, p) {
  if (!length(idx)) return(1)
  rest <- idx[-1L]
  total <- 0
  for (j in seq_along(rest)) total <- total + p[idx[1L], rest[j]] * matching_sum(rest[-j], p)
  total
}

# The SAMSE pilot (Duong & Hazelton 2003) for all psi_r of order r with G = g^2 I: the bias of
# psi_r(g) (diagonal kept) is n^-1 g^-(d+r) A_r + g^2 B_r / 2 with A_r = D^r phi(0) and
# B_r = sum_j psi_{r + 2 e_j}; minimising the summed squared biases over g is a quadratic in
# t = n^-1 g^-(d+r+2). As in Duong & Hazelton (2003) and ks's own SAMSE pilot, the sum runs
# over the distinct multi-indices whose entries are all even, each counted once (checked against
# ks 1.14: the same g from the same psi_{r+2}).
pilot_samse <- function(d, r, psi_next, n) {
  orders <- multi_indices(d, r)
  orders <- orders[apply(orders %% 2L == 0L, 1L, all), , drop = FALSE]
  a <- psi_normal_at_zero(orders)
  b <- vapply(seq_len(nrow(orders)), function(q) {
    sum(vapply(seq_len(d), function(j) {
      target <- orders[q, ]
      target[j] <- target[j] + 2L
      psi_next(target)
    }, numeric(1)))
  }, numeric(1))
  s2 <- sum(a^2)
  s1 <- sum(a * b)
  s0 <- sum(b^2)
  k <- d + r
  t <- ((2 - k) * s1 + sqrt((2 - k)^2 * s1^2 + 8 * k * s2 * s0)) / (4 * k * s2)
  (t * n)^(-1 / (k + 2))
}

# D^r phi(0) for the standard d-variate normal: prod_k He_{r_k}(0) phi(0).
psi_normal_at_zero <- function(orders) {
  # He_r(0) = 0 for odd r and (-1)^(r/2) (r - 1)!! for even r
  he0 <- function(r) if (r %% 2L) 0 else (-1)^(r / 2) * prod(seq(1, max(r - 1, 1), by = 2))
  apply(orders, 1L, function(o) prod(vapply(o, he0, numeric(1)))) * (2 * pi)^(-ncol(orders) / 2)
}

# A lookup of psi values by multi-index.
psi_table <- function(orders, values) {
  keys <- apply(orders, 1L, paste, collapse = ",")
  function(r) values[[match(paste(r, collapse = ","), keys)]]
}

# Two-stage plug-in psi functionals of order 2s + 4 (s = derivative order of the target) on
# data z scaled to unit variances: normal-reference psi of order 2s + 8, SAMSE pilot and
# estimates of order 2s + 6, SAMSE pilot and estimates of order 2s + 4.
# In more than two dimensions the functionals are exact pair sums, O(n^2) in time: above `cap`
# points they use an evenly spaced subsample of `cap` (4.5e6 pairs, well under a second).
plugin_functionals <- function(z, w, n, sigma, s = 0L, cap = 3000L, n_threads = 1L) {
  d <- ncol(z)
  if (d > 2L && nrow(z) > cap) {
    # evenly spaced subsample: deterministic, no random numbers
    keep <- unique(round(seq(1, nrow(z), length.out = cap)))
    z <- z[keep, , drop = FALSE]
    w <- w[keep] / sum(w[keep])
    n <- min(n, 1 / sum(w^2))
  }
  src <- pair_source(z, w, n_threads)
  r_top <- 2L * s + 8L
  top <- multi_indices(d, r_top)
  lookup <- psi_table(top, psi_normal(top, sigma))
  for (r in c(2L * s + 6L, 2L * s + 4L)) {
    g <- pilot_samse(d, r, lookup, n)
    orders <- multi_indices(d, r)
    lookup <- psi_table(orders, psi_multi(src, g, orders))
  }
  lookup
}

# The AMISE of a diagonal H = diag(h^2) for the density (s = 0) or its gradient (s = 1), with
# the Gaussian kernel (Chacon, Duong & Wand 2011):
#   s = 0: n^-1 (4 pi)^(-d/2) / prod(h) + 1/4 sum_jk h_j^2 h_k^2 psi_{2e_j + 2e_k},
#   s = 1: n^-1 (4 pi)^(-d/2) / prod(h) * sum_j h_j^-2 / 2
#          - 1/4 sum_jk h_j^2 h_k^2 sum_i psi_{2e_i + 2e_j + 2e_k}.
# Minimised over log h by BFGS with the analytic gradient, from the normal-reference start.
amise_diag_min <- function(psi, d, n, s, start) {
  m <- matrix(0, d, d)
  for (j in seq_len(d)) {
    for (k in seq_len(d)) {
      base <- integer(d)
      base[j] <- base[j] + 2L
      base[k] <- base[k] + 2L
      m[j, k] <- if (s == 0L) psi(base) else -sum(vapply(seq_len(d), function(i) {
        r <- base
        r[i] <- r[i] + 2L
        psi(r)
      }, numeric(1)))
    }
  }
  c0 <- (4 * pi)^(-d / 2) / n
  value <- function(lh) {
    h2 <- exp(2 * lh)
    var <- c0 * exp(-sum(lh)) * (if (s == 0L) 1 else sum(1 / h2) / 2)
    var + sum(h2 * (m %*% h2)) / 4
  }
  gradient <- function(lh) {
    h2 <- exp(2 * lh)
    v0 <- c0 * exp(-sum(lh))
    dvar <- if (s == 0L) rep(-v0, d) else v0 * (-sum(1 / h2) - 2 / h2) / 2
    dvar + h2 * as.vector(m %*% h2)
  }
  fit <- stats::optim(log(start), value, gradient, method = "BFGS",
                      control = list(reltol = 1e-14, maxit = 500L))
  exp(fit$par)
}

# Plug-in diagonal bandwidth (per-variable scales) for the density (s = 0) or gradient (s = 1).
plugin_diag <- function(x, weights, s, n_threads = 1L) {
  ws <- weight_summary(weights, nrow(x))
  d <- ncol(x)
  sd <- apply(x, 2L, weighted_sd, weights = ws$w)
  z <- sweep(x, 2L, sd, "/")
  # normal reference: one variable, the robust scale min(s, IQR / 1.349) (Wand & Jones 1995),
  # as ks::hpi(); more, the covariance of the scaled data, as ks::Hpi.diag()
  sigma <- if (d == 1L) matrix((robust_scale(x[, 1L], 1.349, weights) / sd)^2) else
    stats::cov.wt(z, wt = ws$w)$cov
  psi <- plugin_functionals(z, ws$w, ws$n, sigma, s, n_threads = n_threads)
  start <- rep((4 / ((d + 2 * s + 2) * ws$n))^(1 / (d + 2 * s + 4)), d)
  h <- amise_diag_min(psi, d, ws$n, s, start)
  if (any(!is.finite(h)) || any(h <= 0)) {
    abort(c("The plug-in criterion has no minimum for these data.",
            i = "Choose another {.arg method} or give {.arg bandwidth} as a number."),
          call = rlang::caller_env(2L))
  }
  h * sd
}

bw_plugin_diag <- function(x, weights, n_threads = 1L) {
  h <- plugin_diag(x, weights, 0L, n_threads)
  if (ncol(x) == 1L) h[[1L]] else h
}

# Per-variable Gaussian scales for estimating the density gradient (mean shift): the two-stage
# plug-in for a diagonal H with derivative order 1, as ks::Hpi.diag(deriv.order = 1).
bw_gradient <- function(x, weights = NULL, n_threads = 1L) {
  x <- check_predictors(x)
  weights <- check_weights(weights, nrow(x))
  if (nrow(x) < 2L) abort("{.arg x} needs at least 2 points to choose a bandwidth.")
  check_spread(x, weights, "plugin")
  plugin_diag(x, weights, 1L, n_threads)
}

# ---- Least-squares cross-validation -------------------------------------------------------------

# LSCV(h) = int f_h^2 - 2 n^-1 sum_i f_{h,-i}(X_i) with the Gaussian kernel:
#   1 / (2 sqrt(pi) n h) + sum_{i != j} w_i w_j phi_{sqrt 2 h}(X_i - X_j)
#   - 2 / (1 - sum w^2) sum_{i != j} w_i w_j phi_h(X_i - X_j).
bw_lscv_1d <- function(v, weights) {
  ws <- weight_summary(weights, length(v))
  pairs <- pair_lags_1d(v, ws$w)
  off <- function(s) lag_sum(pairs, function(u) stats::dnorm(u, sd = s), gaussian_reach * s) -
    ws$self * stats::dnorm(0, sd = s)
  criterion <- function(h) {
    1 / (2 * sqrt(pi) * ws$n * h) + off(sqrt(2) * h) - 2 / (1 - ws$self) * off(h)
  }
  h_max <- oversmoothed(robust_scale(v, 1.349, weights), ws$n)
  floor <- lscv_floor(matrix(v), h_max)
  h <- minimise_1d(criterion, c(floor, 2 * h_max), "lscv", warn_low = FALSE)
  warn_lscv_floor(matrix(v), h, floor)
  h
}

# ---- Tied and rounded data ----
#
# Least-squares cross-validation collapses on tied or rounded data: a duplicated value keeps its
# twin's full kernel weight in the leave-one-out term, which grows without bound as h -> 0 (ks
# warns likewise). Every lscv search therefore keeps each bandwidth at or above the larger of
# 1/20 of its normal-reference scale and the column's resolution, the smallest gap between its
# distinct values (the rounding unit of rounded data): a kernel narrower than the rounding unit
# resolves the rounding, not the density. On untied data the resolution is far below the first.

# The smallest gap between distinct values of v (0 when v is constant).
# (the positive gaps of the sorted values: one sort, no unique())
data_resolution <- function(v) {
  u <- sort.int(v, method = "radix")
  gap <- u[-1L] - u[-length(u)]
  gap <- gap[gap > 0]
  if (length(gap)) min(gap) else 0
}

# The lower limit of the lscv search for the columns of x, given their reference scales.
lscv_floor <- function(x, reference) {
  pmax(reference / 20, vapply(seq_len(NCOL(x)), function(j) data_resolution(x[, j]), 1))
}

# The lower limit that tied or rounded columns of x put on the cv, gcv and aicc searches of the
# regression and classification families, on `kernel`'s scale: a tied column's resolution (its
# rounding unit, on the Gaussian scale as for lscv), 0 for an untied one. Leave-one-out lets a
# point's twins predict it with full weight, so below the rounding unit the score rewards
# kernels that fit every rounded value on its own (islands around the data) instead of a
# function of x; untied data have no twins and keep the search's own limits, and so do columns
# with fewer than `rounded_min_distinct` distinct values, which are codes (a 0/1 dummy, the
# cylinders of a car) rather than rounded measurements. `columns`: how many leading columns of
# x are numeric.
tie_floor <- function(x, kernel, columns = NCOL(x)) {
  floor <- vapply(seq_len(columns), function(j) {
    v <- x[, j]
    rounded <- anyDuplicated(v) && length(unique(v)) >= rounded_min_distinct
    if (rounded) data_resolution(v) else 0
  }, 1)
  floor * kernel_scale_factor(kernel)
}

rounded_min_distinct <- 10L

# Warns when a cv, gcv or aicc search chose the tie floor (tie_floor()) for some variable (the
# floor itself: candidates of the user's own may lie below it).
warn_tie_floor <- function(criterion, x, h, kernel) {
  floor <- tie_floor(x, kernel)
  low <- which(floor > 0 & abs(h - floor) <= 1e-6 * floor)
  if (!length(low)) return(invisible())
  names <- (colnames(x) %||% paste0("x", seq_len(ncol(x))))[low]
  tied <- vapply(low, function(j) mean(duplicated(x[, j])), 1)
  warn(c("The {.val {criterion}} score has its minimum at the resolution of tied or rounded data
          for {.field {names}}: {signif(h[low], 3)}, the smallest bandwidth searched there.",
         i = "{.field {names}} {cli::qty(length(low))}{?has/have} {round(100 * tied)}% duplicated
              values.",
         i = "A narrower kernel would fit each rounded value on its own; give {.arg bandwidth}
              as a number to go below it."), class = "localmean_rounded")
}

# Warns when the lscv minimum is at the lower limit in some columns, saying which of them are
# tied (their share of duplicated values) and at what resolution.
warn_lscv_floor <- function(x, h, floor) {
  low <- h <= floor * (1 + 1e-6)
  if (!any(low)) return(invisible())
  names <- colnames(x) %||% paste0("x", seq_len(ncol(x)))
  if (ncol(x) == 1L && is.null(colnames(x))) names <- "x"
  tied <- vapply(seq_len(ncol(x)), function(j) mean(duplicated(x[, j])), 1)
  at <- names[low]
  ties <- low & tied > 0
  why <- if (any(ties)) {
    c(i = paste0("{.field {names[ties]}} {cli::qty(sum(ties))}{?has/have} tied or rounded values
                  ({round(100 * tied[ties])}% duplicated, resolution
                  {signif(apply(x[, ties, drop = FALSE], 2L, data_resolution), 3)}): least-squares
                  cross-validation is not well-behaved on such data."),
      i = "Consider {.val plugin} or {.val rot}, or give {.arg bandwidth} as a number.")
  }
  warn(c(paste0("The {.val lscv} criterion has its minimum at the smallest bandwidth searched
                 for {.field {at}}: {signif(floor[low], 3)} (the larger of 1/20 of the
                 normal-reference scale and the resolution of the data)."), why))
}

# Global minimum of a criterion on a log grid, refined by optimize() between its neighbours. 80
# points are about 5% apart over the 40-fold ranges searched here.
minimise_1d <- function(criterion, range, method, call = rlang::caller_env(2L), warn_low = TRUE) {
  grid <- exp(seq(log(range[1L]), log(range[2L]), length.out = 80L))
  values <- vapply(grid, criterion, numeric(1))
  if (!any(is.finite(values))) {
    abort("The {.val {method}} criterion cannot be computed for these data.", call = call)
  }
  best <- which.min(values)
  if (best %in% c(1L, length(grid))) {
    if (warn_low || best > 1L) {
      warn("The {.val {method}} criterion has its minimum at an end of the search interval
            [{signif(range[1L], 3)}, {signif(range[2L], 3)}].")
    }
    return(grid[best])
  }
  stats::optimize(function(h) finite_or_max(criterion(h)), grid[best + c(-1L, 1L)],
                  tol = 1e-8 * grid[best])$minimum
}

# Diagonal LSCV: the pair sums come from the engine, sum_q w_q sum_i w_i exp(-|(x_i - x_q)/s|^2/2)
# (self pairs included, then removed). The search is over a common multiple of the
# normal-reference scales, then over every scale (Nelder-Mead on log h).
bw_lscv_diag <- function(x, weights, n_threads) {
  ws <- weight_summary(weights, nrow(x))
  d <- ncol(x)
  pair_exp <- function(s) {
    sums <- engine_run(engine_spec(x, "gaussian", s, prior = ws$w, method = "tree",
                                   n_threads = n_threads), x)$wsum
    sum(ws$w * sums) - ws$self
  }
  criterion <- function(h) {
    if (any(!is.finite(h)) || any(h <= 0)) return(Inf)
    norm_h <- (2 * pi)^(-d / 2) / prod(h)
    (4 * pi)^(-d / 2) / (ws$n * prod(h)) + norm_h * 2^(-d / 2) * pair_exp(sqrt(2) * h) -
      2 / (1 - ws$self) * norm_h * pair_exp(h)
  }
  grid <- diag_search_grid(x, ws, criterion)
  if (grid$best == length(grid$log_h)) {
    warn("The {.val lscv} criterion has its minimum at the largest bandwidths searched.")
  }
  fit <- stats::optim(grid$clamp(grid$log_h[[grid$best]]),
                      function(lh) criterion(exp(grid$clamp(lh))),
                      control = list(reltol = 1e-10, maxit = 1000L))
  h <- exp(grid$clamp(fit$par))
  warn_lscv_floor(x, h, exp(grid$lower))
  h
}

# The first stage of the diagonal cross-validation searches (bw_lscv_diag(), bw_mlcv()): the
# criterion at common multiples 1/20 to 2 of the normal-reference scales (as in one dimension,
# about 10% apart), log h kept within [lscv_floor(), 2] times those scales by `clamp`. Returns
# the grid's log h (unclamped, one vector per multiple), the criterion there, the best point
# and the lower limit.
diag_search_grid <- function(x, ws, criterion) {
  d <- ncol(x)
  sd <- apply(x, 2L, weighted_sd, weights = ws$w)
  start <- sd * (4 / ((d + 2) * ws$n))^(1 / (d + 4))
  lower <- log(lscv_floor(x, start))
  upper <- log(pmax(2 * start, exp(lower)))
  clamp <- function(lh) pmin(pmax(lh, lower), upper)
  mult <- exp(seq(log(0.05), log(2), length.out = 40L))
  log_h <- lapply(mult, function(a) log(a * start))
  values <- vapply(log_h, function(lh) criterion(exp(clamp(lh))), numeric(1))
  list(log_h = log_h, values = values, best = which.min(values), lower = lower, clamp = clamp)
}

# ---- Likelihood cross-validation ----------------------------------------------------------------

# Likelihood cross-validation (Habbema, Hermans & van den Broek 1974; Duin 1976; np's cv.ml):
# maximises sum_i w_i log f_-i(X_i), with the leave-one-out density
#   f_-i(X_i) = (S_i - w_i) / (1 - w_i) (2 pi)^(-d/2) / prod(h),
# S_i the engine's Gaussian weight sum at X_i (its own weight w_i included, then removed). A
# zero leave-one-out density scores as the smallest positive double (as np's cv.ml), so that
# the score stays finite. The search is bw_lscv_diag()'s: a common multiple of the
# normal-reference scales on a grid, then every scale (Nelder-Mead on log h; a golden-section
# search in one dimension), within the same limits, with the same warning at the lower one.
bw_mlcv <- function(x, weights, n_threads) {
  ws <- weight_summary(weights, nrow(x))
  d <- ncol(x)
  spec <- engine_spec(x, "gaussian", rep(1, d), prior = ws$w, method = "tree",
                      n_threads = n_threads)
  criterion <- function(h) {
    if (any(!is.finite(h)) || any(h <= 0)) return(Inf)
    sums <- engine_run(with_scale(spec, h), x)$wsum
    dens <- (2 * pi)^(-d / 2) / prod(h) * (sums - ws$w) / (1 - ws$w)
    -sum(ws$w * log(pmax(dens, .Machine$double.xmin)))
  }
  grid <- diag_search_grid(x, ws, criterion)
  best <- grid$best
  clamp <- grid$clamp
  if (best == length(grid$log_h)) {
    warn("The {.val mlcv} criterion has its optimum at the largest bandwidths searched.")
  }
  h <- if (d == 1L) {
    around <- unlist(grid$log_h[pmin(pmax(best + c(-1L, 1L), 1L), length(grid$log_h))])
    exp(clamp(stats::optimize(function(lh) finite_or_max(criterion(exp(clamp(lh)))), around,
                              tol = 1e-8)$minimum))
  } else {
    fit <- stats::optim(clamp(grid$log_h[[best]]), function(lh) criterion(exp(clamp(lh))),
                        control = list(reltol = 1e-10, maxit = 1000L))
    exp(clamp(fit$par))
  }
  if (criterion(h) > grid$values[best]) h <- exp(clamp(grid$log_h[[best]]))
  warn_mlcv_floor(x, h, exp(grid$lower))
  h
}

# ---- Smoothed cross-validation ------------------------------------------------------------------

# SCV(h) = 1 / (2 sqrt(pi) n h) + sum_i sum_j w_i w_j
#   [phi_{sqrt(2h^2 + 2g^2)} - 2 phi_{sqrt(h^2 + 2g^2)} + phi_{sqrt(2) g}](X_i - X_j),
# the estimated integrated squared bias of Jones, Marron & Park (1991) with a Gaussian pilot g.
bw_scv_1d <- function(v, weights) {
  ws <- weight_summary(weights, length(v))
  pairs <- pair_lags_1d(v, ws$w)
  g <- scv_pilot(pairs, v, weights, ws$n)
  criterion <- function(h) {
    wide <- sqrt(2 * h^2 + 2 * g^2)
    k <- function(u) {
      stats::dnorm(u, sd = wide) - 2 * stats::dnorm(u, sd = sqrt(h^2 + 2 * g^2)) +
        stats::dnorm(u, sd = sqrt(2) * g)
    }
    1 / (2 * sqrt(pi) * ws$n * h) + lag_sum(pairs, k, gaussian_reach * wide)
  }
  h_max <- oversmoothed(robust_scale(v, 1.349, weights), ws$n)
  minimise_1d(criterion, c(h_max / 20, 2 * h_max), "scv")
}

# The SCV pilot. The smoothed bias term is about h^4 / 4 times psi_4 estimated with the kernel
# L_g * L_g (a Gaussian of scale sqrt(2) g), diagonal included, whose leading bias
# n^-1 (sqrt(2) g)^-5 phi^(4)(0) + g^2 psi_6 vanishes at
# g = 2^(-1/2) [-2 phi^(4)(0) / (psi_6 n)]^(1/7); psi_6 comes from a two-stage plug-in
# (normal-reference psi_10 with the scale min(s, IQR / 1.349), then psi_8).
scv_pilot <- function(pairs, v, weights, n) {
  s <- robust_scale(v, 1.349, weights)
  psi10 <- -945 / (64 * sqrt(pi) * s^11)
  psi8 <- psi_1d(pairs, 8L, (-2 * dnorm_deriv(0, 8L) / (psi10 * n))^(1 / 11))
  psi6 <- psi_1d(pairs, 6L, (-2 * dnorm_deriv(0, 6L) / (psi8 * n))^(1 / 9))
  if (!(psi6 < 0)) {
    abort(c("The {.val scv} pilot estimate of psi_6 is not negative for these data.",
            i = "Choose another {.arg method}, such as {.val plugin}."),
          call = rlang::caller_env(2L))
  }
  (-2 * dnorm_deriv(0, 4L) / (psi6 * n))^(1 / 7) / sqrt(2)
}

# ---- Improved Sheather-Jones (diffusion) ---------------------------------------------------------

# Botev, Grotowski & Kroese (2010). On [0, 1] the diffusion estimate at time t (a Gaussian of
# variance t with reflecting ends) is sum_k a_k exp(-k^2 pi^2 t / 2) cos(k pi x) with
# a_k = 2 sum_i w_i cos(k pi X_i), so ||f^(j)(t)||^2 = 1/2 sum_k (k pi)^(2j) a_k^2 exp(-k^2 pi^2 t).
# m = 2^14 cells and l = 7 stages are the defaults of the authors' reference code. The root is
# sought between t = 1/m^2 (a standard deviation of one cell) and 0.1 (a third of the range).
bw_isj <- function(v, weights, m = 2^14, stages = 7L) {
  ws <- weight_summary(weights, length(v))
  widen <- diff(range(v)) / 10
  lo <- min(v) - widen
  width <- diff(range(v)) + 2 * widen
  coef <- dct_coefficients((v - lo) / width, ws$w, m)
  k2 <- (seq_len(m - 1L) * pi)^2
  a2 <- coef^2
  norm_deriv <- function(j, t) sum(k2^j * a2 * exp(-k2 * t)) / 2
  equation <- function(t) t - isj_gamma(t, norm_deriv, ws$n, stages)
  t_star <- largest_root(equation, c(1 / m^2, 0.1))
  if (!is.finite(t_star)) {
    abort(c("The {.val isj} fixed-point equation has no solution for these data.",
            i = "Choose another {.arg method}, such as {.val plugin}."),
          call = rlang::caller_env())
  }
  sqrt(t_star) * width
}

# The largest root where the function crosses from negative to positive, on a log grid then by
# uniroot(). Rounded or tied data add spurious small roots (time scales of the rounding); the
# largest is the one at the scale of the density. NA when there is none. The 60 grid points are
# about a third apart over the range that bw_isj() searches.
largest_root <- function(fun, range) {
  grid <- exp(seq(log(range[1L]), log(range[2L]), length.out = 60L))
  values <- vapply(grid, fun, numeric(1))
  up <- which(values[-length(grid)] < 0 & values[-1L] >= 0)
  if (!length(up) || anyNA(values)) return(NA_real_)
  i <- max(up)
  stats::uniroot(fun, grid[c(i, i + 1L)], f.lower = values[i], f.upper = values[i + 1L],
                 tol = 1e-12 * grid[i + 1L])$root
}

# xi gamma^[l](t): ||f^(l)||^2 at time t gives t_{l-1}; for j = l - 1, ..., 2,
#   t_j = [(1 + 2^-(j + 1/2)) / 3 * (2j - 1)!! / (N sqrt(pi / 2) ||f^(j+1)||^2)]^(2 / (3 + 2j))
# with ||f^(j+1)||^2 estimated at t_{j+1}; finally (2 N sqrt(pi) ||f''(t_2)||^2)^(-2/5).
isj_gamma <- function(t, norm_deriv, n, stages) {
  f <- norm_deriv(stages, t)
  for (j in (stages - 1L):2L) {
    odd <- prod(seq(1, 2 * j - 1, by = 2))
    t_j <- ((1 + 2^(-(j + 0.5))) / 3 * odd / (n * sqrt(pi / 2) * f))^(2 / (3 + 2 * j))
    f <- norm_deriv(j, t_j)
  }
  (2 * n * sqrt(pi) * f)^(-2 / 5)
}

# Cosine coefficients a_k = 2 sum_m p_m cos(k pi (m + 1/2) / M), k = 1..M-1, of the bin masses p
# of u in [0, 1] on M cells: a DCT-II through one FFT of length 2M.
dct_coefficients <- function(u, w, m) {
  # the cell masses: linear binning of the cell numbers on the nodes 0..m-1 puts every point on
  # its node whole
  cell <- pmin(floor(u * m), m - 1)
  p <- linear_bin(cell, w, 0, m - 1, m)
  spec <- stats::fft(c(p, numeric(m)))[seq_len(m)]
  k <- 0:(m - 1L)
  a <- 2 * Re(exp(-1i * pi * k / (2 * m)) * spec)
  a[-1L]
}

# ---- Data with categorical columns -------------------------------------------------------------

# Selectors for data with categorical columns (see kde()).
mixed_kde_selectors <- c("rot", "lscv")

# Whether x (a vector or data frame) has categorical columns: factors, character or logical.
has_categorical <- function(x) {
  is_categorical(x) || (is.data.frame(x) && any(vapply(x, is_categorical, TRUE)))
}

# Bandwidths of mixed data, one per column in column order (h on the scale of `kernel` for numeric
# columns, lambda for categorical ones), by "rot" or "lscv" (see kde()).
kde_mixed_bandwidth <- function(predictors, method, kernel, weights, n_threads,
                                call = rlang::caller_env()) {
  num <- predictors$x
  cat <- predictors$categorical
  d <- ncol(num)
  if (method == "lscv") {
    if (d) check_spread(num, weights, method, call = call)
    bw <- bw_lscv_mixed(num, cat, weights, n_threads)
  } else {
    bw <- list(h = if (d) bw_kde_rot(num, weights),
               lambda = lambda_rot(cat, weight_summary(weights, nrow(num))$n, d))
  }
  out <- join_bandwidth(bw$h * kernel_scale_factor(kernel), bw$lambda, predictors)
  stats::setNames(out, predictors$names)
}

# Least-squares cross-validation of every bandwidth of mixed data with the Gaussian kernel,
# weights w_i summing to one. The criterion is the integrated squared error less its constant,
#   LSCV(h, lambda) = sum_z int f(x, z)^2 dx - 2 sum_i w_i f_{-i}(x_i, z_i),
# z running over every combination of levels. The integral of two Gaussian kernels of scale h is
# one of scale sqrt(2) h, and for the levels the integral becomes the sum over z of
# L(z, z_i) L(z, z_j) (the discrete kernels of each column multiplied). Hence
#   sum_z int f^2 = sum_j w_j sum_z L(z, z_j) S_z(x_j),   S_z(x) = sum_i w_i phi_{sqrt(2) h}(x - x_i) L(z, z_i),
# the engine's weight sums at the data points with every combination z as the query's levels.
# For an unordered column the sum over its levels is again an Aitchison-Aitken kernel, with
# lambda' = 1 - sum_z L(z, l)^2 (its weights at equal levels; the others share the rest evenly),
# so the engine takes it directly at the point's own level and only ordered columns are
# enumerated. The leave-one-out term removes each point's own weight phi_h(0) L(z_i, z_i) from
# the engine's sums at the data, with the normaliser 1 / (1 - sum w_i^2) (1 / (n - 1) unweighted).
lscv_mixed_criterion <- function(num, categorical, weights, n_threads) {
  n <- nrow(num)
  d <- ncol(num)
  ws <- weight_summary(weights, n)
  codes <- categorical$codes
  ordered <- categorical$ordered
  combos <- as.matrix(expand.grid(lapply(categorical$levels[ordered], seq_along),
                                  KEEP.OUT.ATTRS = FALSE))
  rows <- rep(seq_len(n), max(1L, nrow(combos)))
  ise_points <- num[rows, , drop = FALSE]
  ise_codes <- codes[rows, , drop = FALSE]
  ise_codes[, ordered] <- combos[rep(seq_len(nrow(combos)), each = n), , drop = FALSE]
  spec <- engine_spec(num, "gaussian", rep(1, d), prior = ws$w, method = "tree",
                      categorical = categorical, lambda = lambda_upper(categorical),
                      unit_mass = TRUE, n_threads = n_threads)
  sums <- function(scale, lambda, points, query_codes) {
    engine_run(with_scale(spec, scale, lambda = lambda), points, query_codes = query_codes)$wsum
  }
  norm <- function(s) (2 * pi)^(-d / 2) / prod(s)
  criterion <- function(h, lambda) {
    own <- 1   # L(z, z_j) of the ordered columns: combinations z in rows, points j in columns
    self <- 1  # L(z_j, z_j)
    convolved <- lambda
    for (j in seq_along(lambda)) {
      table <- discrete_kernel_table(categorical, j, lambda[j])
      self <- self * diag(table)[codes[, j]]
      if (ordered[j]) {
        own <- own * table[combos[, match(j, which(ordered))], codes[, j], drop = FALSE]
      } else {
        convolved[j] <- 1 - sum(table[, 1L]^2)
      }
    }
    s_z <- matrix(sums(sqrt(2) * h, convolved, ise_points, ise_codes), n)
    ise <- norm(sqrt(2) * h) * sum(ws$w * s_z * if (is.matrix(own)) t(own) else own)
    loo <- (sum(ws$w * sums(h, lambda, num, codes)) - sum(ws$w^2 * self)) / (1 - ws$self)
    ise - 2 * norm(h) * loo
  }
  list(criterion = criterion, spec = spec, ws = ws)
}

# The search: from the normal-reference scales and the lambda rule of thumb, the best common
# multiple of the scales on a grid, then the joint search of every bandwidth (joint_search(),
# as the regression selectors); a lone lambda by a golden-section search over [0, upper]. As
# for numeric data (bw_lscv_diag()), h stays above 1/20 of the normal-reference scale: LSCV
# tends to zero bandwidths on rounded or tied data, and a warning says when the minimum is there.
bw_lscv_mixed <- function(num, categorical, weights, n_threads) {
  d <- ncol(num)
  lscv <- lscv_mixed_criterion(num, categorical, weights, n_threads)
  memo <- new.env(parent = emptyenv())
  score_of <- function(h, threads = NULL, lambda) {
    key <- paste(format(c(h, lambda), digits = 17), collapse = ",")
    if (is.null(memo[[key]])) memo[[key]] <- lscv$criterion(h, lambda)
    memo[[key]]
  }
  upper <- lambda_upper(categorical)
  lambda <- lambda_rot(categorical, lscv$ws$n, d)
  if (d == 0L && length(upper) == 1L) {
    lone <- function(l) finite_or_max(score_of(numeric(0), lambda = l))
    opt <- stats::optimize(lone, c(0, upper), tol = 1e-6 * upper)
    return(list(h = numeric(0), lambda = opt$minimum))
  }
  bounds <- bandwidth_bounds(lscv$spec)
  start <- numeric(0)
  if (d) {
    sd <- apply(num, 2L, weighted_sd, weights = lscv$ws$w)
    reference <- sd * (4 / ((d + 2) * lscv$ws$n))^(1 / (d + 4))
    bounds[1L, ] <- lscv_floor(num, reference)
    mult <- exp(seq(log(0.05), log(2), length.out = 16L))
    values <- vapply(mult, function(a) score_of(a * reference, lambda = lambda), 1)
    start <- mult[which.min(values)] * reference
  }
  best <- joint_search(score_of, start, lambda, bounds, lscv$spec)
  if (d) warn_lscv_floor(num, best$h, bounds[1L, ])
  best
}

# ---- Normal scale for the density gradient ------------------------------------------------------

# Per-variable Gaussian scales for estimating the r-th derivative of the density (r = 1: the
# gradient, which mean shift climbs) by the normal-scale rule of Chacon, Duong & Wand (2011):
# h_j = (4 / ((d + 2r + 2) n))^(1 / (d + 2r + 4)) s_j, the diagonal of ks::Hns(deriv.order = r).
# The AMISE-optimal bandwidth for a normal density, it oversmooths multimodal data a little,
# which for clustering keeps ripples of the estimate from becoming modes.
bw_gradient_ns <- function(x, weights = NULL, r = 1L) {
  ws <- weight_summary(weights, nrow(x))
  d <- ncol(x)
  sd <- apply(x, 2L, weighted_sd, weights = weights)
  (4 / ((d + 2 * r + 2) * ws$n))^(1 / (d + 2 * r + 4)) * sd
}
