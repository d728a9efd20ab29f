// The watchdog's profiling layer (src/comm/watchdog.cpp) runs every blocking
// MPI call a library makes (HDF5's) as its non-blocking form completed by
// wait_yielding. Each call here goes through that layer (the first test
// proves it) and must give what MPI's own blocking call gives: the data, the
// statuses, the matched messages. On 3 ranks (more than the CI machine's
// cores, where the yielding matters). GTest on every rank
// (tests/lib/gtest_mpi_main.cpp).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "comm/watchdog.hpp"

using namespace pentad;

namespace {

int rank_of(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}
int size_of(MPI_Comm c) {
  int n = 0;
  MPI_Comm_size(c, &n);
  return n;
}

// The object file a function's code lies in.
std::string object_of(void* fn) {
  Dl_info info{};
  if (dladdr(fn, &info) == 0 || info.dli_fname == nullptr) return "?";
  return info.dli_fname;
}

}  // namespace

// The calls below are the profiling layer's, not MPI's: MPI_Allgather and
// the others resolve to this executable (linked with pentad's library),
// PMPI_Allgather to MPI's library.
TEST(WatchdogLayer, BlockingCallsAreThisProgramsWrappers) {
  const std::string mpi_lib = object_of(reinterpret_cast<void*>(&PMPI_Allgather));
  for (void* fn : {reinterpret_cast<void*>(&MPI_Allgather), reinterpret_cast<void*>(&MPI_Barrier),
                   reinterpret_cast<void*>(&MPI_Recv), reinterpret_cast<void*>(&MPI_Waitall),
                   reinterpret_cast<void*>(&MPI_Mprobe)}) {
    EXPECT_NE(object_of(fn), mpi_lib) << "a blocking MPI call resolves to MPI's library " << mpi_lib;
  }
  // wait_yielding on a null request completes at once, as MPI_Wait does.
  MPI_Request req = MPI_REQUEST_NULL;
  EXPECT_EQ(wait_yielding(&req, MPI_STATUS_IGNORE), MPI_SUCCESS);
}

TEST(WatchdogLayer, CollectivesGiveMpisResults) {
  const MPI_Comm w = MPI_COMM_WORLD;
  const int r = rank_of(w), n = size_of(w);

  int64_t sum = r + 1;
  ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_INT64_T, MPI_SUM, w), MPI_SUCCESS);
  EXPECT_EQ(sum, int64_t(n) * (n + 1) / 2);
  double mx = 0.5 * r;
  double got_max = -1;
  ASSERT_EQ(MPI_Allreduce(&mx, &got_max, 1, MPI_DOUBLE, MPI_MAX, w), MPI_SUCCESS);
  EXPECT_EQ(got_max, 0.5 * (n - 1));

  char word[8] = "";
  if (r == n - 1) std::strcpy(word, "pentad");
  ASSERT_EQ(MPI_Bcast(word, 8, MPI_CHAR, n - 1, w), MPI_SUCCESS);
  EXPECT_STREQ(word, "pentad");

  std::vector<int> all(size_t(n), -1);
  const int mine = 10 * r + 7;
  ASSERT_EQ(MPI_Allgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, w), MPI_SUCCESS);
  for (int k = 0; k < n; ++k) EXPECT_EQ(all[size_t(k)], 10 * k + 7);

  // Rank k sends k+1 values k; displacements in rank order.
  std::vector<int> counts(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) counts[size_t(k)] = k + 1;
  std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), 0);
  const std::vector<int> send(size_t(r + 1), r);
  const int total = displs.back() + counts.back();
  std::vector<int> recv(size_t(total), -1);
  ASSERT_EQ(MPI_Allgatherv(send.data(), r + 1, MPI_INT, recv.data(), counts.data(), displs.data(), MPI_INT, w),
            MPI_SUCCESS);
  for (int k = 0; k < n; ++k)
    for (int i = 0; i < counts[size_t(k)]; ++i) EXPECT_EQ(recv[size_t(displs[size_t(k)] + i)], k);

  std::vector<int> at_root(size_t(n), -1);
  ASSERT_EQ(MPI_Gather(&mine, 1, MPI_INT, at_root.data(), 1, MPI_INT, 0, w), MPI_SUCCESS);
  if (r == 0) {
    for (int k = 0; k < n; ++k) EXPECT_EQ(at_root[size_t(k)], 10 * k + 7);
  }
  std::vector<int> v_root(size_t(total), -1);
  ASSERT_EQ(MPI_Gatherv(send.data(), r + 1, MPI_INT, v_root.data(), counts.data(), displs.data(), MPI_INT, 1, w),
            MPI_SUCCESS);
  if (r == 1) {
    EXPECT_EQ(v_root, recv);
  }

  // Scatterv from the last rank: rank k gets k+1 copies of 100 + k.
  std::vector<int> to_scatter(static_cast<size_t>(total));
  for (int k = 0; k < n; ++k)
    for (int i = 0; i < counts[size_t(k)]; ++i) to_scatter[size_t(displs[size_t(k)] + i)] = 100 + k;
  std::vector<int> piece(size_t(r + 1), -1);
  ASSERT_EQ(MPI_Scatterv(to_scatter.data(), counts.data(), displs.data(), MPI_INT, piece.data(), r + 1, MPI_INT,
                         n - 1, w),
            MPI_SUCCESS);
  EXPECT_EQ(piece, std::vector<int>(size_t(r + 1), 100 + r));

  // Alltoall: rank r sends 1000*r + k to rank k.
  std::vector<int> out(static_cast<size_t>(n)), in(static_cast<size_t>(n), -1);
  for (int k = 0; k < n; ++k) out[size_t(k)] = 1000 * r + k;
  ASSERT_EQ(MPI_Alltoall(out.data(), 1, MPI_INT, in.data(), 1, MPI_INT, w), MPI_SUCCESS);
  for (int k = 0; k < n; ++k) EXPECT_EQ(in[size_t(k)], 1000 * k + r);

  EXPECT_EQ(MPI_Barrier(w), MPI_SUCCESS);
}

