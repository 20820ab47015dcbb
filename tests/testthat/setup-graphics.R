# Outside an interactive session, a plot drawn by a test without a device of its own opens a
# null device instead of the default Rplots.pdf, so that no file is left in tests/testthat.
if (!interactive()) options(device = function(...) grDevices::pdf(NULL))
