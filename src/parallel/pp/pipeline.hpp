// The one executor of pipeline schedules (schedule.hpp): it walks this
// rank's action list, posting non-blocking receives one compute action ahead
// of their use and sending each chunk's output (activations forward,
// gradients backward) as soon as it is computed, over the pp group; or, on
// a comm whose messages come in groups (NCCL), moving them as the schedule's
// grouped plan says (p2p_plan.hpp). The same
// executor runs the single-stage case (pp = 1: forward, backward, forward,
// ...), so every layout trains through the same code.
// It times every action; the step's bubble is idle over busy time per rank
// (comparable to the textbook (pp - 1) / m), and with a trace file the
// actions become a Chrome-trace timeline (Perfetto, chrome://tracing).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/pp/p2p_plan.hpp"
#include "parallel/pp/schedule.hpp"

namespace pentad {

class Backend;
class Comm;
class DataParallel;
class Model;

class Pipeline {
 public:
  // pp: the pipeline group (rank = stage). dpar is told which micro-batch a
  // backward belongs to (gradient reduction starts after each chunk's last).
  // grouped: the messages move as p2p_plan.hpp's groups (NCCL's way, any
  // comm with CommOp::group), else receives are posted early and sends eager.
  Pipeline(Model& model, Backend& be, Comm& pp, DataParallel& dpar, Schedule train, Schedule eval,
           bool grouped = false);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // One training step's micro-batches: inputs/targets hold m micro-batches
  // of (B, T) tokens, back to back. Returns this rank's loss sum (non-zero on
  // the last stage only). logits_out: (m, B, T, V) on the last stage, or null.
  double train_step(const int32_t* inputs, const int32_t* targets, float loss_scale, float* logits_out);
  // Forward-only over the eval schedule's micro-batches; the loss sum (last stage).
  double eval(const int32_t* inputs, const int32_t* targets) { return eval(inputs, targets, eval_); }
  // The same over another forward_only schedule (another count of micro-batches).
  // With row_losses ((m, B) values, written on the last stage only): each
  // sequence's loss sum over this rank's tokens of it (Model::loss_chunk).
  double eval(const int32_t* inputs, const int32_t* targets, const Schedule& forward_only,
              double* row_losses = nullptr);

  const Schedule& schedule() const { return train_; }
  bool grouped() const { return grouped_; }  // messages as p2p_plan.hpp's groups
  // The last train_step: busy (compute) and wall seconds on this rank, and
  // the most activation slots alive at once.
  double busy_s() const { return busy_; }
  double wall_s() const { return wall_; }
  double bubble() const { return busy_ > 0 ? (wall_ - busy_) / busy_ : 0.0; }
  int peak_inflight() const { return peak_inflight_; }
  // Split-backward schedules: the most W actions pending at once (B done),
  // and the most bytes their kept inputs held at once (the slots' activations
  // not counted).
  int peak_deferred_w() const { return peak_deferred_w_; }
  size_t peak_deferred_w_bytes() const { return peak_deferred_w_bytes_; }

  // Record the actions of the next train_steps (trace_step labels them).
  void set_tracing(bool on, int step) {
    tracing_ = on;
    trace_step_ = step;
  }
  // Chrome-trace JSON events of the traced steps (this rank's process id
  // `pid`), as the text of one JSON array, for write_trace.
  std::string trace_events(int pid, const std::string& label) const;

 private:
  struct Event {
    int step;
    char kind;      // 'F', 'B', 'W', 'r' (waiting for a receive or a group), 's' (send posted),
                    // 'g' (a group started), 'D' (dp wait)
    int mb, chunk;
    double t0, t1;  // seconds since the run's first step
    int group;      // 'g' and a group's 'r': the group's index in its step (-1: none)
  };
  struct Run;  // one run's inputs and bookkeeping (pipeline.cpp)
  double run(const Schedule& s, const P2pPlan* plan, bool train, const int32_t* inputs, const int32_t* targets,
             float loss_scale, float* logits_out, double* row_losses = nullptr);
  void run_group(Run& r, const P2pGroup& g);  // grouped: start one group of the plan
  void finish_group(Run& r, int index);        // grouped: wait for a started group
  // The steps of run, one per kind of action. Receives and sends are over pp.
  void post_recv(Run& r, const Action& a);
  void run_forward(Run& r, const Action& a);
  void send_act(Run& r, const Action& a);
  void run_backward(Run& r, const Action& a);  // a fused backward, or a B
  void run_weight(Run& r, const Action& a);    // a W
  void send_grad(Run& r, const Action& a);
  void arrive(Run& r, bool grad, int mb, int chunk, float* dst);  // wait for a posted receive
  void finish_send(Run& r, int slot);                             // wait for a slot's output send
  void retire(Run& r, int mb, int chunk, int slot);               // the slot's activations are done
  void finish_run(Run& r);                                        // wait for the sends, check the state
  void note(char kind, int mb, int chunk, double t0, double t1, int group = -1);
  static P2pPlan plan_of(const Schedule& s);  // make_p2p_plan, or the job ends naming the schedule
  float* take_buffer();
  void give_buffer(float* b);
  int tag(bool grad, int chunk) const;  // keyed by the chunk that consumes the message

  Model& model_;
  Backend& be_;
  Comm& pp_;
  DataParallel& dpar_;
  Schedule train_, eval_;
  bool grouped_;
  P2pPlan train_plan_, eval_plan_;  // grouped only
  std::vector<float*> free_bufs_, all_bufs_;
  double busy_ = 0, wall_ = 0;
  int peak_inflight_ = 0, peak_deferred_w_ = 0;
  size_t peak_deferred_w_bytes_ = 0;
  bool tracing_ = false;
  int trace_step_ = 0;
  double t_origin_ = -1;
  std::vector<Event> events_;
};

// Gathers every rank's events to `root` of `comm` and writes one Chrome-trace
// JSON file there. Collective over comm.
void write_trace(const std::string& path, const std::string& my_events, int root, MPI_Comm comm);

}  // namespace pentad
