# Shared helpers (R/utils.R): n_threads() and the error and warning classes.

# Requests are capped at the cores RcppParallel sees.
cores <- max(1L, RcppParallel::defaultNumThreads())
capped <- function(k) min(as.integer(k), cores)

# Runs `code` with the thread settings cleared (then `opt` and `env` applied), restoring them after.
with_thread_settings <- function(code, opt = NULL, env = character()) {
  vars <- c("LOCALMEAN_THREADS", "OMP_THREAD_LIMIT", "_R_CHECK_LIMIT_CORES_",
            "RCPP_PARALLEL_NUM_THREADS")
  saved <- Sys.getenv(vars, unset = NA)
  old <- options(localmean.threads = opt)
  on.exit({
    options(old)
    for (v in vars) {
      if (is.na(saved[[v]])) Sys.unsetenv(v) else do.call(Sys.setenv, as.list(saved[v]))
    }
  }, add = TRUE)
  Sys.unsetenv(vars)
  if (length(env)) do.call(Sys.setenv, as.list(env))
  force(code)
}

test_that("an explicit n_threads wins over the option and the environment variable", {
  with_thread_settings(opt = 3, env = c(LOCALMEAN_THREADS = "4"), {
    expect_identical(n_threads(1), 1L)
    expect_identical(n_threads(2), capped(2))
    expect_identical(n_threads(5L), capped(5))
  })
})

test_that("the option localmean.threads comes before the environment variable", {
  with_thread_settings(opt = 3, env = c(LOCALMEAN_THREADS = "4"), {
    expect_identical(n_threads(), capped(3))
  })
  with_thread_settings(opt = 1L, {
    expect_identical(n_threads(), 1L)
  })
})

test_that("the environment variable LOCALMEAN_THREADS is used without the option", {
  with_thread_settings(env = c(LOCALMEAN_THREADS = "4"), {
    expect_identical(n_threads(), capped(4))
  })
  with_thread_settings(env = c(LOCALMEAN_THREADS = ""), {
    expect_identical(n_threads(), max(1L, RcppParallel::defaultNumThreads() %/% 2L))
  })
})

test_that("the default is half the cores, at least 1", {
  with_thread_settings({
    expect_identical(n_threads(), max(1L, RcppParallel::defaultNumThreads() %/% 2L))
  })
})

test_that("OMP_THREAD_LIMIT and R CMD check cap the count", {
  with_thread_settings(env = c(OMP_THREAD_LIMIT = "2"), {
    expect_identical(n_threads(8), capped(2))
    expect_identical(n_threads(1), 1L)
  })
  with_thread_settings(env = c(OMP_THREAD_LIMIT = "junk"), {
    expect_identical(n_threads(8), capped(8))
  })
  with_thread_settings(env = c(`_R_CHECK_LIMIT_CORES_` = "TRUE"), {
    expect_identical(n_threads(8), capped(2))
    expect_identical(n_threads(1), 1L)
  })
  with_thread_settings(opt = 6, env = c(`_R_CHECK_LIMIT_CORES_` = "TRUE"), {
    expect_identical(n_threads(), capped(2))
  })
})

test_that("huge requests are capped at the cores and RcppParallel's limit", {
  with_thread_settings({
    expect_identical(n_threads(1e6), cores)
    expect_identical(n_threads(1e12), cores)
    expect_identical(n_threads(.Machine$integer.max), cores)
  })
  with_thread_settings(env = c(RCPP_PARALLEL_NUM_THREADS = "1"), {
    expect_identical(n_threads(8), 1L)
  })
  # the crash of issue 18: a million threads asked of the binned strategy
  x <- cbind(seq(0, 1, length.out = 200), rep(c(0, 1), 100))
  y <- sin(6 * x[, 1]) + x[, 2]
  huge <- local_poly(x, y, bandwidth = 0.5, n_threads = 1e6, method = "binned",
                     kernel = "laplace", verbose = FALSE)
  one <- local_poly(x, y, bandwidth = 0.5, n_threads = 1, method = "binned",
                    kernel = "laplace", verbose = FALSE)
  expect_identical(fitted(huge), fitted(one))
  expect_identical(huge$n_threads, cores)
})

