// Glue between R and the local-moment engine: convert, call the core, return R objects.
#include "r_policies.h"

#include <localmean/binning.hpp>
#include <localmean/conditional.hpp>
#include <localmean/data_fit.hpp>
#include <localmean/modes.hpp>

#include <memory>

using namespace Rcpp;

// Entry points that small fits call several times are exported with `rng = false`: they draw no
// random numbers, and Rcpp's RNGScope would save and restore R's generator state on every call.

namespace {

using localmean_r::categorical_vars;

struct FitArrays {
  NumericVector coef, var, s00, wsum, inverse, window;
  IntegerVector status;
  FitArrays(std::size_t m, std::size_t nb, std::size_t nv, bool want_var,
            bool want_inverse = false, bool want_window = false)
      : coef(Dimension(m, nb, nv)), var(want_var ? NumericVector(Dimension(m, nb)) : NumericVector(0)),
        s00(m), wsum(m),
        inverse(want_inverse ? NumericVector(Dimension(m, nb, nb)) : NumericVector(0)),
        window(want_window ? NumericVector(Dimension(m, 2)) : NumericVector(0)), status(m) {}
  localmean::EngineOutput output(bool want_var) {
    localmean::EngineOutput out;
    out.coef = coef.begin();
    out.var = want_var ? var.begin() : nullptr;
    out.s00 = s00.begin();
    out.wsum = wsum.begin();
    out.status = status.begin();
    out.inverse = inverse.size() ? inverse.begin() : nullptr;
    out.window = window.size() ? window.begin() : nullptr;
    return out;
  }
  List as_list() const {
    List res = List::create(_["coef"] = coef, _["var"] = var, _["s00"] = s00,
                            _["wsum"] = wsum, _["status"] = status);
    if (inverse.size()) res.push_back(inverse, "inverse");
    if (window.size()) res.push_back(window, "window");
    return res;
  }
};

// A double vector's data for reading. REAL_RO never materialises an ALTREP wrapper (the
// 1-column matrix that dim<- makes of a shared vector, see check_predictors()), where REAL, and
// so NumericVector, would copy the wrapped data.
const double* read_only(SEXP x) {
  if (TYPEOF(x) != REALSXP) stop("internal error: expected a double vector");
  return REAL_RO(x);
}

// Points given as a numeric matrix (n x d) or, for one variable, a plain vector: no copy.
struct Points {
  const double* values;
  std::size_t n, d;
  explicit Points(SEXP x) : values(read_only(x)) {
    SEXP dim = Rf_getAttrib(x, R_DimSymbol);
    n = Rf_isNull(dim) ? Rf_xlength(x) : INTEGER(dim)[0];
    d = Rf_isNull(dim) ? 1 : INTEGER(dim)[1];
  }
  const double* data() const { return values; }
};

// The binned strategy's grid from grid_lo to grid_hi (original units, gridsize nodes per
// variable), in coordinates divided by `scale`.
localmean::Grid scaled_grid(std::size_t d, const NumericVector& scale,
                            const IntegerVector& gridsize, const NumericVector& grid_lo,
                            const NumericVector& grid_hi) {
  std::vector<std::size_t> size(gridsize.begin(), gridsize.end());
  std::vector<double> lo(d), hi(d);
  for (std::size_t j = 0; j < d; ++j) {
    lo[j] = grid_lo[j] / scale[j];
    hi[j] = grid_hi[j] / scale[j];
  }
  return localmean::make_grid(d, lo.data(), hi.data(), size.data());
}

// Binned fits at the nodes of `grid` (from scaled_grid()): linear binning of the data, then
// the node fits (only the `needed` nodes, when given: see query_nodes()).
bool binned_nodes(const Points& pts, const double* values, std::size_t nv, const double* prior,
                  const localmean::Grid& grid, const IntegerVector& gridsize,
                  const NumericVector& grid_lo, const NumericVector& grid_hi,
                  const localmean::EngineSettings& set, const localmean::EngineOutput& nodes,
                  const localmean::ParallelFor& pfor, localmean_r::Monitor& monitor,
                  const std::vector<char>* needed = nullptr) {
  // Binning is the same in original units: no scaled copy of the data.
  std::vector<std::size_t> size(gridsize.begin(), gridsize.end());
  const localmean::Grid raw = localmean::make_grid(pts.d, grid_lo.begin(), grid_hi.begin(),
                                                   size.data());
  std::vector<double> counts, sums;
  // Binning polls for interrupts without moving the progress bar (it counts queries).
  const localmean::Monitor poll = monitor.callback();
  return localmean::linear_bin(raw, pts.data(), pts.n, values, nv, prior, counts, sums, pfor,
                               [&poll](std::size_t, std::size_t) { return poll(0, 0); }) &&
         localmean::binned_fit_nodes(grid, counts, sums, nv, set, localmean::effective_cutoff(set),
                                     nodes, pfor, monitor.callback(), needed);
}

// Points divided by per-variable scales (the engine works in scaled coordinates).
std::vector<double> scaled(const Points& x, const NumericVector& scale) {
  const std::size_t n = x.n, d = x.d;
  std::vector<double> out(n * d);
  for (std::size_t j = 0; j < d; ++j)
    for (std::size_t i = 0; i < n; ++i) out[j * n + i] = x.data()[j * n + i] / scale[j];
  return out;
}
std::vector<double> scaled(const NumericMatrix& x, const NumericVector& scale) {
  return scaled(Points(x), scale);
}

// The loss registry's row of a family name (losses.hpp).
localmean::Loss loss_type(const std::string& name) {
  localmean::Loss loss;
  if (!localmean::find_loss(name.c_str(), &loss)) stop("unknown loss '%s'", name);
  return loss;
}

}  // namespace

