// Data parallelism over the dp group, with the three classic optimisations
// and ZeRO sharding (Rajbhandari et al., SC'20):
//  * gradients live in flat buffers cut into buckets of whole units, in
//    backward order; a bucket's reduction is launched (non-blocking) as soon
//    as backward has finished its last unit, overlapping the rest of backward;
//  * with gradient accumulation nothing is reduced before the last
//    micro-batch (zero 0/1; ZeRO-2/3 reduce-scatter every micro-batch since
//    they do not keep a full gradient);
//  * zero 1 shards the AdamW state, zero 2 also the gradients, zero 3 also
//    the parameters, gathered one unit at a time just before use, with the
//    next unit prefetched while the current one computes.
// The flat buffers are padded to S * dp elements; rank r owns [r*S, (r+1)*S).
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "comm/comm.hpp"
#include "config/config.hpp"
#include "model/model.hpp"
#include "parallel/dp/optimizer.hpp"
#include "model/params.hpp"

namespace pentad {

class DataParallel final : public UnitHooks {
 public:
  // Collective over dp (allocations are local; the layout is agreed by construction).
  DataParallel(ParamStore& params, Backend& be, Comm& dp, const TrainConfig& tc, int zero,
               double bucket_mb);
  ~DataParallel() override;
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // MoE: the experts' DataParallel (its own parameter store, reduced over
  // expert_dp). The step and micro-batch events, the unit hooks and the
  // optimizer step are forwarded to it; grad_norm counts it too.
  void set_partner(DataParallel* experts) { partner_ = experts; }
  void init(uint64_t seed);                    // allocate and draw the initial values
  void begin_step();                           // zero the gradient accumulators
  void begin_micro_batch(int mb, int n_mb);    // reductions only on the last one (zero 0/1)
  void end_micro_batch();                      // ZeRO-2/3: finish this micro-batch's reductions
  void finish_backward();                      // wait for every outstanding reduction
  // Global L2 norm of the reduced gradient (with the partner's, whose
  // shards are also summed over ep: every ep rank holds other experts).
  // Collective over dp, tp, pp, and the partner's group and ep.
  double grad_norm(Comm* tp = nullptr, Comm* pp = nullptr, Comm* ep = nullptr);
  // This group's squared norm: shards summed over the group and tp.
  double grad_sum_squares(Comm* tp);
  // Keep a unit's reduction back, every step, after its last grads_ready
  // until release_held (zero 0/1): the pipeline first sums a tied
  // embedding's gradient over the first and last stage.
  void hold_unit(int unit);
  void release_held(int unit);
  void optimizer_step(int step, float lr, float grad_scale);  // update own range, re-share params

  // Host copies of one tensor's whole local values (collective over dp).
  void get_param(int i, float* host);
  void set_param(int i, const float* host);
  void get_grad(int i, float* host);           // the reduced gradient
  void get_moment(int which, int i, float* host);  // which: 0 = m, 1 = v
  void set_moment(int which, int i, const float* host);

  // UnitHooks
  void acquire(int unit, UnitUse use) override;
  void release(int unit, UnitUse use) override;
  void grads_ready(int unit) override;

  // Accounting of the last step.
  int reductions() const { return n_reductions_; }
  double hidden_fraction() const;  // share of reduction time that overlapped backward
  size_t shard_elems() const { return S_; }
  int n_buckets() const { return int(buckets_.size()); }

 private:
  struct Bucket {
    int unit_first = 0, unit_last = 0;  // units [first, last] (ascending)
    size_t lo = 0, hi = 0;              // flat range
    int units = 0;                      // units with parameters in [first, last]
    int pending = 0;                    // zero 0/1: units whose last gradients are not ready yet
    std::vector<int> pending_mb;        // ZeRO-2/3: per micro-batch, units not ready yet
    bool launched = false;              // a reduction of the window is in flight or unwaited
    float* window = nullptr;            // ZeRO-2/3: the gradients not yet reduced
    int request = -1;
    std::chrono::steady_clock::time_point t_launch, t_done;
    bool done_seen = false;
  };
  struct ParamWindow {
    float* buf = nullptr;
    int request = -1;
  };

  std::vector<int> counts_for(size_t lo, size_t hi) const;  // per-rank pieces of [lo, hi)
  size_t own_lo() const { return own_lo_; }
  void launch(Bucket& b);
  void complete(Bucket& b);             // wait, then ZeRO-2/3 accumulate and free the window
  void poll();                          // drive MPI progress, note completions
  void open_grad_window(Bucket& b);
  void start_gather(int unit);
  void free_param_window(int unit);    // ZeRO-3: wait for its gather, free it
  void check_no_param_windows() const;  // ZeRO-3: before the update
  void gather_range(size_t lo, size_t hi, const float* shard, float* dst);
  const float* reduced_grad_shard() const;

  ParamStore& params_;
  DataParallel* partner_ = nullptr;
  Backend& be_;
  Comm& dp_;
  TrainConfig tc_;
  int zero_;
  size_t N_ = 0, S_ = 0, own_lo_ = 0, own_hi_ = 0;
  std::unique_ptr<AdamW> opt_;
  float* p_shard_ = nullptr;   // ZeRO-3: owned parameters
  float* g_shard_ = nullptr;   // ZeRO-2/3: owned reduced gradients
  float* rs_tmp_ = nullptr;    // reduce-scatter landing area (S)
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_unit_;  // -1: no parameters here
  std::vector<bool> held_;
  std::vector<ParamWindow> pwin_;  // ZeRO-3, per unit
  std::vector<int> in_flight_;     // ZeRO-2/3 bucket indices in launch order
  bool last_mb_ = true;
  int mb_ = 0;  // the micro-batch of the running backward action
  int n_reductions_ = 0;
  std::chrono::steady_clock::time_point t_bwd_end_;
};

}  // namespace pentad
