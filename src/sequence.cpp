// Glue between R and the sequence core: the temporal local mean and the QKV kernel's training.
// Matrices arrive transposed (one column per position), which is the core's row-major layout.
#include "r_policies.h"

#include <localmean/sequence.hpp>

using namespace Rcpp;

namespace {

localmean::TimeKernel time_kernel_from(const std::string& name) {
  if (name == "causal") return localmean::TimeKernel::causal;
  if (name == "window") return localmean::TimeKernel::window;
  if (name == "exponential") return localmean::TimeKernel::exponential;
  if (name == "none") return localmean::TimeKernel::none;
  stop("unknown time kernel");
}

localmean::QkvShape shape_from(List shape) {
  const int dim = as<int>(shape["dim"]), heads = as<int>(shape["heads"]);
  if (as<int>(shape["layers"]) < 1 || heads < 1 || dim % heads != 0 || as<int>(shape["window"]) < 1)
    stop("invalid QKV shape");
  return localmean::QkvShape(as<int>(shape["vocab"]), as<int>(shape["dim"]),
                             as<int>(shape["window"]), as<int>(shape["layers"]),
                             as<int>(shape["heads"]), as<int>(shape["hidden"]),
                             as<bool>(shape["two_sided"]));
}

// The shape, once theta is known to hold its parameters.
localmean::QkvShape shape_of(List shape, const NumericVector& theta) {
  localmean::QkvShape sh = shape_from(shape);
  if (static_cast<std::size_t>(theta.size()) != sh.size) stop("theta has the wrong length");
  return sh;
}

// Token ids must index the vocabulary: the core reads embeddings at them unchecked. Targets may
// also be -1 (no target).
template <class Ids> void check_ids(const localmean::QkvShape& sh, const Ids& ids, int lowest = 0) {
  for (const int id : ids)
    if (id < lowest || (id >= 0 && static_cast<std::size_t>(id) >= sh.vocab))
      stop("token id out of range");
}

// Inputs and targets of one sequence, checked.
localmean::QkvText text_of(const localmean::QkvShape& sh, const IntegerVector& input,
                           const IntegerVector& target) {
  if (input.size() != target.size()) stop("inputs and targets differ in length");
  check_ids(sh, input);
  check_ids(sh, target, -1);
  return {input.begin(), target.begin(), static_cast<std::size_t>(input.size())};
}

}  // namespace

