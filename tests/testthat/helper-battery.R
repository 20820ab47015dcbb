# The default-argument battery (issue 30): every estimator with its default arguments on data that
# ship with R and its recommended packages, each call in a child R process with a time limit.
# tests/testthat/test-battery.R runs a fast part; tools/battery.R (run by hand) the whole.
# Outcomes: ok, warning (a result with a warning), warned_bad (NaN or an absurd value, with a
# warning), classed_error (a localmean_error), unclassed_error, silent_bad (NaN or an absurd
# value without a warning), hang, crash.

# The data, built in the child: data frames and matrices from datasets and MASS, some of them
# cut, tiled or rescaled to reach the edge cases (n = 2, constant columns, ties, 1e5 rows).
battery_data <- function() {
  env <- new.env(parent = globalenv())
  local(envir = env, {
    has_mass <- requireNamespace("MASS", quietly = TRUE)
    cars2 <- utils::head(cars, 2)
    cars3 <- utils::head(cars, 3)
    cars_const <- cbind(cars, k = 1)
    iris4 <- as.matrix(iris[, 1:4])
    quakes4 <- as.matrix(quakes[, 1:4])
    faithful_big <- faithful[rep(seq_len(nrow(faithful)), length.out = 1e5), ] # tied copies
    faithful_tiny <- faithful * 1e-300
    trees_num <- trees
    mtcars_f <- transform(mtcars, cyl = factor(cyl), am = factor(am))
    if (has_mass) {
      geyser <- MASS::geyser
      mcycle <- MASS::mcycle
      Boston <- MASS::Boston
      Animals <- MASS::Animals
      birthwt <- transform(MASS::birthwt, race = factor(race), low = factor(low))
      Pima <- MASS::Pima.tr
    }
    titanic <- as.data.frame(Titanic)
    lake <- matrix(as.numeric(LakeHuron))
    stocks <- unclass(EuStockMarkets)[1:500, ]
    volcano_holes <- volcano
    volcano_holes[seq(1, length(volcano), by = 7)] <- NA
    air_num <- as.matrix(airquality[, 1:4])
    euro <- as.matrix(eurodist)
    set.seed(30)
    triplets <- local({
      t <- matrix(sample(nrow(euro), 3000, replace = TRUE), ncol = 3)
      t <- t[t[, 1] != t[, 2] & t[, 1] != t[, 3] & t[, 2] != t[, 3], ]
      closer <- euro[t[, 1:2]] < euro[t[, c(1, 3)]]
      t[!closer, 2:3] <- t[!closer, 3:2]
      t
    })
    status <- unclass(occupationalStatus) + 0
    gpl <- tokenize_words(readLines(file.path(R.home("share"), "licenses", "GPL-2")))
    patterns <- sign(scale(as.matrix(mtcars)))
    iris_pca <- stats::prcomp(iris4)$x[, 1:2]
  })
  env
}