namespace {

// The engine object of a fit: its data in tree order (LocalData), built once and reused by
// every later request of the fit (bandwidth search, predictions, bands) while the data are the
// same R objects; a request with other scales or categorical lambdas only rescales the points.
// The tree is built in the data's own standardisation (column ranges), whatever the first
// request's scales, so that a fit's results never depend on the requests before it.
// The R objects the data were built from, compared by identity and kept alive in the external
// pointer's protected list (an object R still references is never modified in place), and the
// categorical variables' description.
struct DataKey {
  SEXP x = R_NilValue, values = R_NilValue, prior = R_NilValue, point_scale = R_NilValue,
       codes = R_NilValue;
  std::vector<int> levels, ordered;
  bool unit_mass = false;
  bool operator==(const DataKey& o) const {
    return x == o.x && values == o.values && prior == o.prior && point_scale == o.point_scale &&
           codes == o.codes && levels == o.levels && ordered == o.ordered &&
           unit_mass == o.unit_mass;
  }
};

struct EngineObject {
  DataKey key;
  std::vector<int> codes0;
  std::unique_ptr<localmean::LocalData> data;
  std::vector<double> scale;  // the scales of the points now held
};

// LocalData built since the package was loaded (for tests: a search builds once).
int engine_builds = 0;

SEXP or_nil(SEXP x) { return Rf_isNull(x) ? R_NilValue : x; }

std::vector<int> int_vector(SEXP x) {
  if (Rf_isNull(x)) return {};
  const IntegerVector v(x);
  return std::vector<int>(v.begin(), v.end());
}

// The R objects and categorical description of the data of `spec`.
DataKey data_key(const List& spec) {
  DataKey key;
  key.x = spec["x"];
  key.values = or_nil(spec["values"]);
  key.prior = or_nil(spec["prior"]);
  key.point_scale = or_nil(spec["point_scale"]);
  const SEXP cat_spec = spec["categorical"];
  const List categorical = Rf_isNull(cat_spec) ? List() : List(cat_spec);
  if (categorical.size()) {
    key.codes = categorical["codes"];
    key.levels = int_vector(categorical["levels"]);
    const LogicalVector ord = categorical["ordered"];
    key.ordered.assign(ord.begin(), ord.end());
    if (categorical.containsElementNamed("wang_van_ryzin") &&
        as<bool>(categorical["wang_van_ryzin"]))
      for (int& o : key.ordered) o *= 2;  // the ordered kernel is part of the data's key
    key.unit_mass = as<bool>(categorical["unit_mass"]);
  }
  return key;
}

// The data's R objects stay alive as long as the engine holds them.
void protect_data(SEXP engine, const DataKey& key) {
  if (TYPEOF(engine) == EXTPTRSXP)
    R_SetExternalPtrProtected(
        engine, List::create(key.x, key.values, key.prior, key.point_scale, key.codes));
}

// The data of `spec` (an engine specification of R/engine.R) in `obj`, rebuilt when the data
// differ from those it holds, rescaled when only the scales do.
localmean::LocalData& engine_data(SEXP engine, EngineObject& obj, const List& spec,
                                  const Points& pts, const NumericVector& scale, std::size_t nv) {
  const DataKey key = data_key(spec);
  const SEXP cat_spec = spec["categorical"];
  const List categorical = Rf_isNull(cat_spec) ? List() : List(cat_spec);
  const SEXP values = key.values, prior = key.prior, point_scale = key.point_scale;
  if (!obj.data || !(obj.key == key)) {
    const std::size_t n = pts.n, d = pts.d;
    std::vector<double> spread(d);
    for (std::size_t j = 0; j < d; ++j) {
      double lo, hi;
      localmean::extent(pts.data() + j * n, n, &lo, &hi);
      spread[j] = hi - lo;
    }
    const localmean::CategoricalVars cat = categorical_vars(categorical, obj.codes0);
    obj.data.reset(new localmean::LocalData(
        pts.data(), n, d, Rf_isNull(values) ? nullptr : read_only(values), nv,
        Rf_isNull(prior) || Rf_xlength(prior) == 0 ? nullptr : read_only(prior),
        Rf_isNull(point_scale) || Rf_xlength(point_scale) == 0 ? nullptr : read_only(point_scale),
        cat, spread.data()));
    obj.key = key;
    obj.scale.clear();
    ++engine_builds;
    protect_data(engine, key);
  }
  if (!std::equal(obj.scale.begin(), obj.scale.end(), scale.begin(), scale.end())) {
    obj.data->rescale(pts.data(), scale.begin());
    obj.scale.assign(scale.begin(), scale.end());
  }
  if (categorical.size()) {
    const NumericVector lambda = categorical["lambda"];
    obj.data->set_lambda(std::vector<double>(lambda.begin(), lambda.end()));
  }
  return *obj.data;
}

template <class T>
T field(const List& list, const char* name, T fallback) {
  const SEXP v = list[name];
  return Rf_isNull(v) ? fallback : as<T>(v);
}

}  // namespace

// A new, empty engine object (an external pointer; its data are built by the first request).
// [[Rcpp::export(rng = false)]]
SEXP cpp_engine_new() {
  return XPtr<EngineObject>(new EngineObject(), true);
}

// Whether `engine` is a live engine object (not NULL, not a pointer restored by readRDS()).
// [[Rcpp::export(rng = false)]]
bool cpp_engine_alive(SEXP engine) {
  return TYPEOF(engine) == EXTPTRSXP && R_ExternalPtrAddr(engine) != nullptr;
}

// The number of times an engine object built its data since the package was loaded.
// [[Rcpp::export]]
int cpp_engine_builds() { return engine_builds; }

// Gives the engine object the values of `spec` (n x nv, or a vector) in place of those it holds,
// permuted into its tree order, when it holds the same data otherwise (points, prior weights,
// point scales, categorical codes): bootstrap replicates of a fit swap responses without
// rebuilding the tree. Returns whether it did (false: no data yet, or other data; the next
// request builds them).
// [[Rcpp::export(rng = false)]]
bool cpp_engine_set_values(SEXP engine, List spec) {
  if (!cpp_engine_alive(engine)) return false;
  EngineObject& obj = *XPtr<EngineObject>(engine);
  DataKey key = data_key(spec);
  const SEXP values = key.values;
  key.values = obj.key.values;
  if (!obj.data || !(obj.key == key) || Rf_isNull(values)) return false;
  const std::size_t n = obj.data->n();
  if (Rf_xlength(values) % n != 0) stop("values must have one row per data point");
  obj.data->set_values(read_only(values), Rf_xlength(values) / n);
  obj.key.values = values;
  protect_data(engine, obj.key);
  return true;
}

