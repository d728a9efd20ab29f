// The pipeline executor (see pipeline.hpp): run walks the rank's action
// list and hands each action to the step for its kind, over one Run's
// bookkeeping (posted receives, live slots, sends in flight); the timed
// actions become Chrome-trace events, written with nlohmann-json.
#include "parallel/pp/pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "backend/backend.hpp"
#include "comm/comm.hpp"
#include "comm/host.hpp"
#include "parallel/dp/data_parallel.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "model/model.hpp"

namespace pentad {

Pipeline::Pipeline(Model& model, Backend& be, Comm& pp, DataParallel& dpar, Schedule train, Schedule eval,
                   bool grouped)
    : model_(model), be_(be), pp_(pp), dpar_(dpar), train_(std::move(train)), eval_(std::move(eval)),
      grouped_(grouped) {
  if (train_.pp != pp.size() || train_.n_chunks() != model.n_chunks())
    throw std::logic_error("Pipeline: schedule does not match the pp group or the model's chunks");
  if (grouped_ && !pp.supports(CommOp::group))
    throw std::logic_error("Pipeline: grouped messages on a comm without groups");
  if (grouped_) {
    train_plan_ = plan_of(train_);
    eval_plan_ = plan_of(eval_);
  }
}

// The plan's build replays every rank, so a schedule it cannot serve fails
// here on every rank alike, before any message moves.
P2pPlan Pipeline::plan_of(const Schedule& s) {
  try {
    return make_p2p_plan(s);
  } catch (const std::invalid_argument& e) {
    PENTAD_FATAL(std::string(e.what()) + "; set parallel.pp_p2p = eager on a comm with lone sends");
  }
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
  return run(train_, grouped_ ? &train_plan_ : nullptr, true, inputs, targets, loss_scale, logits_out);
}

double Pipeline::eval(const int32_t* inputs, const int32_t* targets, const Schedule& forward_only,
                      double* row_losses) {
  const bool was = tracing_;
  tracing_ = false;
  const double busy = busy_, wall = wall_;
  const int peak = peak_inflight_, peak_w = peak_deferred_w_;
  const size_t peak_w_bytes = peak_deferred_w_bytes_;
  P2pPlan other;
  const P2pPlan* plan = nullptr;
  if (grouped_) plan = &forward_only == &eval_ ? &eval_plan_ : &(other = plan_of(forward_only));
  const double loss = run(forward_only, plan, false, inputs, targets, 0.0f, nullptr, row_losses);
  busy_ = busy, wall_ = wall, peak_inflight_ = peak;  // report the training step's figures
  peak_deferred_w_ = peak_w, peak_deferred_w_bytes_ = peak_w_bytes;
  tracing_ = was;
  return loss;
}

// ---- the executor ---------------------------------------------------------------

namespace {

struct Pending {
  float* buf = nullptr;
  Comm::Request req = -1;  // eager: its receive
  int group = -1;          // grouped: the started group it arrives in
};

// Grouped: a group started and not yet waited for; what it holds until then.
struct StartedGroup {
  Comm::Group reqs;
  std::vector<std::pair<int, int>> acts;  // (mb, chunk): slots whose output it sends
  std::vector<float*> grad_copies;        // gradient copies it sends
  P2pMessage shown;                       // named in the trace
  bool done = false;
};

// A receive is keyed by the chunk that consumes it and its micro-batch.
std::pair<int, int> recv_key(bool grad, int mb, int chunk) { return {grad ? -1 - chunk : chunk, mb}; }

}  // namespace

struct Pipeline::Run {
  Run(const Schedule& s_, bool train_, const int32_t* inputs_, const int32_t* targets_, float loss_scale_,
      float* logits_out_, double* row_losses_, const Model& model)
      : s(s_), train(train_), inputs(inputs_), targets(targets_), loss_scale(loss_scale_), logits_out(logits_out_),
        row_losses(row_losses_), mb_rows(size_t(model.micro_batch())), mb_tokens(model.tokens_per_micro_batch()), n(model.boundary_elems()),
        V(size_t(model.config().vocab_size)) {}
  const Schedule& s;
  bool train;
  const int32_t* inputs;
  const int32_t* targets;
  float loss_scale;
  float* logits_out;
  double* row_losses;  // evaluation: (m, B) per-sequence loss sums, or null
  size_t mb_rows;      // sequences of one micro-batch (B)
  size_t mb_tokens;  // this rank's tokens of one micro-batch (B x seq_len/cp)
  size_t n;          // elements of one boundary message
  size_t V;
  std::map<std::pair<int, int>, Pending> recvs;  // recv_key -> posted receive
  std::map<std::pair<int, int>, int> live;       // (mb, chunk) -> slot
  std::map<int, Comm::Request> act_sends;        // slot -> its output's send
  std::vector<std::pair<Comm::Request, float*>> grad_sends;
  // Grouped: outputs whose send waits for its group. Activations stay in
  // their slot ((mb, chunk) of the sender); gradients in a copy, keyed by
  // the consuming chunk.
  std::set<std::pair<int, int>> unsent_acts;
  std::map<std::pair<int, int>, float*> unsent_grads;
  // Grouped: the groups started (index = Pending::group), and for each slot
  // whose output a group not yet waited for sends, that group.
  std::vector<StartedGroup> groups;
  std::map<std::pair<int, int>, int> sending_group;
  int inflight = 0, deferred_w = 0;  // slots live; of them, B done and W not
  size_t deferred_w_bytes = 0;
  double busy = 0, loss = 0;
  const P2pPlan* plan = nullptr;  // grouped messages (null: eager)
};

void Pipeline::note(char kind, int mb, int chunk, double t0, double t1, int group) {
  if (tracing_) events_.push_back({trace_step_, kind, mb, chunk, t0 - t_origin_, t1 - t_origin_, group});
}

// The time spent waiting is idle (the bubble).
void Pipeline::arrive(Run& r, bool grad, int mb, int chunk, float* dst) {
  auto it = r.recvs.find(recv_key(grad, mb, chunk));
  if (it == r.recvs.end()) PENTAD_FATAL("pipeline: a compute action found no posted receive (schedule bug)");
  if (it->second.req >= 0) {  // eager: its own receive
    const double t0 = host::wtime();
    pp_.wait(it->second.req);
    note('r', mb, chunk, t0, host::wtime());
  }
  if (it->second.group >= 0) finish_group(r, it->second.group);
  be_.copy_bytes(dst, it->second.buf, r.n * sizeof(float));
  give_buffer(it->second.buf);
  r.recvs.erase(it);
}

// Grouped: waits for a started group (the time is idle) and releases what
// it held: the gradient copies, and under evaluation the slots it sent from.
void Pipeline::finish_group(Run& r, int index) {
  StartedGroup& g = r.groups[size_t(index)];
  if (g.done) return;
  const double t0 = host::wtime();
  pp_.wait_group(g.reqs);
  note('r', g.shown.mb, g.shown.chunk, t0, host::wtime(), index);
  g.done = true;
  for (float* b : g.grad_copies) give_buffer(b);
  for (const auto& [mb, chunk] : g.acts) {
    r.sending_group.erase({mb, chunk});
    if (!r.train) retire(r, mb, chunk, r.live.at({mb, chunk}));  // evaluation keeps nothing
  }
}

void Pipeline::finish_send(Run& r, int slot) {
  auto it = r.act_sends.find(slot);
  if (it == r.act_sends.end()) return;
  pp_.wait(it->second);
  r.act_sends.erase(it);
}

void Pipeline::retire(Run& r, int mb, int chunk, int slot) {
  if (r.unsent_acts.count({mb, chunk}) || r.sending_group.count({mb, chunk}))
    PENTAD_FATAL("pipeline: a slot retired before its output was sent (plan bug)");
  model_.release_slot(slot);
  r.live.erase({mb, chunk});
  --r.inflight;
}

void Pipeline::post_recv(Run& r, const Action& a) {
  const bool grad = a.kind == ActionKind::recv_grad;
  Pending p;
  p.buf = take_buffer();
  const int from = r.s.owner(grad ? a.chunk + 1 : a.chunk - 1);
  p.req = pp_.irecv(p.buf, r.n, from, tag(grad, a.chunk));
  r.recvs[recv_key(grad, a.mb, a.chunk)] = p;
}

void Pipeline::run_forward(Run& r, const Action& a) {
  const bool last = a.chunk == r.s.n_chunks() - 1;
  const int slot = model_.acquire_slot(a.chunk);
  if (a.chunk > 0) arrive(r, false, a.mb, a.chunk, model_.slot_input(slot));
  const double t0 = host::wtime();
  const size_t o = size_t(a.mb) * r.mb_tokens;
  model_.forward_chunk(slot, r.inputs + o, r.targets + o, r.train);
  if (!r.train && last)
    r.loss += model_.loss_chunk(slot, r.row_losses ? r.row_losses + size_t(a.mb) * r.mb_rows : nullptr);
  be_.synchronize();
  const double t1 = host::wtime();
  r.busy += t1 - t0;
  note('F', a.mb, a.chunk, t0, t1);
  r.live[{a.mb, a.chunk}] = slot;
  peak_inflight_ = std::max(peak_inflight_, ++r.inflight);
  if (!r.train && last) retire(r, a.mb, a.chunk, slot);  // evaluation keeps nothing
}

void Pipeline::send_act(Run& r, const Action& a) {
  const int slot = r.live.at({a.mb, a.chunk});
  if (r.plan) {  // it leaves in its group; evaluation frees the slot there
    r.unsent_acts.insert({a.mb, a.chunk});
    return;
  }
  const double t0 = host::wtime();
  r.act_sends[slot] = pp_.isend(model_.slot_output(slot), r.n, r.s.owner(a.chunk + 1), tag(false, a.chunk + 1));
  note('s', a.mb, a.chunk, t0, host::wtime());
  if (!r.train) {  // evaluation: the slot is free once its output has left
    finish_send(r, slot);
    retire(r, a.mb, a.chunk, slot);
  }
}

void Pipeline::run_backward(Run& r, const Action& a) {
  const int G = r.s.n_chunks();
  const int slot = r.live.at({a.mb, a.chunk});
  // Grouped: the slot's output has left before its backward (the replay
  // waits here too); this backward's input gradient next.
  if (auto it = r.sending_group.find({a.mb, a.chunk}); it != r.sending_group.end()) finish_group(r, it->second);
  if (a.chunk < G - 1) arrive(r, true, a.mb, a.chunk, model_.boundary_grad());
  const double t0 = host::wtime();
  dpar_.begin_micro_batch(a.mb, r.s.m);
  float* lo = r.logits_out && a.chunk == G - 1 ? r.logits_out + size_t(a.mb) * r.mb_tokens * r.V : nullptr;
  const bool split = a.kind == ActionKind::backward_input;
  r.loss += split ? model_.backward_input_chunk(slot, r.loss_scale, lo) : model_.backward_chunk(slot, r.loss_scale, lo);
  dpar_.end_micro_batch();
  be_.synchronize();
  const double t1 = host::wtime();
  r.busy += t1 - t0;
  note('B', a.mb, a.chunk, t0, t1);
  finish_send(r, slot);
  if (!split) {
    retire(r, a.mb, a.chunk, slot);
    return;
  }
  // The slot (activations and W's inputs) lives on until its W.
  peak_deferred_w_ = std::max(peak_deferred_w_, ++r.deferred_w);
  r.deferred_w_bytes += model_.deferred_w_bytes(slot);
  peak_deferred_w_bytes_ = std::max(peak_deferred_w_bytes_, r.deferred_w_bytes);
}

// W: the weight gradients of a chunk whose B ran; its grads_ready (and so
// the dp bucket's reduction) comes here, after the micro-batch's last W.
void Pipeline::run_weight(Run& r, const Action& a) {
  const int slot = r.live.at({a.mb, a.chunk});
  const double t0 = host::wtime();
  dpar_.begin_micro_batch(a.mb, r.s.m);
  model_.backward_weight_chunk(slot);
  dpar_.end_micro_batch();
  be_.synchronize();
  const double t1 = host::wtime();
  r.busy += t1 - t0;
  note('W', a.mb, a.chunk, t0, t1);
  --r.deferred_w;
  r.deferred_w_bytes -= model_.deferred_w_bytes(slot);
  retire(r, a.mb, a.chunk, slot);
}

void Pipeline::send_grad(Run& r, const Action& a) {
  // The boundary gradient is overwritten by the next backward: send a copy.
  const double t0 = host::wtime();
  float* buf = take_buffer();
  be_.copy_bytes(buf, model_.boundary_grad(), r.n * sizeof(float));
  if (r.plan) {  // it leaves in its group
    r.unsent_grads[{a.mb, a.chunk - 1}] = buf;
    return;
  }
  r.grad_sends.emplace_back(pp_.isend(buf, r.n, r.s.owner(a.chunk - 1), tag(true, a.chunk - 1)), buf);
  note('s', a.mb, a.chunk, t0, host::wtime());
}

// Grouped: the sends (outputs computed earlier) and receives (into pool
// buffers, found later by arrive) of one group, started together. Training
// goes on and waits for the group where an action needs it
// (p2p_waits_deferred): arrive for a receive, the backward of a slot it
// sends from, finish_run for the rest; evaluation waits for it here.
void Pipeline::run_group(Run& r, const P2pGroup& g) {
  if (g.empty()) return;
  const int index = int(r.groups.size());
  StartedGroup started;
  std::vector<Comm::P2pOp> ops;
  for (const P2pMessage& m : g.sends) {
    const int to = p2p_dest(r.s, m);
    if (m.grad) {
      auto it = r.unsent_grads.find({m.mb, m.chunk});
      if (it == r.unsent_grads.end()) PENTAD_FATAL("pipeline: the plan sends a gradient not computed yet (plan bug)");
      ops.push_back({it->second, nullptr, r.n, to});
      started.grad_copies.push_back(it->second);
      r.unsent_grads.erase(it);
    } else {
      const std::pair<int, int> from{m.mb, m.chunk - 1};
      if (!r.unsent_acts.erase(from)) PENTAD_FATAL("pipeline: the plan sends an activation not computed yet (plan bug)");
      ops.push_back({model_.slot_output(r.live.at(from)), nullptr, r.n, to});
      started.acts.push_back(from);
      r.sending_group[from] = index;
    }
  }
  for (const P2pMessage& m : g.recvs) {
    Pending p;
    p.buf = take_buffer();
    p.group = index;
    r.recvs[recv_key(m.grad, m.mb, m.chunk)] = p;
    ops.push_back({nullptr, p.buf, r.n, p2p_source(r.s, m)});
  }
  started.shown = g.recvs.empty() ? g.sends.back() : g.recvs.back();
  const double t0 = host::wtime();
  started.reqs = pp_.start_group(ops);
  note('g', started.shown.mb, started.shown.chunk, t0, host::wtime(), index);
  r.groups.push_back(std::move(started));
  if (!p2p_waits_deferred(r.s)) finish_group(r, index);
}

void Pipeline::finish_run(Run& r) {
  for (size_t i = 0; i < r.groups.size(); ++i) finish_group(r, int(i));
  for (auto& [slot, req] : r.act_sends) pp_.wait(req);
  for (auto& [req, buf] : r.grad_sends) {
    pp_.wait(req);
    give_buffer(buf);
  }
  if (!r.recvs.empty() || !r.live.empty() || !r.unsent_acts.empty() || !r.unsent_grads.empty() ||
      !r.sending_group.empty())
    PENTAD_FATAL("pipeline: the schedule left receives, sends or activations behind");
}

// Collective over pp (the schedule pairs every send with its receive).
double Pipeline::run(const Schedule& s, const P2pPlan* plan, bool train, const int32_t* inputs,
                     const int32_t* targets, float loss_scale, float* logits_out, double* row_losses) {
  Run r(s, train, inputs, targets, loss_scale, logits_out, row_losses, model_);
  r.plan = plan;
  const double t_start = host::wtime();
  if (t_origin_ < 0) t_origin_ = t_start;
  peak_inflight_ = 0;
  peak_deferred_w_ = 0;
  peak_deferred_w_bytes_ = 0;
  const std::vector<Action>& list = s.ranks[size_t(pp_.rank())];
  for (size_t i = 0; i < list.size(); ++i) {
    const Action& a = list[i];
    if (plan) run_group(r, plan->before[size_t(pp_.rank())][i]);
    switch (a.kind) {
      case ActionKind::recv_act:
      case ActionKind::recv_grad:
        if (!plan) post_recv(r, a);  // grouped: the plan posts its own
        break;
      case ActionKind::forward: run_forward(r, a); break;
      case ActionKind::send_act: send_act(r, a); break;
      case ActionKind::backward: run_backward(r, a); break;
      case ActionKind::send_grad: send_grad(r, a); break;
      case ActionKind::backward_input: run_backward(r, a); break;
      case ActionKind::backward_weight: run_weight(r, a); break;
    }
  }
  if (plan) run_group(r, plan->before[size_t(pp_.rank())][list.size()]);
  finish_run(r);
  busy_ = r.busy;
  wall_ = host::wtime() - t_start;
  return r.loss;
}

// ---- the trace ------------------------------------------------------------------

namespace {

// Seconds -> microseconds with three decimals (the trace's resolution).
double trace_us(double s) { return std::round(s * 1e6 * 1e3) / 1e3; }

}  // namespace

std::string Pipeline::trace_events(int pid, const std::string& label) const {
  using nlohmann::ordered_json;
  ordered_json out = ordered_json::array();
  out.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", label}}}});
  out.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"args", {{"sort_index", pid}}}});
  for (const Event& e : events_) {
    const char* name = e.kind == 'F'   ? "forward"
                       : e.kind == 'B' ? "backward"
                       : e.kind == 'W' ? "weight gradients"
                       : e.kind == 'r' ? "idle (wait recv)"
                       : e.kind == 'g' ? "group started"
                                       : "send";
    const char* cat = e.kind == 'F' || e.kind == 'B' || e.kind == 'W' ? "compute" : e.kind == 'r' ? "idle" : "comm";
    const std::string shown = std::string(e.kind == 'r' ? "wait" : name) + " mb" + std::to_string(e.mb) + " c" +
                              std::to_string(e.chunk);
    out.push_back({{"name", shown},
                   {"cat", cat},
                   {"ph", "X"},
                   {"pid", pid},
                   {"tid", 0},
                   {"ts", trace_us(e.t0)},
                   {"dur", trace_us(e.t1 - e.t0)},
                   {"args", e.group >= 0 ? ordered_json{{"step", e.step}, {"op", name}, {"group", e.group}}
                                         : ordered_json{{"step", e.step}, {"op", name}}}});
  }
  return out.dump();
}

// Collective over comm.
void write_trace(const std::string& path, const std::string& my_events, int root, MPI_Comm comm) {
  const std::vector<std::string> all = host::gather_strings(comm, my_events, root);
  if (host::rank(comm) != root) return;
  nlohmann::ordered_json doc;
  doc["displayTimeUnit"] = "ms";
  nlohmann::ordered_json& events = doc["traceEvents"] = nlohmann::ordered_json::array();
  for (const std::string& text : all) {
    if (text.empty()) continue;
    for (auto& e : nlohmann::ordered_json::parse(text)) events.push_back(std::move(e));
  }
  // Atomic (core/fs): a full disk leaves the previous trace, not half of one.
  if (FsStatus e = write_file_atomic(path, doc.dump() + "\n")) {
    if (e->step == FsStep::create) PENTAD_FATAL("log.trace: cannot write '" + path + "': " + e->message());
    PENTAD_FATAL("log.trace: writing '" + path + "' failed: " + e->message());
  }
}

}  // namespace pentad