# The calls: a list of list(name, call, size) with size "small" (a second or so each) or "large".
battery_cases <- function(size = c("small", "large")) {
  # `data`: for calls that return a bare bandwidth, the data it must be judged against
  q <- function(name, call, size = "small", data = NULL) {
    list(name = name, call = call, size = size, data = data)
  }
  mass <- requireNamespace("MASS", quietly = TRUE)
  regression <- list(
    cars = quote(dist ~ speed), cars2 = quote(dist ~ speed), cars3 = quote(dist ~ speed),
    cars_const = quote(dist ~ speed + k), faithful = quote(eruptions ~ waiting),
    trees_num = quote(Volume ~ Girth + Height), women = quote(weight ~ height),
    mtcars_f = quote(mpg ~ wt + hp + cyl), airquality = quote(Ozone ~ Solar.R + Wind + Temp),
    swiss = quote(Fertility ~ .), faithful_big = quote(waiting ~ eruptions))
  if (mass) {
    regression <- c(regression, list(mcycle = quote(accel ~ times), Animals = quote(brain ~ body),
                                     geyser = quote(waiting ~ duration),
                                     Boston = quote(medv ~ lstat + rm + crim + chas)))
  }
  categorical <- list(mtcars_f = quote(mpg ~ cyl), warpbreaks = quote(breaks ~ wool + tension),
                      titanic = quote(Freq ~ Class + Sex))
  big <- c("faithful_big", "Boston")
  cases <- list()
  for (d in names(regression)) {
    s <- if (d %in% big) "large" else "small"
    for (f in c("local_poly", "local_mean")) {
      cases[[length(cases) + 1L]] <- q(paste(f, d), call(f, regression[[d]], data = as.name(d),
                                                         verbose = FALSE), s)
    }
  }
  for (d in names(categorical)) {
    cases[[length(cases) + 1L]] <- q(paste("local_poly all-categorical", d),
                                     call("local_poly", categorical[[d]], data = as.name(d),
                                          verbose = FALSE), "categorical")
  }
  cases <- c(cases, list(
    q("local_poly binomial all-categorical birthwt",
      quote(local_poly(as.numeric(low) - 1 ~ race, data = birthwt, family = "binomial",
                       verbose = FALSE)), "categorical"),
    q("local_classify all-categorical iris",
      quote(local_classify(Species ~ I(Petal.Length > 4), data = iris, verbose = FALSE)),
      "categorical"),
    q("local_poly poisson warpbreaks",
      quote(local_poly(breaks ~ as.numeric(tension), data = warpbreaks, family = "poisson",
                       verbose = FALSE))),
    q("local_classify iris", quote(local_classify(Species ~ ., data = iris, verbose = FALSE))),
    q("local_classify iris 1-D",
      quote(local_classify(Species ~ Petal.Length, data = iris, verbose = FALSE))),
    q("local_classify mtcars mixed",
      quote(local_classify(am ~ wt + hp + cyl, data = mtcars_f, verbose = FALSE))),
    q("local_classify iris n=3",
      quote(local_classify(Species ~ Petal.Length, data = iris[c(1, 51, 101), ],
                           verbose = FALSE))),
    q("local_smooth cars", quote(local_smooth(cars$speed, cars$dist, verbose = FALSE))),
    q("local_smooth faithful_big",
      quote(local_smooth(faithful_big$eruptions, faithful_big$waiting, verbose = FALSE)),
      "large"),
    q("fuzzy_inference mtcars", quote(fuzzy_inference(mpg ~ wt + hp, data = mtcars,
                                                      verbose = FALSE))),
    q("fuzzy_inference cars", quote(fuzzy_inference(dist ~ speed, data = cars,
                                                    verbose = FALSE))),
    q("fuzzy_inference airquality",
      quote(fuzzy_inference(Ozone ~ Temp + Wind, data = airquality, verbose = FALSE)))
  ))
  if (mass) {
    cases <- c(cases, list(
      q("local_classify Pima", quote(local_classify(type ~ ., data = Pima, verbose = FALSE)),
        "large"),
      q("local_classify birthwt mixed",
        quote(local_classify(low ~ age + lwt + race, data = birthwt, verbose = FALSE))),
      # not a default, but the selector the issue found absurd on these rounded data
      q("kde_bandwidth lscv geyser", quote(kde_bandwidth(as.matrix(geyser), bandwidth = "lscv")),
        data = quote(as.matrix(geyser)))))
  }
  numeric <- list(cars = quote(as.matrix(cars)), cars2 = quote(as.matrix(cars2)),
                  cars_const = quote(as.matrix(cars_const)), faithful = quote(as.matrix(faithful)),
                  iris4 = quote(iris4), islands = quote(islands), precip = quote(precip),
                  discoveries = quote(as.numeric(discoveries)), rivers = quote(rivers),
                  faithful_tiny = quote(as.matrix(faithful_tiny)), quakes4 = quote(quakes4),
                  faithful_big = quote(as.matrix(faithful_big)))
  if (mass) numeric$geyser <- quote(as.matrix(geyser))
  big <- c("faithful_big", "quakes4")
  density_methods <- c("kde", "kde_bandwidth", "mean_shift", "local_score")
  multi_methods <- c("medoid_shift", "pc_shift", "self_local_mean", "lle", "trimap",
                     "local_denoiser", "diffusion_sample")
  for (d in names(numeric)) {
    one_d <- d %in% c("islands", "precip", "discoveries", "rivers")
    for (f in c(density_methods, if (!one_d) multi_methods)) {
      s <- if (d %in% big) "large" else "small"
      if (d == "faithful_big" && f %in% c("medoid_shift", "lle", "trimap")) next
      args <- list(numeric[[d]])
      if (!f %in% c("kde_bandwidth", "local_denoiser", "diffusion_sample")) {
        args$verbose <- FALSE
      }
      cases[[length(cases) + 1L]] <- q(paste(f, d), as.call(c(as.name(f), args)), s,
                                       data = if (f == "kde_bandwidth") numeric[[d]])
    }
  }
  c(cases, list(
    q("kde mixed mtcars", quote(kde(mtcars_f[, c("mpg", "cyl")], verbose = FALSE))),
    q("kde all-categorical titanic", quote(kde(titanic[, 1:3], verbose = FALSE)),
      "categorical"),
    q("local_impute airquality", quote(local_impute(air_num, verbose = FALSE))),
    q("local_impute volcano", quote(local_impute(volcano_holes, verbose = FALSE))),
    q("local_denoise volcano", quote(local_denoise(volcano, verbose = FALSE))),
    q("temporal_local_mean LakeHuron", quote(temporal_local_mean(lake, verbose = FALSE))),
    q("temporal_local_mean stocks", quote(temporal_local_mean(stocks, verbose = FALSE))),
    q("hopfield mtcars", quote(hopfield(patterns, patterns[1:3, ], verbose = FALSE))),
    q("qkv_fit GPL-2", quote(qkv_fit(gpl, verbose = FALSE)), "large"),
    q("ordinal_embed eurodist", quote(ordinal_embed(triplets, verbose = FALSE))),
    q("asym_mds occupationalStatus", quote(asym_mds(status, verbose = FALSE))),
    q("embedding_quality iris", quote(embedding_quality(iris4, iris_pca, verbose = FALSE)))
  ))
}

