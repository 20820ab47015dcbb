// R-side policies for the core: a parallel-for on RcppParallel and a monitor that advances a cli
// progress bar and polls for a user interrupt, both used from the main thread only.
#pragma once

#include <Rcpp.h>
#include <RcppParallel.h>
#include <cli/progress.h>

#include <algorithm>
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
  codes0.resize(codes.size());
  for (R_xlen_t i = 0; i < codes.size(); ++i) codes0[i] = codes[i] - 1;
  cat.codes = codes0.data();
  cat.count = levels.size();
  for (R_xlen_t j = 0; j < levels.size(); ++j) {
    cat.levels.push_back(levels[j]);
    cat.kernels.push_back(ordered[j] ? localmean::DiscreteKernel::li_racine
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

// Work is split into at least 8 pieces per thread; each piece is reduced on its own, so the
// split never changes a result.
// The R side caps n_threads (n_threads() in R/utils.R); the cap here keeps a raw count from
// ever reaching TBB, whose arena allocates per requested slot.
inline localmean::ParallelFor parallel_for(int requested) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const int n_threads = std::max(1, std::min(requested, std::max(cores, 1)));
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

inline void check_interrupt_fn(void*) { R_CheckUserInterrupt(); }

// TRUE when the user pressed Ctrl-C; the interrupt is caught here, not longjmp'ed through C++.
inline bool user_interrupted() { return R_ToplevelExec(check_interrupt_fn, nullptr) == FALSE; }

// Progress bar and interrupt polling between chunks of work.
class Monitor {
public:
  Monitor(bool verbose, double total, const char* name) {
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
      if (user_interrupted()) {
        interrupted_ = true;
        return false;
      }
      if (active_ && CLI_SHOULD_TICK) cli_progress_set(bar_, static_cast<double>(done));
      return true;
    };
  }
  // Raises the R interrupt once the workers have stopped.
  void finish() const {
    if (interrupted_) throw Rcpp::internal::InterruptedException();
  }

private:
  Rcpp::RObject bar_;
  bool active_ = false;
  bool interrupted_ = false;
};

}  // namespace localmean_r
