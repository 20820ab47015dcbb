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
#' @param kernel A kernel: a name (see `kernels()$kernel`), a function of the scaled distance or a
#'   [user_kernel()]; for `kernels()`, NULL (the default) lists every built-in kernel.
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return `kernels()`: a data frame with one row per kernel (or the row of `kernel`): `kernel`,
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
#' kernels(function(u) exp(-u^4))
#' curve(kernel_value(x, "epanechnikov"), -1.5, 1.5)
kernels <- function(kernel = NULL, ...) {
  check_dots(...)
  columns <- c("kernel", "compact", "cutoff", "constant", "mu2", "roughness", "canonical",
               "shadow")
  if (is.null(kernel)) return(registry_table()[columns])
  row <- kernel_row(check_kernel(kernel))
  row$kernel <- as.character(row$kernel)
  as.data.frame(row[columns], stringsAsFactors = FALSE)
}

#' @rdname kernels
#' @param u Numeric vector of scaled distances.
#' @return `kernel_value()`: the kernel density \eqn{k(u)}{k(u)}.
#' @export
kernel_value <- function(u, kernel = "gaussian", ...) {
  check_dots(...)
  kernel <- engine_kernel(check_kernel(kernel))
  if (!is.numeric(u)) abort("{.arg u} must be numeric.")
  cpp_kernel_value(kernel, as.double(u))
}

# The kernel's distribution function on the line, int_{-Inf}^u k(t) dt, from the registry
# (kernel_cdf() in kernels.hpp; built-in kernels only): the integrated kernel of conditional
# distribution functions.
kernel_cdf <- function(u, kernel) cpp_kernel_cdf(as.character(kernel), as.double(u))

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
  # (if-else rather than %||%: several calls per fit)
  user <- attr(kernel, "user_kernel")
  if (is.null(user)) user <- registry$user[[kernel]]
  if (!is.null(user)) return(user$row)
  row <- registry$rows[[kernel]]
  if (is.null(row)) {
    tab <- registry_table()
    row <- registry$rows[[kernel]] <- as.list(tab[tab$kernel == kernel, ])
  }
  row
}

# Registry kernels, optionally only those with a property (e.g. "multivariate", "compact").
kernel_names <- function(having = NULL) {
  tab <- registry_table()
  if (is.null(having)) tab$kernel else tab$kernel[tab[[having]]]
}

# A kernel argument as methods carry it: a registry name, or for a kernel of the user's own (an
# R function of the distance, a user_kernel(), or a registered user kernel's name) a handle: its
# name with its table attached (kernel_handle()). `user = FALSE` where a method needs a built-in
# kernel (`need` says why); `having` asks for a property of the registry row.
check_kernel <- function(kernel, having = NULL, user = TRUE, need = NULL,
                         arg = rlang::caller_arg(kernel), call = rlang::caller_env()) {
  if (is.character(kernel) && length(kernel) == 1L && kernel %in% kernel_names()) {
    if (is.null(having)) return(kernel)  # (every fit asks: one lookup of the names)
    return(check_choice(kernel, kernel_names(having), arg = arg, call = call))
  }
  force(arg)  # before `kernel` changes
  kernel <- as_user_kernel(kernel, arg, call)
  if (is.null(kernel)) check_choice(kernel, kernel_names(having), arg = arg, call = call)
  if (!user) {
    abort(c("{.arg {arg}} must be a built-in kernel here, one of {.val {kernel_names(having)}}.",
            i = need %||% "This method needs facts that a tabulated profile does not have."),
          call = call)
  }
  if (!is.null(having) && !isTRUE(kernel$row[[having]])) {
    abort("{.arg {arg}} must be a kernel with property {.field {having}}.", call = call)
  }
  kernel_handle(register_user_kernel(kernel))
}

