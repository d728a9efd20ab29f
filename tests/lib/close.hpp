// The one elementwise comparator of the tests: |got - ref| <= bound(i) with
// bound(i) = atol + rtol * |ref[i]| (llm.c's and ggml's rule), or, with
// Scale::of_max_ref, atol * max|ref| + rtol * |ref[i]| (the layer tests:
// O(1) atol regardless of the layer's magnitude). Infinities must match
// exactly, NaN never passes. The result names the worst element.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace pentad::test {

struct Close {
  enum class Scale { absolute, of_max_ref };
  double atol = 0;
  double rtol = 0;
  Scale scale = Scale::absolute;
  bool nonzero_ref = false;  // an all-zero reference fails (it would check nothing)
};

// What one comparison found: `worst` is the element with the largest
// err - bound (the first failing one's kind if sizes or infinities differ).
struct CloseReport {
  bool ok = true;
  std::string why;          // set when the failure is not a tolerance excess
  size_t n = 0;
  size_t worst = 0;         // index of the worst element
  double worst_got = 0, worst_ref = 0, worst_err = 0, worst_bound = 0;
  double max_err = 0;       // max |got - ref| over finite elements
  double max_ref = 0;       // max |ref| over finite elements

  std::string describe() const {
    if (!why.empty()) return why;
    char buf[224];
    std::snprintf(buf, sizeof buf,
                  "n=%zu worst at %zu: got %.8g ref %.8g |err| %.3g (bound %.3g); max |err| %.3e, max |ref| %.3e", n,
                  worst, worst_got, worst_ref, worst_err, worst_bound, max_err, max_ref);
    return buf;
  }
};

template <class G, class R>
CloseReport compare_close(std::span<const G> got, std::span<const R> ref, Close tol) {
  static_assert(std::is_floating_point_v<G> && std::is_floating_point_v<R>);
  CloseReport r;
  r.n = ref.size();
  if (got.size() != ref.size()) {
    r.ok = false;
    r.why = "size " + std::to_string(got.size()) + ", reference size " + std::to_string(ref.size());
    return r;
  }
  for (R x : ref)
    if (std::isfinite(x)) r.max_ref = std::max(r.max_ref, double(std::fabs(x)));
  if (tol.nonzero_ref && r.max_ref == 0) {
    r.ok = false;
    r.why = "the reference is all zero (the comparison would check nothing)";
    return r;
  }
  const double atol = tol.scale == Close::Scale::of_max_ref ? tol.atol * r.max_ref : tol.atol;
  constexpr double inf = std::numeric_limits<double>::infinity();
  double worst_excess = -inf;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = got[i], f = ref[i];
    const double bound = atol + tol.rtol * std::fabs(f);
    double err = inf;
    if (std::isinf(g) || std::isinf(f)) {
      err = g == f ? 0.0 : inf;
    } else if (!std::isnan(g) && !std::isnan(f)) {
      err = std::fabs(g - f);
      r.max_err = std::max(r.max_err, err);
    }
    const double excess = err == inf ? inf : err - bound;
    if (excess > worst_excess || i == 0) {
      worst_excess = excess;
      r.worst = i, r.worst_got = g, r.worst_ref = f, r.worst_err = err, r.worst_bound = bound;
    }
    if (excess > 0) r.ok = false;
  }
  return r;
}

template <class G, class R>
CloseReport compare_close(const std::vector<G>& got, const std::vector<R>& ref, Close tol) {
  return compare_close(std::span<const G>(got), std::span<const R>(ref), tol);
}

// For EXPECT_TRUE(all_close(...)) << what: the failure message carries the
// worst element and the tolerances.
template <class G, class R>
::testing::AssertionResult all_close(const std::vector<G>& got, const std::vector<R>& ref, Close tol) {
  const CloseReport r = compare_close(got, ref, tol);
  if (r.ok) return ::testing::AssertionSuccess() << r.describe();
  return ::testing::AssertionFailure() << r.describe() << " (atol " << tol.atol
                                       << (tol.scale == Close::Scale::of_max_ref ? " x max|ref|" : "") << ", rtol "
                                       << tol.rtol << ")";
}

// Bitwise equality (-0 vs 0 and NaN payloads count): how many elements
// differ and the first of them (sizes that differ: every element differs).
struct BitwiseReport {
  bool ok() const { return n_differ == 0; }
  size_t n_differ = 0;
  size_t first = 0;
};

template <class T>
BitwiseReport compare_bitwise(std::span<const T> got, std::span<const T> ref) {
  BitwiseReport r;
  if (got.size() != ref.size()) {
    r.n_differ = std::max<size_t>({got.size(), ref.size(), 1});
    return r;
  }
  for (size_t i = 0; i < ref.size(); ++i)
    if (std::memcmp(&got[i], &ref[i], sizeof(T)) != 0 && r.n_differ++ == 0) r.first = i;
  return r;
}

}  // namespace pentad::test
