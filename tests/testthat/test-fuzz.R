# A seeded fuzz battery (issue 18): every exported function and S3 method called with bad and
# edge inputs, in child R processes (callr; a fresh one after each crash or hang), so that a crash
# or a hang is an outcome rather than the end of the test run. Every call must end in a result without NaN, a documented
# warning, or a classed localmean_error; never a crash, a hang, a silent NaN or a base-R error.
#
# The default battery (about FUZZ_DEFAULT_CALLS calls) takes a minute or two on 2 cores, so it runs
# only off CRAN (NOT_CRAN=true, as `make check` and devtools set), as does the latency test. A local
# campaign: LOCALMEAN_FUZZ_CALLS=5000 LOCALMEAN_FUZZ_SEED=7 (and LOCALMEAN_FUZZ_REPORT=file.csv for
# every call's outcome); LOCALMEAN_FUZZ_CALLS=0 turns the fuzz tests off.
# Misspelt arguments are not fuzzed here (strict `...` checking is tested with each family).

FUZZ_DEFAULT_CALLS <- 1500
FUZZ_CALL_SECONDS <- 30 # a call still running after this is a hang

# ---- What the child evaluates the calls against -------------------------------------------------

# Data and fitted models, made in the child before the first call (small, so that calls are fast).
fuzz_setup <- function() {
  suppressPackageStartupMessages(library(localmean))
  grDevices::pdf(NULL)
  env <- new.env(parent = globalenv())
  local(envir = env, {
    set.seed(1)
    n <- 60L
    x1 <- sort(stats::runif(n))
    y1 <- sin(6 * x1) + stats::rnorm(n, sd = 0.2)
    X2 <- cbind(a = stats::runif(n), b = stats::runif(n))
    X3 <- cbind(X2, c = stats::runif(n))
    cls <- factor(sample(c("p", "q", "r"), n, replace = TRUE))
    cls2 <- factor(ifelse(y1 > 0, "up", "down"))
    counts <- stats::rpois(n, 3)
    df <- data.frame(X2, y = y1, g = cls)
    miss <- X3
    miss[sample(length(miss), 20)] <- NA
    img <- outer(1:16, 1:16, function(r, c) as.numeric((r - 8)^2 + (c - 8)^2 < 20))
    tokens <- sample(c("the", "cat", "sat", "on", "mat"), 300, replace = TRUE)
    text <- c("the cat sat on the mat", "a dog ate the bone", "the dog sat")
    triplets <- matrix(sample(20L, 300, replace = TRUE), ncol = 3)
    triplets <- triplets[apply(triplets, 1, function(r) length(unique(r)) == 3L), ]
    patterns <- sign(matrix(stats::rnorm(4 * 16), 4))
    q <- lapply(list(
      poly = quote(local_poly(X2, y1, bandwidth = 0.3, verbose = FALSE)),
      poly1 = quote(local_poly(x1, y1, bandwidth = 0.1, verbose = FALSE)),
      pform = quote(local_poly(y ~ a + b, data = df, bandwidth = 0.3, verbose = FALSE)),
      lmean = quote(local_mean(x1, y1, bandwidth = 0.1, verbose = FALSE)),
      logit = quote(local_poly(x1, as.numeric(cls2 == "up"), bandwidth = 0.2,
                               family = "binomial", verbose = FALSE)),
      classify = quote(local_classify(X2, cls, bandwidth = 0.3, verbose = FALSE)),
      kde1 = quote(kde(x1, verbose = FALSE)),
      kde2 = quote(kde(X2, verbose = FALSE)),
      kde_nn = quote(kde(X2, bandwidth = nn(10), verbose = FALSE)),
      kde_H = quote(kde(X2, bandwidth = diag(0.01, 2), verbose = FALSE)),
      kde_bounded = quote(kde(x1, bounds = c(0, 1), verbose = FALSE)),
      kde_mixed = quote(kde(data.frame(a = x1, g = cls), verbose = FALSE)),
      ms = quote(mean_shift(X2, bandwidth = 0.3, verbose = FALSE)),
      medoid = quote(medoid_shift(X2, bandwidth = 0.3, verbose = FALSE)),
      pcs = quote(pc_shift(X3, ndim = 1, bandwidth = 0.5, verbose = FALSE)),
      lle = quote(lle(X3, ndim = 2, k = 8, verbose = FALSE)),
      trimap = quote(trimap(X3, n_iter = 20, verbose = FALSE)),
      ordinal = quote(ordinal_embed(triplets, n_iter = 20, verbose = FALSE)),
      impute = quote(local_impute(miss, max_iter = 2, verbose = FALSE)),
      qkv = quote(qkv_fit(tokens, dim = 2, window = 2, n_iter = 1, n_threads = 1,
                          verbose = FALSE)),
      fuzzy = quote(fuzzy_inference(X2, y1, rules = 4, verbose = FALSE)),
      fuzzy1 = quote(fuzzy_inference(x1, y1, rules = 4, consequent = "local", verbose = FALSE)),
      fuzzy_form = quote(fuzzy_inference(y ~ a + b + g, data = df, rules = 3, verbose = FALSE)),
      score = quote(local_score(X2, bandwidth = 0.3, verbose = FALSE)),
      denoiser = quote(local_denoiser(X2)),
      diffusion = quote(diffusion_sample(X2, n = 20, n_iter = 5, verbose = FALSE))
    ), eval, envir = environment())
    fits <- q
    rm(q)
  })
  env
}