# A user kernel from a kernel argument (NULL if it is none): a function is tabulated under the
# name "user".
as_user_kernel <- function(kernel, arg, call) {
  if (is.function(kernel)) return(make_user_kernel(kernel, "user", arg, call))
  if (inherits(kernel, "local_kernel")) return(kernel)
  if (is.character(kernel) && length(kernel) == 1L && !is.na(kernel)) {
    return(attr(kernel, "user_kernel") %||% registry$user[[kernel]])
  }
  if (is_weight_matrix(kernel)) {
    abort(c("{.arg {arg}} cannot be a weight matrix here.",
            i = "Weight matrices serve {.fn local_mean}, {.fn local_poly} and
                 {.fn local_smooth}."), call = call)
  }
  NULL
}

# A precomputed weight matrix (queries x data): dense numeric, or sparse from the Matrix package.
is_weight_matrix <- function(kernel) {
  (is.matrix(kernel) && is.numeric(kernel)) || inherits(kernel, "Matrix")
}

# Factor that turns a Gaussian-scale bandwidth into an equivalent one for `kernel`.
kernel_scale_factor <- function(kernel) kernel_row(kernel)$equivalent

# ---- Kernels of the user's own ------------------------------------------------------------------

#' A kernel of your own
#'
#' Turns a radial profile \eqn{g(u)}{g(u)}, an R function of the scaled distance
#' \eqn{u = \|(x - x^*)/h\| \ge 0}{u = ||(x - x*)/h|| >= 0}, into a kernel that every method
#' taking a `kernel` accepts, exactly as a built-in one: `kernel = function(u) (1 - u^2)^3 *
#' (abs(u) < 1)` smooths as `kernel = "triweight"` does. A bare function given as `kernel` goes
#' through `user_kernel()` with its defaults.
#'
#' The profile is checked (finite, non-negative, positive at 0 and non-increasing on the table's
#' nodes) and tabulated once: its support is found numerically (compact when it vanishes within 64
#' scales, else it is truncated where it falls below \eqn{e^{-32}}{exp(-32)} of its peak, the
#' registry's rule for the Gaussian), then it is tabulated at equally spaced nodes of the squared
#' distance \eqn{u^2}{u^2} (or, for a profile that is not smooth in it, such as
#' \eqn{e^{-u}}{exp(-u)}, of the distance) and interpolated by the cubic through the four nearest
#' nodes. The number of nodes doubles (from 4 to at most 65536 intervals) until the interpolant
#' matches the function within \eqn{10^{-12}}{1e-12} of its peak between the nodes; a profile
#' that never does (a jump inside its support) gets a warning with the accuracy reached. The
#' constants of its registry row (normalising constant, second moment, roughness) are integrals of
#' the interpolant. The engine then evaluates the table in C++ about as fast as a built-in kernel
#' (a polynomial profile such as \eqn{(1 - u^2)^3}{(1 - u^2)^3} needs no table at all).
#'
#' The scale of \eqn{g}{g} does not matter: densities divide by its integral. The bandwidth is the
#' profile's own scale (\eqn{K_h(t) = c\,g(|t|/h)/h}{K_h(t) = c g(|t|/h)/h}), so `bandwidth = 0.5`
#' with a profile supported on \eqn{[0, 1]}{[0, 1]} reaches 0.5 either way.
#'
#' A user kernel is registered for the session under its `name` (a new kernel of the same name
#' replaces it); fits keep its table, so `predict()` works after `saveRDS()`/`readRDS()` and in
#' `future` workers. Methods that need facts a tabulated profile lacks refuse it with an error:
#' the shadow kernel of [local_score()], the mode-merging acceleration of the Gaussian, the joint
#' leave-one-out search and learned metric (Gaussian only), sequence and imputation methods.
#'
#' A kernel that is no function of a distance (a graph, an asymmetric or a learned kernel) can be
#' given to [local_mean()], [local_poly()] and [local_smooth()] as a weight matrix instead, see
#' their `kernel` argument.
#'
#' @param profile A function of the scaled distance `u` (a numeric vector, values at least 0)
#'   returning the profile's values; vectorised or not.
#' @param name The kernel's name, as fits print it; not the name of a built-in kernel.
#' @inheritParams kernels
#' @return A `local_kernel` object: its `name`, the registry `row` (as [kernels()] gives it)
#'   and the tabulated profile; pass it as `kernel` to any method.
#' @family kernels
#' @export
#' @examples
#' tw <- user_kernel(function(u) (1 - u^2)^3 * (abs(u) < 1), name = "my_triweight")
#' kernels(tw)
#' fit <- local_mean(dist ~ speed, cars, kernel = tw, bandwidth = 5)
#' all.equal(fitted(fit), fitted(local_mean(dist ~ speed, cars, kernel = "triweight",
#'                                          bandwidth = 5)))
user_kernel <- function(profile, name = "user", ...) {
  check_dots(...)
  if (!is.function(profile)) abort("{.arg profile} must be a function of the scaled distance.")
  if (!is.character(name) || length(name) != 1L || is.na(name) || !nzchar(name)) {
    abort("{.arg name} must be a single non-empty string.")
  }
  if (name %in% kernel_names()) {
    abort("{.arg name} must not be a built-in kernel's name ({.val {name}}).")
  }
  make_user_kernel(profile, name, "profile", rlang::current_env())
}

make_user_kernel <- function(profile, name, arg, call) {
  tab <- tabulate_profile(profile, name, arg, call)
  register_user_kernel(structure(list(name = name, row = tab$row, values = tab$values,
                                      upper = tab$upper, compact = tab$compact,
                                      squared = tab$squared),
                                 class = "local_kernel"))
}

#' @export
print.local_kernel <- function(x, ...) {
  check_dots(...)
  row <- x$row
  cat(sprintf("<local_kernel> %s: %s support %s, %d table nodes\n", x$name,
              if (row$compact) "compact" else "truncated", format(signif(row$cutoff, 6)),
              length(x$values)))
  invisible(x)
}

# The profile evaluated at u (vectorised or not), checked: finite and non-negative.
profile_values <- function(profile, u, arg, call) {
  g <- tryCatch(profile(u), error = function(e) NULL)
  if (!is.numeric(g) || length(g) != length(u)) {
    g <- tryCatch(vapply(u, function(v) as.double(profile(v))[1L], numeric(1)),
                  error = function(e) {
                    abort(c("{.arg {arg}} failed on scaled distances.", x = conditionMessage(e)),
                          call = call)
                  })
  }
  g <- as.double(g)
  if (anyNA(g) || any(!is.finite(g)) || any(g < 0)) {
    abort("{.arg {arg}} must return finite, non-negative values for distances u >= 0.",
          call = call)
  }
  g
}

# The support of a profile: compact when it vanishes before `kMaxSupport` scales without first
# falling below exp(-32) of its peak on the scan (the last distance where it is positive, by
# bisection), else the radius where it falls below that (the registry's cut-off for the Gaussian
# and the Laplace; the Gaussian's profile underflows to 0 only at 38.6 scales).
kMaxSupport <- 64
profile_support <- function(profile, peak, arg, call) {
  u <- seq(0, kMaxSupport, length.out = 64L * kMaxSupport + 1L)
  g <- profile_values(profile, u, arg, call)
  floor <- exp(-32) * peak
  first <- which(g <= floor)[1L]
  compact <- !is.na(first) && g[first] == 0
  if (is.na(first)) {
    abort(c("{.arg {arg}} must vanish, or fall below exp(-32) of its peak, within
             {kMaxSupport} scales.", i = "Heavy-tailed profiles cannot be tabulated; the
             built-in {.val cauchy} kernel is one."), call = call)
  }
  lo <- u[first - 1L]
  hi <- u[first]
  below <- if (compact) function(v) v == 0 else function(v) v <= floor
  for (i in seq_len(60L)) {
    mid <- (lo + hi) / 2
    if (mid <= lo || mid >= hi) break
    if (below(profile_values(profile, mid, arg, call))) hi <- mid else lo <- mid
  }
  list(upper = lo, compact = compact)
}

# Tabulates and registers the profile (see user_kernel()): in the squared distance first, whose
# table needs no square root per weight, then in the distance. The table doubles from 4 intervals
# until the interpolant meets the function within 1e-12 of the peak, at the midpoints between
# nodes and on a fixed grid of `kProbes` points; doubling stops early in a variable in which the
# profile is not smooth (the error falls less than 4-fold per doubling).
kProbes <- 4096L
tabulate_profile <- function(profile, name, arg, call) {
  peak <- profile_values(profile, 0, arg, call)
  if (!(peak > 0)) abort("{.arg {arg}} must be positive at distance 0.", call = call)
  support <- profile_support(profile, peak, arg, call)
  upper <- support$upper
  probes <- (seq_len(kProbes) - 0.5) / kProbes * upper
  at_probes <- profile_values(profile, probes, arg, call)
  tol <- 1e-12 * peak
  for (squared in c(TRUE, FALSE)) {
    root <- if (squared) sqrt else identity
    last <- Inf
    for (intervals in 2^(2:16)) {
      x <- seq(0, if (squared) upper^2 else upper, length.out = intervals + 1L)
      values <- profile_values(profile, root(x), arg, call)
      if (any(diff(values) > 1e-12 * peak)) {
        abort("{.arg {arg}} must be non-increasing in the distance (a radial profile).",
              call = call)
      }
      row <- cpp_register_kernel(name, values, upper, support$compact, squared)
      u <- c(root((x[-1L] + x[-length(x)]) / 2), probes)
      error <- max(abs(cpp_kernel_shape(name, u^2) -
                         c(profile_values(profile, u[seq_len(intervals)], arg, call), at_probes)))
      if (error <= tol || (squared && intervals >= 64 && error > last / 4)) break
      last <- error
    }
    if (error <= tol) break
  }
  if (error > tol) {
    warn("The tabulated {.arg {arg}} is accurate to {signif(error / peak, 2)} of its peak only
          (a jump inside its support?).")
  }
  list(row = user_row(row), values = values, upper = upper, compact = support$compact,
       squared = squared)
}

# A registry row (as registry_table() holds them) from cpp_register_kernel()'s constants.
user_row <- function(constants) {
  row <- kernel_row("gaussian")
  row[names(constants)] <- constants
  row$shadow <- NA_character_
  row$shadow_factor <- 0
  row$canonical <- (row$roughness / row$mu2^2)^(1 / 5)
  row$truncated <- TRUE
  row$equivalent <- row$canonical / kernel_row("gaussian")$canonical
  row
}

# Records the kernel in the session's registry and makes sure the C++ registry holds its table
# (again after readRDS() or in a future worker, where only the kernel travelled). Returns it.
register_user_kernel <- function(kernel) {
  known <- registry$user[[kernel$name]]
  if (is.null(known) || !identical(known$values, kernel$values) ||
      !identical(isTRUE(known$squared), isTRUE(kernel$squared))) {
    # tables without `squared` come from versions that tabulated in the distance only
    cpp_register_kernel(kernel$name, kernel$values, kernel$upper, kernel$compact,
                        isTRUE(kernel$squared))
    registry$user[[kernel$name]] <- kernel
  }
  kernel
}

# The kernel as methods carry it: its name, with the user kernel's table attached (so that a fit
# carries it to predict(), readRDS() and future workers).
kernel_handle <- function(kernel) structure(kernel$name, user_kernel = kernel)

# Makes sure the engine knows a kernel handle's table; returns the plain name for the C++ side.
engine_kernel <- function(kernel) {
  user <- attr(kernel, "user_kernel")
  if (!is.null(user)) register_user_kernel(user)
  as.character(kernel)
}

# ---- Weight matrices ----------------------------------------------------------------------------

# Checks a weight matrix of m queries x n data points: dense numeric or sparse (Matrix), finite
# and non-negative. Returns it as given (sparse stays sparse).
check_weight_matrix <- function(w, m, n, arg = "kernel", call = rlang::caller_env()) {
  if (!identical(as.integer(dim(w)), as.integer(c(m, n)))) {
    abort("{.arg {arg}}, a weight matrix, must be {m} x {n} (queries x data points), not
           {nrow(w)} x {ncol(w)}.", call = call)
  }
  extremes <- suppressWarnings(range(w))  # a Matrix method for sparse ones
  if (length(w) && (!all(is.finite(extremes)) || extremes[1L] < 0)) {
    abort("{.arg {arg}}, a weight matrix, must have finite, non-negative entries.", call = call)
  }
  w
}

# Local polynomial fits of degree `degree` at `queries` (m x d) with the kernel weights of row q
# of `w` (times the prior weights) for query q: weighted least squares in the monomials of
# x_i - q (degree 0: the local mean, by two matrix products). Returns the fits (m x nv, NA where a
# query has no weight or a singular design) and, when the queries are the data points, the
# leverages (the fit's weight on its own response).
weight_matrix_fit <- function(w, x, values, prior, degree, queries = x, self = TRUE) {
  values <- as.matrix(values)
  p <- prior %||% rep(1, nrow(x))
  if (degree == 0L) {
    total <- as.numeric(w %*% p)
    fitted <- as.matrix(w %*% (p * values)) / total
    fitted[total <= 0, ] <- NA_real_
    leverage <- if (self) diag_of(w) * p / total
    return(list(fitted = fitted, leverage = leverage))
  }
  powers <- basis_powers(ncol(x), degree)
  fitted <- matrix(NA_real_, nrow(queries), ncol(values))
  leverage <- if (self) rep(NA_real_, nrow(queries))
  for (q in seq_len(nrow(queries))) {
    wq <- as.numeric(w[q, ]) * p
    used <- which(wq > 0)
    if (!length(used)) next
    u <- sweep(x[used, , drop = FALSE], 2L, queries[q, ])
    design <- vapply(seq_len(nrow(powers)), function(b) {
      apply(u^rep(powers[b, ], each = nrow(u)), 1L, prod)
    }, numeric(length(used)))
    design <- matrix(design, length(used))
    sw <- sqrt(wq[used])
    qr <- qr(design * sw)
    if (qr$rank < ncol(design)) next
    # the intercept's row of (X'WX)^-1 X'W: the fit's weights on the responses
    e1 <- c(1, rep(0, ncol(design) - 1L))
    weights_q <- sw * qr.Q(qr) %*% backsolve(qr.R(qr), e1, transpose = TRUE)
    fitted[q, ] <- crossprod(weights_q, values[used, , drop = FALSE])
    if (self) leverage[q] <- sum(weights_q[used == q])
  }
  list(fitted = fitted, leverage = leverage)
}

diag_of <- function(w) if (inherits(w, "Matrix")) as.numeric(Matrix::diag(w)) else diag(w)

# The local model of fit_local_model() (see there) whose kernel is a weight matrix (n x n: the
# data points as queries): no bandwidth, no engine specification (so no predict() elsewhere).
fit_weight_matrix <- function(predictors, values, weights, degree, w, n_threads, control,
                              family, likelihood, call) {
  x <- predictors$x
  if (!is.null(predictors$categorical) || likelihood != "gaussian" || family != "regression") {
    abort("A weight matrix as {.arg kernel} serves least-squares fits on numeric predictors.",
          call = call)
  }
  w <- check_weight_matrix(w, nrow(x), nrow(x), call = call)
  prior <- check_weights(weights, nrow(x), call = call)
  f <- weight_matrix_fit(w, x, values, prior, degree)
  list(x = x, categorical = NULL, predictors = predictors[c("names", "kind")], values = values,
       weights = prior, degree = degree, kernel = "weight matrix",
       bandwidth = rep(NA_real_, ncol(x)), nn = NULL, bandwidth_method = "weight matrix",
       cv_curve = NULL, spec = NULL, fitted = f$fitted, leverage = f$leverage,
       n_threads = n_threads(n_threads), control = check_control(control, call = call))
}

# local_smooth() with a weight matrix (queries `at` x data): the estimates at `at`.
smooth_weight_matrix <- function(predictors, response, at, w, degree, deriv, family,
                                 call = rlang::caller_env()) {
  x <- predictors$x
  if (is.null(at) || !is.null(predictors$categorical) || family$family != "gaussian" ||
      deriv > 0L) {
    abort("A weight matrix as {.arg kernel} needs {.arg at} (its rows' points), numeric
           predictors, the Gaussian family and {.code deriv = 0}.", call = call)
  }
  at <- check_predictors(at, arg = "at", call = call)
  if (ncol(at) != ncol(x)) abort("{.arg at} must have {ncol(x)} column{?s}.", call = call)
  colnames(at) <- colnames(x)
  w <- check_weight_matrix(w, nrow(at), nrow(x), call = call)
  prior <- check_weights(response$weights, nrow(x), arg = "weights", call = call)
  f <- weight_matrix_fit(w, x, response$y, prior, degree, queries = at, self = FALSE)
  data.frame(at, estimate = f$fitted[, 1L])
}
