# Outside an interactive session, plots drawn by the tests go to a null device (also when a test
# closed the current one), so that no Rplots.pdf is left in tests/testthat.
if (!interactive()) {
  options(device = function(...) grDevices::pdf(NULL))
  grDevices::pdf(NULL)
}