// Temporal local mean. qt: dk x nq, kt: dk x nk, vt: dv x nk (columns are positions); they may
// be one and the same matrix. Returns the nq x dv means and, with want_weights, the nk x nq
// weights (column t holds query t's).
// [[Rcpp::export]]
List cpp_temporal_local_mean(NumericMatrix qt, NumericMatrix kt, NumericMatrix vt,
                             std::string kernel, double bandwidth, std::string time_kernel,
                             double time_bandwidth, bool want_weights, int n_threads,
                             bool verbose) {
  localmean::TemporalSettings set;
  set.softmax = kernel == "softmax";
  if (!set.softmax) set.kernel = localmean_r::kernel_type(kernel);
  set.bandwidth = bandwidth;
  set.time = time_kernel_from(time_kernel);
  set.time_bandwidth = time_bandwidth;
  const std::size_t nq = qt.ncol(), nk = kt.ncol(), dk = qt.nrow(), dv = vt.nrow();
  set.out_column_major = true;
  NumericMatrix out(nq, dv);
  NumericMatrix weights(want_weights ? nk : 0, want_weights ? nq : 0);
  localmean_r::Monitor monitor(verbose, static_cast<double>(localmean::temporal_tile_count(nq)),
                               "local means");
  const bool done = localmean::temporal_local_mean(
      qt.begin(), nq, kt.begin(), nk, dk, vt.begin(), dv, set, out.begin(),
      want_weights ? weights.begin() : nullptr, localmean_r::parallel_for(n_threads),
      monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  return List::create(_["mean"] = out, _["weights"] = weights);
}

// Trains the QKV model from theta (the flat parameter vector). inputs and targets are n x streams
// matrices of 0-based ids (targets -1 where none; epoch e reads column e % streams); valid_input
// and valid_target the held-out sequence (may be empty); order is epochs x n_batches (0-based
// batch indices).
// [[Rcpp::export]]
List cpp_qkv_train(List shape, NumericVector theta, IntegerMatrix inputs, IntegerMatrix targets,
                   IntegerVector valid_input, IntegerVector valid_target, IntegerVector order,
                   double lr, int batch, int epochs, int n_threads, bool verbose) {
  const localmean::QkvShape sh = shape_of(shape, theta);
  if (inputs.nrow() != targets.nrow() || inputs.ncol() != targets.ncol() || inputs.ncol() == 0)
    stop("inputs and targets differ in shape");
  check_ids(sh, inputs);
  check_ids(sh, targets, -1);
  const std::size_t n = inputs.nrow();
  std::vector<localmean::QkvText> texts;
  for (int e = 0; e < inputs.ncol(); ++e)
    texts.push_back({inputs.begin() + e * n, targets.begin() + e * n, n});
  const localmean::QkvText valid = text_of(sh, valid_input, valid_target);
  localmean::QkvSettings set;
  set.lr = lr;
  set.batch = static_cast<std::size_t>(batch);
  set.epochs = static_cast<std::size_t>(epochs);
  NumericVector th = clone(theta);
  localmean::QkvTrace trace;
  const std::size_t n_batches = (sh.span(n) + set.batch - 1) / set.batch;
  if (static_cast<std::size_t>(order.size()) != n_batches * set.epochs) stop("wrong batch order");
  localmean_r::Monitor monitor(verbose, static_cast<double>(n_batches * set.epochs), "training");
  const bool done = localmean::qkv_train(sh, th.begin(), texts, valid, order.begin(), set, trace,
                                         localmean_r::parallel_for(n_threads),
                                         monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  return List::create(_["theta"] = th, _["batch_loss"] = wrap(trace.batch_loss),
                      _["epoch_loss"] = wrap(trace.epoch_loss),
                      _["valid_loss"] = wrap(trace.valid_loss));
}

// The parameter layout of the QKV model (QkvShape): the offset (0-based) and size of each block
// of theta, by name, and the total size.
// [[Rcpp::export]]
List cpp_qkv_layout(List shape) {
  const localmean::QkvShape sh = shape_from(shape);
  const R_xlen_t nb = static_cast<R_xlen_t>(sh.blocks.size());
  NumericVector start(nb), size(nb);
  CharacterVector names(nb);
  for (R_xlen_t i = 0; i < nb; ++i) {
    start[i] = static_cast<double>(sh.blocks[i].offset);
    size[i] = static_cast<double>(sh.blocks[i].size);
    names[i] = sh.blocks[i].name;
  }
  start.names() = names;
  size.names() = names;
  return List::create(_["start"] = start, _["size"] = size,
                      _["total"] = static_cast<double>(sh.size));
}

// The attention weights of head `head` (1-based) of layer `layer` over the tokens (0-based ids):
// an n x n matrix whose column t holds position t's weights.
// [[Rcpp::export]]
NumericMatrix cpp_qkv_attention(List shape, NumericVector theta, IntegerVector tokens, int layer,
                                int head) {
  const localmean::QkvShape sh = shape_of(shape, theta);
  check_ids(sh, tokens);
  const localmean::QkvText text{tokens.begin(), nullptr, static_cast<std::size_t>(tokens.size())};
  if (layer < 1 || static_cast<std::size_t>(layer) > sh.layers || head < 1 ||
      static_cast<std::size_t>(head) > sh.heads)
    stop("layer or head out of range");
  NumericMatrix weights(tokens.size(), tokens.size());
  localmean::qkv_attention(sh, theta.begin(), text, static_cast<std::size_t>(layer), static_cast<std::size_t>(head - 1),
                           weights.begin());
  return weights;
}

// The probabilities of the token at position at[i] (0-based) of each context (a list of 0-based
// id vectors): vocab x contexts.
// [[Rcpp::export]]
NumericMatrix cpp_qkv_predict(List shape, NumericVector theta, List contexts, IntegerVector at) {
  const localmean::QkvShape sh = shape_of(shape, theta);
  if (at.size() != contexts.size()) stop("one position per context");
  NumericMatrix probs(sh.vocab, contexts.size());
  for (R_xlen_t i = 0; i < contexts.size(); ++i) {
    IntegerVector ctx = contexts[i];
    if (at[i] < 0 || at[i] >= ctx.size()) stop("position out of range");
    check_ids(sh, ctx);
    const localmean::QkvText text{ctx.begin(), nullptr, static_cast<std::size_t>(ctx.size())};
    localmean::qkv_predict(sh, theta.begin(), text, static_cast<std::size_t>(at[i]),
                           probs.begin() + i * sh.vocab);
  }
  return probs;
}

// Summed loss over the sequence (0-based input and target ids, targets -1 where none) and its
// gradient with respect to theta (for tests).
// [[Rcpp::export]]
List cpp_qkv_gradient(List shape, NumericVector theta, IntegerVector input, IntegerVector target) {
  const localmean::QkvShape sh = shape_of(shape, theta);
  const localmean::QkvText text = text_of(sh, input, target);
  NumericVector grad(theta.size());
  const double loss = localmean::qkv_gradient(sh, theta.begin(), text, grad.begin());
  return List::create(_["loss"] = loss, _["gradient"] = grad);
}