# Runs case i of `cases` (a list of calls) in `env`: the outcome and, for errors, the message.
fuzz_run_case <- function(call, env) {
  warned <- FALSE
  outcome <- tryCatch({
    value <- withCallingHandlers(
      eval(call, env),
      warning = function(w) {
        warned <<- TRUE
        invokeRestart("muffleWarning")
      }
    )
    if (!warned && fuzz_has_nan(value)) "silent_nan" else "ok"
  },
  localmean_error = function(e) "localmean_error",
  error = function(e) paste("error:", conditionMessage(e)),
  interrupt = function(e) "interrupt")
  outcome
}

# NaN anywhere in the numbers of a result (lists, data frames, matrices), attributes aside.
fuzz_has_nan <- function(value, depth = 0L) {
  if (depth > 4L) return(FALSE)
  if (is.numeric(value) || is.complex(value)) return(any(is.nan(value)))
  if (is.list(value)) {
    return(any(vapply(value, fuzz_has_nan, TRUE, depth = depth + 1L)))
  }
  FALSE
}

# The child: set up, then run the cases from `first` on, logging "start i" and "end i outcome"
# lines, so that the parent can tell which call crashed or hung.
fuzz_child <- function(cases_file, log_file, first, setup, run_case, has_nan) {
  assign("fuzz_has_nan", has_nan, globalenv())
  cases <- readRDS(cases_file)
  env <- setup()
  con <- file(log_file, open = "a")
  on.exit(close(con))
  for (i in seq(first, length.out = max(0L, length(cases) - first + 1L))) {
    writeLines(paste("start", i), con)
    flush(con)
    outcome <- run_case(cases[[i]], env)
    writeLines(paste("end", i, gsub("[\r\n]+", " ", outcome)), con)
    flush(con)
  }
  invisible(TRUE)
}

# Runs every case in child processes: a new child after a crash or a hang. Returns a data frame
# with one row per case: the call (deparsed) and its outcome.
fuzz_campaign <- function(cases, call_seconds = FUZZ_CALL_SECONDS) {
  cases_file <- tempfile(fileext = ".rds")
  log_file <- tempfile(fileext = ".log")
  err_file <- tempfile(fileext = ".err") # printed output is discarded: a full pipe would block
  on.exit(unlink(c(cases_file, log_file, err_file)), add = TRUE)
  saveRDS(cases, cases_file)
  outcome <- rep(NA_character_, length(cases))
  first <- 1L
  while (first <= length(cases)) {
    helpers <- lapply(list(fuzz_setup, fuzz_run_case, fuzz_has_nan), `environment<-`,
                      globalenv())
    child <- callr::r_bg(`environment<-`(fuzz_child, globalenv()),
                         c(list(cases_file, log_file, first), helpers),
                         libpath = .libPaths(), supervise = TRUE, stdout = NULL,
                         stderr = err_file)
    started <- Sys.time()
    current <- NA_integer_
    read_log <- function() {
      log <- if (file.exists(log_file)) readLines(log_file, warn = FALSE) else character()
      ends <- regmatches(log, regexec("^end ([0-9]+) (.*)$", log))
      for (m in ends[lengths(ends) == 3L]) outcome[as.integer(m[2])] <<- m[3]
      starts <- as.integer(sub("^start ", "", grep("^start ", log, value = TRUE)))
      if (length(starts)) max(starts) else NA_integer_
    }
    repeat {
      child$wait(200)
      alive <- child$is_alive()
      last <- read_log()
      if (!identical(last, current)) {
        current <- last
        started <- Sys.time()
      }
      if (!alive) break
      if (difftime(Sys.time(), started, units = "secs") > call_seconds + 60 * is.na(current)) {
        child$kill()
        if (!is.na(current) && is.na(outcome[current])) outcome[current] <- "hang"
        break
      }
    }
    unfinished <- !is.na(current) && is.na(outcome[current])
    if (unfinished) {
      outcome[current] <- "crash"
    } else if (is.na(current) || current < first) {
      stop("the fuzz child failed before its first call: ",
           paste(readLines(err_file, warn = FALSE), collapse = "\n"))
    }
    first <- max(which(!is.na(outcome)), 0L) + 1L
    unlink(log_file)
  }
  data.frame(call = vapply(cases, function(cl) paste(deparse(cl, width.cutoff = 500L),
                                                     collapse = " "), ""),
             fun = vapply(cases, fuzz_target, ""), outcome = outcome,
             stringsAsFactors = FALSE)
}

