# Fits, predictions, printed output, warnings and errors of a broad set of local_poly() and
# local_mean() calls, for comparing two installs of the package (a change of the fitting path
# must leave them identical()). Run once per library, then compare:
#   R_LIBS=<lib A> Rscript bench/compare-fits.R save a.rds
#   R_LIBS=<lib B> Rscript bench/compare-fits.R save b.rds
#   Rscript bench/compare-fits.R compare a.rds b.rds
# Environments (the engine object's handle, terms, family closures) are replaced by a marker and
# functions by their deparsed text: they cannot be compared across processes.
args <- commandArgs(trailingOnly = TRUE)

# x with every environment replaced by "<env>" and every function by its text.
plain <- function(x) {
  if (is.environment(x)) return("<env>")
  if (is.function(x)) return(paste(deparse(x), collapse = "\n"))
  if (is.list(x) && !is.data.frame(x) || is.pairlist(x)) {
    at <- attributes(x)
    x <- lapply(x, plain)
    attributes(x) <- lapply(at, plain)
    return(x)
  }
  at <- attributes(x)
  if (!is.null(at)) {
    at[[".Environment"]] <- NULL
    attributes(x) <- lapply(at, plain)
  }
  x
}

# The value, printed output, warnings and error of evaluating `expr`.
outcome <- function(expr, env) {
  warnings <- character(0)
  value <- tryCatch(withCallingHandlers(eval(expr, env), warning = function(w) {
    warnings <<- c(warnings, conditionMessage(w))
    invokeRestart("muffleWarning")
  }), error = function(e) {
    structure(conditionMessage(e), class = "captured_error", classes = class(e),
              call = deparse(conditionCall(e)))
  })
  shown <- if (inherits(value, c("local_model", "summary.local_model"))) {
    c(utils::capture.output(print(value)),
      if (inherits(value, "local_model")) utils::capture.output(print(summary(value))))
  }
  list(value = plain(value), shown = shown, warnings = warnings)
}

