// The layer tests' setting (tests/mpi): the whole job as one named group (a
// dup of MPI_COMM_WORLD) with a one-thread CPU backend, made before the
// first test and freed after the last one, before MPI_Finalize. A test file
// declares `JobGroup& job = job_group("tp");` at namespace scope.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "comm/comm.hpp"
#include "cpu.hpp"

namespace pentad::test {

class JobGroup : public ::testing::Environment {
 public:
  explicit JobGroup(std::string name) : name_(std::move(name)) {}
  // Collective over MPI_COMM_WORLD (the dup).
  void SetUp() override {
    MPI_Comm_dup(MPI_COMM_WORLD, &group_);
    be_ = make_cpu_backend(1);
    comm_ = make_mpi_comm(group_, name_);
  }
  void TearDown() override {
    comm_.reset();
    be_.reset();
    MPI_Comm_free(&group_);
  }
  Backend& be() { return *be_; }
  Comm& comm() { return *comm_; }

 private:
  std::string name_;
  MPI_Comm group_ = MPI_COMM_NULL;
  std::unique_ptr<Backend> be_;
  std::unique_ptr<Comm> comm_;
};

// GTest owns the environment (and deletes it after the run).
inline JobGroup& job_group(const char* name) {
  return *static_cast<JobGroup*>(::testing::AddGlobalTestEnvironment(new JobGroup(name)));
}

}  // namespace pentad::test
