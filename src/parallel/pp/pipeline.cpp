// The pipeline executor (see pipeline.hpp).
#include "parallel/pp/pipeline.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <utility>

#include "backend/backend.hpp"
#include "comm/comm.hpp"
#include "parallel/dp/data_parallel.hpp"
#include "core/error.hpp"
#include "model/model.hpp"

namespace pentad {

Pipeline::Pipeline(Model& model, Backend& be, Comm& pp, DataParallel& dpar, Schedule train, Schedule eval)
    : model_(model), be_(be), pp_(pp), dpar_(dpar), train_(std::move(train)), eval_(std::move(eval)) {
  if (train_.pp != pp.size() || train_.n_chunks() != model.n_chunks())
    throw std::logic_error("Pipeline: schedule does not match the pp group or the model's chunks");
}

Pipeline::~Pipeline() {
  for (float* b : all_bufs_) be_.free_bytes(b);
}

float* Pipeline::take_buffer() {
  if (free_bufs_.empty()) {
    all_bufs_.push_back(be_.alloc(model_.boundary_elems(), Mem::comm));
    return all_bufs_.back();
  }
  float* b = free_bufs_.back();
  free_bufs_.pop_back();
  return b;
}

void Pipeline::give_buffer(float* b) { free_bufs_.push_back(b); }

int Pipeline::tag(bool grad, int chunk) const { return (grad ? train_.n_chunks() : 0) + chunk; }

double Pipeline::train_step(const int32_t* inputs, const int32_t* targets, float loss_scale,
                            float* logits_out) {
  return run(train_, true, inputs, targets, loss_scale, logits_out);
}

double Pipeline::eval(const int32_t* inputs, const int32_t* targets) {
  const bool was = tracing_;
  tracing_ = false;
  const double busy = busy_, wall = wall_;
  const int peak = peak_inflight_;
  const double loss = run(eval_, false, inputs, targets, 0.0f, nullptr);
  busy_ = busy, wall_ = wall, peak_inflight_ = peak;  // report the training step's figures
  tracing_ = was;
  return loss;
}

double Pipeline::run(const Schedule& s, bool train, const int32_t* inputs, const int32_t* targets,
                     float loss_scale, float* logits_out) {
  const int me = pp_.rank(), G = s.n_chunks(), M = s.m;
  const size_t mb_tokens = model_.tokens_per_micro_batch();  // this rank's (B x seq_len/cp)
  const size_t n = model_.boundary_elems();
  const size_t V = size_t(model_.config().vocab_size);

  struct Pending {
    float* buf = nullptr;
    Comm::Request req = -1;
  };
  std::map<std::pair<int, int>, Pending> recvs;  // (grad?, mb) of the chunk consuming it -> receive
  std::map<std::pair<int, int>, int> live;       // (mb, chunk) -> slot
  std::map<int, Comm::Request> act_sends;        // slot -> its output's send
  std::vector<std::pair<Comm::Request, float*>> grad_sends;
  int inflight = 0;

  const double t_start = MPI_Wtime();
  if (t_origin_ < 0) t_origin_ = t_start;
  double busy = 0;
  peak_inflight_ = 0;
  auto note = [&](char kind, int mb, int chunk, double t0, double t1) {
    if (tracing_) events_.push_back({trace_step_, kind, mb, chunk, t0 - t_origin_, t1 - t_origin_});
  };
  auto key = [](bool grad, int mb, int chunk) { return std::make_pair(grad ? -1 - chunk : chunk, mb); };
  // Wait for a posted receive; the time spent is idle (the bubble).
  auto arrive = [&](bool grad, int mb, int chunk, float* dst) {
    auto it = recvs.find(key(grad, mb, chunk));
    if (it == recvs.end()) PENTAD_FATAL("pipeline: a compute action found no posted receive (schedule bug)");
    const double t0 = MPI_Wtime();
    pp_.wait(it->second.req);
    note('r', mb, chunk, t0, MPI_Wtime());
    be_.copy_bytes(dst, it->second.buf, n * sizeof(float));
    give_buffer(it->second.buf);
    recvs.erase(it);
  };
  auto finish_send = [&](int slot) {
    auto it = act_sends.find(slot);
    if (it == act_sends.end()) return;
    pp_.wait(it->second);
    act_sends.erase(it);
  };

  double loss = 0;
  for (const Action& a : s.ranks[size_t(me)]) {
    switch (a.kind) {
      case ActionKind::recv_act:
      case ActionKind::recv_grad: {
        const bool grad = a.kind == ActionKind::recv_grad;
        Pending p;
        p.buf = take_buffer();
        const int from = s.owner(grad ? a.chunk + 1 : a.chunk - 1);
        p.req = pp_.irecv(p.buf, n, from, tag(grad, a.chunk));
        recvs[key(grad, a.mb, a.chunk)] = p;
        break;
      }
      case ActionKind::forward: {
        const int slot = model_.acquire_slot(a.chunk);
        if (a.chunk > 0) arrive(false, a.mb, a.chunk, model_.slot_input(slot));
        const double t0 = MPI_Wtime();
        const size_t o = size_t(a.mb) * mb_tokens;
        model_.forward_chunk(slot, inputs + o, targets + o, train);
        if (!train && a.chunk == G - 1) loss += model_.loss_chunk(slot);
        be_.synchronize();
        const double t1 = MPI_Wtime();
        busy += t1 - t0;
        note('F', a.mb, a.chunk, t0, t1);
        live[{a.mb, a.chunk}] = slot;
        peak_inflight_ = std::max(peak_inflight_, ++inflight);
        if (!train && a.chunk == G - 1) {  // evaluation keeps nothing
          model_.release_slot(slot);
          live.erase({a.mb, a.chunk});
          --inflight;
        }
        break;
      }
      case ActionKind::send_act: {
        const int slot = live.at({a.mb, a.chunk});
        const double t0 = MPI_Wtime();
        act_sends[slot] = pp_.isend(model_.slot_output(slot), n, s.owner(a.chunk + 1), tag(false, a.chunk + 1));
        note('s', a.mb, a.chunk, t0, MPI_Wtime());
        if (!train) {  // evaluation: the slot is free once its output has left
          finish_send(slot);
          model_.release_slot(slot);
          live.erase({a.mb, a.chunk});
          --inflight;
        }
        break;
      }
      case ActionKind::backward: {
        const int slot = live.at({a.mb, a.chunk});
        if (a.chunk < G - 1) arrive(true, a.mb, a.chunk, model_.boundary_grad());
        const double t0 = MPI_Wtime();
        dpar_.begin_micro_batch(a.mb, M);
        float* lo = logits_out && a.chunk == G - 1 ? logits_out + size_t(a.mb) * mb_tokens * V : nullptr;
        loss += model_.backward_chunk(slot, loss_scale, lo);
        dpar_.end_micro_batch();
        be_.synchronize();
        const double t1 = MPI_Wtime();
        busy += t1 - t0;
        note('B', a.mb, a.chunk, t0, t1);
        finish_send(slot);
        model_.release_slot(slot);
        live.erase({a.mb, a.chunk});
        --inflight;
        break;
      }
      case ActionKind::send_grad: {
        // The boundary gradient is overwritten by the next backward: send a copy.
        const double t0 = MPI_Wtime();
        float* buf = take_buffer();
        be_.copy_bytes(buf, model_.boundary_grad(), n * sizeof(float));
        grad_sends.emplace_back(pp_.isend(buf, n, s.owner(a.chunk - 1), tag(true, a.chunk - 1)), buf);
        note('s', a.mb, a.chunk, t0, MPI_Wtime());
        break;
      }
    }
  }
  for (auto& [slot, req] : act_sends) pp_.wait(req);
  for (auto& [req, buf] : grad_sends) {
    pp_.wait(req);
    give_buffer(buf);
  }
  if (!recvs.empty() || !live.empty()) PENTAD_FATAL("pipeline: the schedule left receives or activations behind");
  busy_ = busy;
  wall_ = MPI_Wtime() - t_start;
  return loss;
}

std::string Pipeline::trace_events(int pid, const std::string& label) const {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"%s\"}},"
                "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
                pid, label.c_str(), pid, pid);
  out += buf;
  for (const Event& e : events_) {
    const char* name = e.kind == 'F' ? "forward" : e.kind == 'B' ? "backward" : e.kind == 'r' ? "idle (wait recv)" : "send";
    const char* cat = e.kind == 'F' || e.kind == 'B' ? "compute" : e.kind == 'r' ? "idle" : "comm";
    std::snprintf(buf, sizeof buf,
                  ",{\"name\":\"%s mb%d c%d\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,"
                  "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"step\":%d,\"op\":\"%s\"}}",
                  e.kind == 'r' ? "wait" : name, e.mb, e.chunk, cat, pid, e.t0 * 1e6, (e.t1 - e.t0) * 1e6,
                  e.step, name);
    out += buf;
  }
  return out;
}

void write_trace(const std::string& path, const std::string& my_events, int root, MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  const int len = int(my_events.size());
  std::vector<int> lens(size_t(size), 0), displs(size_t(size), 0);
  MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, comm));
  std::string all;
  if (rank == root) {
    size_t total = 0;
    for (int r = 0; r < size; ++r) {
      displs[size_t(r)] = int(total);
      total += size_t(lens[size_t(r)]);
    }
    all.resize(total);
  }
  MPI_CHECK(MPI_Gatherv(my_events.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, root,
                        comm));
  if (rank != root) return;
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) PENTAD_FATAL("log.trace: cannot write '" + path + "'");
  std::fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", f);
  size_t pos = 0;
  bool first = true;
  for (int r = 0; r < size; ++r) {
    if (lens[size_t(r)] == 0) continue;
    if (!first) std::fputc(',', f);
    std::fwrite(all.data() + pos, 1, size_t(lens[size_t(r)]), f);
    pos += size_t(lens[size_t(r)]);
    first = false;
  }
  std::fputs("]}\n", f);
  if (std::fclose(f) != 0) PENTAD_FATAL("log.trace: writing '" + path + "' failed");
}

}  // namespace pentad
