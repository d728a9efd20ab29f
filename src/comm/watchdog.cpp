// The MPI watchdog (see watchdog.hpp). The armed call is published in a few
// atomics so arming costs a clock read and three stores (it runs around
// every MPI call of the step); the thread polls them a few times a second.
// The blocking MPI calls of the control path (comm/host.cpp, Comm's host
// scalars, HDF5's collectives) are armed through MPI's profiling interface:
// the MPI_X defined at the end of this file arm and call PMPI_X (a blocking
// call as its non-blocking PMPI_IX, waited for by wait_yielding).
#include "comm/watchdog.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <sched.h>
#include <thread>
#include <utility>

#include "core/error.hpp"

namespace pentad {
namespace {

using Clock = std::chrono::steady_clock;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// The armed call; armed_at_ns == 0: nothing armed.
std::atomic<int64_t> g_armed_at_ns{0};
std::atomic<const char*> g_group{nullptr};
int g_depth = 0;  // open scopes (the calling thread's: MPI is called from one thread); only the outermost arms
char g_comm_name[MPI_MAX_OBJECT_NAME + 512] = "";  // the group of a raw MPI call
const WatchGroupScope* g_unnamed_group = nullptr;     // the innermost WatchGroupScope
const char* g_unnamed_group_text = nullptr;
std::atomic<const char*> g_op{nullptr};
std::atomic<int> g_step{0};
std::atomic<int64_t> g_timeout_ns{0};

class Watchdog {
 public:
  Watchdog() : thread_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it reads

  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      // Poll at a quarter of the timeout (at most 4 times a second): the job
      // ends at most timeout * 1.25 after the call blocked.
      const int64_t timeout_ns = g_timeout_ns.load();
      const auto poll = std::chrono::nanoseconds(std::min<int64_t>(timeout_ns / 4, 250'000'000));
      if (wake_.wait_for(lock, poll, [this] { return stop_; })) return;
      check(timeout_ns);
    }
  }

  // Fires when one and the same call has stayed armed past the timeout (the
  // armed time read again after the names, so they belong to that call).
  static void check(int64_t timeout_ns) {
    const int64_t t0 = g_armed_at_ns.load();
    if (t0 == 0 || now_ns() - t0 < timeout_ns) return;
    const char* group = g_group.load();
    const char* op = g_op.load();
    const int step = g_step.load();
    if (g_armed_at_ns.load() != t0 || group == nullptr || op == nullptr) return;
    const double waited_s = double(now_ns() - t0) * 1e-9;
    char head[160];
    std::snprintf(head, sizeof head, "MPI operation '%s' in group '", op);
    char tail[320];
    std::snprintf(tail, sizeof tail,
                  "' did not return within parallel.comm_timeout_s = %g s (waited %.1f s, %s%d): a rank of the "
                  "group is stuck or dead; ending the job",
                  double(timeout_ns) * 1e-9, waited_s, step > 0 ? "step " : "setup, before step ", step > 0 ? step : 1);
    fatal_at(__FILE__, __LINE__, head + std::string(group) + tail);
  }
};

}  // namespace

void start_comm_watchdog(double timeout_s) {
  g_timeout_ns.store(int64_t(timeout_s * 1e9));
  static Watchdog watchdog;  // one thread per process, joined at exit
}

void set_watchdog_step(int step) { g_step.store(step, std::memory_order_relaxed); }

namespace {
void arm(const char* group, const char* op) {
  g_group.store(group, std::memory_order_relaxed);
  g_op.store(op, std::memory_order_relaxed);
  g_armed_at_ns.store(now_ns(), std::memory_order_release);
}
}  // namespace

WatchScope::WatchScope(const std::string& group, const char* op) {
  if (g_depth++ == 0) arm(group.c_str(), op);
}

WatchScope::WatchScope(MPI_Comm comm, const char* op) {
  if (g_depth++ > 0) return;
  int len = 0;
  if (PMPI_Comm_get_name(comm, g_comm_name, &len) != MPI_SUCCESS || len == 0) {
    if (g_unnamed_group_text)
      std::snprintf(g_comm_name, sizeof g_comm_name, "%s", g_unnamed_group_text);
    else
      std::strcpy(g_comm_name, "unnamed communicator");
  }
  arm(g_comm_name, op);
}

WatchGroupScope::WatchGroupScope(std::string group) : group_(std::move(group)), outer_(g_unnamed_group) {
  g_unnamed_group = this;
  g_unnamed_group_text = group_.c_str();
}

WatchGroupScope::~WatchGroupScope() {
  g_unnamed_group = outer_;
  g_unnamed_group_text = outer_ ? outer_->group_.c_str() : nullptr;
}

namespace {
// The group of a call on an MPI-IO file handle (which names no communicator).
const std::string kFileGroup = "the communicator of an MPI-IO file";
const std::string& file_group() { return g_unnamed_group ? g_unnamed_group->group() : kFileGroup; }
}  // namespace