TEST(WatchdogLayer, MessagesAndWaitsGiveMpisResults) {
  const MPI_Comm w = MPI_COMM_WORLD;
  const int r = rank_of(w), n = size_of(w);
  const int next = (r + 1) % n, prev = (r + n - 1) % n;

  // A ring of blocking sends and receives, even ranks sending first.
  const int payload[3] = {r, r * r, -r};
  int got[3] = {-1, -1, -1};
  MPI_Status st{};
  if (r % 2 == 0) {
    ASSERT_EQ(MPI_Send(payload, 3, MPI_INT, next, 5, w), MPI_SUCCESS);
    ASSERT_EQ(MPI_Recv(got, 3, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, w, &st), MPI_SUCCESS);
  } else {
    ASSERT_EQ(MPI_Recv(got, 3, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, w, &st), MPI_SUCCESS);
    ASSERT_EQ(MPI_Send(payload, 3, MPI_INT, next, 5, w), MPI_SUCCESS);
  }
  EXPECT_EQ(st.MPI_SOURCE, prev);
  EXPECT_EQ(st.MPI_TAG, 5);
  int count = -1;
  MPI_Get_count(&st, MPI_INT, &count);
  EXPECT_EQ(count, 3);
  EXPECT_EQ(got[0], prev);
  EXPECT_EQ(got[1], prev * prev);
  EXPECT_EQ(got[2], -prev);

  // Probe, then a receive sized by the probe (prev sends r+2 values).
  std::vector<double> send(size_t(r + 2), 1.5 * r);
  MPI_Request sreq = MPI_REQUEST_NULL;
  ASSERT_EQ(MPI_Isend(send.data(), r + 2, MPI_DOUBLE, next, 6, w, &sreq), MPI_SUCCESS);
  MPI_Status pst{};
  ASSERT_EQ(MPI_Probe(prev, 6, w, &pst), MPI_SUCCESS);
  int probed = -1;
  MPI_Get_count(&pst, MPI_DOUBLE, &probed);
  EXPECT_EQ(probed, prev + 2);
  std::vector<double> rbuf(size_t(probed > 0 ? probed : 1), -1);
  ASSERT_EQ(MPI_Recv(rbuf.data(), probed, MPI_DOUBLE, prev, 6, w, MPI_STATUS_IGNORE), MPI_SUCCESS);
  EXPECT_EQ(rbuf, std::vector<double>(size_t(prev + 2), 1.5 * prev));
  ASSERT_EQ(MPI_Wait(&sreq, MPI_STATUS_IGNORE), MPI_SUCCESS);
  EXPECT_EQ(sreq, MPI_REQUEST_NULL);

  // Matched probe and receive (HDF5's shared filtered chunks).
  const int64_t tagged = 77 + r;
  ASSERT_EQ(MPI_Isend(&tagged, 1, MPI_INT64_T, next, 7, w, &sreq), MPI_SUCCESS);
  MPI_Message msg = MPI_MESSAGE_NULL;
  MPI_Status mst{};
  ASSERT_EQ(MPI_Mprobe(MPI_ANY_SOURCE, 7, w, &msg, &mst), MPI_SUCCESS);
  EXPECT_EQ(mst.MPI_SOURCE, prev);
  int64_t matched = -1;
  ASSERT_EQ(MPI_Mrecv(&matched, 1, MPI_INT64_T, &msg, MPI_STATUS_IGNORE), MPI_SUCCESS);
  EXPECT_EQ(matched, 77 + prev);
  ASSERT_EQ(MPI_Wait(&sreq, MPI_STATUS_IGNORE), MPI_SUCCESS);

  // Waitall with statuses: a receive from each side, a send to each.
  int from_prev = -1, from_next = -1;
  const int to_next = 300 + r, to_prev = 400 + r;
  MPI_Request reqs[4];
  MPI_Irecv(&from_prev, 1, MPI_INT, prev, 8, w, &reqs[0]);
  MPI_Irecv(&from_next, 1, MPI_INT, next, 9, w, &reqs[1]);
  MPI_Isend(&to_next, 1, MPI_INT, next, 8, w, &reqs[2]);
  MPI_Isend(&to_prev, 1, MPI_INT, prev, 9, w, &reqs[3]);
  MPI_Status sts[4];
  ASSERT_EQ(MPI_Waitall(4, reqs, sts), MPI_SUCCESS);
  for (const MPI_Request& q : reqs) EXPECT_EQ(q, MPI_REQUEST_NULL);
  EXPECT_EQ(sts[0].MPI_SOURCE, prev);
  EXPECT_EQ(sts[1].MPI_SOURCE, next);
  EXPECT_EQ(from_prev, 300 + prev);
  EXPECT_EQ(from_next, 400 + next);
  ASSERT_EQ(MPI_Waitall(0, nullptr, MPI_STATUSES_IGNORE), MPI_SUCCESS);
}
