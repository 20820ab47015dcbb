# The installed help pages: every formula has a plain-text form, and the text rendering (what
# `?topic` shows in a terminal) leaves no LaTeX behind.

help_pages <- function() tools::Rd_db("localmean")

# "page: formula" for every \eqn or \deqn with only its LaTeX argument.
math_without_ascii <- function(db) {
  found <- character()
  walk <- function(x, page) {
    tag <- attr(x, "Rd_tag")
    if (!is.null(tag) && tag %in% c("\\eqn", "\\deqn")) {
      if (length(x) < 2L) found <<- c(found, paste0(page, ": ", paste(unlist(x), collapse = "")))
    } else if (is.list(x)) {
      for (el in x) walk(el, page)
    }
  }
  for (page in names(db)) walk(db[[page]], page)
  found
}

# The text rendering of a page without its usage and examples (code may hold backslashes).
prose_text <- function(rd) {
  keep <- !vapply(rd, function(section) {
    identical(attr(section, "Rd_tag"), "\\examples") || identical(attr(section, "Rd_tag"), "\\usage")
  }, TRUE)
  prose <- rd[keep]
  class(prose) <- "Rd"
  out <- tempfile(fileext = ".txt")
  on.exit(unlink(out))
  tools::Rd2txt(prose, out = out, options = list(underline_titles = FALSE))
  readLines(out, encoding = "UTF-8")
}

test_that("every \\eqn and \\deqn has an ASCII alternative", {
  db <- help_pages()
  expect_gt(length(db), 30L)
  expect_identical(math_without_ascii(db), character())
})

test_that("the detector finds a formula without an ASCII form", {
  rd <- tools::parse_Rd(textConnection(c(
    "\\name{x}\\alias{x}\\title{X}",
    "\\description{Both \\eqn{a \\le b}{a <= b} and \\eqn{\\nabla f} here.}"
  )))
  expect_identical(math_without_ascii(list(x.Rd = rd)), "x.Rd: \\nabla f")
  expect_match(paste(prose_text(rd), collapse = " "), "\\nabla f", fixed = TRUE)
})

test_that("the text help shows no LaTeX commands", {
  db <- help_pages()
  leftovers <- unlist(lapply(names(db), function(page) {
    text <- prose_text(db[[page]])
    bad <- grep("\\\\[A-Za-z]+|[_^]\\{|<=ftarrow", text, value = TRUE)
    if (length(bad)) paste0(page, ": ", trimws(bad))
  }))
  expect_identical(leftovers, NULL)
})
