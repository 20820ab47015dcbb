// Tests of the header-only core without R: the engine against a direct computation, and the same
// results from a serial and a std::thread parallel-for. Run by `make core-test`, which builds it
// twice (with the AVX2 copies of the hot loops, and portable only with -DLOCALMEAN_NO_CLONES),
// runs each with a file name, and compares the two files bit for bit: the engine's outputs that
// the tests record() (sweeps, binned fits, metric losses, sequence and imputation loops).
#include <localmean/bandwidth.hpp>
#include <localmean/binning.hpp>
#include <localmean/conditional.hpp>
#include <localmean/data_fit.hpp>
#include <localmean/engine.hpp>
#include <localmean/impute.hpp>
#include <localmean/metric.hpp>
#include <localmean/modes.hpp>
#include <localmean/sequence.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <vector>

using namespace localmean;

static int checks = 0, failures = 0;

// The outputs compared between the two builds, in the order the tests record them.
static std::vector<double> recorded;
static void record(const double* p, std::size_t n) { recorded.insert(recorded.end(), p, p + n); }
static void record(const std::vector<double>& v) { record(v.data(), v.size()); }
static void record(double v) { record(&v, 1); }

static void expect(bool ok, const char* what) {
  ++checks;
  if (!ok) {
    std::printf("FAIL: %s\n", what);
    ++failures;
  }
}

// Splits [begin, end) over two std::threads.
static void two_threads(std::size_t begin, std::size_t end,
                        const std::function<void(std::size_t, std::size_t)>& fn) {
  const std::size_t mid = begin + (end - begin) / 2;
  std::thread other(fn, mid, end);
  fn(begin, mid);
  other.join();
}

// Imputation: neighbour rows against a direct search, the layers against direct local means,
// observed entries untouched, serial and threaded iterations identical; non-local means
// against a direct double loop and across thread splits.
static void impute_tests() {
  const std::size_t n = 60, p = 9;
  std::mt19937 rng(7);
  std::normal_distribution<double> norm(0.0, 1.0);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  std::vector<double> x(n * p), obs(n * p);
  for (std::size_t i = 0; i < n; ++i) {
    const double f = norm(rng);
    for (std::size_t c = 0; c < p; ++c) {
      x[i * p + c] = f * (1.0 + 0.1 * c) + 0.2 * norm(rng);
      obs[i * p + c] = unif(rng) < 0.7 ? 1.0 : 0.0;
    }
    obs[i * p] = 1.0;  // every row keeps an observed entry
  }
  std::vector<double> x0(x);
  for (std::size_t a = 0; a < n * p; ++a)
    if (obs[a] == 0.0) x0[a] = 0.0;
  const IncompleteTable t{x0.data(), obs.data(), n, p};
  std::vector<unsigned char> query(n, 1);
  const std::size_t k = 6;
  RowNeighbours g1, g2;
  shared_neighbours(t, query.data(), k, g1);
  shared_neighbours(t, query.data(), k, g2, two_threads);
  expect(g1.index == g2.index && g1.dist2 == g2.dist2, "serial and threaded neighbour rows");
  bool ok = true;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::pair<double, int>> all;
    for (std::size_t j = 0; j < n; ++j) {
      if (j == i) continue;
      double num = 0.0, den = 0.0;
      for (std::size_t c = 0; c < p; ++c) {
        const double m = obs[i * p + c] * obs[j * p + c];
        num += m * (x[i * p + c] - x[j * p + c]) * (x[i * p + c] - x[j * p + c]);
        den += m;
      }
      if (den > 0) all.emplace_back(p * num / den, static_cast<int>(j));
    }
    std::sort(all.begin(), all.end());
    for (std::size_t b = 0; b < k; ++b)
      ok = ok && g1.index[i * k + b] == all[b].second &&
           std::fabs(g1.dist2[i * k + b] - all[b].first) < 1e-9 * (1.0 + all[b].first);
  }
  expect(ok, "neighbour rows equal a sort of all shared-entry distances");

  // One iteration of the sample layer alone is the kernel-weighted mean of the neighbours.
  std::vector<double> start(x0);
  for (std::size_t a = 0; a < n * p; ++a)
    if (obs[a] == 0.0) start[a] = 0.5;
  std::vector<unsigned char> active(n, 1);
  const MissingEntries miss = missing_entries(IncompleteTable{start.data(), obs.data(), n, p},
                                              active.data());
  FeatureLinks none;
  none.start.assign(p + 1, 0);
  none.centre.assign(p, 0.0);
  none.scale.assign(p, 1.0);
  ImputeSettings set;
  set.use_feature = false;
  set.nn_rank = 3;
  set.max_iter = 1;
  set.imputed_weight = 0.1;
  std::vector<double> y1(start), change;
  impute_iterate(y1.data(), obs.data(), n, p, miss, g1, none, set, change);
  double worst = 0.0;
  for (std::size_t r = 0; r < miss.rows.size(); ++r) {
    const std::size_t i = miss.rows[r];
    std::vector<double> d2(k), w(k);
    for (std::size_t b = 0; b < k; ++b) {
      const std::size_t j = g1.index[i * k + b];
      double num = 0.0, den = 0.0;
      for (std::size_t c = 0; c < p; ++c) {
        const double m = (obs[i * p + c] ? 1.0 : 0.1) * (obs[j * p + c] ? 1.0 : 0.1);
        num += m * std::pow(start[i * p + c] - start[j * p + c], 2);
        den += m;
      }
      d2[b] = p * num / den;
    }
    std::vector<double> sorted(d2);
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t b = 0; b < k; ++b) w[b] = std::exp(-0.5 * d2[b] / sorted[2]);
    for (std::size_t e = miss.row_start[r]; e < miss.row_start[r + 1]; ++e) {
      const int c = miss.column[e];
      double sw = 0.0, swx = 0.0;
      for (std::size_t b = 0; b < k; ++b) {
        const std::size_t j = g1.index[i * k + b];
        const double a = obs[j * p + c] ? 1.0 : 0.1;
        sw += w[b] * a;
        swx += w[b] * a * start[j * p + c];
      }
      worst = std::max(worst, std::fabs(y1[i * p + c] - swx / sw));
    }
  }
  expect(worst < 1e-9, "the sample layer is the kernel-weighted mean of the neighbour rows");
  bool kept = true;
  for (std::size_t a = 0; a < n * p; ++a)
    if (obs[a] != 0.0) kept = kept && y1[a] == start[a];
  expect(kept, "observed entries are never changed");

  // Both layers, several iterations, serial and threaded.
  FeatureLinks chain;
  chain.start.push_back(0);
  for (std::size_t c = 0; c < p; ++c) {
    for (std::size_t l = 0; l < p; ++l)
      if (l != c) {
        chain.feature.push_back(static_cast<int>(l));
        chain.weight.push_back(std::exp(-std::fabs(double(l) - double(c))));
        chain.slope.push_back(1.0);
      }
    chain.start.push_back(chain.feature.size());
  }
  chain.centre.assign(p, 0.0);
  chain.scale.assign(p, 1.0);
  set.use_feature = true;
  set.max_iter = 10;
  set.tol = 0.0;
  std::vector<double> y2(start), y3(start), c2, c3;
  impute_iterate(y2.data(), obs.data(), n, p, miss, g1, chain, set, c2);
  impute_iterate(y3.data(), obs.data(), n, p, miss, g1, chain, set, c3, nullptr, nullptr,
                 two_threads);
  expect(y2 == y3 && c2 == c3, "serial and threaded imputation are identical");
  record(y1);
  record(y2);
  record(c2);
  expect(c2.size() == 10 && c2.back() < c2.front(), "the imputation settles");

  // Non-local means on a small image against a direct computation.
  const std::size_t H = 13, W = 11;
  std::vector<double> img(H * W), out1(H * W), out2(H * W);
  for (std::size_t r = 0; r < H; ++r)
    for (std::size_t c = 0; c < W; ++c) img[r * W + c] = (r > 5) + 0.3 * norm(rng);
  NlmSettings nset;
  nset.half_patch = 1;
  nset.half_search = 3;
  nset.h = 0.4;
  nset.sigma = 0.3;
  nl_means(img.data(), H, W, nset, out1.data());
  nl_means(img.data(), H, W, nset, out2.data(), two_threads);
  expect(out1 == out2, "serial and threaded non-local means are identical");
  record(out1);
  auto at = [&](long r, long c) {
    return img[detail::mirror(r, H) * W + detail::mirror(c, W)];
  };
  // The largest difference from a direct computation with weight(excess), the excess patch
  // distance max(d2 - 2 sigma^2, 0).
  auto direct_worst = [&](double (*weight)(double)) {
    double worst = 0.0;
    for (long r = 0; r < long(H); ++r)
      for (long c = 0; c < long(W); ++c) {
        double sw = 0.0, swx = 0.0;
        for (long dy = -3; dy <= 3; ++dy)
          for (long dx = -3; dx <= 3; ++dx) {
            double d2 = 0.0;
            for (long a = -1; a <= 1; ++a)
              for (long b = -1; b <= 1; ++b)
                d2 += std::pow(at(r + a, c + b) - at(r + dy + a, c + dx + b), 2);
            const double w = weight(std::max(d2 / 9.0 - 2 * 0.09, 0.0));
            sw += w;
            swx += w * at(r + dy, c + dx);
          }
        worst = std::max(worst, std::fabs(out1[r * W + c] - swx / sw));
      }
    return worst;
  };
  expect(direct_worst([](double e) { return std::exp(-e / 0.16); }) < 1e-10,
         "non-local means equal a direct computation");

  // Another registry kernel: Epanechnikov weights max(0, 1 - 2 excess / h^2).
  nset.kernel = KernelType::epanechnikov;
  nl_means(img.data(), H, W, nset, out1.data());
  nl_means(img.data(), H, W, nset, out2.data(), two_threads);
  expect(out1 == out2, "serial and threaded Epanechnikov non-local means are identical");
  record(out1);
  expect(direct_worst([](double e) { return std::max(0.0, 1.0 - 2.0 * e / 0.16); }) < 1e-10,
         "Epanechnikov non-local means equal a direct computation");

  // The engine's local mean over a neighbour list equals a hand loop, and listed kernel weights
  // are the kernel's values (0 for incomparable neighbours, equal shares at h = 0).
  const std::vector<double> lw = {0.5, 2.0, 0.0, 1.5}, lp = {1.0, 0.1, 1.0, 0.5},
                            lv = {3.0, -1.0, 7.0, 2.0};
  const double listed = listed_local_mean(lw.data(), 4, [&](std::size_t b) { return lp[b]; },
                                          [&](std::size_t b) { return lv[b]; });
  double hw = 0.0, hwy = 0.0;
  for (std::size_t b = 0; b < 4; ++b) {
    hw += lw[b] * lp[b];
    hwy += lw[b] * lp[b] * lv[b];
  }
  expect(listed == hwy / hw, "the listed local mean equals a hand loop");
  expect(std::isnan(listed_local_mean(lw.data() + 2, 1, [](std::size_t) { return 1.0; },
                                      [](std::size_t) { return 1.0; })),
         "a listed local mean without weight is NaN");
  const std::vector<double> ld2 = {0.0, 0.25, kInf, 4.0};
  std::vector<double> kw(4);
  listed_kernel_weights(KernelType::biweight, ld2.data(), 4, 0.5, kw.data());
  expect(kw[0] == 1.0 && kw[1] == 0.25 && kw[2] == 0.0 && kw[3] == 0.0,
         "listed kernel weights are the kernel's values");
  listed_kernel_weights(KernelType::gaussian, ld2.data(), 4, 0.0, kw.data());
  expect(kw[0] == 1.0 && kw[1] == 0.0 && kw[2] == 0.0, "at h = 0 only exact duplicates weigh");
}