namespace {

// The summaries of fit_summary() as an R list; `status` counts points per QueryStatus.
List fit_sums_list(const localmean::FitSums& s) {
  IntegerVector status(4);
  for (int k = 0; k < 4; ++k) status[k] = static_cast<int>(s.status[k]);
  return List::create(_["count"] = s.count, _["weight"] = s.weight, _["rss"] = s.rss,
                      _["trace"] = s.trace, _["loo"] = s.loo, _["mean"] = s.mean,
                      _["spread"] = s.spread, _["near_one"] = s.near_one, _["status"] = status);
}

// A request of cpp_engine_fit() (see there).
struct FitRequest {
  SEXP queries = R_NilValue, radius = R_NilValue, query_codes = R_NilValue,
       leave_out = R_NilValue;
  bool want_var = false, want_inverse = false, want_window = false, verbose = false;
  double rtol = 0.0;
  int n_threads = 1;
};

// The local polynomial fits of cpp_engine_fit().
FitArrays engine_fit(SEXP engine, const List& spec, const FitRequest& request) {
  EngineObject one_off;
  EngineObject& obj = cpp_engine_alive(engine) ? *XPtr<EngineObject>(engine) : one_off;
  const SEXP x = spec["x"];
  const Points pts(x);
  const NumericVector scale = spec["scale"];
  const SEXP values = or_nil(spec["values"]);
  const Points queries(request.queries);
  const std::size_t n = pts.n, d = pts.d, m = queries.n;
  const std::size_t nv = Rf_isNull(values) ? 0 : Rf_xlength(values) / n;
  const double* vals = Rf_isNull(values) ? nullptr : read_only(values);
  const std::vector<double> qs = scaled(queries, scale);
  const std::string method = as<std::string>(spec["method"]);
  const bool want_var = request.want_var, verbose = request.verbose;
  localmean::EngineSettings set;
  set.kernel = localmean_r::kernel_type(as<std::string>(spec["kernel"]));
  set.degree = as<int>(spec["degree"]);
  set.want_var = want_var;
  set.cutoff = as<double>(spec["cutoff"]);
  set.rtol = request.rtol;
  set.family = loss_type(field<std::string>(spec, "family", "gaussian"));
  set.loss_param = field<double>(spec, "loss_param", NA_REAL);
  set.max_iter = field<int>(spec, "max_iter", 25);
  set.tol = field<double>(spec, "tol", 1e-8);
  set.design = spec.containsElementNamed("design") ? as<int>(spec["design"]) : 0;
  set.inverse_variance = spec.containsElementNamed("inverse_variance") &&
                         as<bool>(spec["inverse_variance"]);
  if (set.design > 0) {
    const localmean::LossKind kind = localmean::loss_info(set.family).kind;
    if (method == "binned" || static_cast<std::size_t>(set.design) + 1 != nv ||
        kind == localmean::LossKind::least_squares || kind == localmean::LossKind::multinomial)
      stop("a design needs an iterative loss, values (response, design) and no binning");
  }
  const localmean::Basis basis(static_cast<int>(d), set.degree);
  const std::size_t nb = localmean::detail::fit_size(basis, set);
  // (want_inverse: S^-1 of each query's last solve, not interpolated by the binned strategy)
  const bool iterative = method != "binned" && set.family != localmean::Loss::gaussian;
  FitArrays res(m, nb, set.design > 0 ? 1 : nv, want_var,
                method != "binned" && request.want_inverse, iterative && request.want_window);
  localmean_r::Monitor monitor(verbose, static_cast<double>(m), "local fit");
  // (binned: the grid's work is not counted in points; small fits never bin)
  const double visits = method == "binned" ? localmean_r::kSerialWork : static_cast<double>(m) * n;
  const auto pfor = localmean_r::parallel_for(request.n_threads, visits);
  const SEXP prior = or_nil(spec["prior"]);
  const double* w = Rf_isNull(prior) || Rf_xlength(prior) == 0 ? nullptr : read_only(prior);
  bool done;
  if (method == "binned") {
    const NumericMatrix range = spec["grid_range"];
    const NumericVector grid_lo = range(0, _), grid_hi = range(1, _);
    const IntegerVector gridsize = spec["gridsize"];
    const localmean::Grid grid = scaled_grid(d, scale, gridsize, grid_lo, grid_hi);
    FitArrays nodes(grid.nodes(), nb, nv, want_var);
    // Fits only at the nodes the queries interpolate from.
    const std::vector<char> needed = localmean::query_nodes(grid, qs.data(), m);
    done = binned_nodes(pts, vals, nv, w, grid, gridsize, grid_lo, grid_hi, set,
                        nodes.output(want_var), pfor, monitor, &needed);
    if (done)
      localmean::interpolate_nodes(grid, nodes.output(want_var), nb, nv, qs.data(), m,
                                   res.output(want_var));
  } else {
    set.use_tree = method == "tree";
    localmean::LocalData& data = engine_data(engine, obj, spec, pts, scale, nv);
    data.use_kernel(set.kernel);
    std::vector<int> qcodes = int_vector(request.query_codes);
    for (int& c : qcodes) --c;
    std::vector<int> left = int_vector(request.leave_out);
    for (int& r : left) --r;
    if (!left.empty() && left.size() != m) stop("leave_out must have one row per query");
    for (int r : left)
      if (r >= static_cast<int>(n)) stop("leave_out rows must be data rows");
    const NumericVector radius =
        Rf_isNull(request.radius) ? NumericVector(0) : NumericVector(request.radius);
    done = localmean::local_fit(data, qs.data(), m, radius.size() ? radius.begin() : nullptr,
                                qcodes.empty() ? nullptr : qcodes.data(), set,
                                res.output(want_var), pfor, monitor.callback(),
                                left.empty() ? nullptr : left.data());
  }
  monitor.finish();
  if (!done) stop("the computation was stopped");
  return res;
}

}  // namespace

// Local polynomial fits at the request's queries from the engine specification `spec` (see
// engine_spec() in R/engine.R: x (n x d, or a vector), values (n x nv, or a vector; NULL: none),
// prior, point_scale, scale, kernel, degree, method, cutoff, gridsize, grid_range (2 x d, the
// binned grid, which must cover the data and queries), categorical, family, max_iter, tol,
// design (iterative losses: values = (response, p design columns), design = p, the
// varying-coefficient fit; coef m x (p nb) x 1, see detail::window_basis()), inverse_variance
// (robust losses: MASS::rlm()'s wt.method = "inv.var")) held
// by the engine object `engine` (NULL: a one-off object). The request: queries (m x d, original
// units), radius (length m: per-query multiples of the scales, nn bandwidths; empty: none),
// want_var, want_inverse (optional: also `inverse`, m x nb x nb, S^-1 of each query's last
// solve in the scaled basis), want_window (optional, iterative losses: also `window`, m x 2, the
// rows of each query's window and the sum of their kernel weights), rtol (> 0: weight sums
// within that relative error), query_codes (the queries' 1-based levels, m x count), leave_out
// (likelihood families: per query a 1-based data row left out of its window, 0 none; empty:
// none), n_threads, verbose.
// [[Rcpp::export(rng = false)]]
List cpp_engine_fit(SEXP engine, List spec, List request) {
  FitRequest req;
  // (a matrix: converted if need be, and kept alive here)
  const NumericMatrix queries = request["queries"];
  req.queries = queries;
  req.radius = request["radius"];
  req.want_var = as<bool>(request["want_var"]);
  req.want_inverse = field<bool>(request, "want_inverse", false);
  req.want_window = field<bool>(request, "want_window", false);
  req.verbose = as<bool>(request["verbose"]);
  req.rtol = field<double>(request, "rtol", 0.0);
  req.query_codes = request["query_codes"];
  req.leave_out = request["leave_out"];
  req.n_threads = as<int>(request["n_threads"]);
  return engine_fit(engine, spec, req).as_list();
}