# The function or method a case calls (for the per-function counts).
fuzz_target <- function(cl) {
  fun <- paste(deparse(cl[[1L]]), collapse = "")
  obj <- if (length(cl) > 1L) cl[[2L]] else NULL
  if (is.call(obj) && identical(obj[[1L]], as.name("$"))) paste0(fun, "(", obj[[3L]], ")") else fun
}

# ---- The generated battery ------------------------------------------------------------------

# Bad and edge values by kind of argument: expressions the child evaluates (they may refer to its
# data, see fuzz_setup()).
fuzz_pools <- function() {
  num <- list(0, -1, NA, NaN, Inf, -Inf, 1e300, 1e-300, "a", TRUE, c(1, 2), numeric(0), NULL,
              list(1))
  list(
    data = c(num[c(3, 9, 12, 13)], list(
      quote(x1), quote(X2), quote(X3), quote(X2[0, ]), quote(X2[1, , drop = FALSE]),
      quote(X2[, 0]), quote(X2[1:2, ]), quote(matrix(1, 30, 2)), quote(rep(1, 30)),
      quote(X2 * 1e300), quote(X2 * 1e-300), quote(`[<-`(X2, 3, 1, NA)),
      quote(`[<-`(X2, 3, 1, NaN)), quote(`[<-`(X2, 3, 2, Inf)), quote(round(X2 * 10)),
      quote(`storage.mode<-`(round(X2 * 10), "integer")), quote(as.data.frame(X2)),
      quote(data.frame(a = x1, g = cls)), quote(data.frame(a = x1, s = as.character(cls))),
      quote(data.frame(a = x1, l = y1 > 0)), quote(data.frame(a = x1, d = Sys.Date() + 1:60)),
      quote(as.list(as.data.frame(X2))), quote(matrix("a", 5, 2)), quote(cls),
      quote(c(x1, NA)), quote(x1 > 0.5), quote(df)
    )),
    response = c(num[c(3, 9, 12, 13)], list(
      quote(y1), quote(y1[-1]), quote(c(NA, y1[-1])), quote(c(Inf, y1[-1])),
      quote(rep(1, 60)), quote(y1 * 1e300), quote(y1 * 1e-300), quote(cls), quote(cls2),
      quote(as.character(cls)), quote(y1 > 0), quote(as.integer(round(y1 * 10))),
      quote(counts), quote(-counts), quote(factor(rep("a", 60))), quote(cbind(y1, y1)),
      quote(list(y1))
    )),
    bandwidth = c(num, list(
      "cv", "gcv", "aicc", "rot", "plugin", "lscv", "scv", "isj", "metric", "bogus",
      character(0), quote(nn(0)), quote(nn(-1)), quote(nn(1e9)), quote(nn(1)), quote(nn(59)),
      quote(nn(60)), quote(nn(NA)), quote(nn(3, scale = -1)), c(0.1, 0.2, 0.3),
      quote(diag(2)), quote(diag(-1, 2)), quote(matrix(NA_real_, 2, 2)),
      quote(matrix(c(1, 2, 2, 1), 2)), 0.3, 1e-8, 1e8
    )),
    count = c(num, list(1, 2, 3, 1.5, 1e9, 2^31, quote(60L), quote(61L), -0.5, "2",
                        NA_integer_)),
    iterations = c(num, list(1, 2, 50, 1.5, 1e9, 2^31, -0.5, "2")),
    positive = c(num, list(1e-12, 1e12, 0.5, 2)),
    kernel = list("bogus", NA, 1, c("gaussian", "epanechnikov"), "", NULL, "GAUSSIAN",
                  "gaussian", "epanechnikov", "uniform", "triangular", "biweight", "triweight",
                  "tricube", "cosine", "laplace", "cauchy"),
    threads = list(0, -1, 1e6, 1.5, NA, Inf, "2", 2, 1e12, TRUE, NULL, c(1, 2)),
    flag = list(NA, "TRUE", c(TRUE, FALSE), 1, NULL, TRUE, FALSE),
    weights = c(num[c(3, 9, 12, 13)], list(
      quote(rep(0, 60)), quote(rep(-1, 60)), quote(c(NA, rep(1, 59))), quote(rep(1, 3)),
      quote(rep(Inf, 60)), quote(rep(1e300, 60)), quote(rep(1e-300, 60)),
      quote(c(1, rep(0, 59))), quote(runif(60)), quote(as.integer(counts))
    )),
    method = list("bogus", "binned", "exact", "tree", "auto", NA, 1, NULL),
    family = list("bogus", "gaussian", "binomial", "poisson", NA, 1, "multinomial"),
    control = list(quote(local_control(gridsize = 1e7)), quote(local_control(gridsize = 3)),
                   quote(local_control(gridsize = 1e5)), quote(local_control(cutoff = 1e-300)),
                   quote(local_control(cutoff = 1e300)), quote(local_control(max_iter = 1)),
                   quote(local_control(candidates = 1e-300)), quote(local_control(candidates = 1e300)),
                   quote(local_control(chunk_size = 1)), quote(local_control(n_candidates = 2)),
                   list(), "x", NULL),
    newdata = c(num[c(3, 9, 12, 13)], list(
      quote(X2), quote(X3), quote(x1), quote(X2[0, ]), quote(X2[1, , drop = FALSE]),
      quote(`[<-`(X2, 3, 1, NA)), quote(`[<-`(X2, 3, 2, Inf)), quote(X2 * 1e300),
      quote(data.frame(a = 1, c = 2)), quote(data.frame(b = 0.5, a = 0.5)), quote(df),
      quote(list(1, 2)), quote(matrix("a", 2, 2)), quote(c(0.5, 0.5)), quote(rep(0.5, 3)),
      quote(data.frame(a = x1, g = cls)), quote(data.frame(a = 0.5, g = "zz")), quote(tokens),
      quote(c("the", "unknownword")), quote(character(0))
    )),
    image_dim = list(c(4, 4), c(2, 2), c(0, 0), c(-1, 3), NA, c(16, 16), "a", 3, c(1e9, 1e9)),
    tokens = c(num[c(3, 9, 12, 13)], list(quote(tokens), quote(tokens[1]), quote(character(0)),
                                          quote(c(tokens, NA)), quote(rep("a", 50)),
                                          quote(text), quote(cls), quote(c("", ""))))
  )
}