// Neighbour search: brute force (high dimension) against the kd-tree (the same points padded
// with constant variables, which change no distance) and against a sort; the nearest index.
static void neighbour_tests() {
  const std::size_t n = 300, m = 50, d = 3, wide = 12, k = 7;
  std::mt19937 rng(11);
  std::normal_distribution<double> norm(0.0, 1.0);
  std::vector<double> x(n * wide, 0.25), q(m * wide, 0.25);
  for (std::size_t j = 0; j < d; ++j) {
    for (std::size_t i = 0; i < n; ++i) x[j * n + i] = norm(rng);
    for (std::size_t i = 0; i < m; ++i) q[j * m + i] = norm(rng);
  }
  for (std::size_t i = 0; i < 5; ++i)  // duplicates of earlier points
    for (std::size_t j = 0; j < d; ++j) x[j * n + 290 + i] = x[j * n + i];
  // x and q hold d informative columns, then constant ones; both layouts share the first d.
  std::vector<double> r_tree(m), r_brute(m), r_brute2(m);
  knn_radius(x.data(), n, d, q.data(), m, k, r_tree.data());
  knn_radius(x.data(), n, wide, q.data(), m, k, r_brute.data());
  knn_radius(x.data(), n, wide, q.data(), m, k, r_brute2.data(), two_threads);
  double worst = 0.0;
  for (std::size_t i = 0; i < m; ++i) {
    std::vector<double> dist(n);
    for (std::size_t p = 0; p < n; ++p) {
      double s = 0.0;
      for (std::size_t j = 0; j < d; ++j) s += std::pow(x[j * n + p] - q[j * m + i], 2);
      dist[p] = std::sqrt(s);
    }
    std::nth_element(dist.begin(), dist.begin() + (k - 1), dist.end());
    worst = std::max({worst, std::fabs(r_tree[i] - dist[k - 1]),
                      std::fabs(r_brute[i] - dist[k - 1])});
  }
  expect(worst < 1e-12, "tree and brute-force knn_radius equal the k-th sorted distance");
  expect(r_brute == r_brute2, "serial and threaded brute-force knn_radius are identical");
  record(r_tree);
  record(r_brute);
  std::vector<double> r_all(m);
  knn_radius(x.data(), n, wide, q.data(), m, n + 5, r_all.data());
  knn_radius(x.data(), n, d, q.data(), m, n, r_tree.data());
  expect(r_all == r_tree, "k beyond n gives the farthest point, by either search");

  KnnGraph g_tree, g_brute;
  knn_graph(x.data(), n, d, x.data(), n, k, true, g_tree);
  knn_graph(x.data(), n, wide, x.data(), n, k, true, g_brute, two_threads);
  expect(g_tree.index == g_brute.index, "tree and brute-force neighbour graphs agree");
  double gworst = 0.0;
  for (std::size_t a = 0; a < g_tree.dist.size(); ++a)
    gworst = std::max(gworst, std::fabs(g_tree.dist[a] - g_brute.dist[a]));
  expect(gworst < 1e-12, "and so do their distances");
  bool no_self = true;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t r = 0; r < k; ++r) no_self = no_self && g_tree.index[i * k + r] != int(i);
  expect(no_self, "a self graph leaves every point out of its own list");
  expect(g_tree.dist[290 * k] == 0.0 && g_tree.index[290 * k] == 0, "duplicates are neighbours");

  std::vector<std::size_t> i_tree(m), i_brute(m);
  nearest_index(x.data(), n, d, q.data(), m, i_tree.data());
  nearest_index(x.data(), n, wide, q.data(), m, i_brute.data(), two_threads);
  expect(i_tree == i_brute, "tree and brute-force nearest indices agree");
  std::vector<double> r1(m);
  knn_radius(x.data(), n, d, q.data(), m, 1, r1.data());
  double iworst = 0.0;
  for (std::size_t i = 0; i < m; ++i) {
    double s = 0.0;
    for (std::size_t j = 0; j < d; ++j) s += std::pow(x[j * n + i_tree[i]] - q[j * m + i], 2);
    iworst = std::max(iworst, std::fabs(std::sqrt(s) - r1[i]));
  }
  expect(iworst < 1e-12, "the nearest index is at the nearest distance");

  // Stopping: a monitor that says stop ends the search with false.
  const Monitor stop = [](std::size_t, std::size_t) { return false; };
  expect(!knn_radius(x.data(), n, wide, q.data(), m, k, r_brute.data(), serial_for, stop),
         "the monitor stops a search");

  // Radial constants against closed forms: Epanechnikov in 2-D (2 / pi), uniform in 3-D
  // (3 / (4 pi)), Laplace in 3-D (1 / (8 pi)).
  expect(std::fabs(radial_constant(KernelType::epanechnikov, 2) * kPi / 2.0 - 1.0) < 1e-12 &&
             std::fabs(radial_constant(KernelType::uniform, 3) * 4.0 * kPi / 3.0 - 1.0) < 1e-12 &&
             std::fabs(radial_constant(KernelType::laplace, 3) * 8.0 * kPi - 1.0) < 1e-11,
         "radial constants equal their closed forms");

  // The kernels' distribution functions: 1/2 at 0, symmetric, 0 and 1 beyond the support of
  // compact kernels, and their derivative (a central difference) is the kernel.
  {
    double worst = 0.0;
    for (std::size_t t = 0; t < kKernelCount; ++t) {
      const KernelType type = static_cast<KernelType>(t);
      const KernelInfo& info = kernel_info(type);
      worst = std::max(worst, std::fabs(kernel_cdf(type, 0.0) - 0.5));
      for (double u : {-2.5, -0.9, -0.3, 0.2, 0.7, 1.7}) {
        worst = std::max(worst, std::fabs(kernel_cdf(type, u) + kernel_cdf(type, -u) - 1.0));
        const double step = 1e-5;
        const double slope = (kernel_cdf(type, u + step) - kernel_cdf(type, u - step)) / (2 * step);
        worst = std::max(worst, std::fabs(slope - kernel_value(type, u)) * 1e-2);
      }
      if (info.compact)
        worst = std::max(worst, kernel_cdf(type, -1.5) + std::fabs(kernel_cdf(type, 1.5) - 1.0));
    }
    expect(worst < 1e-9, "kernel_cdf() integrates each kernel");
  }

  // A tabulated profile (a kernel of the user's own) of the triweight's shape: its values
  // between the nodes, its registry row and its radial constant equal the built-in kernel's.
  std::vector<double> nodes(4097);
  for (std::size_t j = 0; j < nodes.size(); ++j) {
    const double u = static_cast<double>(j) / 4096.0;
    nodes[j] = Triweight::exact(u * u);
  }
  const KernelType user = register_profile(std::unique_ptr<KernelProfile>(
      new KernelProfile("core_triweight", nodes.data(), nodes.size(), 1.0, true, false)));
  double shape_error = 0.0;
  for (double u = 0.0; u < 1.2; u += 0.000917)
    shape_error = std::max(shape_error,
                           std::fabs(kernel_shape(user, u * u) - Triweight::exact(u * u)));
  const KernelInfo& row = kernel_info(user);
  const KernelInfo& built = kernel_info(KernelType::triweight);
  KernelType found;
  expect(shape_error < 1e-13 && kernel_from_name("core_triweight", &found) && found == user &&
             std::fabs(row.constant - built.constant) < 1e-12 &&
             std::fabs(row.mu2 - built.mu2) < 1e-12 &&
             std::fabs(row.roughness - built.roughness) < 1e-12 &&
             std::fabs(radial_constant(user, 3) / radial_constant(KernelType::triweight, 3) -
                       1.0) < 1e-12,
         "a tabulated profile equals the built-in kernel of its shape");

  // Tables in the squared distance: the triweight is one cubic in it (4 intervals, no table
  // lookups), the Gaussian needs a table. Their weights in four lanes (recorded from the best
  // build) equal the one-at-a-time values, and the kernels they stand for.
  std::vector<double> cubic(5), gauss(16385);
  for (std::size_t j = 0; j < cubic.size(); ++j) cubic[j] = Triweight::exact(j / 4.0);
  for (std::size_t j = 0; j < gauss.size(); ++j) gauss[j] = Gaussian::exact(64.0 * j / 16384.0);
  const KernelProfile tw2("core_triweight2", cubic.data(), cubic.size(), 1.0, true, true);
  const KernelProfile gauss2("core_gaussian2", gauss.data(), gauss.size(), 8.0, false, true);
  std::vector<double> r2(203), lanes(r2.size());
  for (std::size_t k = 0; k < r2.size(); ++k) r2[k] = 0.37 * k * k / r2.size();  // to 75
  double lane_error = 0.0, kernel_error = 0.0;
  for (const KernelProfile* p : {kernel_profile(user), &tw2, &gauss2}) {
    const KernelProfile& profile = *p;
    best_build([&]() LOCALMEAN_LAMBDA_INLINE {
      profile.shapes(r2.data(), r2.size(), lanes.data());
    });
    record(lanes);
    for (std::size_t k = 0; k < r2.size(); ++k) {
      lane_error = std::max(lane_error, std::fabs(lanes[k] - profile.shape(r2[k])));
      const double want = &profile == &gauss2 ? (r2[k] <= 64.0 ? Gaussian::exact(r2[k]) : 0.0)
                                              : Triweight::exact(r2[k]);
      kernel_error = std::max(kernel_error, std::fabs(lanes[k] - want));
    }
  }
  expect(lane_error == 0.0 && kernel_error < 1e-12,
         "tabulated weights in lanes equal the single values and the kernels' own");
}

