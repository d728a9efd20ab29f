// Builds the Cartesian grid and every per-axis communicator with MPI_Cart_sub
// (and the pipeline's end stages, for tied embeddings, and the copies of a
// key/value head, by MPI_Comm_split).
#include "comm/topology.hpp"

#include "core/error.hpp"

namespace pentad {

GridShape grid_shape(const ParallelConfig& p) {
  return GridShape{p.pp, p.dp, p.ep, p.cp, p.tp};
}

int rank_of(const GridShape& s, const GridCoords& c) {
  const auto d = s.dims();
  const std::array<int, 5> x = {c.pp, c.dp_outer, c.ep, c.cp, c.tp};
  int r = 0;
  for (int i = 0; i < 5; ++i) r = r * d[i] + x[i];
  return r;
}

GridCoords coords_of(const GridShape& s, int rank) {
  const auto d = s.dims();
  std::array<int, 5> x{};
  for (int i = 4; i >= 0; --i) {
    x[i] = rank % d[i];
    rank /= d[i];
  }
  return GridCoords{x[0], x[1], x[2], x[3], x[4]};
}

namespace {
MPI_Comm sub(MPI_Comm cart, std::array<int, 5> remain, const char* name) {
  MPI_Comm c = MPI_COMM_NULL;
  MPI_CHECK(MPI_Cart_sub(cart, remain.data(), &c));
  MPI_CHECK(MPI_Comm_set_name(c, name));
  return c;
}
}  // namespace

Topology::Topology(MPI_Comm job_comm, const ParallelConfig& p, int kv_heads) : shape(grid_shape(p)), job(job_comm) {
  MPI_CHECK(MPI_Comm_size(job, &size));
  if (size != shape.size()) PENTAD_FATAL("grid size does not match the job (validated earlier)");
  auto dims = shape.dims();
  std::array<int, 5> periodic = {1, 0, 0, 1, 0};  // pp and cp wrap around
  MPI_CHECK(MPI_Cart_create(job, 5, dims.data(), periodic.data(), /*reorder=*/0, &cart));
  MPI_CHECK(MPI_Comm_set_name(cart, "pentad.cart"));
  MPI_CHECK(MPI_Comm_rank(cart, &rank));
  std::array<int, 5> c{};
  MPI_CHECK(MPI_Cart_coords(cart, rank, 5, c.data()));
  me = GridCoords{c[0], c[1], c[2], c[3], c[4]};
  if (!(coords_of(shape, rank) == me)) PENTAD_FATAL("MPI_Cart_coords disagrees with coords_of");
  //                    pp dp/ep ep cp tp
  tp = sub(cart, {0, 0, 0, 0, 1}, "pentad.tp");
  cp = sub(cart, {0, 0, 0, 1, 0}, "pentad.cp");
  ep = sub(cart, {0, 0, 1, 0, 0}, "pentad.ep");
  dp = sub(cart, {0, 1, 1, 0, 0}, "pentad.dp");
  dp_cp = sub(cart, {0, 1, 1, 1, 0}, "pentad.dp_cp");
  expert_dp = sub(cart, {0, 1, 0, 1, 0}, "pentad.expert_dp");
  pp = sub(cart, {1, 0, 0, 0, 0}, "pentad.pp");
  const ScheduleKind kind = train_schedule_kind(p.pp, p.virtual_stages, p.schedule);
  head_stage = chunk_owner(chunk_placement(kind), p.pp, p.pp * p.virtual_stages - 1);
  const bool at_end = is_first_stage() || holds_head();
  if (ends_apart()) {
    MPI_CHECK(MPI_Comm_split(pp, at_end ? 0 : MPI_UNDEFINED, me.pp, &pp_ends));
    if (pp_ends != MPI_COMM_NULL) MPI_CHECK(MPI_Comm_set_name(pp_ends, "pentad.pp_ends"));
  }
  if (kv_heads > 1 && shape.tp > kv_heads) {  // tp rank r holds head r * kv_heads / tp (kv_part)
    MPI_CHECK(MPI_Comm_split(tp, me.tp * kv_heads / shape.tp, me.tp, &kv_copies));
    MPI_CHECK(MPI_Comm_set_name(kv_copies, "pentad.kv_copies"));
  }
}

Topology::~Topology() {
  for (MPI_Comm* c : {&kv_copies, &pp_ends, &tp, &cp, &ep, &dp, &dp_cp, &expert_dp, &pp, &cart}) {
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  }
}

std::string Topology::describe() const {
  return "pp=" + std::to_string(shape.pp) + " dp=" + std::to_string(shape.dp) +
         " (ep=" + std::to_string(shape.ep) + ") cp=" + std::to_string(shape.cp) +
         " tp=" + std::to_string(shape.tp);
}

}  // namespace pentad
