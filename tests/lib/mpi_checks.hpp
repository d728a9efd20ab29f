// Checks for the MPI layer tests (tests/mpi): every rank runs the same
// checks on its own data; a failure is counted and printed by the rank that
// saw it, a pass printed by rank 0 with PENTAD_VERBOSE (or always, unless
// quiet). finish() sums the failures over the job and gives the exit code.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace pentad::test {

inline int failures = 0;
inline int rank = 0;

inline void report(bool ok, bool quiet, const std::string& line) {
  if (!ok) ++failures;
  const bool verbose = std::getenv("PENTAD_VERBOSE") != nullptr;
  if (!ok || (rank == 0 && (!quiet || verbose)))
    std::printf("%s%s %s\n", ok ? "" : ("[rank " + std::to_string(rank) + "] ").c_str(), ok ? "ok  " : "FAIL",
                line.c_str());
}

inline void expect(bool ok, const std::string& what) { report(ok, true, what); }

struct Tol {
  double atol = 1e-5;           // times max |ref|
  double rtol = 1e-4;           // times |ref[i]|
  bool quiet = true;            // print passes only with PENTAD_VERBOSE
  bool nonzero_ref = false;     // an all-zero reference fails (it would check nothing)
};

// |got - ref| <= atol * max|ref| + rtol * |ref| elementwise. Infinities must
// match exactly (a fully masked row: both -inf); NaN fails.
inline void expect_close(const std::string& what, const std::vector<float>& got, const std::vector<float>& ref,
                         Tol tol = {}) {
  double ref_max = 0, worst = 0, worst_excess = -1;
  for (float r : ref)
    if (std::isfinite(r)) ref_max = std::max(ref_max, double(std::fabs(r)));
  bool ok = got.size() == ref.size() && (!tol.nonzero_ref || ref_max > 0);
  for (size_t i = 0; ok && i < ref.size(); ++i) {
    if (std::isinf(ref[i]) || std::isinf(got[i])) {
      ok = got[i] == ref[i];
      continue;
    }
    const double d = std::fabs(double(got[i]) - ref[i]);
    if (!(d == d)) ok = false;  // NaN
    worst = std::max(worst, d);
    worst_excess = std::max(worst_excess, d - (tol.atol * ref_max + tol.rtol * std::fabs(ref[i])));
  }
  ok = ok && worst_excess <= 0;
  char buf[96];
  std::snprintf(buf, sizeof buf, ": max |diff| %.3e (max|ref| %.3e)", worst, ref_max);
  report(ok, tol.quiet, what + buf);
}

// The failures over MPI_COMM_WORLD, printed by rank 0: the exit code.
inline int finish(const char* name) {
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("%s: %s (%d failed checks over all ranks)\n", name, total ? "FAILED" : "passed", total);
  return total ? 1 : 0;
}

}  // namespace pentad::test