// The plug-in functionals' pair sums against a direct double loop over all ordered pairs.
static void pair_sum_tests() {
  const std::size_t n = 60, d = 2, nq = 3;
  std::mt19937 rng(5);
  std::normal_distribution<double> norm(0.0, 1.0);
  std::vector<double> u(n * d), w(n);
  for (auto& v : u) v = norm(rng);
  for (auto& v : w) v = 0.5 + std::fabs(norm(rng));
  const int orders[nq * d] = {4, 0, 2, 2, 0, 6};
  auto hermite = [](int r, double v) {
    double a = 1.0, b = v;
    if (r == 0) return a;
    for (int m = 1; m < r; ++m) {
      const double c = v * b - m * a;
      a = b;
      b = c;
    }
    return b;
  };
  std::vector<double> direct(nq, 0.0), serial(nq), parallel(nq);
  for (std::size_t q = 0; q < nq; ++q)
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        const double v0 = u[i * d] - u[j * d], v1 = u[i * d + 1] - u[j * d + 1];
        direct[q] += w[i] * w[j] * hermite(orders[q * d], v0) * hermite(orders[q * d + 1], v1) *
                     std::exp(-(v0 * v0 + v1 * v1) / 2.0);
      }
  hermite_pair_sums(u.data(), w.data(), n, d, orders, nq, serial.data());
  hermite_pair_sums(u.data(), w.data(), n, d, orders, nq, parallel.data(), two_threads);
  expect(serial == parallel, "pair sums do not depend on the threads");
  record(serial);
  double worst = 0.0;
  for (std::size_t q = 0; q < nq; ++q)
    worst = std::max(worst, std::fabs(serial[q] - direct[q]) / (1.0 + std::fabs(direct[q])));
  expect(worst < 1e-10, "pair sums equal the direct double loop");
}

// The tiled sweep of exact local means (every kernel, d = 1..5, sizes around the block and
// cache-block lengths, prior weights, two values, per-query scales, point scales) against a
// direct double loop, identical for one or two threads and wherever a query sits in its tile.
static bool same_or_both_nan(double a, double b) { return a == b || (a != a && b != b); }

static void tiled_sweep_tests() {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  const std::size_t m = 13, nv = 2;
  double worst = 0.0;
  bool same_threads = true, same_slots = true;
  for (std::size_t d = 1; d <= 5; ++d) {
    for (std::size_t n : {16u, 17u, 63u, 2071u, 4133u}) {
      std::vector<double> x(n * d), y(n * nv), prior(n), scale(n), q((m + 1) * d), radius(m + 1);
      for (auto& v : x) v = unif(rng) * 3.0;
      for (auto& v : y) v = unif(rng) - 0.5;
      for (auto& v : prior) v = 0.1 + unif(rng);
      for (auto& v : scale) v = 0.5 + unif(rng);
      for (auto& v : q) v = unif(rng) * 3.5 - 0.25;
      for (auto& v : radius) v = 0.3 + unif(rng);
      const bool stretch = n == 63;
      LocalData data(x.data(), n, d, y.data(), nv, prior.data(), stretch ? scale.data() : nullptr);
      for (std::size_t kt = 0; kt < kKernelCount; ++kt) {
        EngineSettings set;
        set.kernel = static_cast<KernelType>(kt);
        data.use_kernel(set.kernel);
        set.use_tree = false;
        // Queries 1..m, and the same queries shifted by one slot (query 0 first).
        std::vector<double> coef((m + 1) * nv), serial(m * nv), parallel(m * nv), wsum(m + 1);
        std::vector<double> qm(m * d);
        for (std::size_t j = 0; j < d; ++j)
          for (std::size_t i = 0; i < m; ++i) qm[j * m + i] = q[j * (m + 1) + i + 1];
        EngineOutput out;
        out.coef = serial.data();
        local_fit(data, qm.data(), m, radius.data() + 1, nullptr, set, out);
        out.coef = parallel.data();
        local_fit(data, qm.data(), m, radius.data() + 1, nullptr, set, out, two_threads);
        same_threads = same_threads && std::equal(serial.begin(), serial.end(), parallel.begin(),
                                                  same_or_both_nan);
        out.coef = coef.data();
        out.wsum = wsum.data();
        local_fit(data, q.data(), m + 1, radius.data(), nullptr, set, out);
        record(coef);
        record(wsum);
        for (std::size_t i = 0; i < m; ++i)
          for (std::size_t v = 0; v < nv; ++v)
            same_slots = same_slots && same_or_both_nan(coef[v * (m + 1) + i + 1], serial[v * m + i]);
        for (std::size_t i = 0; i <= m; ++i) {
          double sw = 0.0, swy[nv] = {0.0, 0.0};
          for (std::size_t p = 0; p < n; ++p) {
            double r2 = 0.0;
            for (std::size_t j = 0; j < d; ++j)
              r2 += std::pow((x[j * n + p] - q[j * (m + 1) + i]) / radius[i], 2);
            if (stretch) r2 /= scale[p] * scale[p];
            const double w =
                prior[p] * with_kernel(set.kernel, [&](auto k) { return decltype(k)::exact(r2); });
            sw += w;
            for (std::size_t v = 0; v < nv; ++v) swy[v] += w * y[v * n + p];
          }
          if (!(sw > 0.0)) {
            same_slots = same_slots && !(wsum[i] > 0.0);
            continue;
          }
          worst = std::max(worst, std::fabs(wsum[i] - sw) / sw);
          for (std::size_t v = 0; v < nv; ++v)
            worst = std::max(worst, std::fabs(coef[v * (m + 1) + i] - swy[v] / sw) /
                                        (1.0 + std::fabs(swy[v] / sw)));
        }
      }
    }
  }
  expect(worst < 1e-12, "the tiled sweep equals the direct local mean (1e-12)");
  expect(same_threads, "the tiled sweep gives identical results on one and two threads");
  expect(same_slots, "the tiled sweep does not depend on a query's place in its tile");
}

