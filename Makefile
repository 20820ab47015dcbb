# Two entry points for a clean clone: `make demo` and `make check` (see README.md).
PKG     := localmean
VERSION := $(shell sed -n 's/^Version: //p' DESCRIPTION)
TARBALL := $(PKG)_$(VERSION).tar.gz
DEMO_OUT ?= demo-output

.PHONY: deps document build install demo core-test test check clean

deps:
	sh tools/install-deps.sh

document: deps
	Rscript -e 'Rcpp::compileAttributes(); roxygen2::roxygenise()'

build: deps
	rm -f $(TARBALL)
	R CMD build .

install: build
	R CMD INSTALL $(TARBALL)

# Reproduces the paper's regression figure; PNG files go to $(DEMO_OUT)/.
demo: install
	LOCALMEAN_DEMO_DIR=$(DEMO_OUT) Rscript -e 'demo("regression", package = "localmean", ask = FALSE, echo = FALSE)'

# The C++ core on its own, without R (it must compile and pass as plain C++).
core-test:
	$(CXX) -std=c++14 -O2 -Wall -Wextra -pthread -Iinst/include tools/core-test.cpp -o core-test
	./core-test
	rm -f core-test

# The whole test suite on the installed package, then R CMD check --as-cran on the tarball.
test: install core-test
	Rscript tools/run-tests.R

# The timestamp check needs a time server this machine cannot reach; the PDF manual needs a
# LaTeX installation (texlive) that the set-up does not install.
check: test
	_R_CHECK_SYSTEM_CLOCK_=false _R_CHECK_FUTURE_FILE_TIMESTAMPS_=false \
	  _R_CHECK_CRAN_INCOMING_REMOTE_=false \
	  R CMD check --as-cran --no-manual $(TARBALL)
	Rscript tools/check-log.R $(PKG).Rcheck/00check.log

clean:
	rm -rf $(PKG).Rcheck $(PKG)_*.tar.gz $(DEMO_OUT) src/*.o src/*.so core-test