test_that("bad thread counts are clear errors", {
  with_thread_settings({
    for (bad in list(0, -1, 1.5, NA, NaN, Inf, -Inf, "2", c(1, 2), TRUE, numeric(0), list(2),
                    factor(2), NA_integer_)) {
      expect_error(n_threads(bad), class = "localmean_error", regexp = "n_threads")
    }
  })
  with_thread_settings(opt = 0, {
    expect_error(n_threads(), class = "localmean_error", regexp = "n_threads")
  })
  with_thread_settings(env = c(LOCALMEAN_THREADS = "many"), {
    expect_error(n_threads(), class = "localmean_error", regexp = "n_threads")
  })
  d <- make_data_1d(50)
  expect_error(local_poly(d$x, d$y, bandwidth = 0.1, n_threads = 0, verbose = FALSE),
               class = "localmean_error", regexp = "n_threads")
})

test_that("fits use the option when n_threads is not given, and record it", {
  d <- make_data_1d(50)
  with_thread_settings(opt = 1, {
    fit <- local_poly(d$x, d$y, bandwidth = 0.1, verbose = FALSE)
    expect_identical(fit$n_threads, 1L)
  })
  with_thread_settings(env = c(LOCALMEAN_THREADS = "2"), {
    fit <- local_poly(d$x, d$y, bandwidth = 0.1, verbose = FALSE)
    expect_identical(fit$n_threads, capped(2))
  })
})

test_that("errors and warnings carry the package classes", {
  d <- make_data_1d(50)
  err <- tryCatch(local_poly(d$x, d$y, bandwidth = -1, verbose = FALSE), error = identity)
  expect_s3_class(err, "localmean_error")
  expect_s3_class(err, "rlang_error")
  # the error is reported against the user's call, not an internal helper
  expect_match(paste(deparse(conditionCall(err)), collapse = ""), "local_poly")
  fit <- local_poly(d$x, d$y, kernel = "uniform", bandwidth = 0.05, verbose = FALSE)
  # (5 is also beyond the data, which warns too)
  warned <- list()
  withCallingHandlers(predict(fit, 5), warning = function(w) {
    warned[[length(warned) + 1L]] <<- w
    invokeRestart("muffleWarning")
  })
  expect_true(all(vapply(warned, inherits, TRUE, "localmean_warning")))
  expect_true(any(grepl("NA", vapply(warned, conditionMessage, ""))))
})

test_that("verbose = TRUE gives the same numbers with a fixed bandwidth", {
  d <- make_data_1d(200)
  quiet <- local_poly(d$x, d$y, bandwidth = 0.1, verbose = FALSE)
  loud <- local_poly(d$x, d$y, bandwidth = 0.1, verbose = TRUE)
  expect_identical(fitted(loud), fitted(quiet))
  expect_identical(predict(loud, c(0.2, 0.5), verbose = TRUE), predict(quiet, c(0.2, 0.5)))
})

test_that("verbose = TRUE works with the bandwidth selectors (the interactive default)", {
  d <- make_data_1d(200)
  ctrl <- local_control(n_candidates = 5)
  quiet <- local_poly(d$x, d$y, bandwidth = "cv", verbose = FALSE, control = ctrl)
  loud <- local_poly(d$x, d$y, bandwidth = "cv", verbose = TRUE, control = ctrl)
  expect_identical(fitted(loud), fitted(quiet))
  expect_identical(loud$bandwidth, quiet$bandwidth)
  cls <- quietly_about(local_classify(iris[, 3:4], iris$Species, verbose = TRUE, control = ctrl),
                       "localmean_rounded")
  expect_s3_class(cls, "local_classify")
})