// The value of the local polynomial (its intercept, of the first value column) at the request's
// queries (queries, n_threads, verbose), fitted as cpp_engine_fit() fits it: list(coef (m x 1 x
// 1; NA where the query has no usable window), status), what predict() needs of plain
// predictions.
// [[Rcpp::export(rng = false)]]
List cpp_engine_values(SEXP engine, List spec, List request) {
  FitRequest req;
  const NumericMatrix queries = request["queries"];
  req.queries = queries;
  req.n_threads = as<int>(request["n_threads"]);
  req.verbose = as<bool>(request["verbose"]);
  const FitArrays res = engine_fit(engine, spec, req);
  const std::size_t m = res.s00.size();
  NumericVector coef(Dimension(m, 1, 1));
  for (std::size_t i = 0; i < m; ++i) coef[i] = res.status[i] == 0 ? res.coef[i] : NA_REAL;
  return List::create(_["coef"] = coef, _["status"] = res.status);
}

// Least-squares fits at the data points of `spec` (see cpp_engine_fit(); the exact or tree
// strategy, without nn radii or categorical variables) in one call, with what a fit keeps of
// them: list(fitted (n x nv; NA where no fit exists), leverage (the prior weight times
// [S^-1]_00), status (per point), status_counts (points per status), sums (as cpp_fit_sums()
// gives them for these fits)). The request: n_threads, verbose.
// [[Rcpp::export(rng = false)]]
List cpp_engine_data_fit(SEXP engine, List spec, List request) {
  FitRequest req;
  req.queries = spec["x"];
  req.n_threads = as<int>(request["n_threads"]);
  req.verbose = as<bool>(request["verbose"]);
  const FitArrays res = engine_fit(engine, spec, req);
  const SEXP values = spec["values"], prior = or_nil(spec["prior"]);
  const std::size_t n = res.s00.size(), nv = Rf_xlength(values) / n;
  const double* w = Rf_isNull(prior) || Rf_xlength(prior) == 0 ? nullptr : read_only(prior);
  NumericMatrix fitted(no_init(n, nv));
  NumericVector leverage(no_init(n));
  IntegerVector counts(4);
  const std::size_t nb = res.coef.size() / (n * nv);
  for (std::size_t i = 0; i < n; ++i) {
    const int status = res.status[i];
    // (the NA, not any NaN: as R marks the queries without a usable window)
    const bool ok = status == 0;
    for (std::size_t v = 0; v < nv; ++v)
      fitted[v * n + i] = ok ? res.coef[v * n * nb + i] : NA_REAL;
    const double s00 = ok ? res.s00[i] : NA_REAL;
    leverage[i] = w ? w[i] * s00 : s00;
    if (status >= 0 && status < 4) ++counts[status];
  }
  localmean::FitSums sums;
  localmean::given_fit_summary(n, read_only(values), nv, w, fitted.begin(), leverage.begin(),
                               &sums, localmean_r::parallel_for(req.n_threads,
                                                                static_cast<double>(n) * nv));
  return List::create(_["fitted"] = fitted, _["leverage"] = leverage, _["status"] = res.status,
                      _["status_counts"] = counts, _["sums"] = fit_sums_list(sums));
}

namespace {

// What every request on the engine's windows shares (cpp_engine_windows(),
// cpp_engine_cdens_quantiles(), cpp_engine_scale_moments()): the data of `spec` held by
// `engine` (a one-off object without one; with the spec's values, so that a later fit of the same
// specification reuses the object), the request's queries (m x d, original units) scaled and
// their level codes 0-based, the sweep's settings (the spec's kernel and cut-off; the tree unless
// "exact"), its progress bar (`label`) and the parallel-for of m x n visits.
struct WindowSweep {
  EngineObject one_off;
  localmean_r::Monitor monitor;
  std::size_t n = 0, d = 0, m = 0;
  std::vector<double> queries;
  std::vector<int> codes;
  localmean::EngineSettings set;
  localmean::LocalData* data = nullptr;
  localmean::ParallelFor parallel_for;
  WindowSweep(SEXP engine, const List& spec, const List& request, const char* label)
      : monitor(as<bool>(request["verbose"]), Rf_nrows(request["queries"]), label) {
    EngineObject& obj = cpp_engine_alive(engine) ? *XPtr<EngineObject>(engine) : one_off;
    const SEXP x = spec["x"];
    const Points pts(x);
    const NumericVector scale = spec["scale"];
    const NumericMatrix q = request["queries"];
    n = pts.n;
    d = pts.d;
    m = q.nrow();
    queries = scaled(q, scale);
    set.kernel = localmean_r::kernel_type(as<std::string>(spec["kernel"]));
    set.cutoff = as<double>(spec["cutoff"]);
    set.use_tree = as<std::string>(spec["method"]) != "exact";
    const SEXP values = or_nil(spec["values"]);
    const std::size_t nv = Rf_isNull(values) ? 0 : Rf_xlength(values) / n;
    data = &engine_data(engine, obj, spec, pts, scale, nv);
    data->use_kernel(set.kernel);
    codes = int_vector(request["query_codes"]);
    for (int& c : codes) --c;
    parallel_for = localmean_r::parallel_for(as<int>(request["n_threads"]),
                                             static_cast<double>(m) * n);
  }
  const int* query_codes() const { return codes.empty() ? nullptr : codes.data(); }
  // Raises a stop (interrupt, time limit) once the workers are done.
  void finish(bool done) {
    monitor.finish();
    if (!done) stop("the computation was stopped");
  }
};

}  // namespace