# Templates: a valid call and the kinds of its arguments that the battery varies.
fuzz_templates <- function() {
  tp <- function(call, ...) list(call = call, args = c(...))
  # The methods the package registers for each fitted model's classes, with predict() fed bad
  # newdata (local_qkv's predict() has its own template).
  fit_classes <- list(poly = "local_poly", poly1 = "local_poly", pform = "local_poly",
                      lmean = "local_model", logit = "local_poly", classify = "local_classify",
                      kde1 = "local_kde", kde2 = "local_kde", kde_nn = "local_kde",
                      kde_H = "local_kde", kde_bounded = "local_kde", kde_mixed = "local_kde",
                      ms = "local_modes", medoid = "local_modes", pcs = "local_ridges",
                      lle = "local_embedding", trimap = "local_embedding",
                      ordinal = "local_embedding", impute = "local_imputation", qkv = "local_qkv",
                      fuzzy = "local_fuzzy", fuzzy1 = "local_fuzzy", fuzzy_form = "local_fuzzy",
                      score = "local_score", denoiser = "local_denoiser",
                      diffusion = "local_diffusion")
  generics <- c("print", "summary", "nobs", "plot", "fitted", "residuals", "formula", "logLik",
                "as.data.frame", "deviance", "sigma", "df.residual", "as.matrix", "predict")
  has_method <- function(generic, cls) {
    classes <- c(cls, if (cls %in% c("local_poly", "local_classify")) "local_model")
    any(vapply(classes, function(k) !is.null(utils::getS3method(generic, k, optional = TRUE)),
               TRUE))
  }
  fit_methods <- function(fit) {
    obj <- call("$", as.name("fits"), fit)
    cls <- fit_classes[[fit]]
    out <- list()
    for (g in generics[vapply(generics, has_method, TRUE, cls = cls)]) {
      out[[length(out) + 1L]] <- if (g == "predict" && cls != "local_qkv") {
        tp(as.call(list(as.name("predict"), obj, newdata = quote(X2))), newdata = "newdata",
           n_threads = "threads")
      } else if (g == "summary") {
        tp(call("print", call("summary", obj)))
      } else if (g != "predict") {
        tp(call(g, obj))
      }
    }
    out
  }
  reg <- c(x = "data", y = "response", bandwidth = "bandwidth", kernel = "kernel",
           weights = "weights", method = "method", n_threads = "threads", verbose = "flag",
           control = "control")
  c(
    list(
      tp(quote(local_poly(x = X2, y = y1, bandwidth = 0.3, verbose = FALSE)), reg,
         degree = "count", family = "family"),
      tp(quote(local_poly(x = x1, y = y1, bandwidth = 0.1, verbose = FALSE)), reg,
         degree = "count", family = "family"),
      tp(quote(local_mean(x = X2, y = y1, bandwidth = 0.3, verbose = FALSE)), reg),
      tp(quote(local_classify(x = X2, y = cls, bandwidth = 0.3, verbose = FALSE)), reg,
         degree = "count"),
      tp(quote(fuzzy_inference(x = X2, y = y1, rules = 3, verbose = FALSE)),
         reg[names(reg) != "control"], rules = "count", centres = "newdata",
         consequent = "tokens"),
      tp(quote(fuzzy_inference(x = x1, y = y1, rules = 3, consequent = "local",
                               verbose = FALSE)),
         reg[names(reg) != "control"], rules = "count", centres = "newdata"),
      tp(quote(local_smooth(x = x1, y = y1, bandwidth = 0.1, verbose = FALSE)), reg,
         at = "newdata", degree = "count", deriv = "count", family = "family"),
      tp(quote(kde(x = X2, verbose = FALSE)), x = "data", bandwidth = "bandwidth",
         kernel = "kernel", weights = "weights", gridsize = "count", bounds = "newdata",
         method = "method", n_threads = "threads", control = "control"),
      tp(quote(kde(x = x1, verbose = FALSE)), x = "data", bandwidth = "bandwidth",
         kernel = "kernel", weights = "weights", gridsize = "count", bounds = "newdata",
         method = "method", n_threads = "threads"),
      tp(quote(kde_bandwidth(x = X2)), x = "data", bandwidth = "bandwidth", kernel = "kernel",
         weights = "weights", n_threads = "threads"),
      tp(quote(mean_shift(x = X2, bandwidth = 0.3, verbose = FALSE)), x = "data",
         bandwidth = "bandwidth", kernel = "kernel", max_iter = "iterations", tol = "positive",
         blurring = "flag", merge_tol = "positive", min_size = "count", seeds = "newdata",
         weights = "weights", method = "method", n_threads = "threads", control = "control"),
      tp(quote(medoid_shift(x = X2, bandwidth = 0.3, verbose = FALSE)), x = "data",
         bandwidth = "bandwidth", kernel = "kernel", max_iter = "iterations", weights = "weights",
         n_threads = "threads"),
      tp(quote(pc_shift(x = X3, ndim = 1, bandwidth = 0.5, verbose = FALSE)), x = "data",
         ndim = "count", bandwidth = "bandwidth", kernel = "kernel", max_iter = "iterations",
         n_threads = "threads"),
      tp(quote(self_local_mean(x = X2, n_iter = 2, bandwidth = 0.3, verbose = FALSE)),
         x = "data", n_iter = "iterations", bandwidth = "bandwidth", kernel = "kernel",
         n_threads = "threads"),
      tp(quote(lle(x = X3, ndim = 2, k = 8, verbose = FALSE)), x = "data", ndim = "count",
         k = "count", reg = "positive", n_threads = "threads"),
      tp(quote(trimap(x = X3, n_iter = 20, verbose = FALSE)), x = "data", ndim = "count",
         n_inliers = "count", n_outliers = "count", n_random = "count", lr = "positive",
         n_iter = "iterations", init = "newdata", n_threads = "threads"),
      tp(quote(ordinal_embed(triplets = triplets, n_iter = 20, verbose = FALSE)),
         triplets = "data", n = "count", ndim = "count", weights = "weights", l2 = "positive",
         lr = "positive", n_iter = "iterations", n_threads = "threads"),
      tp(quote(asym_mds(s = matrix(runif(25), 5))), s = "data", ndim = "count",
         max_iter = "iterations", tol = "positive"),
      tp(quote(embedding_quality(x = X3, layout = X2, verbose = FALSE)), x = "data",
         layout = "data", labels = "response", k = "count", max_points = "count",
         n_threads = "threads"),
      tp(quote(temporal_local_mean(x = X3)), x = "data", kernel = "kernel",
         bandwidth = "bandwidth", time_kernel = "kernel", time_bandwidth = "positive",
         n_threads = "threads"),
      tp(quote(qkv_fit(tokens = tokens, dim = 2, window = 2, n_iter = 1, verbose = FALSE)),
         tokens = "tokens", dim = "count", window = "count", layers = "count",
         n_iter = "iterations", lr = "positive", vocab_size = "count", batch_size = "count",
         n_threads = "threads"),
      tp(quote(hopfield(patterns = patterns, query = patterns[1, ])), patterns = "data",
         query = "newdata", beta = "positive", n_iter = "iterations", n_threads = "threads"),
      tp(quote(local_impute(x = miss, max_iter = 2, verbose = FALSE)), x = "data",
         image_dim = "image_dim", layers = "count", kernel = "kernel", bandwidth = "bandwidth",
         k = "count", mix = "positive", max_iter = "iterations", tol = "positive",
         n_threads = "threads"),
      tp(quote(local_denoise(img = img, patch = 3, search = 5, verbose = FALSE)),
         img = "data", patch = "count", search = "count", bandwidth = "positive",
         sigma = "positive",
         kernel = "kernel", n_threads = "threads"),
      tp(quote(plot_images(x = matrix(runif(32), 2), image_dim = c(4, 4))), x = "data",
         image_dim = "image_dim", nrow = "count", ncol = "count"),
      tp(quote(tokenize_words(text = text)), text = "tokens", lower = "flag",
         punctuation = "flag"),
      tp(quote(word_cooccurrence(text = text, vocab_size = 5)), text = "tokens",
         vocab_size = "count", window = "count"),
      tp(quote(kernel_value(u = x1, kernel = "gaussian")), u = "response", kernel = "kernel"),
      tp(quote(nn(k = 5)), k = "count", scale = "positive"),
      tp(quote(local_control()), gridsize = "count", cutoff = "positive",
         candidates = "bandwidth", n_candidates = "count", refine = "flag",
         chunk_size = "count", max_iter = "iterations", tol = "positive"),
      tp(quote(n_threads(n_threads = 1)), n_threads = "threads"),
      tp(quote(kernels())),
      tp(quote(read_idx(file = tempfile())), file = "tokens"),
      tp(quote(simulate(fits$kde1, nsim = 5)), nsim = "count", seed = "count"),
      tp(quote(simulate(fits$kde_nn, nsim = 5)), nsim = "count"),
      tp(quote(simulate(fits$kde_H, nsim = 5)), nsim = "count"),
      tp(quote(simulate(fits$kde_mixed, nsim = 5)), nsim = "count"),
      tp(quote(simulate(fits$kde_bounded, nsim = 5)), nsim = "count"),
      tp(quote(simulate(fits$kde2, nsim = 5, sampler = "langevin", n_iter = 3)),
         nsim = "count", seed = "count", n_iter = "iterations", sampler = "tokens"),
      tp(quote(local_score(x = X2, bandwidth = 0.3, verbose = FALSE)), x = "data",
         at = "newdata", kernel = "kernel", bandwidth = "bandwidth", weights = "weights",
         method = "method", n_threads = "threads", verbose = "flag", control = "control"),
      tp(quote(local_denoiser(x = X2)), x = "data", bandwidth = "bandwidth",
         weights = "weights", method = "method", control = "control"),
      tp(quote(predict(fits$denoiser, newdata = X2, noise = 0.1)), newdata = "newdata",
         noise = "positive", n_threads = "threads"),
      tp(quote(diffusion_sample(x = X2, n = 20, n_iter = 5, verbose = FALSE)), x = "data",
         n = "count", bandwidth = "bandwidth", sampler = "tokens", n_iter = "iterations",
         max_noise = "positive", eta = "positive", weights = "weights", method = "method",
         n_threads = "threads", control = "control"),
      tp(quote(predict(fits$qkv, context = c("the", "cat"), type = "token")),
         context = "newdata", type = "tokens"),
      tp(quote(attention_weights(fits$qkv, tokens = c("the", "cat", "sat"))),
         tokens = "tokens"),
      tp(quote(predict(fits$kde_mixed, newdata = data.frame(a = 0.5, g = "p"))),
         newdata = "newdata"),
      tp(quote(predict(fits$classify, newdata = X2, type = "prob")), newdata = "newdata",
         type = "tokens", n_threads = "threads", method = "method"),
      tp(quote(predict(fits$poly, newdata = X2, se.fit = TRUE)), newdata = "newdata",
         se.fit = "flag", deriv = "count", type = "tokens", interval = "tokens",
         level = "positive", simultaneous = "flag", method = "method"),
      tp(quote(predict(fits$logit, newdata = x1, type = "link")), newdata = "newdata",
         se.fit = "flag", type = "tokens", interval = "tokens", level = "positive"),
      tp(quote(predict(fits$pform, newdata = df)), newdata = "newdata", se.fit = "flag"),
      tp(quote(predict(fits$fuzzy, newdata = X2, se.fit = TRUE)), newdata = "newdata",
         se.fit = "flag", type = "tokens", n_threads = "threads"),
      tp(quote(predict(fits$fuzzy_form, newdata = df)), newdata = "newdata", se.fit = "flag"),
      tp(quote(plot(fits$fuzzy1, which = "fit")), which = "tokens", n_grid = "count"),
      tp(quote(augment(fits$fuzzy, newdata = X2)), newdata = "newdata", se_fit = "flag"),
      tp(quote(residuals(fits$logit, type = "pearson")), type = "tokens"),
      tp(quote(plot(fits$poly1, which = "fit")), which = "tokens", n_grid = "count",
         level = "positive"),
      tp(quote(plot(fits$kde1, probs = 0.5)), probs = "positive", rug = "flag"),
      tp(quote(plot(fits$classify, n_grid = 20)), n_grid = "count"),
      tp(quote(plot(fits$lle, labels = cls)), labels = "response"),
      tp(quote(plot(fits$ms, paths = TRUE)), paths = "flag"),
      tp(quote(predict(fits$kde2, newdata = X2, method = "tree")), newdata = "newdata",
         method = "method", rtol = "positive", n_threads = "threads"),
      tp(quote(predict(fits$lle, newdata = X3)), newdata = "newdata", n_threads = "threads"),
      tp(quote(predict(fits$ms, newdata = X2)), newdata = "newdata", n_threads = "threads")
    ),
    unlist(lapply(names(fit_classes), fit_methods), recursive = FALSE)
  )
}