void qkv_core_tests();
static void metric_tests();
static void metric_fused_tests();
static void metric_kernel_tests(const MetricProblem& data);

// The binned fits at 1-D data points (binned_data_fit(), whose blocks take line_block_sums()):
// fits and leverages equal interpolate_nodes() at the points, the sums plain sums, with and
// without weights, over several blocks and an odd tail, with a point off the grid (its block
// taken by block_sums(): NA there), serial and threaded identical.
static void data_fit_tests() {
  const std::size_t n = 3 * kSumBlock + 7, G = 101, nb = 2;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  std::vector<double> x(n), y(n), prior(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = 2.0 * unif(rng);
    y[i] = std::sin(3.0 * x[i]) + 0.3 * unif(rng);
    prior[i] = i % 50 == 0 ? 0.0 : unif(rng);
  }
  const double scale = 0.1;
  for (bool off : {false, true}) {
    x[kSumBlock + 5] = off ? 2.5 : 1.0;  // off the grid (2 / scale units) or on it
    for (const double* w : {static_cast<const double*>(nullptr), static_cast<const double*>(prior.data())}) {
      const double lo = 0.0, hi = 2.0, slo = lo / scale, shi = hi / scale;
      std::size_t size = G;
      const Grid raw = make_grid(1, &lo, &hi, &size), g = make_grid(1, &slo, &shi, &size);
      std::vector<double> counts, sums, coef(G * nb), s00(G), wsum(G);
      std::vector<int> status(G);
      EngineOutput nodes;
      nodes.coef = coef.data();
      nodes.s00 = s00.data();
      nodes.wsum = wsum.data();
      nodes.status = status.data();
      EngineSettings set;
      set.degree = 1;
      linear_bin(raw, x.data(), n, y.data(), 1, w, counts, sums, serial_for);
      binned_fit_nodes(g, counts, sums, 1, set, effective_cutoff(set), nodes, serial_for, {});
      std::vector<double> q(n), ic(n * nb), is00(n), iw(n);
      std::vector<int> ist(n);
      for (std::size_t i = 0; i < n; ++i) q[i] = x[i] / scale;
      EngineOutput at;
      at.coef = ic.data();
      at.s00 = is00.data();
      at.wsum = iw.data();
      at.status = ist.data();
      interpolate_nodes(g, nodes, nb, 1, q.data(), n, at);
      std::vector<double> fit1(n), lev1(n), res1(n), fit2(n), lev2(n), res2(n);
      DataFitOutput o1, o2;
      o1.fitted = fit1.data();
      o1.leverage = lev1.data();
      o1.residuals = res1.data();
      o2.fitted = fit2.data();
      o2.leverage = lev2.data();
      o2.residuals = res2.data();
      FitSums s1, s2;
      binned_data_fit(g, nodes, nb, x.data(), n, &scale, y.data(), 1, w, o1, &s1, serial_for);
      binned_data_fit(g, nodes, nb, x.data(), n, &scale, y.data(), 1, w, o2, &s2, two_threads);
      for (const std::vector<double>* v : {&counts, &sums, &coef, &s00, &wsum, &ic, &is00, &fit1,
                                           &lev1, &res1})
        record(*v);
      for (double v : {s1.rss, s1.loo, s1.trace, s1.weight, s1.mean, s1.spread}) record(v);
      bool same = true, missing = true;
      double rss = 0.0, loo = 0.0, trace = 0.0, weight = 0.0, count = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        if (ist[i] != kOk) {
          missing = missing && std::isnan(fit1[i]) && std::isnan(lev1[i]) && std::isnan(res1[i]);
          continue;
        }
        const double p = w ? w[i] : 1.0, lev = p * is00[i], r = y[i] - ic[i];
        same = same && fit1[i] == ic[i] && lev1[i] == lev && res1[i] == r;
        rss += p * r * r;
        loo += p * (r / (1.0 - lev)) * (r / (1.0 - lev));
        trace += lev;
        weight += p;
        count += p > 0.0;
      }
      auto close = [](double a, double b) { return std::fabs(a - b) <= 1e-12 * std::fabs(b); };
      expect(same, "binned fits at the data equal the interpolated node fits");
      expect(missing, "a point off the grid has no fit");
      expect(s1.status[kNoWeight] == (off ? 1u : 0u), "the point off the grid is counted");
      expect(close(s1.rss, rss) && close(s1.loo, loo) && close(s1.trace, trace) &&
                 close(s1.weight, weight) && s1.count == count,
             "binned data-fit sums equal plain sums");
      auto bits = [n](const std::vector<double>& a, const std::vector<double>& b) {
        return std::memcmp(a.data(), b.data(), n * sizeof(double)) == 0;
      };
      expect(bits(fit1, fit2) && bits(lev1, lev2) && bits(res1, res2) && s1.rss == s2.rss &&
                 s1.loo == s2.loo && s1.trace == s2.trace && s1.spread == s2.spread,
             "serial and threaded binned data fits are identical");
    }
  }
}