// The kernel windows of the request's queries (see cpp_engine_fit() for `spec` and the request:
// queries, radius, query_codes, n_threads, verbose), as the engine's fits would sweep them:
// list(start, row, weight, size, wsum), query i's data rows (1-based, ascending) and kernel
// weights (prior weights not applied) at positions start[i] + 1 to start[i + 1] of row and
// weight, and per query its number of rows of positive weight (kernel times prior) and the sum of
// their kernel weights; with request$sizes_only, row and weight are empty. The binned strategy
// has no windows: the tree's are given.
// [[Rcpp::export(rng = false)]]
List cpp_engine_windows(SEXP engine, List spec, List request) {
  WindowSweep sweep(engine, spec, request, "kernel windows");
  const std::size_t m = sweep.m;
  const NumericVector radius = request["radius"];
  std::vector<std::vector<std::size_t>> rows;
  std::vector<std::vector<double>> weights;
  const bool sizes_only = field<bool>(request, "sizes_only", false);
  NumericMatrix sizes(sizes_only ? m : 0, 2);
  sweep.finish(localmean::kernel_windows(
      *sweep.data, sweep.queries.data(), m, radius.size() ? radius.begin() : nullptr,
      sweep.query_codes(), sweep.set, rows, weights, sweep.parallel_for,
      sweep.monitor.callback(), sizes_only ? sizes.begin() : nullptr));
  IntegerVector start(m + 1), size(m);
  NumericVector wsum(m);
  for (std::size_t i = 0; i < m; ++i) {
    size[i] = static_cast<int>(sizes_only ? sizes[i] : rows[i].size());
    if (sizes_only) wsum[i] = sizes[i + m];
    for (double w : weights[i]) wsum[i] += w;
    start[i + 1] = start[i] + (sizes_only ? 0 : size[i]);
  }
  IntegerVector row(start[m]);
  NumericVector weight(start[m]);
  for (std::size_t i = 0; i < m && !sizes_only; ++i)
    for (std::size_t b = 0; b < rows[i].size(); ++b) {
      row[start[i] + b] = static_cast<int>(rows[i][b]) + 1;
      weight[start[i] + b] = weights[i][b];
    }
  return List::create(_["start"] = start, _["row"] = row, _["weight"] = weight,
                      _["size"] = size, _["wsum"] = wsum);
}

// Moves `points` (m x d) by iterated local means of the data `x` (n x d) in coordinates divided
// by `scale`: mean shift (ndim < 0) or the principal-component shift onto ndim-dimensional
// ridges. Mean shift may accelerate and let climbs meet earlier modes within `meet` scaled
// units (see localmean::ShiftSettings). Returns the final points, the weight sums there,
// iterations, status and paths.
// [[Rcpp::export]]
List cpp_shift_points(NumericMatrix x, NumericVector scale, NumericVector prior,
                      NumericMatrix points, std::string kernel, std::string method, double cutoff,
                      int max_iter, double tol, int ndim, bool keep_path, bool accelerate,
                      double meet, int n_threads, bool verbose) {
  const std::size_t n = x.nrow(), d = x.ncol(), m = points.nrow();
  const std::vector<double> xs = scaled(x, scale);
  std::vector<double> ps = scaled(points, scale);
  const std::vector<double> values = localmean::shift_values(xs.data(), n, d, ndim >= 0);
  localmean::LocalData data(xs.data(), n, d, values.data(), values.size() / n,
                            prior.size() ? prior.begin() : nullptr);
  localmean::EngineSettings set;
  set.kernel = localmean_r::kernel_type(kernel);
  data.use_kernel(set.kernel);
  set.use_tree = method == "tree";
  set.cutoff = cutoff;
  const localmean::ShiftSettings shift{max_iter, tol, ndim, keep_path, accelerate, meet};
  NumericVector wsum(m);
  IntegerVector iterations(m), status(m);
  std::vector<std::vector<double>> paths(keep_path ? m : 0);
  localmean::ShiftOutput out;
  out.wsum = wsum.begin();
  out.iterations = iterations.begin();
  out.status = status.begin();
  out.paths = &paths;
  localmean_r::Monitor monitor(verbose, static_cast<double>(m), "shifting points");
  const bool done = localmean::shift_points(data, ps.data(), m, set, shift, out,
                                            localmean_r::parallel_for(n_threads),
                                            monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  NumericMatrix final_points(m, d);
  for (std::size_t j = 0; j < d; ++j)
    for (std::size_t i = 0; i < m; ++i) final_points[j * m + i] = ps[j * m + i] * scale[j];
  List path_list(keep_path ? m : 0);
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const std::size_t steps = paths[i].size() / d;
    NumericMatrix p(steps, d);
    for (std::size_t s = 0; s < steps; ++s)
      for (std::size_t j = 0; j < d; ++j) p[j * steps + s] = paths[i][s * d + j] * scale[j];
    path_list[i] = p;
  }
  return List::create(_["points"] = final_points, _["wsum"] = wsum,
                      _["iterations"] = iterations, _["status"] = status, _["paths"] = path_list);
}

// Greedy grouping of modes (rows of `modes`, already in visiting order): a mode joins the first
// group whose representative lies within `tol`, else starts a new group. Returns 1-based groups.
// [[Rcpp::export]]
IntegerVector cpp_merge_modes(NumericMatrix modes, double tol) {
  const std::size_t m = modes.nrow(), d = modes.ncol();
  std::vector<std::size_t> reps;
  IntegerVector group(m);
  for (std::size_t i = 0; i < m; ++i) {
    std::size_t g = 0;
    for (; g < reps.size(); ++g) {
      double s = 0.0;
      for (std::size_t j = 0; j < d && s <= tol * tol; ++j) {
        const double t = modes[j * m + i] - modes[j * m + reps[g]];
        s += t * t;
      }
      if (s <= tol * tol) break;
    }
    if (g == reps.size()) reps.push_back(i);
    group[i] = static_cast<int>(g) + 1;
  }
  return group;
}

