# Fail when R CMD check reports an error or a warning; list every note.
log <- readLines(commandArgs(TRUE)[1])
status <- grep("^Status:", log, value = TRUE)
cat(status, sep = "\n")
notes <- grep("\\.\\.\\. (NOTE|WARNING|ERROR)$", log, value = TRUE)
if (length(notes)) cat("Flagged checks:", notes, sep = "\n  ")
if (any(grepl("ERROR|WARNING", status))) quit(status = 1)