# n calls: each a template with one or two of its arguments replaced by a value from its pool
# (the bare template now and then). Templates with more arguments to vary are drawn more often.
fuzz_cases <- function(n, seed) {
  templates <- fuzz_templates()
  pools <- fuzz_pools()
  old <- if (exists(".Random.seed", globalenv())) get(".Random.seed", globalenv())
  on.exit(if (is.null(old)) rm(".Random.seed", envir = globalenv())
          else assign(".Random.seed", old, envir = globalenv()))
  set.seed(seed)
  weight <- 1 + vapply(templates, function(t) length(t$args), 1)
  lapply(seq_len(n), function(i) {
    t <- templates[[sample.int(length(templates), 1L, prob = weight)]]
    call <- t$call
    if (!length(t$args)) return(call)
    for (arg in sample(names(t$args), min(length(t$args), sample(0:2, 1L, prob = c(1, 6, 3))))) {
      pool <- pools[[t$args[[arg]]]]
      value <- pool[[sample.int(length(pool), 1L)]]
      call[arg] <- list(value)
    }
    call
  })
}

# ---- The tests --------------------------------------------------------------------------------

test_that("the fuzz battery finds no crash, hang, silent NaN or unclassed error", {
  skip_on_cran() # minutes of child processes; wall-clock timings
  skip_if(Sys.getenv("LOCALMEAN_FUZZ_CALLS") == "0", "LOCALMEAN_FUZZ_CALLS=0")
  skip_if_not_installed("callr")
  n <- as.integer(Sys.getenv("LOCALMEAN_FUZZ_CALLS", FUZZ_DEFAULT_CALLS))
  seed <- as.integer(Sys.getenv("LOCALMEAN_FUZZ_SEED", 18))
  res <- fuzz_campaign(fuzz_cases(n, seed))
  res$kind <- sub(":.*", "", res$outcome)
  report <- Sys.getenv("LOCALMEAN_FUZZ_REPORT")
  if (nzchar(report)) utils::write.csv(res, report, row.names = FALSE)
  bad <- res[!res$kind %in% c("ok", "localmean_error"), ]
  expect(nrow(bad) == 0L,
         sprintf("%d of %d fuzz calls failed:\n%s", nrow(bad), nrow(res),
                 paste(utils::head(paste0(bad$outcome, "  <-  ", bad$call), 40),
                       collapse = "\n")))
})

