# Issue 19: prediction error of fuzzy_inference() (Takagi-Sugeno-Kang rule bases) against
# local_poly() and lm() on two data sets shipped with R, by 10-fold cross-validation repeated
# BENCH_REPS times (5); every method is refitted on each training fold (local_poly() chooses its
# bandwidth by leave-one-out there, "cv" widths likewise). Accuracy, not speed: no peer timing.
#
# Run by hand: Rscript bench/bench-fuzzy.R   (about 3 minutes on 2 busy cores)

suppressPackageStartupMessages(library(localmean))
options(localmean.threads = 1)
reps <- as.integer(Sys.getenv("BENCH_REPS", 5))

cv_rmse <- function(fml, data, fitter, folds = 10) {
  data <- data[stats::complete.cases(data[all.vars(fml)]), ]
  y <- data[[all.vars(fml)[1]]]
  vapply(seq_len(reps), function(r) {
    set.seed(100 + r)
    fold <- sample(rep_len(seq_len(folds), nrow(data)))
    pred <- numeric(nrow(data))
    for (k in seq_len(folds)) {
      fit <- suppressWarnings(fitter(fml, data[fold != k, ]))
      pred[fold == k] <- suppressWarnings(predict(fit, data[fold == k, ]))
    }
    sqrt(mean((y - pred)^2))
  }, 1)
}

fuzzy <- function(...) function(f, d) fuzzy_inference(f, d, ..., verbose = FALSE)
methods <- list(
  "lm()" = function(f, d) lm(f, d),
  "local_poly(), bandwidth cv" = function(f, d) local_poly(f, d, verbose = FALSE),
  "3 rules, global, spacing" = fuzzy(rules = 3),
  "3 rules, global, cv" = fuzzy(rules = 3, bandwidth = "cv"),
  "5 rules, global, cv" = fuzzy(rules = 5, bandwidth = "cv"),
  "3 rules, local" = fuzzy(rules = 3, consequent = "local"),
  "5 rules, local" = fuzzy(rules = 5, consequent = "local"),
  "mean-shift rules, global" = fuzzy(centres = "mean_shift")
)
problems <- list(mtcars = list(mpg ~ wt + hp, mtcars),
                 airquality = list(Ozone ~ Temp + Wind + Solar.R, airquality))
cat(sprintf("== bench-fuzzy: %d x 10-fold CV RMSE; load average at start: %s ==\n", reps,
            paste(readLines("/proc/loadavg", warn = FALSE), collapse = "")))
for (p in names(problems)) {
  cat("\n", p, ": ", deparse(problems[[p]][[1]]), "\n", sep = "")
  res <- t(vapply(methods, function(m) {
    e <- cv_rmse(problems[[p]][[1]], problems[[p]][[2]], m)
    c(rmse = mean(e), sd = stats::sd(e))
  }, c(rmse = 0, sd = 0)))
  print(round(res, 3))
}