test_that("the issue's misspelt arguments are errors that name them, with a hint", {
  x <- faithful$eruptions
  expect_dots_error <- function(expr, arg, hint = NULL) {
    err <- tryCatch(expr, error = identity)
    expect_s3_class(err, "localmean_error")
    expect_match(conditionMessage(err), arg, fixed = TRUE)
    if (!is.null(hint)) expect_match(conditionMessage(err), paste("Did you mean", hint))
  }
  expect_dots_error(local_poly(dist ~ speed, cars, bandwith = 2), "bandwith", "`bandwidth`")
  expect_dots_error(kde(x, bw = 0.1), "bw", "`bandwidth`")
  expect_dots_error(mean_shift(cbind(x), bandwith = 1), "bandwith", "`bandwidth`")
  expect_dots_error(local_mean(cars$speed, cars$dist, kernal = "biweight"), "kernal",
                    "`kernel`")
  expect_dots_error(kde(~ eruptions, faithful, gridsiz = 10), "gridsiz", "`gridsize`")
  fit_kde <- kde(cars$speed, verbose = FALSE)
  # predict.local_kde() has no `type`: the density is all it returns
  expect_dots_error(predict(fit_kde, 70, type = "cdf"), "type")
  fit <- local_poly(dist ~ speed, cars, bandwidth = 5, verbose = FALSE)
  nd <- data.frame(speed = c(10, 20))
  band <- predict(fit, nd, interval = "confidence")
  expect_identical(colnames(band), c("fit", "lwr", "upr"))
  expect_true(all(band[, "lwr"] < band[, "fit"] & band[, "fit"] < band[, "upr"]))
  expect_dots_error(predict(fit, nd, intervals = "confidence"), "intervals", "`interval`")
  expect_dots_error(print(fit, digts = 3), "digts")
  # no hint when nothing is close
  err <- tryCatch(nobs(fit, zzz = 1), error = identity)
  expect_no_match(conditionMessage(err), "Did you mean")
  # unnamed leftovers are counted
  expect_dots_error(summary(fit, 1), "1 unnamed argument")
})

test_that("the hint finds aliases, prefixes and near misses", {
  args <- c("x", "bandwidth", "kernel", "n_threads", "max_iter", "verbose")
  expect_identical(closest_name("bw", args), "bandwidth")
  expect_identical(closest_name("h", args), "bandwidth")
  expect_identical(closest_name("threads", args), "n_threads")
  expect_identical(closest_name("verb", args), "verbose")
  expect_identical(closest_name("kernal", args), "kernel")
  expect_identical(closest_name("maxiter", args), "max_iter")
  expect_identical(closest_name("colour", args), "")
  expect_identical(closest_name("bw", c("x", "kernel")), "")
})

test_that("every exported function rejects a misspelt argument", {
  exports <- sort(getNamespaceExports("localmean"))
  exports <- exports[vapply(exports, function(f) is.function(getExportedValue("localmean", f)),
                            TRUE)]
  generics_only <- c("tidy", "glance", "augment")  # re-exported from generics
  for (name in setdiff(exports, generics_only)) {
    f <- getExportedValue("localmean", name)
    first <- names(formals(f))[1L]
    args <- list(bandwith = 1)
    # a first argument for the generics that dispatch on it (never evaluated past the check)
    if (name %in% c("kde", "local_poly", "local_mean", "local_classify", "fuzzy_inference")) {
      args <- c(list(as.double(1:20), as.double(1:20)), args)
      if (name == "kde") args <- args[-2L]
    }
    if (name == "attention_weights") args <- c(list(small_fits()$local_qkv, "the"), args)
    err <- tryCatch(do.call(f, args), error = identity)
    expect_s3_class(err, "error")
    expect_s3_class(err, "localmean_error")
    expect_match(conditionMessage(err), "bandwith", fixed = TRUE, info = name)
    if ("bandwidth" %in% names(formals(f))) {
      expect_match(conditionMessage(err), "Did you mean .*bandwidth", info = name)
    }
  }
})

