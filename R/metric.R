# The learned metric of bandwidth = "metric": a linear map x -> A x of the numeric predictors,
# chosen by minimising the leave-one-out squared error with the analytic gradient of the C++
# core (metric learning for kernel regression, Weinberger and Tesauro 2007) for any registry
# kernel with a slope (kernel_has_slope()), started from the diagonal "cv" solution
# A = diag(1 / h). The fit then uses the unit bandwidth on A x.

# The engine specification of a "metric" bandwidth: list(spec, how, curve, metric).
# `resolve_cv()` resolves the diagonal "cv" bandwidths of the original predictors (the start,
# and the categorical lambdas kept); the returned specification holds the transformed data x A'
# with unit scales.
resolve_metric <- function(x, values, prior, degree, kernel, method, control, n_threads, verbose,
                           call, family, categorical, likelihood, resolve_cv) {
  check_metric_problem(x, values, degree, kernel, family, likelihood, call)
  cv <- resolve_cv()
  h <- cv$spec$scale
  lambda <- cv$spec$categorical$lambda
  learned <- learn_metric(x, values[, 1L], prior, degree, h,
                          categorical = cv$spec$categorical, cutoff = cv$spec$cutoff,
                          n_threads = n_threads, verbose = verbose, call = call,
                          kernel = kernel)
  z <- apply_metric(x, learned$A)
  spec <- engine_spec(z, kernel, rep(1, ncol(x)), values = values, prior = prior, degree = degree,
                      method = method, control = control, categorical = categorical,
                      lambda = lambda, family = likelihood, n_threads = n_threads, call = call)
  learned$cv_bandwidth <- h
  list(spec = spec, how = "metric", curve = NULL, metric = learned)
}

# "metric" needs a kernel with a slope, least squares on one response, degree 0 or 1 and at least
# one numeric predictor.
check_metric_problem <- function(x, values, degree, kernel, family, likelihood, call) {
  why <- if (family != "regression") {
    "is for {.fn local_poly} and {.fn local_mean}, not classification"
  } else if (likelihood != "gaussian") {
    "is for the Gaussian family (least squares) only"
  } else if (!kernel_has_slope(kernel)) {
    if (is_registry_kernel(kernel)) {
      "needs a kernel whose weights change smoothly with distance: the uniform kernel's are a
       step, so the leave-one-out loss has no gradient"
    } else {
      "needs a kernel of the registry: the gradient of the loss needs the slope of the profile,
       which a kernel of the user's own does not have"
    }
  } else if (degree > 1L) {
    "is for degree 0 or 1"
  } else if (ncol(x) == 0L) {
    "needs at least one numeric predictor"
  } else if (ncol(values) != 1L) {
    "needs one response"
  }
  if (!is.null(why)) abort(paste0("{.code bandwidth = \"metric\"} ", why, "."), call = call)
}

# Whether a kernel is one of the registry's rows (not a kernel of the user's own).
is_registry_kernel <- function(kernel) {
  is.character(kernel) && is.null(attr(kernel, "user_kernel")) && kernel %in% kernel_names()
}

# Whether the leave-one-out score has an informative analytic gradient under `kernel`
# (metric.hpp): a registry kernel (the registry's slope of its profile; a tabulated profile has
# none) whose weights are not a step. The uniform kernel's profile is constant inside its
# support, so the score is a step function of the bandwidths with zero gradient wherever it has
# one: its searches stay derivative-free.
kernel_has_slope <- function(kernel) {
  if (!is_registry_kernel(kernel)) return(FALSE)
  peak_and_inside <- kernel_value(c(0, 0.5), kernel)
  peak_and_inside[2L] < peak_and_inside[1L]
}

# Rows of x (n x d) mapped to A x: x A'.
apply_metric <- function(x, A) {
  z <- x %*% t(A)
  colnames(z) <- colnames(x)
  z
}

# Numeric query points of a metric fit in the coordinates of its engine specification (A x);
# other fits' points unchanged.
metric_transform <- function(object, x) {
  if (is.null(object$metric)) return(x)
  apply_metric(x, object$metric$A)
}

# Minimises the leave-one-out squared error of the `kernel` fit of `degree` over the
# metric A, from the diagonal "cv" solution A = diag(1 / h). Degree 1 first learns the local
# mean's metric (its loss is smoother: no nearly singular local designs) and starts the local
# linear search from it, widened until every point has a leave-one-out fit; when that search
# ends above the diagonal's loss, it searches from the diagonal as well. The result is
# widened (widen_metric()). Between evaluations R checks for interrupts and a spinner shows
# progress. Returns list(A, loss, start_loss (the diagonal's), evaluations, convergence).
learn_metric <- function(x, y, prior, degree, h, categorical = NULL, cutoff = 0,
                         n_threads = 1L, verbose = FALSE, call = rlang::caller_env(),
                         kernel = "gaussian") {
  loss_of <- metric_loss_function(x, y, prior, categorical, cutoff, n_threads,
                                  progress = if (verbose) environment(), kernel = kernel)
  diagonal <- diag(1 / h, length(h))
  if (verbose) cli::cli_progress_bar("metric learning", total = NA)
  start_loss <- loss_of(diagonal, degree)$loss
  if (!is.finite(start_loss)) {
    abort(c("The leave-one-out loss of the diagonal {.val cv} bandwidths is not finite.",
            i = "Some point has no leave-one-out fit; use {.code bandwidth = \"cv\"}."),
          call = call)
  }
  best <- descend_metric(loss_of, diagonal, 0L)
  evaluations <- best$evaluations
  if (degree == 1L) {
    start <- feasible_metric_start(loss_of, best$A, diagonal)
    best <- descend_metric(loss_of, start, 1L)
    evaluations <- evaluations + best$evaluations
    if (best$loss > start_loss) {
      direct <- descend_metric(loss_of, diagonal, 1L)
      evaluations <- evaluations + direct$evaluations
      if (direct$loss < best$loss) best <- direct
    }
  }
  if (verbose) cli::cli_progress_done()
  A <- best$A
  loss <- best$loss
  wide <- widen_metric(A, x)
  if (!identical(wide, A)) {
    wide_loss <- loss_of(wide, degree)$loss
    if (is.finite(wide_loss)) {
      A <- wide
      loss <- wide_loss
    }
  }
  dimnames(A) <- list(NULL, colnames(x))
  list(A = A, loss = loss, start_loss = start_loss, evaluations = evaluations,
       convergence = best$convergence)
}