# Evaluates one call in the child and says how it went: list(kind, detail, seconds). `data`
# (a call) is the data a bare bandwidth result is judged against.
battery_evaluate <- function(call, env, data = NULL) {
  warnings <- character()
  start <- proc.time()[["elapsed"]]
  value <- withCallingHandlers(
    tryCatch(eval(call, env), error = function(e) e),
    warning = function(w) {
      warnings <<- c(warnings, conditionMessage(w))
      invokeRestart("muffleWarning")
    })
  seconds <- proc.time()[["elapsed"]] - start
  out <- function(kind, detail) {
    list(kind = kind, detail = gsub("\\s+", " ", detail), seconds = seconds)
  }
  if (inherits(value, "error")) {
    kind <- if (inherits(value, "localmean_error")) "classed_error" else "unclassed_error"
    return(out(kind, paste(class(value)[1L], conditionMessage(value), sep = ": ")))
  }
  if (!is.null(data) && is.numeric(value)) {
    value <- structure(list(h = value, x = eval(data, env)), class = "battery_bandwidth")
  }
  problem <- battery_problem(value)
  if (length(warnings)) {
    kind <- if (length(problem)) "warned_bad" else "warning"
    return(out(kind, paste(c(problem, utils::head(warnings, 2L)), collapse = " | ")))
  }
  if (length(problem)) out("silent_bad", problem) else out("ok", "")
}

# What is wrong with a result, if anything: NaN among its numbers, values beyond 1e100,
# bandwidths that are not positive or are a millionth of the data's spread, fitted values of a
# local mean far outside the response's range.
battery_problem <- function(value) {
  numbers <- battery_numbers(value)
  nan <- names(numbers)[vapply(numbers, function(v) any(is.nan(v)), TRUE)]
  if (length(nan)) return(paste("NaN in", paste(nan, collapse = ", ")))
  huge <- names(numbers)[vapply(numbers, function(v) any(abs(v[is.finite(v)]) > 1e100), TRUE)]
  if (length(huge)) return(paste("values beyond 1e100 in", paste(huge, collapse = ", ")))
  h <- battery_bandwidths(value)
  if (!is.null(h) && length(h$h)) {
    if (any(!(h$h > 0))) return("a bandwidth that is not positive")
    if (any(h$h < 1e-6 * h$spread)) {
      return(sprintf("bandwidth %.3g against a data spread of %.3g", min(h$h), min(h$spread)))
    }
  }
  if (inherits(value, "local_model") && !inherits(value, "local_classify") &&
      is.null(value$deviance)) {
    r <- range(value$y)
    f <- value$fitted[is.finite(value$fitted)]
    if (any(f < r[1L] - 10 * diff(r) | f > r[2L] + 10 * diff(r))) {
      return("fitted values far outside the range of the response")
    }
  }
  NULL
}