test_that("every S3 method rejects a misspelt argument in its dots", {
  fits <- small_fits()
  objects <- c(fits, list(
    summary.local_model = summary(fits$local_poly),
    summary.local_classify = summary(fits$local_classify),
    summary.local_kde = summary(fits$kde_1d),
    summary.local_cdens = summary(fits$local_cdens),
    summary.local_self = summary(fits$local_self),
    summary.local_modes = summary(fits$mean_shift),
    summary.local_qkv = summary(fits$local_qkv),
    summary.local_ridges = summary(fits$local_ridges),
    summary.local_pca = summary(fits$local_pca),
    summary.local_propagation = summary(fits$local_propagation),
    summary.local_embedding = summary(fits$lle),
    summary.local_imputation = summary(fits$local_imputation),
    summary.local_fuzzy = summary(fits$local_fuzzy),
    local_nn = nn(5),
    local_control = local_control(),
    local_kernel = user_kernel(function(u) pmax(0, 1 - u^2)),
    local_score = local_score(faithful, bandwidth = c(0.3, 5), verbose = FALSE),
    local_denoiser = local_denoiser(faithful),
    local_diffusion = diffusion_sample(faithful, n = 20, n_iter = 3, verbose = FALSE),
    summary.local_diffusion = summary(diffusion_sample(faithful, n = 20, n_iter = 3,
                                                       verbose = FALSE)),
    localized = localized <- localize(lm(dist ~ speed, data = cars), over = ~speed,
                                      bandwidth = 5, at = c(10, 20), verbose = FALSE),
    summary.local_refits = summary(localized),
    local_test = kde_test(as.double(1:20), as.double(2:21), verbose = FALSE),
    local_relevance = relevance_test(local_poly(dist ~ speed, cars, bandwidth = 5,
                                                verbose = FALSE), B = 19, verbose = FALSE)
  ))
  methods <- getNamespaceInfo("localmean", "S3methods")
  # autoplot() is tested with the tidiers; formula and default methods are the fitting
  # functions above. plot() methods take graphical parameters and refuse other names.
  methods <- methods[!methods[, 1L] %in% "autoplot" &
                       !methods[, 2L] %in% c("default", "formula"), , drop = FALSE]
  for (i in seq_len(nrow(methods))) {
    generic <- methods[i, 1L]
    cls <- methods[i, 2L]
    obj <- Find(function(o) inherits(o, cls), objects)
    expect_false(is.null(obj), info = paste(generic, cls))
    if (is.null(obj)) next
    fn <- if (generic %in% c("tidy", "glance", "augment")) {
      getExportedValue("generics", generic)
    } else {
      get(generic, mode = "function", envir = asNamespace("localmean"))
    }
    err <- tryCatch(fn(obj, bandwith = 1), error = identity)
    expect_s3_class(err, "localmean_error")
    expect_match(conditionMessage(err), "bandwith", fixed = TRUE, info = paste(generic, cls))
  }
})

test_that("data.frame() of a fit passes stringsAsFactors through as.data.frame()", {
  fit <- kde(faithful$eruptions, verbose = FALSE)
  expect_identical(data.frame(fit), as.data.frame(fit))
})

test_that("numeric-only methods refuse factor columns with advice that fits them", {
  for (fit in list(function(x) trimap(x, verbose = FALSE),
                   function(x) mean_shift(x, verbose = FALSE))) {
    err <- expect_error(fit(iris), class = "localmean_error")
    msg <- conditionMessage(err)
    expect_match(msg, "Species", fixed = TRUE)
    expect_match(msg, "model.matrix", fixed = TRUE)
    expect_no_match(msg, "per level", fixed = TRUE)
  }
})
