# The default-argument battery (issue 30), run by hand: every estimator with its default arguments
# on data that ship with R and MASS (numeric, rounded, tied, all-categorical, constant columns,
# heavy tails, n from 2 to 1e5), each call in a child R process (callr) with a time limit.
# Prints one line per call and the counts: ok, warning (a result with a warning), warned_bad (NaN
# or an absurd value with a warning), classed error, unclassed error, silent_bad (NaN or an
# absurd value without a warning), hang, crash; then the calls that are not clean.
# The cases and the judge live in tests/testthat/helper-battery.R (test-battery.R runs a fast part).
#
# Usage: R_LIBS=<library> Rscript tools/battery.R [timeout_seconds] [name_regex] [report.csv]
args <- commandArgs(trailingOnly = TRUE)
timeout <- if (length(args) >= 1L) as.numeric(args[[1L]]) else 60
pattern <- if (length(args) >= 2L) args[[2L]] else ""
report <- if (length(args) >= 3L) args[[3L]] else ""
source(file.path("tests", "testthat", "helper-battery.R"))
cases <- battery_cases()
cases <- Filter(function(case) grepl(pattern, case$name), cases)
cat(sprintf("%d calls, %g s each at most (localmean %s)\n\n", length(cases), timeout,
            utils::packageVersion("localmean")))
start <- Sys.time()
res <- battery_run(cases, timeout = timeout, progress = TRUE)
kinds <- c("ok", "warning", "warned_bad", "classed_error", "unclassed_error", "silent_bad", "hang", "crash")
cat("\nCounts:\n")
print(table(factor(res$kind, levels = kinds)))
cat(sprintf("\n%.0f s in all\n", as.double(difftime(Sys.time(), start, units = "secs"))))
bad <- res[res$kind %in% c("warned_bad", "unclassed_error", "silent_bad", "hang", "crash"), ]
if (nrow(bad)) {
  cat("\nFailures:\n")
  cat(sprintf("  %-45s %-16s %s\n", bad$name, bad$kind, bad$detail), sep = "")
}
if (nzchar(report)) utils::write.csv(res, report, row.names = FALSE)