calls <- quote(list(
  plain = local_poly(dist ~ speed, cars, bandwidth = 3),
  plain_predict = predict(local_poly(dist ~ speed, cars, bandwidth = 3), at),
  plain_predict_se = predict(local_poly(dist ~ speed, cars, bandwidth = 3), at, se.fit = TRUE),
  plain_fitted = fitted(local_poly(dist ~ speed, cars, bandwidth = 3)),
  plain_resid = residuals(local_poly(dist ~ speed, cars, bandwidth = 3)),
  predict_none = predict(local_poly(dist ~ speed, cars, bandwidth = 3)),
  predict_out = predict(local_poly(dist ~ speed, cars, bandwidth = 3),
                        data.frame(speed = c(1, 10, 30))),
  predict_na = predict(local_poly(dist ~ speed, cars, bandwidth = 3),
                       data.frame(speed = c(5, NA, 12))),
  predict_vector = predict(local_poly(cars$speed, cars$dist, bandwidth = 3), c(5, 10)),
  integer_cols = local_poly(glu ~ bp, Pima, bandwidth = 8),
  integer_predict = predict(local_poly(glu ~ bp, Pima, bandwidth = 8), data.frame(bp = 60:70)),
  dot = local_poly(mpg ~ ., mtcars[c("mpg", "wt", "hp")], bandwidth = c(0.8, 60)),
  dot_predict = predict(local_poly(mpg ~ ., mtcars[c("mpg", "wt", "hp")], bandwidth = c(0.8, 60)),
                        mtcars[1:5, ]),
  na_rows = local_poly(Ozone ~ Temp, airquality, bandwidth = 5),
  na_exclude = local_poly(Ozone ~ Temp, airquality, bandwidth = 5, na.action = na.exclude),
  na_exclude_fitted = fitted(local_poly(Ozone ~ Temp, airquality, bandwidth = 5,
                                        na.action = na.exclude)),
  subset = local_poly(dist ~ speed, cars, subset = speed > 8, bandwidth = 3),
  weights = local_poly(dist ~ speed, cars, weights = seq_len(50) / 50, bandwidth = 3),
  transform = local_poly(log(dist) ~ I(speed^2), cars, bandwidth = 60),
  transform_predict = predict(local_poly(log(dist) ~ sqrt(speed), cars, bandwidth = 0.6), at),
  factor = local_poly(mpg ~ wt + factor(cyl), mtcars, bandwidth = c(0.8, 0.3)),
  factor_predict = predict(local_poly(mpg ~ wt + factor(cyl), mtcars, bandwidth = c(0.8, 0.3)),
                           mtcars[1:6, ]),
  binomial = local_poly(yes ~ glu, pima, family = "binomial", bandwidth = 20),
  binomial_band = predict(local_poly(yes ~ glu, pima, family = "binomial", bandwidth = 20),
                          data.frame(glu = c(80, 120, 160)), interval = "confidence"),
  poisson = local_poly(count ~ spray_x, sprays, family = "poisson", bandwidth = 1.5),
  poisson_se = predict(local_poly(count ~ spray_x, sprays, family = "poisson", bandwidth = 1.5),
                       data.frame(spray_x = 1:6), se.fit = TRUE),
  nn = local_poly(dist ~ speed, cars, bandwidth = nn(15)),
  nn_predict = predict(local_poly(dist ~ speed, cars, bandwidth = nn(15)), at),
  cv_1d = local_poly(dist ~ speed, cars),
  cv_1d_predict = predict(local_poly(dist ~ speed, cars), at),
  cv_2d = local_poly(mpg ~ wt + hp, mtcars),
  degree0 = local_poly(dist ~ speed, cars, bandwidth = 3, degree = 0),
  degree2 = local_poly(dist ~ speed, cars, bandwidth = 4, degree = 2),
  degree3 = local_poly(dist ~ speed, cars, bandwidth = 5, degree = 3),
  degree2_2d = local_poly(mpg ~ wt + hp, mtcars, bandwidth = c(1, 80), degree = 2),
  deriv1 = predict(local_poly(dist ~ speed, cars, bandwidth = 4, degree = 2), at, deriv = 1),
  deriv2 = predict(local_poly(dist ~ speed, cars, bandwidth = 5, degree = 3), at, deriv = 2),
  deriv_2d = predict(local_poly(mpg ~ wt + hp, mtcars, bandwidth = c(1, 80)), mtcars[1:4, ],
                     deriv = 1),
  se_fit = predict(local_poly(dist ~ speed, cars, bandwidth = 3), at, se.fit = TRUE),
  band_conf = predict(local_poly(dist ~ speed, cars, bandwidth = 3), at,
                      interval = "confidence"),
  band_simul = predict(local_poly(dist ~ speed, cars, bandwidth = 3), at,
                       interval = "confidence", simultaneous = TRUE),
  band_pred = predict(local_poly(dist ~ speed, cars, bandwidth = 3), at,
                      interval = "prediction", se.fit = TRUE),
  band_local = predict(local_poly(dist ~ speed, cars, bandwidth = 3), at,
                       interval = "confidence", variance = "local"),
  band_deriv = predict(local_poly(dist ~ speed, cars, bandwidth = 4, degree = 2), at,
                       interval = "confidence", deriv = 1),
  local_mean = local_mean(dist ~ speed, cars, bandwidth = 3),
  local_mean_predict = predict(local_mean(dist ~ speed, cars, bandwidth = 3), at),
  local_mean_xy = local_mean(cars$speed, cars$dist, bandwidth = 3),
  xy = local_poly(cars$speed, cars$dist, bandwidth = 3),
  xy_matrix = local_poly(as.matrix(mtcars[c("wt", "hp")]), mtcars$mpg, bandwidth = c(1, 80)),
  xy_frame = local_poly(mtcars[c("wt", "hp")], mtcars$mpg, bandwidth = c(1, 80)),
  coef = coef(local_poly(dist ~ speed, cars, bandwidth = 3)),
  coef_new = coef(local_poly(dist ~ speed, cars, bandwidth = 3), at),
  confint = confint(local_poly(dist ~ speed, cars, bandwidth = 3), newdata = at),
  update = update(local_poly(dist ~ speed, cars, bandwidth = 3), bandwidth = 4),
  update_degree = update(local_poly(dist ~ speed, cars, bandwidth = 3), degree = 0),
  robust = local_poly(dist ~ speed, cars, kernel = "tricube", bandwidth = 6, n_robust = 2),
  control = local_poly(dist ~ speed, cars, bandwidth = 3,
                       control = local_control(cutoff = 3)),
  tricube = local_poly(dist ~ speed, cars, bandwidth = 6, kernel = "tricube"),
  method_tree = local_poly(dist ~ speed, cars, bandwidth = 3, method = "tree"),
  method_binned = local_poly(dist ~ speed, cars, bandwidth = 3, method = "binned"),
  threads = local_poly(dist ~ speed, cars, bandwidth = 3, n_threads = 2),
  logLik = logLik(local_poly(dist ~ speed, cars, bandwidth = 3)),
  nobs = nobs(local_poly(dist ~ speed, cars, bandwidth = 3)),
  sigma = sigma(local_poly(dist ~ speed, cars, bandwidth = 3)),
  deviance = deviance(local_poly(dist ~ speed, cars, bandwidth = 3)),
  # errors and warnings
  err_bandwidth = local_poly(dist ~ speed, cars, bandwidth = -1),
  err_bandwidth_na = local_poly(dist ~ speed, cars, bandwidth = NA_real_),
  err_bandwidth_len = local_poly(dist ~ speed, cars, bandwidth = c(1, 2)),
  err_bandwidth_chr = local_poly(dist ~ speed, cars, bandwidth = "nope"),
  err_degree = local_poly(dist ~ speed, cars, bandwidth = 3, degree = 5),
  err_degree_neg = local_poly(dist ~ speed, cars, bandwidth = 3, degree = -1),
  err_kernel = local_poly(dist ~ speed, cars, bandwidth = 3, kernel = "nope"),
  err_family = local_poly(dist ~ speed, cars, bandwidth = 3, family = "nope"),
  err_method = local_poly(dist ~ speed, cars, bandwidth = 3, method = "nope"),
  err_threads = local_poly(dist ~ speed, cars, bandwidth = 3, n_threads = 0),
  err_verbose = local_poly(dist ~ speed, cars, bandwidth = 3, verbose = NA),
  err_control = local_poly(dist ~ speed, cars, bandwidth = 3, control = list()),
  err_dots = local_poly(dist ~ speed, cars, bandwidth = 3, bandwith = 2),
  err_column = local_poly(dist ~ nope, cars, bandwidth = 3),
  err_constant = local_poly(dist ~ one, cbind(cars, one = 1), bandwidth = 3),
  err_inf = local_poly(dist ~ speed, transform(cars, speed = replace(speed, 3, Inf)),
                       bandwidth = 3),
  err_few = local_poly(dist ~ speed, cars[1:2, ], bandwidth = 3, degree = 2),
  err_response = local_poly(dist ~ speed, transform(cars, dist = as.character(dist)),
                            bandwidth = 3),
  err_deriv = predict(local_poly(dist ~ speed, cars, bandwidth = 3), at, deriv = 2),
  err_newdata = predict(local_poly(dist ~ speed, cars, bandwidth = 3), data.frame(x = 1)),
  err_type = predict(local_poly(dist ~ speed, cars, bandwidth = 3), at, type = "nope"),
  err_weights = local_poly(dist ~ speed, cars, weights = rep(-1, 50), bandwidth = 3),
  warn_sparse = local_poly(dist ~ speed, cars, bandwidth = 0.2, kernel = "epanechnikov"),
  warn_sparse_predict = predict(local_poly(dist ~ speed, cars, bandwidth = 1,
                                           kernel = "epanechnikov"), data.frame(speed = 4:8))
))