# The metric A divided by 1.25 until every point has a local linear leave-one-out fit (wider
# windows), at most 30 times (a factor of about 800); `fallback` if none does.
feasible_metric_start <- function(loss_of, A, fallback) {
  for (k in seq_len(30L)) {
    if (is.finite(loss_of(A, 1L)$loss)) return(A)
    A <- A / 1.25
  }
  fallback
}

# The C++ loss as a function of the metric A and the degree. R checks for interrupts between
# calls; `progress` is the frame of a cli progress bar to advance, or NULL.
metric_loss_function <- function(x, y, prior, categorical, cutoff, n_threads, progress = NULL,
                                 kernel = "gaussian") {
  prior <- prior %||% numeric(0)
  categorical <- categorical %||% list()
  function(A, degree) {
    if (!is.null(progress)) cli::cli_progress_update(.envir = progress)
    metric_loss(x, y, prior, A, degree, categorical, cutoff, 0, n_threads, FALSE,
                kernel = kernel)
  }
}

# BFGS on the metric from `start` (invertible): the search runs over B in A = B start, from B = I,
# so that the parameters are of order one. An infinite loss (a point without a leave-one-out
# fit) makes the line search step back. Points whose fit nearly interpolates them (a leverage
# within 1e-10 of 1, which makes the "cv" score's leverage identity infinite) are allowed: their
# leave-one-out residuals are computed directly. Returns the best point evaluated (optim's
# `par` can be a rejected last trial when the line search ends next to an infinite loss):
# list(A, loss, evaluations, convergence).
descend_metric <- function(loss_of, start, degree, maxit = 200L, reltol = 1e-8) {
  d <- nrow(start)
  last <- new.env(parent = emptyenv())
  best <- new.env(parent = emptyenv())
  best$loss <- Inf
  evaluate <- function(b) {
    if (!identical(b, last$b)) {
      last$b <- b
      A <- matrix(b, d) %*% start
      value <- loss_of(A, degree)
      # dL/dB = dL/dA start'
      last$value <- list(loss = value$loss, gradient = as.vector(value$gradient %*% t(start)))
      if (value$loss < best$loss) {
        best$A <- A
        best$loss <- value$loss
      }
    }
    last$value
  }
  opt <- stats::optim(as.vector(diag(d)), function(b) evaluate(b)$loss,
                      function(b) evaluate(b)$gradient, method = "BFGS",
                      control = list(maxit = maxit, reltol = reltol))
  list(A = best$A, loss = best$loss, evaluations = opt$counts[["function"]],
       convergence = opt$convergence)
}

# The metric A with its singular values raised to at least 1 / (bandwidth_limits$upper times
# the data's range along their right singular vectors): the selectors' widest bandwidth. Along
# such a direction the kernel is flat over the data (that combination of the predictors is
# smoothed out) and the fit barely changes, but the local linear design stays well conditioned
# for the engine's rank check.
widen_metric <- function(A, x) {
  s <- svd(A)
  span <- apply(x %*% s$v, 2L, function(v) diff(range(v)))
  floor <- 1 / (bandwidth_limits$upper * span)
  if (all(s$d >= floor)) return(A)
  s$u %*% (pmax(s$d, floor) * t(s$v))
}

# The label of a metric fit's bandwidth: the singular values of A (inverse bandwidths along
# its principal directions), and any categorical lambdas.
metric_label <- function(object) {
  sv <- signif(svd(object$metric$A, 0L, 0L)$d, 3)
  label <- paste0("metric A, singular values ", paste(sv, collapse = ", "))
  kind <- object$predictors$kind
  if (all(kind == "numeric")) return(label)
  lambda <- signif(object$bandwidth[kind != "numeric"], 4)
  paste0(label, "; ", paste(object$predictors$names[kind != "numeric"], "=", lambda,
                            collapse = ", "))
}

# What predict() cannot do with a metric fit: standard errors of derivatives (they need the
# covariances of the local slopes, which the engine does not return), simultaneous bands and
# the local variance (they assume the fit's own coordinates).
check_metric_predict <- function(object, deriv, want_var, simultaneous, variance,
                                 call = rlang::caller_env()) {
  if (is.null(object$metric)) return(invisible())
  if (deriv > 0L && want_var) {
    abort("Standard errors and bands of derivatives are not available with
           {.code bandwidth = \"metric\"}.", call = call)
  }
  if (simultaneous || variance == "local") {
    abort("Simultaneous bands and {.code variance = \"local\"} are not available with
           {.code bandwidth = \"metric\"}.", call = call)
  }
}

# Derivatives of a metric fit with respect to the original predictors: the engine's gradient
# g in the coordinates z = A x, mapped back by the chain rule, dm/dx = A' g (row by row: g' A).
# Metric fits have degree at most 1, so only first derivatives arise.
metric_gradient <- function(object, fit, deriv) {
  if (is.null(object$metric) || deriv == 0L) return(fit)
  A <- object$metric$A
  out <- matrix(fit, ncol = ncol(A)) %*% A
  if (ncol(A) == 1L) drop(out) else out
}