test_that("the fuzz harness tells crashes, hangs and unclassed errors apart", {
  skip_on_cran() # minutes of child processes; wall-clock timings
  skip_if(Sys.getenv("LOCALMEAN_FUZZ_CALLS") == "0", "LOCALMEAN_FUZZ_CALLS=0")
  skip_if_not_installed("callr")
  cases <- list(quote(n_threads(1)), quote(n_threads(0)), quote(stop("plain")),
                quote(tools::pskill(Sys.getpid(), tools::SIGKILL)), quote(log(-1)),
                quote(c(0, NaN)), quote(Sys.sleep(60)), quote(kernels()))
  res <- fuzz_campaign(cases, call_seconds = 3)
  expect_identical(res$outcome, c("ok", "localmean_error", "error: plain", "crash", "ok",
                                  "silent_nan", "hang", "ok"))
})

test_that("long iterative runs stop within a second of Ctrl-C and leave R usable", {
  skip_on_cran() # minutes of child processes; wall-clock timings
  skip_if(Sys.getenv("LOCALMEAN_FUZZ_CALLS") == "0", "LOCALMEAN_FUZZ_CALLS=0")
  skip_if_not_installed("callr")
  long_runs <- list(
    qkv_fit = function() {
      tokens <- sample(c("the", "cat", "sat", "on", "mat"), 300, replace = TRUE)
      localmean::qkv_fit(tokens, dim = 2, window = 2, n_iter = 3e4, batch_size = 1,
                         verbose = FALSE)
    },
    ordinal_embed = function() {
      tri <- matrix(sample(20L, 300, replace = TRUE), ncol = 3)
      tri <- tri[apply(tri, 1, function(r) length(unique(r)) == 3L), ]
      localmean::ordinal_embed(tri, n_iter = 1e7, verbose = FALSE)
    },
    trimap = function() {
      localmean::trimap(matrix(stats::runif(600), 200), n_iter = 1e7, verbose = FALSE)
    },
    # Images: the neighbour search, then the iterations (tol = 0 keeps them going).
    local_impute = function() {
      x <- localmean::fashion_mnist_subset$x / 255
      x[sample(length(x), length(x) %/% 5)] <- NA
      localmean::local_impute(x, image_dim = c(28, 28), max_iter = 1e6, tol = 0,
                              verbose = FALSE)
    }
  )
  for (name in names(long_runs)) {
    run <- function(f) {
      cat("started\n")
      flush(stdout())
      res <- tryCatch(f(), interrupt = function(e) "interrupted")
      list(res, sum(1:10)) # R goes on after the interrupt
    }
    child <- callr::r_bg(run, list(long_runs[[name]]), libpath = .libPaths(),
                         stdout = "|", stderr = NULL)
    # a loaded machine may take seconds to start R: interrupt 3 s into the run, not the start
    started <- FALSE
    deadline <- Sys.time() + 60
    while (!started && child$is_alive() && Sys.time() < deadline) {
      child$poll_io(200)
      started <- any(child$read_output_lines() == "started")
    }
    Sys.sleep(3)
    expect_true(child$is_alive(), label = paste(name, "still running after 3 s"))
    sent <- Sys.time()
    child$interrupt()
    child$wait(5000)
    waited <- as.double(difftime(Sys.time(), sent, units = "secs"))
    if (child$is_alive()) child$kill()
    expect_lt(waited, 1.5, label = paste(name, "seconds to stop"))
    expect_identical(child$get_result(), list("interrupted", 55L), label = name)
  }
})