if (identical(args[1L], "save")) {
  suppressPackageStartupMessages(library(localmean))
  env <- new.env()
  env$at <- data.frame(speed = seq(4, 25, length.out = 50))
  env$Pima <- MASS::Pima.tr
  env$pima <- transform(MASS::Pima.tr, yes = as.numeric(type == "Yes"))
  env$sprays <- transform(InsectSprays, spray_x = as.numeric(spray))
  options(localmean.threads = 1)
  exprs <- as.list(calls)[-1L]
  out <- lapply(exprs, outcome, env = env)
  saveRDS(out, args[2L])
  errors <- sum(vapply(out, function(o) inherits(o$value, "captured_error"), TRUE))
  cat(length(out), "calls;", errors, "errors;", sum(lengths(lapply(out, `[[`, "warnings"))),
      "warnings\n")
} else if (identical(args[1L], "compare")) {
  a <- readRDS(args[2L])
  b <- readRDS(args[3L])
  same <- vapply(names(a), function(k) identical(a[[k]], b[[k]]), TRUE)
  cat(sum(same), "of", length(same), "calls identical\n")
  if (!all(same)) {
    for (k in names(a)[!same]) {
      cat("differs:", k, "\n")
      for (part in c("value", "shown", "warnings")) {
        if (!identical(a[[k]][[part]], b[[k]][[part]])) {
          cat("  in", part, "\n")
          print(all.equal(a[[k]][[part]], b[[k]][[part]]))
        }
      }
    }
    quit(status = 1L)
  }
} else {
  stop("usage: compare-fits.R save <file> | compare <a> <b>")
}
