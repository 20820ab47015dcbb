# Bandwidth selectors: one shape and one list for every family.
#
# A selector is the name users type as `bandwidth`, the families it serves ("regression",
# "classification", "density", "modes", "conditional"), the most variables it handles (`max_d`), and
# `select(problem)`, which returns list(bandwidth, curve): bandwidths for the problem's kernel
# (one per variable) and the curve it searched (a data frame of candidates and scores, or NULL);
# the cv, gcv and aicc selectors add the score and `smoothed_out`, a logical per variable (TRUE
# where the bandwidth is so wide that the variable is irrelevant to the local fit).
# A problem is a list with the family's inputs: always `x` (n x d), `kernel`, `weights` (or
# NULL), `n_threads` and `verbose`; regression adds `spec` (an engine specification of the fit),
# `degree`, `values` and `control`; density adds `plugin`. `applies(problem)` returns NULL or
# why the selector does not apply beyond the number of variables.
selector <- function(name, families, select, max_d = Inf, applies = function(problem) NULL) {
  list(name = name, families = families, select = select, max_d = max_d, applies = applies)
}

# Regression selectors that minimise a score of the fit at the data over candidate bandwidths.
scored_selector <- function(name, families) {
  selector(name, families, function(p) {
    if (p$spec$numeric_vars == 0L) return(select_lambdas(name, p$spec, p$control$refine, p$verbose))
    d <- ncol(p$x)
    given <- p$control$candidates
    candidates <- if (is.null(given)) {
      default_candidates(p$x, p$kernel, p$control$n_candidates,
                         gradient = p$control$refine && gradient_search_applies(name, p$spec))
    } else {
      matrix(given, ncol = d)
    }
    check_size(nrow(candidates), search_limits$candidates, "candidate bandwidths (each a fit)",
               if (is.null(given)) "n_candidates" else "candidates", call = p$call)
    res <- select_bandwidth(name, p$spec, candidates, p$control$refine, p$verbose,
                            extend = is.null(given))
    warn_tie_floor(name, p$x, res$bandwidth, p$kernel)
    res
  })
}

# Density selectors work on the Gaussian scale (see kde_bandwidth()); the result is converted to
# the problem's kernel. Data-driven ones need some spread in every variable.
density_selector <- function(name, gaussian_bandwidth, max_d = Inf, data_driven = TRUE) {
  selector(name, "density", max_d = max_d, select = function(p) {
    if (data_driven) check_spread(p$x, p$weights, name, call = p$call)
    bw <- gaussian_bandwidth(p)
    factor <- kernel_scale_factor(p$kernel)
    list(bandwidth = if (is.matrix(bw)) bw * factor^2 else bw * factor, curve = NULL)
  })
}

# Mode-seeking selectors: Gaussian scales for the density gradient, converted to the kernel.
mode_selector <- function(name, gaussian_bandwidth) {
  selector(name, "modes", function(p) {
    if (nrow(p$x) < 2L) {
      abort("{.arg x} needs at least 2 points for {.code bandwidth = \"{name}\"}.", call = p$call)
    }
    h <- gaussian_bandwidth(p) * kernel_scale_factor(p$kernel)
    if (any(!(h > 0))) {
      abort(c("{.code bandwidth = \"{name}\"} gives a zero bandwidth: a variable has no spread.",
              i = "Give {.arg bandwidth} as a number."), call = p$call)
    }
    list(bandwidth = h, curve = NULL)
  })
}

# Every selector of the package, in the order their names are listed to users.
bandwidth_selectors <- list(
  scored_selector("cv", c("regression", "classification")),
  scored_selector("gcv", "regression"),
  scored_selector("aicc", "regression"),
  selector("rot", c("regression", "classification"), function(p) {
    list(bandwidth = widen_to_fit(p$spec, bw_rot(p$x, p$kernel)), curve = NULL)
  }),
  selector("plugin", "regression", max_d = 1, select = function(p) {
    h <- bw_plugin(p$x[, 1L], p$values[, 1L], p$kernel, p$n_threads)
    list(bandwidth = widen_to_fit(p$spec, h), curve = NULL)
  }, applies = function(p) {
    if (p$degree != 1L || ncol(p$values) != 1L) {
      "{.code bandwidth = \"plugin\"} is for local linear regression on one predictor."
    }
  }),
  density_selector("rot", function(p) bw_kde_rot(p$x, p$weights), data_driven = FALSE),
  density_selector("plugin", function(p) {
    if (p$plugin == "ste") bw_sj_ste(p$x[, 1L], p$weights) else bw_plugin_diag(p$x, p$weights, p$n_threads)
  }),
  density_selector("lscv", function(p) {
    if (ncol(p$x) == 1L) bw_lscv_1d(p$x[, 1L], p$weights) else
      bw_lscv_diag(p$x, p$weights, p$n_threads)
  }),
  density_selector("scv", function(p) bw_scv_1d(p$x[, 1L], p$weights), max_d = 1),
  density_selector("mlcv", function(p) bw_mlcv(p$x, p$weights, p$n_threads)),
  density_selector("isj", function(p) bw_isj(p$x[, 1L], p$weights), max_d = 1),
  # conditional densities (R/conditional.R): list(h, lambda, y) as `bandwidth`
  selector("rot", "conditional", function(p) cdens_rot(p$fit, p$call)),
  selector("mlcv", "conditional", function(p) cdens_mlcv(p$fit, p$n_threads, p$verbose, p$call)),
  selector("lscv", "conditional", function(p) cdens_lscv(p$fit, p$n_threads, p$verbose, p$call)),
  mode_selector("auto", function(p) bw_gradient_ns(p$x, p$weights)),
  mode_selector("plugin", function(p) bw_gradient(p$x, p$weights, p$n_threads))
)

# Names of the selectors that serve a family (and handle d variables).
selector_names <- function(family, d = 1) {
  serves <- vapply(bandwidth_selectors, function(s) family %in% s$families && d <= s$max_d, TRUE)
  vapply(bandwidth_selectors[serves], `[[`, "", "name")
}

# Whether `bandwidth` names a selector of the family.
is_selector_name <- function(bandwidth, family) {
  is.character(bandwidth) && length(bandwidth) == 1L && bandwidth %in% selector_names(family)
}

# Runs the family's selector `name` on a problem (see selector()), after checking that it
# applies: list(bandwidth, curve).
run_selector <- function(name, family, problem, arg = "bandwidth", call = rlang::caller_env()) {
  serves <- vapply(bandwidth_selectors, function(s) family %in% s$families && s$name == name, TRUE)
  sel <- bandwidth_selectors[serves][[1L]]
  d <- ncol(problem$x)
  if (d > sel$max_d) {
    where <- if (sel$max_d == 1) "in one dimension only" else "for at most {sel$max_d} variables"
    abort(c(paste("{.arg {arg}} {.val {name}} is available", where),
            i = "Choose one of {.val {selector_names(family, d)}} for {d} variables."),
          call = call)
  }
  why <- sel$applies(problem)
  if (!is.null(why)) abort(why, call = call)
  problem$call <- call
  sel$select(problem)
}