# The numeric vectors of a result and its list elements (two levels down), by name; not the
# engine's internals (its specification, the binned grid's node cache, the settings).
battery_numbers <- function(value, prefix = "", depth = 0L) {
  if (is.numeric(value)) return(stats::setNames(list(as.double(value)), prefix))
  if (!is.list(value) || depth > 2L) return(list())
  internal <- names(value) %in% c("spec", "nodes", "engine", "control")
  value <- value[!internal]
  parts <- Map(function(v, nm) battery_numbers(v, paste0(prefix, "$", nm), depth + 1L),
               value, names(value) %||% seq_along(value))
  do.call(c, unname(parts))
}

# The numeric bandwidths of a result and the spread (range) of the data they apply to.
battery_bandwidths <- function(value) {
  spread <- function(x) {
    x <- as.matrix(x)
    s <- apply(x, 2L, function(v) diff(range(v, na.rm = TRUE)))
    s[s > 0]
  }
  if (inherits(value, "local_model") && is.null(value$nn) && NCOL(value$x) > 0L) {
    d <- NCOL(value$x)
    return(list(h = value$bandwidth[seq_len(d)], spread = spread(value$x)))
  }
  if (inherits(value, "battery_bandwidth")) {
    h <- if (is.matrix(value$h)) sqrt(diag(value$h)) else value$h
    return(list(h = h, spread = spread(value$x)))
  }
  if (inherits(value, c("local_kde", "local_modes")) && is.null(value$categorical)) {
    h <- if (is.list(value$bandwidth)) value$bandwidth$h else value$bandwidth
    if (is.numeric(h) && is.numeric(value$x)) {
      return(list(h = if (is.matrix(h)) sqrt(diag(h)) else h, spread = spread(value$x)))
    }
  }
  NULL
}

`%||%` <- function(a, b) if (is.null(a)) b else a

# Runs the cases in child R processes (callr::r_session, a fresh one after a crash or a hang),
# each with `timeout` seconds; returns a data frame: name, kind, detail, seconds.
battery_run <- function(cases, timeout = 60, libpath = .libPaths(), progress = FALSE) {
  session <- NULL
  start_session <- function() {
    s <- callr::r_session$new(callr::r_session_options(libpath = libpath), wait = TRUE)
    s$run(function(helper) {
      suppressPackageStartupMessages(library(localmean))
      grDevices::pdf(NULL)
      source(helper, local = globalenv())
      assign(".battery_env", battery_data(), envir = globalenv())
      NULL
    }, list(helper = battery_helper_path()))
    s
  }
  rows <- lapply(cases, function(case) {
    if (is.null(session) || !session$is_alive()) session <<- start_session()
    session$call(function(call, data) battery_evaluate(call, .battery_env, data),
                 list(case$call, case$data))
    ready <- session$poll_process(timeout * 1000)
    res <- if (ready == "timeout") {
      session$kill()
      session <<- NULL
      list(kind = "hang", detail = sprintf("still running after %g s", timeout),
           seconds = timeout)
    } else {
      got <- tryCatch(session$read(), error = function(e) NULL)
      if (is.null(got) || !session$is_alive() || !is.null(got$error)) {
        if (!is.null(session)) session$kill()
        session <<- NULL
        detail <- if (!is.null(got$error)) conditionMessage(got$error) else "the child died"
        list(kind = "crash", detail = detail, seconds = NA_real_)
      } else {
        got$result
      }
    }
    if (progress) {
      cat(sprintf("%-45s %-16s %6.1f s  %s\n", case$name, res$kind, res$seconds,
                  substr(res$detail, 1L, 120L)))
    }
    data.frame(name = case$name, size = case$size, kind = res$kind, detail = res$detail,
               seconds = res$seconds)
  })
  if (!is.null(session)) session$close()
  do.call(rbind, rows)
}

# This file, for the children to source (tests run from tests/testthat, tools/ from the root).
battery_helper_path <- function() {
  candidates <- c("helper-battery.R", file.path("tests", "testthat", "helper-battery.R"))
  normalizePath(candidates[file.exists(candidates)][1L])
}
