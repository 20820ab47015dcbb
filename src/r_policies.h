// R-side policies for the core: a parallel-for on RcppParallel and a monitor that advances a cli
// progress bar and polls for a user interrupt or an expired time limit, both used from the main
// thread only.
#pragma once

#include <Rcpp.h>
#include <RcppParallel.h>
#include <cli/progress.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include <localmean/engine.hpp>

namespace localmean_r {

// The registry's kernel for a name that the R side has already checked.
inline localmean::KernelType kernel_type(const std::string& name) {
  localmean::KernelType type;
  if (!localmean::kernel_from_name(name, &type)) Rcpp::stop("unknown kernel '%s'", name);
  return type;
}

// Categorical variables from R: list(codes = n x count integer matrix of 1-based level codes,
// levels, ordered, lambda, unit_mass); an empty list for none. `codes0` receives the 0-based
// codes the core reads.
inline localmean::CategoricalVars categorical_vars(const Rcpp::List& spec,
                                                 std::vector<int>& codes0) {
  localmean::CategoricalVars cat;
  if (spec.size() == 0) return cat;
  const Rcpp::IntegerVector codes = spec["codes"], levels = spec["levels"];
  const Rcpp::LogicalVector ordered = spec["ordered"];
  const Rcpp::NumericVector lambda = spec["lambda"];
  // ordered columns: Li-Racine unless the spec asks for Wang-van Ryzin
  const bool wang_van_ryzin = spec.containsElementNamed("wang_van_ryzin") &&
                              Rcpp::as<bool>(spec["wang_van_ryzin"]);
  const localmean::DiscreteKernel ordered_kernel =
      wang_van_ryzin ? localmean::DiscreteKernel::wang_van_ryzin
                     : localmean::DiscreteKernel::li_racine;
  codes0.resize(codes.size());
  for (R_xlen_t i = 0; i < codes.size(); ++i) codes0[i] = codes[i] - 1;
  cat.codes = codes0.data();
  cat.count = levels.size();
  for (R_xlen_t j = 0; j < levels.size(); ++j) {
    cat.levels.push_back(levels[j]);
    cat.kernels.push_back(ordered[j] ? ordered_kernel
                                     : localmean::DiscreteKernel::aitchison_aitken);
    cat.lambda.push_back(lambda[j]);
  }
  cat.unit_mass = Rcpp::as<bool>(spec["unit_mass"]);
  return cat;
}

struct FunctionWorker : public RcppParallel::Worker {
  const std::function<void(std::size_t, std::size_t)>& fn;
  explicit FunctionWorker(const std::function<void(std::size_t, std::size_t)>& f) : fn(f) {}
  void operator()(std::size_t begin, std::size_t end) { fn(begin, end); }
};

// Below this many point visits (kernel evaluations) a task runs on the calling thread: waking
// the pool's workers costs more than such work (a fit of 50 queries on 50 points).
constexpr double kSerialWork = 1e5;

// Work is split into at least 8 pieces per thread; each piece is reduced on its own, so the
// split never changes a result, nor does running small work (`work` point visits below
// kSerialWork) on one thread.
// The R side caps n_threads (n_threads() in R/utils.R); the cap here keeps a raw count from
// ever reaching TBB, whose arena allocates per requested slot.
inline localmean::ParallelFor parallel_for(int requested, double work = kSerialWork) {
  // (hardware_concurrency() reads a system file: once per session)
  static const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int n_threads = work < kSerialWork ? 1 : std::max(1, std::min(requested, cores));
  return [n_threads](std::size_t begin, std::size_t end,
                     const std::function<void(std::size_t, std::size_t)>& fn) {
    if (n_threads <= 1 || end - begin < 2) {
      fn(begin, end);
      return;
    }
    FunctionWorker worker(fn);
    const std::size_t grain = std::max<std::size_t>(1, (end - begin) / (8 * n_threads));
    RcppParallel::parallelFor(begin, end, worker, grain, n_threads);
  };
}

// ---- Interrupts and time limits ----
//
// R_CheckUserInterrupt() raises a user interrupt (Ctrl-C) as an "interrupt" condition and R's
// time limits (setTimeLimit(), and so R.utils::withTimeout() and Shiny) as an error. It is called
// inside R_tryCatch(), which catches both before they can longjmp through C++ frames; the
// workers stop, and Monitor::finish() raises the same condition again once they have joined.
// (R clears a time limit when it fires, so its error must be raised again, not just noticed.)

struct PollResult {
  bool interrupted = false;  // Ctrl-C
  std::string error;         // the message of an error, e.g. "reached elapsed time limit"
};

inline SEXP poll_body(void*) {
  R_CheckUserInterrupt();
  return R_NilValue;
}

inline SEXP poll_handler(SEXP condition, void* data) {
  PollResult* result = static_cast<PollResult*>(data);
  if (Rf_inherits(condition, "interrupt")) {
    result->interrupted = true;
    return R_NilValue;
  }
  result->error = "R signalled an error while polling for interrupts";
  if (TYPEOF(condition) == VECSXP && XLENGTH(condition) > 0) {
    SEXP message = VECTOR_ELT(condition, 0);
    if (TYPEOF(message) == STRSXP && XLENGTH(message) > 0) {
      result->error = CHAR(STRING_ELT(message, 0));
    }
  }
  return R_NilValue;
}

// Polls R on the main thread for a user interrupt or an expired time limit.
inline PollResult poll_r() {
  PollResult result;
  SEXP classes = PROTECT(Rf_allocVector(STRSXP, 2));
  SET_STRING_ELT(classes, 0, Rf_mkChar("interrupt"));
  SET_STRING_ELT(classes, 1, Rf_mkChar("error"));
  R_tryCatch(poll_body, nullptr, classes, poll_handler, &result, nullptr, nullptr);
  UNPROTECT(1);
  return result;
}

// Progress bar and interrupt / time-limit polling between chunks of work. R is polled at most
// every kPollEvery (a poll evaluates R's tryCatch, tens of microseconds), from kPollEvery after
// the start, so that a stop is seen within a few milliseconds of the chunk that follows it and
// short calls never pay for a poll (R itself notices a stop right after them).
constexpr std::chrono::milliseconds kPollEvery{5};

class Monitor {
public:
  Monitor(bool verbose, double total, const char* name)
      : last_poll_(std::chrono::steady_clock::now()) {
    if (verbose) {
      bar_ = cli_progress_bar(total, R_NilValue);
      cli_progress_set_name(bar_, name);
      active_ = true;
    }
  }
  ~Monitor() {
    if (active_) cli_progress_done(bar_);
  }
  localmean::Monitor callback() {
    return [this](std::size_t done, std::size_t) {
      if (stopped()) return false;
      if (active_ && CLI_SHOULD_TICK) cli_progress_set(bar_, static_cast<double>(done));
      return true;
    };
  }
  // Raises the R interrupt or the error (a time limit) once the workers have stopped.
  void finish() const {
    if (poll_.interrupted) throw Rcpp::internal::InterruptedException();
    if (!poll_.error.empty()) Rcpp::stop(poll_.error);
  }

private:
  bool stopped() {
    if (poll_.interrupted || !poll_.error.empty()) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_poll_ < kPollEvery) return false;
    last_poll_ = now;
    poll_ = poll_r();
    return poll_.interrupted || !poll_.error.empty();
  }

  Rcpp::RObject bar_;
  bool active_ = false;
  std::chrono::steady_clock::time_point last_poll_;
  PollResult poll_;
};

}  // namespace localmean_r
