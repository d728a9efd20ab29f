// Checks for the MPI layer tests (tests/mpi), on GTest: every rank runs the
// same checks on its own data; a failure is a non-fatal GTest failure at the
// caller's line, printed by the rank that saw it (tests/lib/gtest_mpi_main.cpp
// agrees the verdict over the job); a pass is printed by rank 0 with
// PENTAD_VERBOSE (or always, unless quiet).
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <source_location>
#include <string>
#include <vector>

#include "close.hpp"
#include "gtest_mpi.hpp"

namespace pentad::test {

inline void report(bool ok, bool quiet, const std::string& line, const std::source_location& at) {
  if (!ok) {
    ADD_FAILURE_AT(at.file_name(), int(at.line())) << "FAIL " << line;
    return;
  }
  if (job_rank() == 0 && (!quiet || std::getenv("PENTAD_VERBOSE") != nullptr)) std::printf("ok   %s\n", line.c_str());
}

inline void expect(bool ok, const std::string& what, std::source_location at = std::source_location::current()) {
  report(ok, true, what, at);
}

struct Tol {
  double atol = 1e-5;           // times max |ref|
  double rtol = 1e-4;           // times |ref[i]|
  bool quiet = true;            // print passes only with PENTAD_VERBOSE
  bool nonzero_ref = false;     // an all-zero reference fails (it would check nothing)
};

// |got - ref| <= atol * max|ref| + rtol * |ref| elementwise (close.hpp).
// Infinities must match exactly (a fully masked row: both -inf); NaN fails.
inline void expect_close(const std::string& what, const std::vector<float>& got, const std::vector<float>& ref,
                         Tol tol = {}, std::source_location at = std::source_location::current()) {
  const Close c{.atol = tol.atol, .rtol = tol.rtol, .scale = Close::Scale::of_max_ref, .nonzero_ref = tol.nonzero_ref};
  const CloseReport r = compare_close(got, ref, c);
  report(r.ok, tol.quiet, what + ": " + r.describe(), at);
}

}  // namespace pentad::test
