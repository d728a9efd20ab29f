// Collectives bound to one group (one axis of the grid). The CPU build runs
// them with MPI on host memory; a CUDA build binds NCCL to the same groups.
// Every call is collective over the group (or point-to-point within it), and
// every call counts the bytes this rank sends, for communication accounting.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/capability.hpp"  // CommOp, and what each implementation supports

namespace pentad {

class Comm {
 public:
  Comm(MPI_Comm comm, std::string name);
  virtual ~Comm() = default;

  int size() const { return size_; }
  int rank() const { return rank_; }
  const std::string& name() const { return name_; }
  // Whether this Comm implements `op` (the base implements none of them);
  // an implementation answers from kCommSupports (capability.hpp).
  virtual bool supports(CommOp op) const;
  MPI_Comm mpi() const { return comm_; }
  // Bytes this rank has put on the wire in this group since the last reset,
  // counted as a ring algorithm moves them: all-reduce 2(n-1)/n * bytes,
  // all-gather and reduce-scatter (n-1)/n * bytes of the full buffer.
  double bytes_sent() const { return bytes_sent_; }
  // Wall time this rank spent blocked in this group's calls (blocking
  // collectives and wait()), i.e. communication not hidden behind compute.
  double seconds_blocked() const { return seconds_; }
  void reset_bytes() {
    bytes_sent_ = 0;
    seconds_ = 0;
  }

  // Device buffers (backend memory).
  virtual void allreduce_sum(float* buf, size_t n) = 0;   // in place
  virtual void allreduce_max(float* buf, size_t n) = 0;   // in place
  virtual void allgather(const float* send, float* recv, size_t n_per_rank) = 0;
  virtual void reduce_scatter_sum(const float* send, float* recv, size_t n_per_rank) = 0;
  virtual void broadcast(float* buf, size_t n, int root) = 0;
  virtual void send(const float* buf, size_t n, int peer, int tag) = 0;
  virtual void recv(float* buf, size_t n, int peer, int tag) = 0;
  // All-to-all with per-peer counts (expert dispatch and combine): send holds
  // size() consecutive pieces, send_counts[r] elements for rank r; recv gets
  // recv_counts[r] elements from rank r, back to back in rank order. Zero
  // counts are fine. Counts the bytes sent to the other ranks (the piece for
  // this rank is a local copy). Optional: see supports(CommOp::alltoallv).
  virtual void alltoallv(const float* send, const std::vector<int>& send_counts, float* recv,
                         const std::vector<int>& recv_counts);

  // Non-blocking collectives (gradient buckets, ZeRO gathers). A request is
  // completed by wait(); test() and progress() let MPI advance it while the
  // caller computes (MPICH progresses only inside MPI calls unless its async
  // progress thread is on).
  using Request = int;
  virtual Request iallreduce_sum(float* buf, size_t n) = 0;
  // send holds size() consecutive pieces of counts[r] elements; this rank
  // receives the sum of piece rank() into recv.
  virtual Request ireduce_scatter_sum(const float* send, float* recv, const std::vector<int>& counts) = 0;
  // Every rank contributes counts[rank()] elements (send); recv receives all
  // pieces back to back, in rank order. send == nullptr: in place.
  virtual Request iallgatherv(const float* send, float* recv, const std::vector<int>& counts) = 0;
  // Non-blocking point-to-point (pipeline activations between stages, ring
  // attention's K/V blocks over cp): the buffer must stay untouched until
  // wait(). Optional: see supports(CommOp::isend / irecv).
  virtual Request isend(const float* buf, size_t n, int peer, int tag);
  virtual Request irecv(float* buf, size_t n, int peer, int tag);
  // A send of n elements to `to` and a receive of n from `from`, started
  // together (one hop of the cp ring, where every rank sends and receives at
  // once). The base posts isend then irecv; NCCL makes them one group, since
  // separate NCCL sends and receives on one stream wait on each other.
  // Completed by wait_exchange(). Optional: see supports(CommOp::isendrecv).
  struct Exchange {
    Request send = -1, recv = -1;  // -1: none (NCCL's group is one request, in send)
  };
  virtual Exchange isendrecv(const float* send, float* recv, size_t n, int to, int from, int tag);
  void wait_exchange(const Exchange& x);
  // Sends and receives started as one group and completed together by
  // wait_group (the pipeline's grouped messages, parallel/pp/p2p_plan.hpp).
  // Each op is a send (send set) or a receive (recv set) of n elements with
  // `peer`. Messages between two ranks pair in the order they are posted
  // (one tag for all). The base posts isend / irecv per op; NCCL makes one
  // group. Several groups may be in flight (training waits for each only
  // where it needs it); NCCL runs them in the order started, one after
  // another on the comm's stream. Optional: see supports(CommOp::group).
  struct P2pOp {
    const float* send = nullptr;
    float* recv = nullptr;
    size_t n = 0;
    int peer = 0;
  };
  using Group = std::vector<Request>;
  virtual Group start_group(const std::vector<P2pOp>& ops);
  void wait_group(const Group& g);
  virtual void wait(Request r) = 0;
  virtual bool test(Request r) = 0;
  virtual void progress() = 0;  // test every outstanding request

  // Host scalars (losses, norms, counters): always MPI, fp64.
  void allreduce_sum_host(double* buf, int n);
  void allreduce_max_host(double* buf, int n);
  // Host integers (token counts before an alltoallv): n_per_rank to every rank.
  void alltoall_host(const int* send, int* recv, int n_per_rank);
  // Host integers (routing choices of a cut sequence): every rank's n_per_rank
  // values, back to back in rank order.
  void allgather_host(const int* send, int* recv, int n_per_rank);

 protected:
  MPI_Comm comm_;
  std::string name_;
  int size_ = 1, rank_ = 0;
  double bytes_sent_ = 0;
  double seconds_ = 0;
};

class Backend;
// Builds the Comm of one group for buffers of the run's backend; collective
// over `comm`. The application picks the implementation (app/runtime.cpp).
using CommFactory = std::function<std::unique_ptr<Comm>(MPI_Comm comm, std::string name)>;

}  // namespace pentad
