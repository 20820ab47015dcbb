# Two entry points for a clean clone: `make demo` and `make check` (see README.md).
PKG     := localmean
VERSION := $(shell sed -n 's/^Version: //p' DESCRIPTION)
TARBALL := $(PKG)_$(VERSION).tar.gz
DEMO_OUT ?= demo-output

.PHONY: deps document build install demo core-test test check sanitize site site-build valgrind clean

deps:
	sh tools/install-deps.sh

document: deps
	Rscript -e 'Rcpp::compileAttributes(); roxygen2::roxygenise()'

build: deps
	rm -f $(TARBALL)
	R CMD build .

install: build
	R CMD INSTALL $(TARBALL)

# Reproduces the paper's regression figure; PNG files go to $(DEMO_OUT)/ (the demo itself writes
# to a temporary folder unless LOCALMEAN_DEMO_DIR names one).
demo: install
	LOCALMEAN_DEMO_DIR=$(DEMO_OUT) Rscript -e 'demo("regression", package = "localmean", ask = FALSE, echo = FALSE)'

# The C++ core on its own, without R (it must compile and pass as plain C++), built twice: with
# the AVX2 copies of the hot loops (simd.hpp) and portable only. Both must pass and record
# bit-identical outputs (on a processor without AVX2 both run the portable copy).
CORE_CXX := $(CXX) -std=c++14 -O2 -Wall -Wextra -pthread -Iinst/include tools/core-test.cpp
core-test:
	$(CORE_CXX) -o core-test
	$(CORE_CXX) -DLOCALMEAN_NO_CLONES -o core-test-portable
	./core-test core-test-avx2.out
	./core-test-portable core-test-portable.out
	cmp core-test-avx2.out core-test-portable.out
	@echo "core: the AVX2 and the portable build give bit-identical outputs"
	rm -f core-test core-test-portable core-test-avx2.out core-test-portable.out

# The whole test suite on the installed package, then R CMD check --as-cran on the tarball.
test: install core-test
	Rscript tools/run-tests.R

# The timestamp check needs a time server this machine cannot reach. The PDF manual is built with
# the Times fonts (R_RD4PDF) from Debian's texlive-fonts-recommended, which install-deps installs;
# R's default, inconsolata, lives in a far larger TeX package.
check: test
	_R_CHECK_SYSTEM_CLOCK_=false _R_CHECK_FUTURE_FILE_TIMESTAMPS_=false \
	  _R_CHECK_CRAN_INCOMING_REMOTE_=false R_RD4PDF="times,hyper" \
	  R CMD check --as-cran $(TARBALL)
	Rscript tools/check-log.R $(PKG).Rcheck/00check.log

# The core test and the whole test suite under AddressSanitizer and UndefinedBehaviorSanitizer,
# as CRAN's additional checks run them. The package is built from a tarball (so that no
# instrumented object reaches src/) with a private R_MAKEVARS_USER (~/.R is left alone) into a
# private library; R itself is not instrumented, so the ASan runtime is preloaded (the fuzz
# test's child R processes inherit it). Any finding aborts the process (-fno-sanitize-recover,
# ASan's default), which fails the target. Leak detection is off: R keeps memory alive on purpose
# until exit. ASan's memory is bounded (a whole run peaks below 1 GB per process): a 64 MB
# quarantine of freed blocks (256 MB by default), short allocation stacks, allocations above
# 4 GB failing as they fail in plain R on a machine without that memory (R then reports "cannot
# allocate"; ASan's default aborts the process), and a process above 6 GB resident stopped with
# a report instead of exhausting a shared machine.
SAN_DIR   ?= $(CURDIR)/sanitize
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
SAN_CC    ?= gcc
SAN_ASAN  := detect_leaks=0:quarantine_size_mb=64:malloc_context_size=5:hard_rss_limit_mb=6144
SAN_ASAN  := $(SAN_ASAN):max_allocation_size_mb=4096:allocator_may_return_null=1
SAN_ENV    = LD_PRELOAD=$$($(SAN_CC) -print-file-name=libasan.so) ASAN_OPTIONS=$(SAN_ASAN) \
	  UBSAN_OPTIONS=print_stacktrace=1 R_LIBS=$(SAN_DIR)/lib

sanitize: deps
	rm -rf $(SAN_DIR) && mkdir -p $(SAN_DIR)/lib
	printf '%s\n' 'CFLAGS = -g -O1 $(SAN_FLAGS)' 'CXXFLAGS = -g -O1 $(SAN_FLAGS)' \
	  'CXX11FLAGS = -g -O1 $(SAN_FLAGS)' 'CXX14FLAGS = -g -O1 $(SAN_FLAGS)' \
	  'CXX17FLAGS = -g -O1 $(SAN_FLAGS)' 'LDFLAGS = $(SAN_FLAGS)' > $(SAN_DIR)/Makevars
	cd $(SAN_DIR) && R CMD build --no-build-vignettes --no-manual $(CURDIR)
	R_MAKEVARS_USER=$(SAN_DIR)/Makevars R CMD INSTALL --no-test-load -l $(SAN_DIR)/lib \
	  $(SAN_DIR)/$(TARBALL)
	$(CXX) -std=c++14 -g -O1 $(SAN_FLAGS) -pthread -Iinst/include tools/core-test.cpp \
	  -o $(SAN_DIR)/core-test
	ASAN_OPTIONS=$(SAN_ASAN) UBSAN_OPTIONS=print_stacktrace=1 $(SAN_DIR)/core-test
	nm -D $(SAN_DIR)/lib/$(PKG)/libs/$(PKG).so | grep -q __asan_report
	$(SAN_ENV) Rscript tools/run-tests.R
	rm -rf $(SAN_DIR)

# The pkgdown site in docs/ (reference by family, the vignettes as articles; see _pkgdown.yml),
# built without network access (pkgdown.internet = FALSE skips its CRAN look-up). site-build uses
# the package as already installed (CI runs it after `make check`, which installs it).
site: install
	$(MAKE) site-build

site-build:
	sh tools/install-deps.sh site
	Rscript -e 'options(pkgdown.internet = FALSE); pkgdown::build_site(preview = FALSE, install = FALSE, new_process = FALSE)'

# valgrind's memcheck on one short call per family (tools/valgrind.R, about 10 minutes): any
# invalid read or write, use of an uninitialised value or bad free fails the target; the log
# stays in $(VG_LOG). valgrind is installed here when missing (Debian, as root).
VG_LOG ?= valgrind.log
valgrind: install
	command -v valgrind >/dev/null 2>&1 || { DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valgrind; }
	R -d "valgrind --error-exitcode=1 --track-origins=yes --log-file=$(VG_LOG)" --vanilla \
	  -f tools/valgrind.R

clean:
	rm -rf $(PKG).Rcheck $(PKG)_*.tar.gz $(DEMO_OUT) src/*.o src/*.so core-test core-test-* sanitize \
	  valgrind.log docs