// Index (1-based) of the data point nearest to every query, in coordinates divided by `scale`.
// [[Rcpp::export]]
IntegerVector cpp_nearest_index(NumericMatrix x, NumericVector scale, NumericMatrix queries,
                                int n_threads) {
  const std::vector<double> xs = scaled(x, scale), qs = scaled(queries, scale);
  const std::size_t m = queries.nrow();
  std::vector<std::size_t> index(m);
  localmean_r::Monitor monitor(false, m, "nearest points");  // interrupts only
  const bool done = localmean::nearest_index(xs.data(), x.nrow(), x.ncol(), qs.data(), m,
                                             index.data(), localmean_r::parallel_for(n_threads),
                                             monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  IntegerVector out(m);
  for (std::size_t i = 0; i < m; ++i) out[i] = static_cast<int>(index[i]) + 1;
  return out;
}

// Distance from every query to its k-th nearest data point, in coordinates divided by `scale`.
// [[Rcpp::export]]
NumericVector cpp_knn_radius(NumericMatrix x, NumericVector scale, NumericMatrix queries, int k,
                             int n_threads, bool verbose) {
  const std::vector<double> xs = scaled(x, scale), qs = scaled(queries, scale);
  NumericVector radius(queries.nrow());
  localmean_r::Monitor monitor(verbose, queries.nrow(), "neighbours");
  const bool done = localmean::knn_radius(xs.data(), x.nrow(), x.ncol(), qs.data(),
                                          queries.nrow(), static_cast<std::size_t>(k),
                                          radius.begin(), localmean_r::parallel_for(n_threads),
                                          monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  return radius;
}

// Radius of the ball about every query that holds its k nearest data points and reaches the
// `distinct`-th different distance (see knn_distinct_radius()), in coordinates divided by
// `scale`.
// [[Rcpp::export]]
NumericVector cpp_knn_distinct_radius(NumericMatrix x, NumericVector scale, NumericMatrix queries,
                                      int k, int distinct, double slack, int n_threads,
                                      bool verbose) {
  const std::vector<double> xs = scaled(x, scale), qs = scaled(queries, scale);
  NumericVector radius(queries.nrow());
  localmean_r::Monitor monitor(verbose, queries.nrow(), "neighbours");
  const bool done = localmean::knn_distinct_radius(
      xs.data(), x.nrow(), x.ncol(), qs.data(), queries.nrow(), static_cast<std::size_t>(k),
      static_cast<std::size_t>(distinct), slack, radius.begin(),
      localmean_r::parallel_for(n_threads), monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  return radius;
}

// The kernel registry as a data frame, one row per kernel in the core's table order.
// [[Rcpp::export]]
DataFrame cpp_kernel_table() {
  std::size_t size;
  const localmean::KernelInfo* table = localmean::kernel_table(&size);
  CharacterVector name(size), shadow(size);
  LogicalVector compact(size), multivariate(size);
  NumericVector cutoff(size), constant(size), mu2(size), roughness(size), reach(size),
      quartile(size), shadow_factor(size);
  for (std::size_t i = 0; i < size; ++i) {
    name[i] = table[i].name;
    compact[i] = table[i].compact;
    cutoff[i] = table[i].cutoff;
    constant[i] = table[i].constant;
    mu2[i] = table[i].mu2;
    roughness[i] = table[i].roughness;
    multivariate[i] = table[i].multivariate;
    reach[i] = table[i].reach;
    quartile[i] = table[i].quartile;
    shadow_factor[i] = table[i].shadow_factor;
    if (table[i].shadow_factor > 0)
      shadow[i] = localmean::kernel_info(table[i].shadow).name;
    else
      shadow[i] = NA_STRING;
  }
  return DataFrame::create(_["kernel"] = name, _["compact"] = compact, _["cutoff"] = cutoff,
                           _["constant"] = constant, _["mu2"] = mu2, _["roughness"] = roughness,
                           _["multivariate"] = multivariate, _["reach"] = reach,
                           _["quartile"] = quartile, _["shadow"] = shadow,
                           _["shadow_factor"] = shadow_factor, _["stringsAsFactors"] = false);
}

// Exponents of the local polynomial's basis monomials, one row per term, in the engine's order.
// [[Rcpp::export(rng = false)]]
IntegerMatrix cpp_basis_powers(int d, int degree) {
  const localmean::Basis basis(d, degree);
  IntegerMatrix out(basis.size(), d);
  for (std::size_t b = 0; b < basis.size(); ++b)
    for (int j = 0; j < d; ++j) out(b, j) = basis.powers(b)[j];
  return out;
}

// Kernel density values c * k(u) on the line.
// [[Rcpp::export]]
NumericVector cpp_kernel_value(std::string kernel, NumericVector u) {
  const localmean::KernelType type = localmean_r::kernel_type(kernel);
  NumericVector out(u.size());
  for (R_xlen_t i = 0; i < u.size(); ++i) out[i] = localmean::kernel_value(type, u[i]);
  return out;
}

// Normalising constant of the radial kernel in d dimensions.
// [[Rcpp::export]]
double cpp_radial_constant(std::string kernel, int d) {
  return localmean::radial_constant(localmean_r::kernel_type(kernel), d);
}

// Column ranges (2 x d) and whether every entry is finite, in one pass.
// [[Rcpp::export(rng = false)]]
List cpp_column_ranges(SEXP points) {
  const Points pts(points);
  const std::size_t n = pts.n, d = pts.d;
  const double* x = pts.data();
  NumericMatrix range(2, d);
  LogicalVector finite(d);
  for (std::size_t j = 0; j < d; ++j) {
    double lo, hi;
    finite[j] = localmean::extent(x + j * n, n, &lo, &hi);
    range(0, j) = lo;
    range(1, j) = hi;
  }
  return List::create(_["range"] = range, _["finite"] = finite);
}

// TRUE when every entry is finite (no allocation, unlike all(is.finite(x))).
// [[Rcpp::export(rng = false)]]
bool cpp_all_finite(SEXP x) {
  const double* v = read_only(x);
  const R_xlen_t n = Rf_xlength(x);
  // finite iff v - v == 0 (NaN for NaN and +-Inf): a branch-free loop, one test at the end
  double acc = 0.0;
  for (R_xlen_t i = 0; i < n; ++i) acc += v[i] - v[i];
  return acc == 0.0;
}

// Fits at the data points `x` (n x d, or a vector) of the binned least-squares fit of `values`
// (n x nv, or a vector), in one pass after binning: the node fits and [S^-1]_00 interpolated to
// every point (see binned_data_fit() in data_fit.hpp). Returns the fit's summaries (`sums`),
// with keep_fits the fits (n x nv, a vector for nv = 1; NA where a fit does not exist) and the
// leverages (prior weight times [S^-1]_00), with keep_residuals the residuals (as the fits).
// With keep_nodes, also the grid's node fits (`nodes`, as cpp_engine_fit() returns its fits:
// coef G x nb x nv, s00, wsum, status) for cpp_interpolate_nodes().
// Grid arguments as for cpp_engine_fit().
// [[Rcpp::export(rng = false)]]
List cpp_binned_data_fit(SEXP x, NumericVector scale, SEXP values, NumericVector prior,
                         std::string kernel, int degree, double cutoff, IntegerVector gridsize,
                         NumericVector grid_lo, NumericVector grid_hi, int n_threads,
                         bool verbose, bool keep_fits, bool keep_residuals, bool keep_nodes) {
  const Points pts(x);
  const std::size_t n = pts.n, d = pts.d, nv = Rf_xlength(values) / n;
  const double* vals = read_only(values);
  const double* w = prior.size() ? prior.begin() : nullptr;
  localmean::EngineSettings set;
  set.kernel = localmean_r::kernel_type(kernel);
  set.degree = degree;
  set.cutoff = cutoff;
  const std::size_t nb = localmean::Basis(static_cast<int>(d), degree).size();
  localmean_r::Monitor monitor(verbose, static_cast<double>(n), "local fit");
  const auto pfor = localmean_r::parallel_for(n_threads);
  const localmean::Grid grid = scaled_grid(d, scale, gridsize, grid_lo, grid_hi);
  FitArrays nodes(grid.nodes(), nb, nv, false);
  const localmean::EngineOutput node_out = nodes.output(false);
  // One value column: plain vectors, which R can drop into a model as they are. Not zeroed:
  // binned_data_fit() writes every entry.
  auto fits = [n, nv](bool keep) {
    if (!keep) return NumericVector(0);
    return nv == 1 ? NumericVector(no_init(n)) : NumericVector(NumericMatrix(no_init(n, nv)));
  };
  NumericVector fitted = fits(keep_fits), residuals = fits(keep_residuals);
  NumericVector leverage(no_init(keep_fits ? n : 0));
  localmean::DataFitOutput out;
  out.missing = NA_REAL;
  if (keep_fits) {
    out.fitted = fitted.begin();
    out.leverage = leverage.begin();
  }
  if (keep_residuals) out.residuals = residuals.begin();
  localmean::FitSums sums;
  const bool done = binned_nodes(pts, vals, nv, w, grid, gridsize, grid_lo, grid_hi, set,
                                 node_out, pfor, monitor) &&
                    localmean::binned_data_fit(grid, node_out, nb, pts.data(), n, scale.begin(),
                                               vals, nv, w, out, &sums, pfor,
                                               monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  List res = List::create(_["sums"] = fit_sums_list(sums));
  if (keep_fits) {
    res["fitted"] = fitted;
    res["leverage"] = leverage;
  }
  if (keep_residuals) res["residuals"] = residuals;
  if (keep_nodes) res["nodes"] = nodes.as_list();
  return res;
}

// The summaries (fit_sums_list()) of least-squares fits at the data points of `spec` (one
// numeric variable, no categorical variables, point scales or nn radii) for many bandwidths at
// once, held by the engine object `engine` as cpp_engine_fit() holds them (in units of the
// largest bandwidth; the spec's own scale is not used). The request: scales (K bandwidths,
// original units), reach (K truncation radii in bandwidths, Inf: none), n_threads, verbose.
// Returns one list per bandwidth.
// [[Rcpp::export]]
List cpp_engine_candidate_sums(SEXP engine, List spec, List request) {
  EngineObject one_off;
  EngineObject& obj = cpp_engine_alive(engine) ? *XPtr<EngineObject>(engine) : one_off;
  const SEXP x = spec["x"];
  const Points pts(x);
  const SEXP values = or_nil(spec["values"]);
  if (pts.d != 1 || Rf_isNull(values)) stop("internal error: one variable and values needed");
  const std::size_t n = pts.n, nv = Rf_xlength(values) / n;
  const NumericVector scales = request["scales"], reach = request["reach"];
  const std::size_t K = scales.size();
  if (static_cast<std::size_t>(reach.size()) != K) stop("internal error: one reach per scale");
  localmean::EngineSettings set;
  set.kernel = localmean_r::kernel_type(as<std::string>(spec["kernel"]));
  set.degree = as<int>(spec["degree"]);
  // The data in units of the largest bandwidth: the candidates' shared basis x - q stays of
  // the order of their windows, whatever the data's units (1e-300 or 1e300).
  const double unit = K ? *std::max_element(scales.begin(), scales.end()) : 1.0;
  localmean::LocalData& data = engine_data(engine, obj, spec, pts, NumericVector::create(unit),
                                           nv);
  if (data.categorical() || data.inv_scale2()) stop("internal error: plain 1-D data needed");
  data.use_kernel(set.kernel);
  std::vector<double> relative(K);
  for (std::size_t c = 0; c < K; ++c) relative[c] = scales[c] / unit;
  std::vector<double> fitted(n * nv * K), s00(n * K);
  const auto pfor = localmean_r::parallel_for(as<int>(request["n_threads"]));
  localmean_r::Monitor monitor(as<bool>(request["verbose"]), static_cast<double>(n),
                               "bandwidth candidates");
  const bool done = localmean::candidate_data_fits(data, relative.data(), reach.begin(), K, set,
                                                   fitted.data(), s00.data(), pfor,
                                                   monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  const SEXP prior = or_nil(spec["prior"]);
  const double* w = Rf_isNull(prior) || Rf_xlength(prior) == 0 ? nullptr : read_only(prior);
  const double* vals = read_only(values);
  List out(K);
  std::vector<double> leverage(n);
  for (std::size_t c = 0; c < K; ++c) {
    for (std::size_t i = 0; i < n; ++i) leverage[i] = (w ? w[i] : 1.0) * s00[c * n + i];
    localmean::FitSums sums;
    localmean::given_fit_summary(n, vals, nv, w, fitted.data() + c * n * nv, leverage.data(),
                                 &sums, pfor);
    out[c] = fit_sums_list(sums);
  }
  return out;
}

// The node fits `nodes` of cpp_binned_data_fit() (keep_nodes) on its grid, interpolated to
// `queries` (m x d) as cpp_engine_fit() interpolates the fits of the same grid (without
// variances): the same list, without binning the data again. Grid arguments as for
// cpp_engine_fit().
// [[Rcpp::export(rng = false)]]
List cpp_interpolate_nodes(List nodes, NumericMatrix queries, NumericVector scale,
                           IntegerVector gridsize, NumericVector grid_lo, NumericVector grid_hi) {
  const std::size_t m = queries.nrow(), d = queries.ncol();
  const NumericVector coef = nodes["coef"], s00 = nodes["s00"], wsum = nodes["wsum"];
  const IntegerVector status = nodes["status"];
  const IntegerVector dim = coef.attr("dim");
  const localmean::Grid grid = scaled_grid(d, scale, gridsize, grid_lo, grid_hi);
  const std::size_t G = grid.nodes(), nb = dim[1], nv = dim[2];
  if (static_cast<std::size_t>(dim[0]) != G || static_cast<std::size_t>(s00.size()) != G ||
      static_cast<std::size_t>(wsum.size()) != G || static_cast<std::size_t>(status.size()) != G)
    stop("internal error: the node fits do not match the grid");
  localmean::EngineOutput in;
  in.coef = const_cast<double*>(coef.begin());
  in.s00 = const_cast<double*>(s00.begin());
  in.wsum = const_cast<double*>(wsum.begin());
  in.status = const_cast<int*>(status.begin());
  FitArrays res(m, nb, nv, false);
  const std::vector<double> qs = scaled(queries, scale);
  localmean::interpolate_nodes(grid, in, nb, nv, qs.data(), m, res.output(false));
  return res.as_list();
}

// The summaries of given fits (n x nv) and leverages (n) of `values` at the data points, as
// cpp_binned_data_fit() returns them (see fit_summary() in data_fit.hpp).
// [[Rcpp::export(rng = false)]]
List cpp_fit_sums(SEXP values, SEXP fitted, SEXP leverage, NumericVector prior, int n_threads) {
  const std::size_t n = Rf_xlength(leverage), nv = n ? Rf_xlength(values) / n : 0;
  if (static_cast<std::size_t>(Rf_xlength(fitted)) != n * nv)
    stop("internal error: fitted values and values differ in size");
  localmean::FitSums sums;
  localmean::given_fit_summary(n, read_only(values), nv, prior.size() ? prior.begin() : nullptr,
                               read_only(fitted), read_only(leverage), &sums,
                               localmean_r::parallel_for(n_threads, static_cast<double>(n) * nv));
  return fit_sums_list(sums);
}

// Local principal axes at m points from the local means of the coordinates and of their
// products (m x (d + d (d + 1) / 2), see localmean::local_axes()): variances (m x d, largest
// first) and axes (d x d x m, column k of slice i the axis of variances[i, k]).
// [[Rcpp::export]]
List cpp_local_axes(NumericMatrix means, int d) {
  const std::size_t m = means.nrow(), dd = static_cast<std::size_t>(d), nv = means.ncol();
  NumericMatrix variances(m, d);
  NumericVector axes(dd * dd * m);
  std::vector<double> mean(nv), var(dd);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t v = 0; v < nv; ++v) mean[v] = means[v * m + i];
    localmean::local_axes(mean.data(), dd, var.data(), &axes[i * dd * dd]);
    for (std::size_t k = 0; k < dd; ++k) variances[k * m + i] = var[k];
  }
  axes.attr("dim") = IntegerVector::create(d, d, static_cast<int>(m));
  return List::create(Named("variances") = variances, Named("axes") = axes);
}

// Conditional quantiles of kde(y ~ x) at degree 0 (conditional_quantiles() in conditional.hpp)
// from the engine specification `spec` of the predictors (see cpp_engine_fit(); its values are
// not used) held by `engine`. The request: queries (m x d), query_codes (m x count, 1-based),
// y (the responses, n), y_kernel, hy (the response's kernel and bandwidth), tau, max_iter,
// n_threads, verbose. Returns the quantiles, m x length(tau) (NA where no data weigh).
// [[Rcpp::export(rng = false)]]
NumericMatrix cpp_engine_cdens_quantiles(SEXP engine, List spec, List request) {
  WindowSweep sweep(engine, spec, request, "conditional quantiles");
  const NumericVector y = request["y"], tau = request["tau"];
  if (static_cast<std::size_t>(y.size()) != sweep.n)
    stop("internal error: one response per point");
  NumericMatrix out(sweep.m, tau.size());
  sweep.finish(localmean::conditional_quantiles(
      *sweep.data, sweep.queries.data(), sweep.m, sweep.query_codes(), sweep.set, y.begin(),
      localmean_r::kernel_type(as<std::string>(request["y_kernel"])), as<double>(request["hy"]),
      tau.begin(), tau.size(), as<int>(request["max_iter"]), out.begin(), sweep.parallel_for,
      sweep.monitor.callback()));
  for (double& v : out)
    if (std::isnan(v)) v = NA_REAL;
  return out;
}

// The Gaussian weight sums of the request's queries with their derivatives in the log-scales
// (gaussian_scale_moments() in conditional.hpp: m x (1 + d + d (d + 1) / 2)) from the engine
// specification `spec` (Gaussian kernel, values not used) held by `engine`. The request:
// queries (m x d), query_codes (m x count, 1-based), derivatives (FALSE: the sums alone, m x 1),
// at_data (optional: TRUE when the queries are the data points in their order), y and
// joint_cutoff (optional, at the data: the response in scales, whose joint kernel with the data
// is cut at joint_cutoff scales, its sums in the columns after), n_threads, verbose.
// [[Rcpp::export(rng = false)]]
NumericMatrix cpp_engine_scale_moments(SEXP engine, List spec, List request) {
  WindowSweep sweep(engine, spec, request, "cross-validation sums");
  if (sweep.set.kernel != localmean::KernelType::gaussian)
    stop("internal error: the Gaussian kernel is needed");
  const bool derivatives = as<bool>(request["derivatives"]);
  const SEXP y = request["y"];
  std::size_t width = 0;
  for (std::size_t d = sweep.d; d <= sweep.d + !Rf_isNull(y); ++d)
    width += derivatives ? 1 + d + d * (d + 1) / 2 : 1;
  NumericMatrix out(sweep.m, width);
  sweep.finish(localmean::gaussian_scale_moments(
      *sweep.data, sweep.queries.data(), sweep.m, sweep.query_codes(), sweep.set, derivatives,
      out.begin(), sweep.parallel_for, sweep.monitor.callback(),
      field<bool>(request, "at_data", false), Rf_isNull(y) ? nullptr : REAL(y),
      field<double>(request, "joint_cutoff", R_PosInf)));
  return out;
}
