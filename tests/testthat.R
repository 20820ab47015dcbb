library(testthat)
library(localmean)

test_check("localmean")