int main(int argc, char** argv) {
  const std::size_t n = 500, m = 40, d = 2;
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  std::vector<double> x(n * d), y(n), q(m * d);
  for (auto& v : x) v = unif(rng) * 5.0;
  for (std::size_t i = 0; i < n; ++i) y[i] = std::sin(x[i]) + x[n + i];
  for (auto& v : q) v = unif(rng) * 5.0;
  LocalData data(x.data(), n, d, y.data(), 1, nullptr);

  for (KernelType type : {KernelType::gaussian, KernelType::epanechnikov, KernelType::laplace}) {
    for (bool tree : {false, true}) {
      EngineSettings set;
      set.kernel = type;
      data.use_kernel(type);
      set.use_tree = tree;
      std::vector<double> serial(m), parallel(m);
      EngineOutput out;
      out.coef = serial.data();
      local_fit(data, q.data(), m, nullptr, nullptr, set, out);
      out.coef = parallel.data();
      local_fit(data, q.data(), m, nullptr, nullptr, set, out, two_threads);
      expect(serial == parallel, "serial and threaded fits are identical");
      record(serial);
      // The local mean computed directly, untruncated.
      double worst = 0.0;
      for (std::size_t k = 0; k < m; ++k) {
        double sw = 0.0, swy = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
          const double u0 = x[i] - q[k], u1 = x[n + i] - q[m + k];
          const double w = kernel_value(type, std::sqrt(u0 * u0 + u1 * u1));
          sw += w;
          swy += w * y[i];
        }
        if (sw > 0.0) worst = std::max(worst, std::fabs(swy / sw - serial[k]));
      }
      expect(worst < 1e-10, "the engine equals the direct local mean");
    }
  }

  // Conditional quantiles: F(q | x) = tau by a direct sum at every query, for kernels in y
  // with and without the approximate first steps; the Gaussian scale moments against direct
  // sums; serial and threaded runs identical.
  {
    EngineSettings set;
    set.use_tree = false;
    data.use_kernel(set.kernel);
    const double tau[3] = {0.05, 0.5, 0.9}, hy = 0.4;
    for (KernelType ky : {KernelType::gaussian, KernelType::epanechnikov}) {
      std::vector<double> qs(3 * m), qs2(3 * m);
      conditional_quantiles(data, q.data(), m, nullptr, set, y.data(), ky, hy, tau, 3, 100,
                            qs.data());
      conditional_quantiles(data, q.data(), m, nullptr, set, y.data(), ky, hy, tau, 3, 100,
                            qs2.data(), two_threads);
      expect(qs == qs2, "serial and threaded conditional quantiles are identical");
      record(qs);
      double worst = 0.0;
      for (std::size_t k = 0; k < m; ++k)
        for (std::size_t t = 0; t < 3; ++t) {
          double sw = 0.0, sf = 0.0;
          for (std::size_t i = 0; i < n; ++i) {
            const double u0 = x[i] - q[k], u1 = x[n + i] - q[m + k];
            const double w = std::exp(-0.5 * (u0 * u0 + u1 * u1));
            sw += w;
            sf += w * kernel_cdf(ky, (qs[t * m + k] - y[i]) / hy);
          }
          worst = std::max(worst, std::fabs(sf / sw - tau[t]));
        }
      expect(worst < 1e-10, "conditional quantiles solve F(q | x) = tau");
    }
    // The Gaussian y-kernel's sums of F and f (the vectorised erfc, and its approximation)
    // against the standard library's erfc and exp, up to 8.5 standard deviations either side
    // (per point: within 1e-14 exactly, 1.5e-7 approximately).
    {
      std::vector<double> ys(77), w(77);
      double total = 0.0;
      for (std::size_t b = 0; b < ys.size(); ++b) {
        ys[b] = -8.0 + 16.0 * b / 76.0;
        w[b] = 1.0 + 0.5 * std::sin(3.0 * b);
        total += b >= 3 ? w[b] : 0.0;
      }
      double worst_exact = 0.0, worst_approx = 0.0, worst_dens = 0.0;
      for (double at = -0.5; at <= 0.5; at += 0.01) {
        double exact[2], approx[2], F = 0.0, f = 0.0;
        detail::gaussian_cdf_sums(false, ys.data(), w.data(), 3, ys.size(), at, 1.0, exact);
        detail::gaussian_cdf_sums(true, ys.data(), w.data(), 3, ys.size(), at, 1.0, approx);
        for (std::size_t b = 3; b < ys.size(); ++b) {
          const double u = at - ys[b];
          F += w[b] * 0.5 * std::erfc(-u / std::sqrt(2.0));
          f += w[b] * std::exp(-0.5 * u * u);
        }
        worst_exact = std::max(worst_exact, std::fabs(exact[0] - F));
        worst_approx = std::max(worst_approx, std::fabs(approx[0] - F));
        worst_dens = std::max(worst_dens, std::fabs(exact[1] - f) + std::fabs(approx[1] - f));
      }
      expect(worst_exact < 1e-14 * total, "the Gaussian F sums equal erfc's");
      expect(worst_approx < 1.5e-7 * total, "the approximate Gaussian F sums are close");
      expect(worst_dens < 1e-14 * total, "the Gaussian f sums equal exp's");
    }
    std::vector<double> mom(6 * m), mom2(6 * m);
    gaussian_scale_moments(data, q.data(), m, nullptr, set, true, mom.data());
    gaussian_scale_moments(data, q.data(), m, nullptr, set, true, mom2.data(), two_threads);
    expect(mom == mom2, "serial and threaded scale moments are identical");
    record(mom);
    double worst = 0.0;
    for (std::size_t k = 0; k < m; ++k) {
      double ref[6] = {0, 0, 0, 0, 0, 0};
      for (std::size_t i = 0; i < n; ++i) {
        const double a = (x[i] - q[k]) * (x[i] - q[k]), b = (x[n + i] - q[m + k]) * (x[n + i] - q[m + k]);
        const double w = std::exp(-0.5 * (a + b));
        const double terms[6] = {w, w * a, w * b, w * a * a, w * a * b, w * b * b};
        for (int c = 0; c < 6; ++c) ref[c] += terms[c];
      }
      for (int c = 0; c < 6; ++c)
        worst = std::max(worst, std::fabs(mom[c * m + k] - ref[c]) / (1e-300 + std::fabs(ref[c])));
    }
    expect(worst < 1e-10, "Gaussian scale moments equal direct sums");
  }

  // Values swapped into an object built with others give the fits of one built with them.
  {
    std::vector<double> other(2 * n, 1.0), both(2 * n);
    for (std::size_t i = 0; i < n; ++i) both[i] = both[n + i] = y[i];
    LocalData swapped(x.data(), n, d, other.data(), 1, nullptr);
    swapped.set_values(both.data(), 2);
    EngineSettings set;
    std::vector<double> built(m), twice(2 * m);
    EngineOutput out;
    out.coef = built.data();
    data.use_kernel(set.kernel);
    local_fit(data, q.data(), m, nullptr, nullptr, set, out);
    out.coef = twice.data();
    local_fit(swapped, q.data(), m, nullptr, nullptr, set, out);
    expect(std::equal(built.begin(), built.end(), twice.begin()) &&
               std::equal(built.begin(), built.end(), twice.begin() + m),
           "values swapped into an engine object give the fits of a rebuilt one");
  }

  // The k-th neighbour distance against a sort.
  std::vector<double> radius(m);
  knn_radius(x.data(), n, d, q.data(), m, 5, radius.data());
  for (std::size_t k = 0; k < m; ++k) {
    std::vector<double> dist(n);
    for (std::size_t i = 0; i < n; ++i)
      dist[i] = std::hypot(x[i] - q[k], x[n + i] - q[m + k]);
    std::nth_element(dist.begin(), dist.begin() + 4, dist.end());
    expect(std::fabs(dist[4] - radius[k]) < 1e-12, "kth_distance equals the 5th sorted distance");
  }
  // Chunked runs visit every item exactly once, whatever the chunk sizes become.
  std::vector<int> visits(100000, 0);
  run_chunked(visits.size(), 3, serial_for, {}, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) ++visits[i];
  });
  expect(std::all_of(visits.begin(), visits.end(), [](int v) { return v == 1; }),
         "run_chunked covers every item once");

  // Kernel windows: the rows of positive Epanechnikov weight, ascending, with the kernel's
  // weights, equal a direct pass over the data; serial and threaded runs identical.
  {
    EngineSettings set;
    set.kernel = KernelType::epanechnikov;
    data.use_kernel(set.kernel);
    std::vector<double> scale_q(m, 0.8);
    std::vector<std::vector<std::size_t>> rows, rows2;
    std::vector<std::vector<double>> wts, wts2;
    kernel_windows(data, q.data(), m, scale_q.data(), nullptr, set, rows, wts);
    kernel_windows(data, q.data(), m, scale_q.data(), nullptr, set, rows2, wts2, two_threads);
    expect(rows == rows2 && wts == wts2, "serial and threaded windows are identical");
    bool same = true;
    for (std::size_t k = 0; k < m; ++k) {
      std::vector<std::size_t> r;
      std::vector<double> w;
      for (std::size_t i = 0; i < n; ++i) {
        const double u = std::hypot(x[i] - q[k], x[n + i] - q[m + k]) / 0.8;
        const double v = kernel_shape(KernelType::epanechnikov, u * u);
        if (v > 0.0) {
          r.push_back(i);
          w.push_back(v);
        }
      }
      same = same && r == rows[k] && w.size() == wts[k].size();
      for (std::size_t b = 0; same && b < w.size(); ++b)
        same = std::fabs(w[b] - wts[k][b]) < 1e-12;
      record(wts[k]);
    }
    expect(same, "kernel windows equal a direct pass over the data");
  }

  // Fits at the data points for many scales at once (the 1-D bandwidth search) equal local_fit()
  // at each scale: tree-strategy reach (8 scales for the Gaussian) and no truncation, Gaussian
  // weights by squaring (scales h, h / sqrt(2), h / 2) and by the profile; serial and threaded
  // runs identical.
  {
    const std::size_t n1 = 300;
    std::vector<double> x1(n1), y1(n1), prior1(n1);
    for (std::size_t i = 0; i < n1; ++i) {
      x1[i] = unif(rng);
      y1[i] = std::sin(6.0 * x1[i]) + 0.3 * unif(rng);
      prior1[i] = 0.5 + unif(rng);
    }
    const double scales[] = {0.02, 0.05, 0.05 / std::sqrt(2.0), 0.025, 0.3, 0.011};
    const double reach[] = {8.0, 8.0, 8.0, 8.0, kInf, 8.0};
    const std::size_t K = 6;
    for (KernelType type : {KernelType::gaussian, KernelType::epanechnikov}) {
      const LocalData line(x1.data(), n1, 1, y1.data(), 1, prior1.data());
      LocalData scaled(x1.data(), n1, 1, y1.data(), 1, prior1.data());
      scaled.use_kernel(type);
      EngineSettings set;
      set.kernel = type;
      set.degree = 1;
      std::vector<double> fit1(n1 * K), s1(n1 * K), fit2(n1 * K), s2(n1 * K);
      candidate_data_fits(line, scales, reach, K, set, fit1.data(), s1.data());
      candidate_data_fits(line, scales, reach, K, set, fit2.data(), s2.data(), two_threads);
      expect(fit1 == fit2 && s1 == s2, "serial and threaded candidate fits are identical");
      record(fit1);
      record(s1);
      double worst = 0.0;
      for (std::size_t c = 0; c < K; ++c) {
        scaled.rescale(x1.data(), &scales[c]);
        std::vector<double> qs(n1), coef(2 * n1), s00(n1);
        for (std::size_t i = 0; i < n1; ++i) qs[i] = x1[i] / scales[c];
        EngineSettings one = set;
        one.use_tree = std::isfinite(reach[c]);
        EngineOutput out;
        out.coef = coef.data();
        out.s00 = s00.data();
        local_fit(scaled, qs.data(), n1, nullptr, nullptr, one, out);
        for (std::size_t i = 0; i < n1; ++i) {
          if (!std::isfinite(coef[i])) {
            worst = std::max(worst, std::isfinite(fit1[c * n1 + i]) ? 1.0 : 0.0);
            continue;
          }
          worst = std::max(worst, std::fabs(fit1[c * n1 + i] - coef[i]));
          worst = std::max(worst, std::fabs(s1[c * n1 + i] - s00[i]) / s00[i]);
        }
      }
      expect(worst < 1e-10, "candidate fits equal local_fit at each scale");
    }
  }

  // Sample-point scales: the weight sum with point i stretched by s_i, against a direct sum.
  std::vector<double> point_scale(n);
  for (auto& v : point_scale) v = 0.2 + unif(rng);
  LocalData stretched(x.data(), n, d, y.data(), 1, nullptr, point_scale.data());
  stretched.use_kernel(KernelType::biweight);
  for (bool tree : {false, true}) {
    EngineSettings set;
    set.kernel = KernelType::biweight;
    set.use_tree = tree;
    std::vector<double> coef(m), wsum(m);
    EngineOutput out;
    out.coef = coef.data();
    out.wsum = wsum.data();
    local_fit(stretched, q.data(), m, nullptr, nullptr, set, out);
    record(coef);
    record(wsum);
    double worst = 0.0;
    for (std::size_t k = 0; k < m; ++k) {
      double sw = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        const double r = std::hypot(x[i] - q[k], x[n + i] - q[m + k]) / point_scale[i];
        sw += r <= 1.0 ? (1 - r * r) * (1 - r * r) : 0.0;
      }
      worst = std::max(worst, std::fabs(sw - wsum[k]));
    }
    expect(worst < 1e-10, "point scales stretch every point's kernel");
  }

  // Jacobi eigen-decomposition: A v = lambda v.
  std::vector<double> a = {4, 1, 0.5, 1, 3, 0.2, 0.5, 0.2, 1}, a0 = a, values, vectors;
  symmetric_eigen(a, 3, values, vectors);
  double resid = 0.0;
  for (std::size_t k = 0; k < 3; ++k)
    for (std::size_t i = 0; i < 3; ++i) {
      double av = 0.0;
      for (std::size_t j = 0; j < 3; ++j) av += a0[i * 3 + j] * vectors[j * 3 + k];
      resid = std::max(resid, std::fabs(av - values[k] * vectors[i * 3 + k]));
    }
  expect(resid < 1e-12, "symmetric_eigen solves A v = lambda v");

  // Mean shift: a point started anywhere ends at a fixed point of the local mean, identically
  // with one or two threads.
  const std::vector<double> coords = shift_values(x.data(), n, d, false);
  const LocalData cloud(x.data(), n, d, coords.data(), d, nullptr);
  EngineSettings gauss;
  gauss.kernel = KernelType::gaussian;
  ShiftSettings shift;
  shift.tol = 1e-10;
  std::vector<double> p1(q), p2(q);
  std::vector<int> iters(m);
  ShiftOutput sout;
  sout.iterations = iters.data();
  shift_points(cloud, p1.data(), m, gauss, shift, sout);
  shift_points(cloud, p2.data(), m, gauss, shift, sout, two_threads);
  expect(p1 == p2, "serial and threaded mean shift are identical");
  record(p1);
  double moved = 0.0;
  for (std::size_t k = 0; k < m; ++k) {
    double sw = 0.0, sx = 0.0, sy = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      const double w = std::exp(-0.5 * (std::pow(x[i] - p1[k], 2) + std::pow(x[n + i] - p1[m + k], 2)));
      sw += w;
      sx += w * x[i];
      sy += w * x[n + i];
    }
    moved = std::max(moved, std::hypot(sx / sw - p1[k], sy / sw - p1[m + k]));
  }
  expect(moved < 1e-8, "mean shift stops at a fixed point of the local mean");

  // Temporal local mean: causal attention against a direct two-pass softmax, the same with two
  // threads; the QKV trainer gives identical parameters with one and two threads.
  {
    const std::size_t T = 200, dk = 3, dv = 2;
    std::vector<double> tq(T * dk), tk(T * dk), tv(T * dv), o1(T * dv), o2(T * dv), w(T * T);
    for (auto& v : tq) v = unif(rng) * 4 - 2;
    for (auto& v : tk) v = unif(rng) * 4 - 2;
    for (auto& v : tv) v = unif(rng);
    TemporalSettings ts;
    ts.bandwidth = std::sqrt(3.0);
    temporal_local_mean(tq.data(), T, tk.data(), T, dk, tv.data(), dv, ts, o1.data(), w.data());
    temporal_local_mean(tq.data(), T, tk.data(), T, dk, tv.data(), dv, ts, o2.data(), nullptr,
                        two_threads);
    expect(o1 == o2, "serial and threaded temporal local means are identical");
    record(o1);
    record(w);
    double worst = 0.0, worst_w = 0.0;
    for (std::size_t t = 0; t < T; ++t) {
      std::vector<double> sc(t + 1);
      double mx = -1e300, sum = 0.0;
      for (std::size_t s = 0; s <= t; ++s) {
        sc[s] = (tq[t * 3] * tk[s * 3] + tq[t * 3 + 1] * tk[s * 3 + 1] +
                 tq[t * 3 + 2] * tk[s * 3 + 2]) / std::sqrt(3.0);
        mx = std::max(mx, sc[s]);
      }
      for (std::size_t s = 0; s <= t; ++s) sum += (sc[s] = std::exp(sc[s] - mx));
      for (std::size_t c = 0; c < dv; ++c) {
        double y = 0.0;
        for (std::size_t s = 0; s <= t; ++s) y += sc[s] / sum * tv[s * dv + c];
        worst = std::max(worst, std::fabs(y - o1[t * dv + c]));
      }
      for (std::size_t s = 0; s < T; ++s)
        worst_w = std::max(worst_w, std::fabs((s <= t ? sc[s] / sum : 0.0) - w[t * T + s]));
    }
    expect(worst < 1e-12, "the temporal local mean equals causal softmax attention");
    expect(worst_w < 1e-12, "its weights equal the softmax weights");

    const QkvShape shape(6, 4, 3, 2, 2, 5);
    std::vector<int> tokens(400);
    for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = (i * 7 + i / 3) % 6;
    std::vector<double> theta(shape.size);
    for (auto& v : theta) v = unif(rng) * 0.2 - 0.1;
    std::vector<double> th1(theta), th2(theta);
    std::vector<int> order = {2, 0, 1, 3};
    QkvSettings qs;
    qs.batch = 100;
    QkvTrace tr1, tr2;
    std::vector<int> next(tokens.size(), -1);
    for (std::size_t i = 0; i + 1 < tokens.size(); ++i) next[i] = tokens[i + 1];
    const std::vector<QkvText> texts = {{tokens.data(), next.data(), tokens.size()}};
    const QkvText none{nullptr, nullptr, 0};
    qkv_train(shape, th1.data(), texts, none, order.data(), qs, tr1);
    qkv_train(shape, th2.data(), texts, none, order.data(), qs, tr2, two_threads);
    expect(th1 == th2, "serial and threaded QKV training are identical");
    record(th1);
    record(tr1.batch_loss);
    expect(tr1.batch_loss.back() < tr1.batch_loss.front(), "QKV training lowers the loss");
  }
  pair_sum_tests();
  qkv_core_tests();
  tiled_sweep_tests();
  impute_tests();
  neighbour_tests();
  metric_tests();
  metric_fused_tests();
  data_fit_tests();

  std::printf("core: %d passed, %d failed\n", checks - failures, failures);
  if (argc > 1) {  // the recorded outputs, as raw doubles
    std::FILE* f = std::fopen(argv[1], "wb");
    const bool written = f && std::fwrite(recorded.data(), sizeof(double), recorded.size(), f) ==
                                   recorded.size();
    if (!f || std::fclose(f) != 0 || !written) {
      std::printf("FAIL: cannot write %s\n", argv[1]);
      return 1;
    }
    std::printf("core: %zu outputs recorded (%s build)\n", recorded.size(),
                LOCALMEAN_X86_CLONES ? "AVX2" : "portable");
  }
  return failures ? 1 : 0;
}

