// Host-memory collectives over raw MPI communicators (see host.hpp).
#include "comm/host.hpp"

#include <unistd.h>

#include "comm/watchdog.hpp"
#include "core/error.hpp"

namespace pentad::host {

template <> MPI_Datatype mpi_type<float>() { return MPI_FLOAT; }
template <> MPI_Datatype mpi_type<double>() { return MPI_DOUBLE; }
template <> MPI_Datatype mpi_type<char>() { return MPI_CHAR; }
template <> MPI_Datatype mpi_type<int32_t>() { return MPI_INT32_T; }
template <> MPI_Datatype mpi_type<int64_t>() { return MPI_INT64_T; }
template <> MPI_Datatype mpi_type<uint64_t>() { return MPI_UINT64_T; }

namespace {
MPI_Op mpi_op(Op op) { return op == Op::sum ? MPI_SUM : op == Op::min ? MPI_MIN : MPI_MAX; }
}  // namespace

double wtime() { return MPI_Wtime(); }

int rank(MPI_Comm comm) {
  int r = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &r));
  return r;
}

int size(MPI_Comm comm) {
  int n = 0;
  MPI_CHECK(MPI_Comm_size(comm, &n));
  return n;
}

namespace {
// rank() or size() of this rank's node group of comm.
int of_node(MPI_Comm comm, int (*what)(MPI_Comm)) {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank(comm), MPI_INFO_NULL, &node));
  const int r = what(node);
  MPI_CHECK(MPI_Comm_free(&node));
  return r;
}
}  // namespace

int node_rank(MPI_Comm comm) { return of_node(comm, rank); }
int node_size(MPI_Comm comm) { return of_node(comm, size); }

void complete(MPI_Request& req, MPI_Comm comm, const char* op) {
  const WatchScope watch(comm, op);
  MPI_CHECK(wait_yielding(&req, MPI_STATUS_IGNORE));
}

void barrier(MPI_Comm comm) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ibarrier(comm, &req));
  complete(req, comm, "MPI_Ibarrier");
}

void idle_barrier(MPI_Comm comm) {
  // Armed for the whole wait: MPI_Test returns at once, so the watchdog's
  // profiling layer never sees this barrier block.
  const WatchScope watch(comm, "MPI_Ibarrier");
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ibarrier(comm, &req));
  for (int done = 0;;) {
    MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (done) return;
    ::usleep(200);
  }
}

template <class T>
void allreduce(MPI_Comm comm, T* buf, int n, Op op) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, n, mpi_type<T>(), mpi_op(op), comm, &req));
  complete(req, comm, "MPI_Iallreduce");
}

template <class T>
void bcast(MPI_Comm comm, T* buf, int n, int root) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ibcast(buf, n, mpi_type<T>(), root, comm, &req));
  complete(req, comm, "MPI_Ibcast");
}

std::string bcast_string(MPI_Comm comm, const std::string& s, int root) {
  int64_t n = int64_t(s.size());
  bcast(comm, &n, 1, root);
  std::string out = rank(comm) == root ? s : std::string(size_t(n), '\0');
  if (n > 0) bcast(comm, out.data(), int(n), root);
  return out;
}

template <class T>
void allgather(MPI_Comm comm, const T* send, int n, T* recv) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Iallgather(send, n, mpi_type<T>(), recv, n, mpi_type<T>(), comm, &req));
  complete(req, comm, "MPI_Iallgather");
}

template <class T>
void gather(MPI_Comm comm, const T* send, int n, T* recv, int root) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Igather(send, n, mpi_type<T>(), recv, n, mpi_type<T>(), root, comm, &req));
  complete(req, comm, "MPI_Igather");
}

namespace {
// Variable-length strings: lengths first, then the bytes (to every rank, or to root).
std::vector<std::string> gather_strings_impl(MPI_Comm comm, const std::string& mine, int root, bool all) {
  const int n = size(comm), me = rank(comm);
  const int len = int(mine.size());
  std::vector<int> lens(size_t(n), 0), displs(size_t(n), 0);
  MPI_Request req = MPI_REQUEST_NULL;
  if (all)
    MPI_CHECK(MPI_Iallgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm, &req));
  else
    MPI_CHECK(MPI_Igather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, comm, &req));
  complete(req, comm, all ? "MPI_Iallgather" : "MPI_Igather");
  int total = 0;
  for (int r = 0; r < n; ++r) {
    displs[size_t(r)] = total;
    total += lens[size_t(r)];
  }
  const bool receives = all || me == root;
  std::vector<char> bytes(receives ? size_t(total) : 0);
  if (all)
    MPI_CHECK(MPI_Iallgatherv(mine.data(), len, MPI_CHAR, bytes.data(), lens.data(), displs.data(), MPI_CHAR, comm,
                              &req));
  else
    MPI_CHECK(MPI_Igatherv(mine.data(), len, MPI_CHAR, bytes.data(), lens.data(), displs.data(), MPI_CHAR, root,
                           comm, &req));
  complete(req, comm, all ? "MPI_Iallgatherv" : "MPI_Igatherv");
  std::vector<std::string> out;
  if (!receives) return out;
  for (int r = 0; r < n; ++r)
    out.emplace_back(bytes.data() + displs[size_t(r)], size_t(lens[size_t(r)]));
  return out;
}
}  // namespace

std::vector<std::string> allgather_strings(MPI_Comm comm, const std::string& mine) {
  return gather_strings_impl(comm, mine, 0, true);
}

std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& mine, int root) {
  return gather_strings_impl(comm, mine, root, false);
}

template <class T>
void send(MPI_Comm comm, const T* buf, int n, int dest, int tag) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Isend(buf, n, mpi_type<T>(), dest, tag, comm, &req));
  complete(req, comm, "MPI_Isend");
}

template <class T>
void recv(MPI_Comm comm, T* buf, int n, int src, int tag) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Irecv(buf, n, mpi_type<T>(), src, tag, comm, &req));
  complete(req, comm, "MPI_Irecv");
}

#define PENTAD_HOST_INSTANTIATE(T)                                   \
  template void allreduce<T>(MPI_Comm, T*, int, Op);                 \
  template void bcast<T>(MPI_Comm, T*, int, int);                    \
  template void allgather<T>(MPI_Comm, const T*, int, T*);           \
  template void gather<T>(MPI_Comm, const T*, int, T*, int);         \
  template void send<T>(MPI_Comm, const T*, int, int, int);          \
  template void recv<T>(MPI_Comm, T*, int, int, int);
PENTAD_HOST_INSTANTIATE(float)
PENTAD_HOST_INSTANTIATE(double)
PENTAD_HOST_INSTANTIATE(char)
PENTAD_HOST_INSTANTIATE(int32_t)
PENTAD_HOST_INSTANTIATE(int64_t)
PENTAD_HOST_INSTANTIATE(uint64_t)
#undef PENTAD_HOST_INSTANTIATE

}  // namespace pentad::host

namespace pentad {

void agree_or_throw(bool ok, const std::string& msg, MPI_Comm comm) {
  // The lowest failing rank's message wins.
  const int me = host::rank(comm);
  const int64_t first_bad = host::allreduce<int64_t>(comm, ok ? int64_t(1) << 30 : me, host::Op::min);
  if (first_bad == int64_t(1) << 30) return;
  throw InputError(host::bcast_string(comm, msg, int(first_bad)));
}

}  // namespace pentad