std::string comm_name(MPI_Comm comm) {
  char name[MPI_MAX_OBJECT_NAME] = "";
  int len = 0;
  if (PMPI_Comm_get_name(comm, name, &len) != MPI_SUCCESS || len == 0) return "unnamed communicator";
  return name;
}

WatchScope::~WatchScope() {
  if (--g_depth == 0) g_armed_at_ns.store(0, std::memory_order_release);
}

namespace {
// How long a wait polls before it starts yielding: a short wait (a message
// already on its way) finishes at full polling speed, without a system call
// per poll.
constexpr int64_t kSpinBeforeYieldNs = 50'000;

// Polls test(&done) until done: at full speed for kSpinBeforeYieldNs, then
// with a sched_yield between polls. MPI's error code.
template <class Test>
int poll_yielding(Test test) {
  const int64_t spin_until = now_ns() + kSpinBeforeYieldNs;
  for (int done = 0;;) {
    if (const int rc = test(&done); rc != MPI_SUCCESS || done) return rc;
    if (now_ns() > spin_until) ::sched_yield();
  }
}
}  // namespace

int wait_yielding(MPI_Request* req, MPI_Status* status) {
  return poll_yielding([&](int* done) { return PMPI_Test(req, done, status); });
}

namespace {
// A blocking call run as its non-blocking form: `started` is that call's
// error code, req the request it made; waits for it yielding.
int finish(int started, MPI_Request& req, MPI_Status* status = MPI_STATUS_IGNORE) {
  return started != MPI_SUCCESS ? started : wait_yielding(&req, status);
}
}  // namespace

}  // namespace pentad

// ---- the profiling-interface layer: each blocking call armed for its duration ----

extern "C" {

int MPI_Allreduce(const void* send, void* recv, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
  const pentad::WatchScope watch(comm, "MPI_Allreduce");
  MPI_Request req = MPI_REQUEST_NULL;
  return pentad::finish(PMPI_Iallreduce(send, recv, n, t, op, comm, &req), req);
}

int MPI_Bcast(void* buf, int n, MPI_Datatype t, int root, MPI_Comm comm) {
  const pentad::WatchScope watch(comm, "MPI_Bcast");
  MPI_Request req = MPI_REQUEST_NULL;
  return pentad::finish(PMPI_Ibcast(buf, n, t, root, comm, &req), req);
}

int MPI_Allgather(const void* send, int ns, MPI_Datatype ts, void* recv, int nr, MPI_Datatype tr, MPI_Comm comm) {
  const pentad::WatchScope watch(comm, "MPI_Allgather");
  MPI_Request req = MPI_REQUEST_NULL;
  return pentad::finish(PMPI_Iallgather(send, ns, ts, recv, nr, tr, comm, &req), req);
}

int MPI_Allgatherv(const void* send, int ns, MPI_Datatype ts, void* recv, const int nr[], const int displs[],
                   MPI_Datatype tr, MPI_Comm comm) {
  const pentad::WatchScope watch(comm, "MPI_Allgatherv");
  MPI_Request req = MPI_REQUEST_NULL;
  return pentad::finish(PMPI_Iallgatherv(send, ns, ts, recv, nr, displs, tr, comm, &req), req);
}

int MPI_Gather(const void* send, int ns, MPI_Datatype ts, void* recv, int nr, MPI_Datatype tr, int root,
               MPI_Comm comm) {
  const pentad::WatchScope watch(comm, "MPI_Gather");
  MPI_Request req = MPI_REQUEST_NULL;
  return pentad::finish(PMPI_Igather(send, ns, ts, recv, nr, tr, root, comm, &req), req);
}

int MPI_Gatherv(const void* send, int ns, MPI_Datatype ts, void* recv, const int nr[], const int displs[],
                MPI_Datatype tr, int root, MPI_Comm comm) {
  const pentad::WatchScope watch(comm, "MPI_Gatherv");
  MPI_Request req = MPI_REQUEST_NULL;
  return pentad::finish(PMPI_Igatherv(send, ns, ts, recv, nr, displs, tr, root, comm, &req), req);
}

int MPI_Alltoall(const void* send, int ns, MPI_Datatype ts, void* recv, int nr, MPI_Datatype tr, MPI_Comm comm) {
  const pentad::WatchScope watch(comm, "MPI_Alltoall");
  MPI_Request req = MPI_REQUEST_NULL;
  return pentad::finish(PMPI_Ialltoall(send, ns, ts, recv, nr, tr, comm, &req), req);
}

int MPI_Barrier(MPI_Comm comm) {
  const pentad::WatchScope watch(comm, "MPI_Barrier");
  MPI_Request req = MPI_REQUEST_NULL;
  return pentad::finish(PMPI_Ibarrier(comm, &req), req);
}

int MPI_Send(const void* buf, int n, MPI_Datatype t, int dest, int tag, MPI_Comm comm) {
  const pentad::WatchScope watch(comm, "MPI_Send");
  MPI_Request req = MPI_REQUEST_NULL;
  return pentad::finish(PMPI_Isend(buf, n, t, dest, tag, comm, &req), req);
}

int MPI_Recv(void* buf, int n, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Status* status) {
  const pentad::WatchScope watch(comm, "MPI_Recv");
  MPI_Request req = MPI_REQUEST_NULL;
  return pentad::finish(PMPI_Irecv(buf, n, t, src, tag, comm, &req), req, status);
}

int MPI_Scatterv(const void* send, const int ns[], const int displs[], MPI_Datatype ts, void* recv, int nr,
                 MPI_Datatype tr, int root, MPI_Comm comm) {
  const pentad::WatchScope watch(comm, "MPI_Scatterv");
  MPI_Request req = MPI_REQUEST_NULL;
  return pentad::finish(PMPI_Iscatterv(send, ns, displs, ts, recv, nr, tr, root, comm, &req), req);
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* out) {
  const pentad::WatchScope watch(comm, "MPI_Comm_dup");
  return PMPI_Comm_dup(comm, out);
}

// The collectives of start-up, where a rank that cannot reach another first blocks.
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* out) {
  const pentad::WatchScope watch(comm, "MPI_Comm_split");
  return PMPI_Comm_split(comm, color, key, out);
}

