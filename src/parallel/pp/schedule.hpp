// Pipeline schedules as data (ARCHITECTURE.md section 6). A generator turns
// (kind, pp, virtual stages v, micro-batches m) into one list of actions per
// pipeline rank; one executor (pipeline.hpp) runs any list, and a checker
// validates a list without MPI: every send has its receive, the order cannot
// deadlock, and the activation high-water mark per rank is the expected one.
//
// The model is cut into pp * v chunks of consecutive blocks. Round robin
// (every schedule but zbv): chunk g lives on pipeline rank g % pp, so with
// v > 1 each rank holds v non-adjacent chunks (rank r: chunks r, r + pp,
// r + 2pp, ...). The V (zbv, v = 2): chunk g < pp on rank g, chunk g >= pp
// on rank 2pp - 1 - g, so rank r holds chunks r and 2pp - 1 - r, the first
// and the last chunk are both on rank 0, and the turn of the V (chunk pp - 1
// to pp) stays on rank pp - 1 (a message the rank sends itself). Activations
// flow g -> g + 1 in forward and gradients g + 1 -> g in backward. The first
// chunk also runs the embedding, the last one the final norm, the head and
// the loss.
#pragma once

#include <string>
#include <vector>

namespace pentad {

enum class ScheduleKind { afab, one_f_one_b, interleaved, zbh1, zbv, forward_only };

// Where the chunks live (see above).
enum class ChunkPlacement { round_robin, v_shape };
ChunkPlacement chunk_placement(ScheduleKind k);  // v_shape for zbv
// The pipeline rank holding chunk g of the pp * v chunks.
int chunk_owner(ChunkPlacement p, int pp, int g);

// backward: B and W fused (every schedule but the zero-bubble ones);
// backward_input / backward_weight: the two halves, B then W, of one backward.
enum class ActionKind {
  forward,
  backward,
  recv_act,
  send_act,
  recv_grad,
  send_grad,
  backward_input,
  backward_weight
};

// Does the schedule split each backward into B and W actions?
bool splits_backward(ScheduleKind k);

// One step of a rank's list. recv_* post a non-blocking receive for the
// input of (mb, chunk) (placed one compute action ahead of its use); send_*
// send the output of (mb, chunk) right after it is computed.
struct Action {
  ActionKind kind;
  int mb;
  int chunk;  // global chunk index in [0, pp * v)
  bool operator==(const Action&) const = default;
};

struct Schedule {
  ScheduleKind kind = ScheduleKind::one_f_one_b;
  ChunkPlacement placement = ChunkPlacement::round_robin;
  int pp = 1, v = 1, m = 1;
  std::vector<std::vector<Action>> ranks;  // [pp rank] -> actions in order

