// The main() of the MPI test binaries (tests/mpi): MPI_Init, every GTest
// test on every rank in the same order, a failure printed by the rank that
// saw it ("[rank r] file:line"), each test's verdict agreed over the job and
// printed once by rank 0, and one exit code on every rank (nccl-tests'
// all-reduced pass flag). Checks inside a test must be non-fatal (EXPECT_*):
// a rank that left a test early would leave the others in a collective. For
// the same reason an exception is not caught: it ends the rank, and mpiexec
// the job, at once.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "gtest_mpi.hpp"

namespace pentad::test {
namespace {

std::vector<std::string>& args_storage() {
  static std::vector<std::string> a;
  return a;
}

std::map<std::string, Mode>& modes() {
  static std::map<std::string, Mode> m;
  return m;
}

std::string full_name(const ::testing::TestInfo& t) {
  return std::string(t.test_suite_name()) + "." + t.name();
}

// Replaces GTest's printer on every rank. Collective over MPI_COMM_WORLD in
// OnTestEnd: every rank runs the same tests, so each one ends on all ranks.
class MpiPrinter : public ::testing::EmptyTestEventListener {
 public:
  MpiPrinter(int rank, int size) : rank_(rank), size_(size) {}

  void OnTestStart(const ::testing::TestInfo& t) override {
    t0_ = std::chrono::steady_clock::now();
    if (rank_ == 0) print("[ RUN      ] " + full_name(t));
  }

  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.type() == ::testing::TestPartResult::kSuccess) return;
    if (r.skipped()) {
      if (rank_ == 0) print(std::string("[  SKIPPED ] ") + r.message());
      return;
    }
    print("[rank " + std::to_string(rank_) + "] " + (r.file_name() ? r.file_name() : "?") + ":" +
          std::to_string(r.line_number()) + ": Failure\n" + r.message());
  }

  void OnTestEnd(const ::testing::TestInfo& t) override {
    const int mine = t.result()->Failed() ? 1 : 0;
    std::vector<int> all(static_cast<size_t>(size_));
    MPI_Allgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
    if (rank_ != 0) return;
    std::string ranks;
    for (int r = 0; r < size_; ++r)
      if (all[size_t(r)]) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    const long ms = long(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count());
    if (!ranks.empty()) {
      failed_.push_back(full_name(t) + " (ranks " + ranks + ")");
      print("[  FAILED  ] " + full_name(t) + " on ranks " + ranks + " (" + std::to_string(ms) + " ms)");
    } else if (t.result()->Skipped()) {
      print("[  SKIPPED ] " + full_name(t));
    } else {
      print("[       OK ] " + full_name(t) + " (" + std::to_string(ms) + " ms)");
    }
  }

  void OnTestProgramEnd(const ::testing::UnitTest& u) override {
    if (rank_ != 0) return;
    print("[==========] " + std::to_string(u.test_to_run_count()) + " tests on " + std::to_string(size_) +
          " ranks, " + std::to_string(failed_.size()) + " failed");
    for (const std::string& f : failed_) print("[  FAILED  ] " + f);
  }

 private:
  static void print(const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  int rank_, size_;
  std::chrono::steady_clock::time_point t0_;
  std::vector<std::string> failed_;
};

// Every test, then the verdict agreed over the job: 0 only if every rank
// passed every test and at least one test ran (a filter that selects none
// would check nothing).
int run_tests(int rank, int size) {
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new MpiPrinter(rank, size));
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  if (::testing::UnitTest::GetInstance()->test_to_run_count() == 0) {
    if (rank == 0) std::printf("no test selected: failing (a run that checks nothing cannot pass)\n");
    failed = 1;
  }
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any;
}

}  // namespace

const std::vector<std::string>& test_args() { return args_storage(); }

bool add_mode(const char* flag, Mode fn) {
  modes()[flag] = fn;
  return true;
}

}  // namespace pentad::test

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  pentad::set_job_comm(MPI_COMM_WORLD);
  GTEST_FLAG_SET(catch_exceptions, false);
  ::testing::InitGoogleTest(&argc, argv);
  auto& args = pentad::test::args_storage();
  args.assign(argv + 1, argv + argc);
  const int rank = pentad::test::job_rank(), size = pentad::test::job_size();
  int rc = 0;
  const auto mode = args.empty() ? pentad::test::modes().end() : pentad::test::modes().find(args[0]);
  if (mode != pentad::test::modes().end())
    rc = mode->second(args);
  else
    rc = pentad::test::run_tests(rank, size);
  MPI_Finalize();
  return rc;
}