// The QKV model's parameter layout covers theta block after block, and the attention weights of
// every layer and head are causal, windowed and normalised; with one layer, no feed-forward
// block and unit layer-norm gains, layer 1's equal a direct softmax over each position's window.
void qkv_core_tests() {
  const std::size_t V = 7, D = 4, W = 4, L = 2, NH = 2, F = 5;
  const QkvShape shape(V, D, W, L, NH, F);
  std::size_t next = 0;
  bool contiguous = true;
  for (const QkvBlock& b : shape.blocks) {
    contiguous = contiguous && b.offset == next;
    next += b.size;
  }
  expect(contiguous && next == shape.size && shape.blocks.size() == 18,
         "the QKV blocks cover theta in order");
  expect(shape.blocks[0].offset == shape.embed && shape.blocks[6].offset == shape.lag &&
             shape.blocks[6].size == L * NH * W && shape.blocks[17].offset == shape.out_bias,
         "the named QKV offsets are the blocks' offsets");
  const QkvShape bare(V, D, W, 1, 1, 0);
  expect(bare.size == 2 * V * D + V + 2 * D + 4 * D * D + W + 2 * D,
         "a layer without feed-forward block has no feed-forward parameters");

  std::mt19937 rng(3);
  std::uniform_real_distribution<double> unif(-1.0, 1.0);
  const std::vector<int> tok = {1, 4, 4, 0, 6, 2, 5, 1, 3};
  const std::size_t n = tok.size();
  const QkvText text{tok.data(), nullptr, n};
  std::vector<double> theta(shape.size);
  for (auto& v : theta) v = unif(rng);
  bool causal = true;
  double worst_sum = 0.0;
  for (std::size_t l = 1; l <= L; ++l)
    for (std::size_t h = 0; h < NH; ++h) {
      std::vector<double> a(n * n);
      qkv_attention(shape, theta.data(), text, l, h, a.data());
      for (std::size_t t = 0; t < n; ++t) {
        double sum = 0.0;
        const std::size_t first = t + 1 > W ? t + 1 - W : 0;
        for (std::size_t s = 0; s < n; ++s) {
          sum += a[t * n + s];
          causal = causal && (s >= first && s <= t ? true : a[t * n + s] == 0);
        }
        worst_sum = std::max(worst_sum, std::fabs(sum - 1.0));
      }
      record(a);
    }
  expect(worst_sum < 1e-12 && causal, "every layer's and head's attention is causal, windowed, normalised");

  // One layer, one head: with layer norm y = (x - mean) / sd, q = y Wq, k = y Wk.
  std::vector<double> th(bare.size);
  for (auto& v : th) v = unif(rng);
  for (std::size_t c = 0; c < D; ++c) th[bare.ln1_gain + c] = 1.0, th[bare.ln1_bias + c] = 0.0;
  std::vector<double> a1(n * n);
  qkv_attention(bare, th.data(), text, 1, 0, a1.data());
  auto proj = [&](std::size_t block, int word, double* out) {
    const double* e = &th[bare.embed + word * D];
    double mean = 0.0, var = 0.0;
    for (std::size_t c = 0; c < D; ++c) mean += e[c] / D;
    for (std::size_t c = 0; c < D; ++c) var += (e[c] - mean) * (e[c] - mean) / D;
    for (std::size_t o = 0; o < D; ++o) {
      out[o] = 0.0;
      for (std::size_t c = 0; c < D; ++c)
        out[o] += (e[c] - mean) / std::sqrt(var + kLayerNormEps) * th[block + c * D + o];
    }
  };
  double worst = 0.0;
  for (std::size_t t = 0; t < n; ++t) {
    std::vector<double> w(n, 0.0);
    double q[D], k[D], mx = -1e300, sum = 0.0;
    proj(bare.wq, tok[t], q);
    const std::size_t first = t + 1 > W ? t + 1 - W : 0;
    for (std::size_t s = first; s <= t; ++s) {
      proj(bare.wk, tok[s], k);
      double sc = th[bare.lag + t - s];
      for (std::size_t c = 0; c < D; ++c) sc += q[c] * k[c] / std::sqrt(double(D));
      mx = std::max(mx, w[s] = sc);
    }
    for (std::size_t s = first; s <= t; ++s) sum += (w[s] = std::exp(w[s] - mx));
    for (std::size_t s = 0; s < n; ++s) worst = std::max(worst, std::fabs(w[s] / sum - a1[t * n + s]));
  }
  expect(worst < 1e-12, "QKV attention equals a direct softmax over the window");
  record(a1);
}