  int n_chunks() const { return pp * v; }
  int owner(int chunk) const { return chunk_owner(placement, pp, chunk); }
};

// "afab" | "1f1b" | "interleaved" | "zbh1" | "zbv" -> kind, for `pentad schedule --kind`
// (the deck's parallel.schedule is parsed by the config schema).
ScheduleKind parse_schedule_kind(const std::string& name);
const char* schedule_name(ScheduleKind k);

// The schedule a training step runs: without a pipeline (pp = 1, v = 1)
// always 1f1b (one micro-batch's activations at a time), else the deck's
// parallel.schedule. The trainer and the planner both ask this function.
ScheduleKind train_schedule_kind(int pp, int v, ScheduleKind schedule);

// "" when (kind, pp, v, m) can be scheduled, else a message naming the deck
// keys (parallel.schedule, parallel.pp, parallel.virtual_stages,
// train.grad_accum = m).
std::string schedule_problem(ScheduleKind kind, int pp, int v, int m);

// The same for a block split (partition_blocks' boundaries, n_chunks + 1):
// the zero-bubble schedules need a block in every chunk (a W with no matmul
// to run would leave its bubble unfilled, and an empty chunk on the V's
// turn is a pure copy). "" when the split is usable.
std::string stage_split_problem(ScheduleKind kind, const std::vector<int>& chunk_blocks);

// Throws std::invalid_argument with schedule_problem()'s message. The
// chunks are placed as the kind places them; forward_only (evaluation)
// takes the placement of the training schedule it runs beside.
Schedule make_schedule(ScheduleKind kind, int pp, int v, int m);
Schedule make_schedule(ScheduleKind kind, int pp, int v, int m, ChunkPlacement placement);

// The in-flight (mb, chunk) activation sets rank r holds at most: m for
// afab, min(pp - r, m) for 1f1b, min(warm-up + 1, m v) for interleaved with
// warm-up = 2 (pp - r - 1) + (v - 1) pp, min(pp, m) for zbh1 (a slot lives
// from F to W: 1F1B's rank-0 bound on every rank), min(2 pp, 2 m) for zbv
// (the generator's cap: 2 pp half-stage slots, the bytes of 1F1B's rank-0
// bound when the chunks are balanced), and 1 for forward_only (evaluation
// keeps nothing for a backward).
int expected_inflight(ScheduleKind kind, int pp, int v, int m, int rank);

// The W actions rank r holds deferred at most (B done, W not yet): r + 1 for
// zbh1 (rank r keeps r of them pending through the steady state), 0 for the
// schedules with a fused backward. zbv has no closed form (its generator
// fills idle time with W greedily); it returns the bound, the in-flight cap
// min(2 pp, 2 m), and the checker's replay gives the exact count.
int expected_deferred_w(ScheduleKind kind, int pp, int v, int m, int rank);
// Is expected_deferred_w an exact count (true) or a bound (zbv)?
bool deferred_w_exact(ScheduleKind kind);

// The textbook bubble of the schedule, as idle time over busy time per rank:
// (pp - 1) / m, and (pp - 1) / (v m) for interleaved. zbh1 (Qi et al. 2024,
// section 3.1): the idle time per rank is (pp - 1)(t_F + t_B - t_W) over a
// busy m (t_F + t_B + t_W), i.e. (pp - 1) / (3 m) with t_F = t_B = t_W.
// zbv: the paper's zero bubble (idle (pp - 1)(t_F + t_B - 2 t_W) per stage
// beyond the fill) is zero at t_F = t_B = t_W, but a step that ends
// together on every rank (the global gradient norm, the loss) still pays the
// fill of the V's first leg: rank r cannot start before r chunk forwards
// have passed, so (pp - 1) chunk units idle over a busy 6 m, (pp - 1) / (6 m).
double bubble_formula(ScheduleKind kind, int pp, int v, int m);

struct ScheduleCheck {
  std::string error;                 // "" when the schedule is valid
  std::vector<int> peak_inflight;    // per rank, (mb, chunk) activation sets
  std::vector<int> peak_deferred_w;  // per rank, W actions pending (B done, W not)
  // A timed replay with forward = t_f and backward = t_b per chunk,
  // communication free: per-rank idle / busy over the step's makespan.
  std::vector<double> sim_bubble;
  double sim_makespan = 0;
  // The same replay's timeline, [rank][action]: when a compute action
  // starts (after its input arrives); a send, when its output exists; a
  // receive, 0. Filled for a valid schedule.
  std::vector<std::vector<double>> start;
  bool ok() const { return error.empty(); }
};

// Replays the lists without MPI. t_f, t_b: cost of one chunk's forward and
// (whole) backward in the timed replay; a split backward costs t_b - t_w for
// B and t_w for W, with t_w < 0 meaning t_b / 2.
ScheduleCheck check_schedule(const Schedule& s, double t_f = 1.0, double t_b = 2.0, double t_w = -1.0);

// Blocks per chunk: chunk g holds blocks [b[g], b[g+1]) of n_layers, for
// n_chunks = pp * virtual_stages. stage_layers "" = balanced: n_layers /
// n_chunks each, the remainder one more to chunks 1, 2, ... (the middle
// ones first, then chunk 0, then the last: the first chunk also embeds and
// the last runs the head and the loss). Otherwise a comma-separated count
// per chunk. Throws std::invalid_argument naming parallel.stage_layers.
std::vector<int> partition_blocks(int n_layers, int n_chunks, const std::string& stage_layers);

// Human-readable per-rank lists, e.g. "rank 0: F0.0 F1.0 B0.0 ..." (a fused
// backward and a B are both "B"; a W is "W").
std::string describe_schedule(const Schedule& s);

}  // namespace pentad
