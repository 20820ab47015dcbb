#!/bin/sh
# Install what building, testing and checking localmean needs, skipping what is already there.
# Debian's r-cran-* binaries where apt-get is usable (as root), CRAN otherwise (through the
# repository configured in R, getOption("repos"); this script names no host).
# `sh tools/install-deps.sh site` also installs pkgdown, for `make site`.
set -e
R_PKGS="rlang Rcpp RcppEigen RcppParallel RSpectra cli testthat roxygen2 knitr rmarkdown KernSmooth ks future future.apply uwot janeaustenr locfit generics ggplot2 tibble callr quantreg Matrix"
if [ "$1" = site ]; then R_PKGS="$R_PKGS pkgdown"; fi
SYS_TOOLS="pandoc qpdf tidy pngquant"
# LaTeX for the PDF manual that R CMD check builds (with R_RD4PDF="times,hyper", so that the
# inconsolata font, in a far larger package, is not needed).
TEX_DEBS="texlive-latex-base texlive-latex-recommended texlive-fonts-recommended"

missing_r() {
  Rscript -e 'p <- commandArgs(TRUE); cat(p[!vapply(p, requireNamespace, TRUE, quietly = TRUE)])' $R_PKGS
}

apt_usable() {
  command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]
}

need_r=$(missing_r)
need_sys=""
for tool in $SYS_TOOLS; do command -v "$tool" >/dev/null 2>&1 || need_sys="$need_sys $tool"; done
need_tex=""
if command -v dpkg-query >/dev/null 2>&1; then
  for deb in $TEX_DEBS; do
    dpkg-query -W -f='${Status}' "$deb" 2>/dev/null | grep -q "ok installed" || need_tex="$need_tex $deb"
  done
fi

if [ -n "$need_r$need_sys$need_tex" ] && apt_usable; then
  debs="$need_sys$need_tex"
  for p in $need_r; do debs="$debs r-cran-$(echo "$p" | tr 'A-Z' 'a-z')"; done
  echo "install-deps: apt-get install$debs"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends $debs || echo "install-deps: some Debian packages failed; trying CRAN"
fi
if ! command -v pdflatex >/dev/null 2>&1; then
  echo "install-deps: no pdflatex: R CMD check cannot build the PDF manual (install a TeX distribution)" >&2
fi

# Fashion-MNIST from Debian, for the tests that compare the shipped subset with the full test set
# (optional: those tests skip without it).
if [ ! -d /usr/share/datasets/fashion-mnist ] && apt_usable; then
  echo "install-deps: apt-get install dataset-fashion-mnist"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -qq --no-install-recommends dataset-fashion-mnist ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends dataset-fashion-mnist; }; } ||
    echo "install-deps: dataset-fashion-mnist not installed (optional)"
fi

need_r=$(missing_r)
if [ -n "$need_r" ]; then
  echo "install-deps: install.packages from CRAN: $need_r"
  Rscript -e '
    repos <- getOption("repos")
    if (!length(repos) || any(repos == "@CRAN@"))
      stop("no CRAN mirror set: set options(repos = ...) in your R profile", call. = FALSE)
    install.packages(commandArgs(TRUE), repos = repos, Ncpus = 2)' $need_r
fi
need_r=$(missing_r)
if [ -n "$need_r" ]; then echo "install-deps: still missing: $need_r" >&2; exit 1; fi
echo "install-deps: all dependencies present"