// The largest relative error of the metric gradient `at` (2 x 2 metric A) against central
// differences with `step`.
static double metric_fd_error(const MetricProblem& p, const double* A, const MetricLoss& at,
                              double step) {
  double worst = 0.0;
  for (std::size_t k = 0; k < 4; ++k) {
    double up[4], down[4];
    std::copy(A, A + 4, up);
    std::copy(A, A + 4, down);
    up[k] += step;
    down[k] -= step;
    MetricLoss lu, ld;
    metric_loo_loss(p, up, lu);
    metric_loo_loss(p, down, ld);
    const double fd = (lu.loss - ld.loss) / (2 * step);
    worst = std::max(worst, std::fabs(fd - at.gradient[k]) / (1e-3 + std::fabs(fd)));
  }
  return worst;
}

// The learned metric's leave-one-out loss: at a diagonal metric it equals a direct leave-one-out
// local mean; its gradient matches central differences (degrees 0 and 1, with prior weights and
// a categorical variable); serial and threaded evaluations are identical.
static void metric_tests() {
  const std::size_t n = 80, d = 2;
  std::mt19937 rng(11);
  std::normal_distribution<double> norm(0.0, 1.0);
  std::vector<double> x(n * d), y(n), prior(n);
  std::vector<int> codes(n);
  for (auto& v : x) v = norm(rng);
  for (std::size_t i = 0; i < n; ++i) {
    y[i] = std::sin(x[i] + x[n + i]) + 0.1 * norm(rng);
    prior[i] = 0.5 + std::fabs(norm(rng));
    codes[i] = static_cast<int>(i % 3);
  }
  CategoricalVars cat;
  cat.codes = codes.data();
  cat.count = 1;
  cat.levels = {3};
  cat.kernels = {DiscreteKernel::aitchison_aitken};
  cat.lambda = {0.3};
  MetricProblem p;
  p.x = x.data();
  p.n = n;
  p.d = d;
  p.y = y.data();
  const double diag[4] = {2.0, 0.0, 0.0, 1.5};
  double direct = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    double num = 0.0, den = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
      if (j == i) continue;
      const double u = 2.0 * (x[i] - x[j]), v = 1.5 * (x[n + i] - x[n + j]);
      const double k = std::exp(-0.5 * (u * u + v * v));
      num += k * y[j];
      den += k;
    }
    direct += (y[i] - num / den) * (y[i] - num / den) / n;
  }
  MetricLoss out;
  metric_loo_loss(p, diag, out);
  record(out.loss);
  record(out.gradient);
  expect(std::fabs(out.loss - direct) < 1e-12 * direct, "metric loss equals a direct LOO mean");
  const double A[4] = {1.2, 0.4, -0.3, 0.9};
  p.prior = prior.data();
  p.categorical = &cat;
  for (int degree : {0, 1}) {
    p.degree = degree;
    MetricLoss serial, threaded;
    metric_loo_loss(p, A, serial);
    expect(serial.failed == 0 && serial.gap > 0.0 && serial.gap < 1.0,
           "metric leverages are reported");
    metric_loo_loss(p, A, threaded, two_threads);
    record(serial.loss);
    record(serial.gradient);
    expect(serial.loss == threaded.loss && serial.gradient == threaded.gradient,
           "metric loss does not depend on the threads");
    expect(metric_fd_error(p, A, serial, 1e-5) < 1e-5,
           "metric gradient matches central differences");
  }
  metric_kernel_tests(p);
}