int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm* out) {
  const pentad::WatchScope watch(comm, "MPI_Comm_split_type");
  return PMPI_Comm_split_type(comm, type, key, info, out);
}

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm* out) {
  const pentad::WatchScope watch(comm, "MPI_Cart_create");
  return PMPI_Cart_create(comm, ndims, dims, periods, reorder, out);
}

int MPI_Cart_sub(MPI_Comm comm, const int remain[], MPI_Comm* out) {
  const pentad::WatchScope watch(comm, "MPI_Cart_sub");
  return PMPI_Cart_sub(comm, remain, out);
}

int MPI_Wait(MPI_Request* req, MPI_Status* status) {
  const pentad::WatchScope watch(pentad::file_group(), "MPI_Wait");
  return pentad::wait_yielding(req, status);
}

// HDF5's collective writes of filtered (checksummed) chunks shared by ranks
// receive the other ranks' pieces in a loop of blocking matched probes.
int MPI_Mprobe(int src, int tag, MPI_Comm comm, MPI_Message* msg, MPI_Status* status) {
  const pentad::WatchScope watch(comm, "MPI_Mprobe");
  return pentad::poll_yielding([&](int* found) { return PMPI_Improbe(src, tag, comm, found, msg, status); });
}

int MPI_Probe(int src, int tag, MPI_Comm comm, MPI_Status* status) {
  const pentad::WatchScope watch(comm, "MPI_Probe");
  return pentad::poll_yielding([&](int* found) { return PMPI_Iprobe(src, tag, comm, found, status); });
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[]) {
  const pentad::WatchScope watch(pentad::file_group(), "MPI_Waitall");
  return pentad::poll_yielding([&](int* done) { return PMPI_Testall(n, reqs, done, statuses); });
}

// MPI-IO (HDF5's parallel driver): ROMIO's collectives inside these call
// PMPI_X directly, past the layer above, so the file calls are armed here.
int MPI_File_open(MPI_Comm comm, const char* name, int amode, MPI_Info info, MPI_File* fh) {
  const pentad::WatchScope watch(comm, "MPI_File_open");
  return PMPI_File_open(comm, name, amode, info, fh);
}

int MPI_File_close(MPI_File* fh) {
  const pentad::WatchScope watch(pentad::file_group(), "MPI_File_close");
  return PMPI_File_close(fh);
}

int MPI_File_set_size(MPI_File fh, MPI_Offset size) {
  const pentad::WatchScope watch(pentad::file_group(), "MPI_File_set_size");
  return PMPI_File_set_size(fh, size);
}

int MPI_File_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype ftype, const char* rep,
                      MPI_Info info) {
  const pentad::WatchScope watch(pentad::file_group(), "MPI_File_set_view");
  return PMPI_File_set_view(fh, disp, etype, ftype, rep, info);
}

int MPI_File_read_at_all(MPI_File fh, MPI_Offset off, void* buf, int n, MPI_Datatype t, MPI_Status* status) {
  const pentad::WatchScope watch(pentad::file_group(), "MPI_File_read_at_all");
  return PMPI_File_read_at_all(fh, off, buf, n, t, status);
}

int MPI_File_write_at_all(MPI_File fh, MPI_Offset off, const void* buf, int n, MPI_Datatype t,
                          MPI_Status* status) {
  const pentad::WatchScope watch(pentad::file_group(), "MPI_File_write_at_all");
  return PMPI_File_write_at_all(fh, off, buf, n, t, status);
}

int MPI_File_set_atomicity(MPI_File fh, int flag) {
  const pentad::WatchScope watch(pentad::file_group(), "MPI_File_set_atomicity");
  return PMPI_File_set_atomicity(fh, flag);
}

int MPI_File_sync(MPI_File fh) {
  const pentad::WatchScope watch(pentad::file_group(), "MPI_File_sync");
  return PMPI_File_sync(fh);
}

}  // extern "C"
