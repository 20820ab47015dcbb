# Run the test suite on the installed package and fail on any failure. The whole suite by
# default (NOT_CRAN=true, as devtools sets); NOT_CRAN=false runs what CRAN runs (no fuzz battery,
# no wall-clock tests), as R CMD check does.
if (!nzchar(Sys.getenv("NOT_CRAN"))) Sys.setenv(NOT_CRAN = "true")
res <- as.data.frame(testthat::test_dir("tests/testthat", package = "localmean",
                                        load_package = "installed", stop_on_failure = FALSE,
                                        reporter = "summary"))
per_file <- sort(tapply(res$real, res$file, sum), decreasing = TRUE)
cat("\nSlowest files (s):\n")
print(round(utils::head(per_file, 8), 1))
failed <- sum(res$failed) + sum(res$error)
cat(sprintf("\n%d passed, %d failed, %d skipped\n", sum(res$passed), failed, sum(res$skipped)))
if (failed > 0) quit(status = 1)