// At a diagonal metric the fused passes (up to kFusedMaxD variables) give the loss and gradient
// of the general pass over the same metric, for every degree and dimension, with prior weights,
// two categorical variables, a number of points that leaves a partial block, and a cut-off
// short enough that the fused passes skip blocks; the lambda gradients match central
// differences, and threads change nothing.
static void metric_fused_tests() {
  const std::size_t n = 203, dmax = 5;
  std::mt19937 rng(5);
  std::normal_distribution<double> norm(0.0, 1.0);
  std::vector<double> x(n * dmax), y(n), prior(n);
  std::vector<int> codes(2 * n);
  for (auto& v : x) v = norm(rng);
  for (std::size_t i = 0; i < n; ++i) {
    y[i] = std::sin(x[i]) + x[n + i] * x[n + i] / 2 + 0.2 * norm(rng) + 0.3 * (i % 3);
    prior[i] = 0.5 + std::fabs(norm(rng));
    codes[i] = static_cast<int>(i % 3);
    codes[n + i] = static_cast<int>((i / 3) % 4);
  }
  CategoricalVars cat;
  cat.codes = codes.data();
  cat.count = 2;
  cat.levels = {3, 4};
  cat.kernels = {DiscreteKernel::aitchison_aitken, DiscreteKernel::li_racine};
  cat.lambda = {0.2, 0.4};
  double worst = 0.0, worst_fd = 0.0;
  bool same_threads = true;
  int compared = 0;
  for (double cutoff : {0.0, 2.0})
  for (std::size_t d = 1; d <= dmax; ++d) {
    for (int degree : {0, 1}) {
      MetricProblem p;
      p.cutoff = cutoff;
      p.x = x.data();
      p.n = n;
      p.d = d;
      p.y = y.data();
      p.prior = prior.data();
      p.categorical = &cat;
      p.degree = degree;
      p.lambda_gradient = true;
      std::vector<double> A(d * d, 0.0);
      for (std::size_t k = 0; k < d; ++k) A[k * d + k] = (cutoff > 0.0 ? 1.5 : 0.6) + 0.1 * k;
      MetricLoss general, fused, threaded;
      metric_loo_loss(p, A.data(), general);
      p.diagonal = true;
      metric_loo_loss(p, A.data(), fused);
      metric_loo_loss(p, A.data(), threaded, two_threads);
      for (const MetricLoss* l : {&general, &fused}) {
        record(l->loss);
        record(l->gradient);
        record(l->lambda_gradient);
      }
      same_threads = same_threads && fused.loss == threaded.loss &&
                     fused.gradient == threaded.gradient &&
                     fused.lambda_gradient == threaded.lambda_gradient;
      const auto rel = [](double a, double b) { return std::fabs(a - b) / (1e-12 + std::fabs(b)); };
      expect(fused.failed == general.failed, "fused metric loss: the same points have no fit");
      if (general.failed) continue;
      worst = std::max(worst, rel(fused.loss, general.loss));
      compared += cutoff > 0.0;
      for (std::size_t k = 0; k < d; ++k)
        worst = std::max(worst, rel(fused.gradient[k * d + k], general.gradient[k * d + k]));
      for (std::size_t c = 0; c < 2; ++c) {
        worst = std::max(worst, rel(fused.lambda_gradient[c], general.lambda_gradient[c]));
        CategoricalVars up = cat, down = cat;
        up.lambda[c] += 1e-6;
        down.lambda[c] -= 1e-6;
        MetricLoss lu, ld;
        p.categorical = &up;
        metric_loo_loss(p, A.data(), lu);
        p.categorical = &down;
        metric_loo_loss(p, A.data(), ld);
        p.categorical = &cat;
        const double fd = (lu.loss - ld.loss) / 2e-6;
        worst_fd = std::max(worst_fd, std::fabs(fd - fused.lambda_gradient[c]) /
                                          (1e-3 + std::fabs(fd)));
      }
    }
  }
  expect(compared >= 4, "fused metric loss: the short cut-off leaves a fit for every point");
  // Both passes add in the sweep's kLanes lanes, the fused one in the sorted order of its window:
  // the lambda gradients are sums that cancel (values near 1e-2 of terms near 1), within 4e-12.
  expect(worst < 1e-11, "fused metric loss equals the general pass at a diagonal metric");
  // The short cut-off leaves blocks out of the windows (in the variable of the fewest pairs).
  {
    MetricProblem p;
    p.x = x.data();
    p.n = n;
    p.d = 2;
    p.y = y.data();
    std::vector<double> z(x.begin(), x.begin() + 2 * n);
    for (std::size_t i = 0; i < 2 * n; ++i) z[i] *= i < n ? 1.5 : 1.6;
    const detail::FusedData f(p, z.data(), 2.0);
    std::size_t swept = 0;
    for (std::size_t s = 0; s < n; ++s) {
      std::size_t first, last;
      f.window(s, 4.0, &first, &last);
      swept += last - first;
    }
    expect(swept < 0.8 * n * f.stride, "fused metric windows skip far blocks");
    // Data that are not all finite are not sorted: every window is the whole data.
    z[5] = std::numeric_limits<double>::quiet_NaN();
    const detail::FusedData g(p, z.data(), 2.0);
    std::size_t first = 1, last = 0;
    g.window(7, 4.0, &first, &last);
    expect(g.whole && first == 0 && last == g.stride, "fused metric data with a NaN: whole windows");
  }
  expect(worst_fd < 1e-5, "fused metric lambda gradient matches central differences");
  expect(same_threads, "fused metric loss does not depend on the threads");
}

// Every registry kernel: its slope is -d shape / d r2 (central differences away from kinks, and
// the shadow kernel's facts); its leave-one-out loss at a diagonal metric is the same from the
// fused and the general passes, and the general pass's gradient in a full metric matches central
// differences (degrees 0 and 1; the data, prior weights and categorical variable of metric_tests).
static void metric_kernel_tests(const MetricProblem& data) {
  std::size_t kernels = 0;
  const KernelInfo* table = kernel_table(&kernels);
  double worst_slope = 0.0, worst_shadow = 0.0, worst_fused = 0.0, worst_fd = 0.0;
  for (std::size_t k = 0; k < kernels; ++k) {
    const KernelType type = table[k].type;
    for (double r2 : {0.09, 0.36, 0.64, 2.25}) {
      if (table[k].compact && r2 > 1.0) continue;
      const double e = 1e-6;
      const double fd = (kernel_shape(type, r2 - e) - kernel_shape(type, r2 + e)) / (2 * e);
      worst_slope = std::max(worst_slope, std::fabs(fd - kernel_slope(type, r2)));
      if (table[k].shadow_factor > 0.0)
        worst_shadow = std::max(worst_shadow, std::fabs(kernel_slope(type, r2) -
            table[k].shadow_factor * kernel_shape(table[k].shadow, r2)));
    }
  }
  expect(worst_slope < 1e-8, "kernel slopes are -d shape / d r2");
  expect(worst_shadow < 1e-13, "kernel slopes agree with the shadow kernels");
  for (std::size_t k = 0; k < kernels; ++k) {
    for (int degree : {0, 1}) {
      MetricProblem p = data;
      p.kernel = table[k].type;
      p.degree = degree;
      p.lambda_gradient = true;
      const double diag[4] = {0.45, 0.0, 0.0, 0.4};
      MetricLoss general, fused;
      metric_loo_loss(p, diag, general);
      p.diagonal = true;
      metric_loo_loss(p, diag, fused);
      p.diagonal = false;
      record(fused.loss);
      record(fused.gradient);
      record(fused.lambda_gradient);
      expect(general.failed == 0 && fused.failed == 0, "every point has a LOO fit");
      const auto rel = [](double a, double b) { return std::fabs(a - b) / (1e-12 + std::fabs(b)); };
      worst_fused = std::max(worst_fused, rel(fused.loss, general.loss));
      for (std::size_t e : {std::size_t(0), std::size_t(3)})
        worst_fused = std::max(worst_fused, rel(fused.gradient[e], general.gradient[e]));
      worst_fused =
          std::max(worst_fused, rel(fused.lambda_gradient[0], general.lambda_gradient[0]));
      const double A[4] = {0.45, 0.05, -0.1, 0.4};
      MetricLoss at;
      metric_loo_loss(p, A, at);
      record(at.loss);
      record(at.gradient);
      worst_fd = std::max(worst_fd, metric_fd_error(p, A, at, 1e-6));
    }
  }
  expect(worst_fused < 1e-12, "every kernel: fused metric loss equals the general pass");
  expect(worst_fd < 1e-5, "every kernel: metric gradient matches central differences");
}
