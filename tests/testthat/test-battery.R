# The fast part of the default-argument battery (helper-battery.R; the whole is tools/battery.R):
# estimators with their default arguments on small data that ship with R and MASS, each in a
# child process with a time limit. Every call ends in a result without NaN or absurd values (or
# with a warning), or in a localmean_error; never a hang, a crash or an unclassed error.

battery_fast <- c(
  "local_poly cars2", "local_mean cars3", "local_poly cars_const", "local_poly mtcars_f",
  "local_classify iris n=3", "local_classify mtcars mixed", "fuzzy_inference cars",
  "kde cars2", "kde islands", "kde_bandwidth discoveries", "mean_shift cars_const",
  "kde_bandwidth faithful_tiny", "local_score precip", "hopfield mtcars",
  "temporal_local_mean LakeHuron", "asym_mds occupationalStatus"
)

battery_cases_named <- function(names) {
  cases <- battery_cases()
  found <- vapply(cases, `[[`, "", "name")
  stopifnot(all(names %in% found))
  cases[match(names, found)]
}

expect_battery_clean <- function(res) {
  bad <- res[!res$kind %in% c("ok", "warning", "warned_bad", "classed_error"), ]
  expect(nrow(bad) == 0L, sprintf("%d of %d battery calls failed:\n%s", nrow(bad), nrow(res),
                                  paste0(bad$name, ": ", bad$kind, " ", bad$detail,
                                         collapse = "\n")))
}

test_that("estimators with default arguments on small real data: no hang, crash or NaN", {
  skip_if_not_installed("callr")
  skip_if_not_installed("MASS")
  res <- battery_run(battery_cases_named(battery_fast), timeout = 30)
  expect_identical(res$name, battery_fast)
  expect_battery_clean(res)
})

test_that("estimators with default arguments on all-categorical data do not hang", {
  skip_if_not_installed("callr")
  skip_if_not_installed("MASS")
  cases <- Filter(function(case) case$size == "categorical", battery_cases())
  expect_battery_clean(battery_run(cases, timeout = 30))
})

test_that("the battery's judge tells NaN, absurd bandwidths and errors apart", {
  env <- new.env()
  judge <- function(expr) battery_evaluate(substitute(expr), env)$kind
  expect_identical(judge(c(1, NaN)), "silent_bad")
  expect_identical(judge(suppressWarnings(c(1, NaN))), "silent_bad")
  expect_identical(judge({warning("careful"); c(1, NaN)}), "warned_bad")
  expect_identical(judge({warning("careful"); 1}), "warning")
  expect_identical(judge(stop("plain")), "unclassed_error")
  expect_identical(judge(localmean::kde(1:3, bandwidth = -1)), "classed_error")
  expect_identical(judge(list(a = 1e200)), "silent_bad")
  tiny <- localmean::mean_shift(cbind(a = c(0, 1, 3), b = c(0, 2, 1)), bandwidth = 1,
                                verbose = FALSE)
  tiny$bandwidth[] <- 1e-300
  assign("tiny", tiny, env)
  expect_match(battery_evaluate(quote(tiny), env)$detail, "bandwidth 1e-300")
  expect_identical(judge(localmean::kde(faithful$eruptions, verbose = FALSE)), "ok")
})
