// Checkpoints under MPI: tensors with exactly predictable contents
// f(name, step, global index) are saved under one split of blocks over the
// ranks and loaded under another, then compared bitwise; plus pruning, the
// `latest` pointer, every error path (signature, shape, missing tensor,
// corrupted chunk, truncated / zeroed / foreign file) raised on every rank,
// the llm.c export, and signals. Extra modes for the crash-safety script and
// the throughput figures:
//   test_checkpoint [DIR] [--gtest_...]   the tests (DIR: scratch, default /tmp)
//   test_checkpoint --write-loop DIR [N]  save N checkpoints (default: until killed)
//   test_checkpoint --verify-latest DIR   load DIR's latest under this job's split, verify
//   test_checkpoint --bench DIR MB        save + load throughput of an MB-sized checkpoint
// GTest on every rank (tests/lib/gtest_mpi_main.cpp); the modes are its add_mode.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <source_location>
#include <span>
#include <string>
#include <vector>

#include "io/checkpoint.hpp"
#include "core/error.hpp"
#include "io/h5io.hpp"
#include "../lib/close.hpp"
#include "../lib/gtest_mpi.hpp"

using namespace pentad;
namespace fs = std::filesystem;

namespace {

int g_rank = 0, g_size = 1;  // set by init_job() once MPI is up

void init_job() {
  g_rank = pentad::test::job_rank();
  g_size = pentad::test::job_size();
}

// A non-fatal GTest failure at the caller's line (printed by this rank).
void check(bool ok, const std::string& what, std::source_location at = std::source_location::current()) {
  if (!ok) ADD_FAILURE_AT(at.file_name(), int(at.line())) << what;
}

// ---------------------------------------------------------------- contents

uint64_t hash_str(const std::string& s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// Exactly representable, distinct per (name, step, index) with high probability.
float value_of(uint64_t name_hash, int64_t step, int64_t g) {
  uint64_t h = name_hash ^ (uint64_t(step) * 0x9E3779B97F4A7C15ull) ^ (uint64_t(g) * 0xBF58476D1CE4E5B9ull);
  h ^= h >> 31;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 29;
  return float(int32_t(h & 0xFFFFFF) - 0x800000) / 8388608.0f;
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Global flat index of the local flat index i of a block.
int64_t global_index(int64_t i, const std::vector<int64_t>& shape, const std::vector<int64_t>& start,
                     const std::vector<int64_t>& local) {
  int64_t g = 0, stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    const int64_t coord = i % local[d] + start[d];
    i /= local[d];
    g += coord * stride;
    stride *= shape[d];
  }
  return g;
}

// ---------------------------------------------------------------- splits

// mixed, mixed1..mixed4: tensor k gets rows, cols, 2x2, replicated(writer
// last), one-rank-holds-all by (k + rotation) % 5, so five saves give every
// tensor every split.
enum class Split { rows, cols, grid, repl0, repl_last, single, mixed, mixed1, mixed2, mixed3, mixed4 };
const char* split_name(Split s) {
  switch (s) {
    case Split::rows: return "rows";
    case Split::cols: return "cols";
    case Split::grid: return "2x2";
    case Split::repl0: return "replicated(writer 0)";
    case Split::repl_last: return "replicated(writer last)";
    case Split::single: return "one rank holds all";
    case Split::mixed: return "mixed per tensor";
    case Split::mixed1: return "mixed+1";
    case Split::mixed2: return "mixed+2";
    case Split::mixed3: return "mixed+3";
    case Split::mixed4: return "mixed+4";
  }
  return "?";
}

struct Spec {
  std::string name;
  std::vector<int64_t> shape;
};

void range(int64_t n, int parts, int i, int64_t* start, int64_t* len) {
  *start = n * i / parts;
  *len = n * (i + 1) / parts - *start;
}

// This rank's block of tensor `k` under a split over `size` ranks.
void block_of(Split s, size_t k, const std::vector<int64_t>& shape, int rank, int size,
              std::vector<int64_t>* start, std::vector<int64_t>* local, bool* writer) {
  if (s >= Split::mixed) {
    const Split order[] = {Split::rows, Split::cols, Split::grid, Split::repl_last, Split::single};
    s = order[(k + size_t(s) - size_t(Split::mixed)) % 5];
  }
  const size_t nd = shape.size(), last = nd - 1;
  *start = std::vector<int64_t>(nd, 0);
  *local = shape;
  *writer = true;
  switch (s) {
    case Split::rows: range(shape[0], size, rank, &(*start)[0], &(*local)[0]); break;
    case Split::cols: range(shape[last], size, rank, &(*start)[last], &(*local)[last]); break;
    case Split::grid:
      if (size == 4 && nd >= 2) {
        range(shape[0], 2, rank / 2, &(*start)[0], &(*local)[0]);
        range(shape[last], 2, rank % 2, &(*start)[last], &(*local)[last]);
      } else {
        range(shape[0], size, rank, &(*start)[0], &(*local)[0]);
      }
      break;
    case Split::repl0: *writer = rank == 0; break;
    case Split::repl_last: *writer = rank == size - 1; break;
    case Split::single:
      if (rank != size / 2) (*local)[0] = 0;
      break;
    default: break;
  }
}

// Local buffers of one rank, by tensor name.
using Store = std::map<std::string, std::vector<float>>;

std::vector<CkptTensor> make_tensors(const std::vector<Spec>& specs, Split s, int64_t step, Store* store,
                                     MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::vector<CkptTensor> out;
  for (size_t k = 0; k < specs.size(); ++k) {
    CkptTensor t;
    t.name = specs[k].name;
    t.shape = specs[k].shape;
    block_of(s, k, t.shape, rank, size, &t.local_start, &t.local_shape, &t.writer);
    const uint64_t h = hash_str(t.name);
    t.get = [h, step, shape = t.shape, st = t.local_start, loc = t.local_shape](float* p) {
      const int64_t n = numel(loc);
      for (int64_t i = 0; i < n; ++i) p[i] = value_of(h, step, global_index(i, shape, st, loc));
    };
    const size_t n = size_t(numel(t.local_shape));
    t.set = [store, name = t.name, n](const float* p) { (*store)[name].assign(p, p + n); };
    out.push_back(std::move(t));
  }
  return out;
}

// Elements of the store that differ (bitwise) from f(name, step, index).
int64_t mismatches(const std::vector<CkptTensor>& tensors, const Store& store, int64_t step,
                   std::string* first) {
  int64_t bad = 0;
  std::vector<float> want;
  for (const auto& t : tensors) {
    const auto it = store.find(t.name);
    const int64_t n = numel(t.local_shape);
    if (it == store.end() || int64_t(it->second.size()) != n) {
      if (first->empty()) *first = t.name + ": set() not called with the block";
      bad += n > 0 ? n : 1;
      continue;
    }
    const uint64_t h = hash_str(t.name);
    want.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i)
      want[size_t(i)] = value_of(h, step, global_index(i, t.shape, t.local_start, t.local_shape));
    const pentad::test::BitwiseReport r =
        pentad::test::compare_bitwise(std::span<const float>(it->second), std::span<const float>(want));
    if (!r.ok() && first->empty())
      *first = t.name + "[local " + std::to_string(r.first) + "] = " + std::to_string(it->second[r.first]) +
               ", want " + std::to_string(want[r.first]);
    bad += int64_t(r.n_differ);
  }
  return bad;
}

const std::vector<Spec> kSpecs = {
    {"model/wte", {37, 24}},
    {"model/layers/0/mlp/b_up", {96}},
    {"big/rows", {600, 1000}},   // 3 chunks of whole rows
    {"big/flat", {300000}},      // 2 chunks along one dimension
    {"x/three_d", {5, 6, 7}},
    {"x/empty", {0, 8}},
};

CkptMeta meta_for(int64_t step) {
  CkptMeta m;
  m.step = step;
  m.seed = 0xFEDCBA9876543210ull;
  m.config_toml = "[model]\nfamily = \"llama\"  # caf\xc3\xa9\n";
  m.layout = "dp=" + std::to_string(g_size) + " tp=1 pp=1 cp=1 ep=1 zero=0";
  m.model_signature = "test: synthetic tensors v1";
  return m;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::string& what, const std::string& msg, const std::vector<std::string>& needles) {
  bool ok = !msg.empty();
  for (const auto& n : needles) ok = ok && msg.find(n) != std::string::npos;
  check(ok, what + ": got error '" + msg + "'");
}

std::string bcast_string(std::string s, MPI_Comm comm) {
  int n = int(s.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, comm);
  s.resize(size_t(n));
  MPI_Bcast(s.data(), n, MPI_CHAR, 0, comm);
  return s;
}

// ---------------------------------------------------------------- file surgery (rank 0)

void copy_file(const std::string& from, const std::string& to) {
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
}

// File offset and size of chunk `idx` of a chunked dataset.
bool chunk_location(const std::string& path, const std::string& name, hsize_t idx, haddr_t* addr,
                    hsize_t* size) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return false;
  const hid_t ds = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  const hid_t sp = H5Dget_space(ds);
  hsize_t offset[8] = {};
  unsigned mask = 0;
  const herr_t rc = H5Dget_chunk_info(ds, sp, idx, offset, &mask, addr, size);
  H5Sclose(sp);
  H5Dclose(ds);
  H5Fclose(f);
  return rc >= 0;
}

void flip_byte(const std::string& path, int64_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char ch = 0;
  f.read(&ch, 1);
  ch = char(ch ^ 0x5a);
  f.seekp(at);
  f.write(&ch, 1);
}

void zero_prefix(const std::string& path, int64_t n) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  const std::vector<char> zeros(size_t(n), 0);
  f.write(zeros.data(), n);
}

// ---------------------------------------------------------------- the tests

void test_roundtrips(const std::string& dir, MPI_Comm comm) {
  const Split saves[] = {Split::mixed, Split::mixed1, Split::mixed2, Split::mixed3, Split::mixed4, Split::repl0};
  const Split loads[] = {Split::rows, Split::cols, Split::grid, Split::single, Split::mixed2, Split::repl0};
  const bool times = g_rank == 0 && std::getenv("PENTAD_CKPT_TIMES");
  // Each save twice: written by every rank (MPI-IO), and gathered to rank 0.
  for (size_t run = 0; run < 2 * std::size(saves); ++run) {
    const size_t si = run % std::size(saves);
    const bool gathered = run >= std::size(saves);
    const CkptWriter writer{gathered ? int64_t{1} << 40 : 0};
    const std::string how = gathered ? " (gathered to rank 0)" : " (every rank)";
    Store unused;
    const int64_t step = 10 + int64_t(run);
    const auto saved = make_tensors(kSpecs, saves[si], step, &unused, comm);
    auto t0 = std::chrono::steady_clock::now();
    const std::string path = save_checkpoint(dir, meta_for(step), saved, 0, comm, writer);
    if (times) std::fprintf(stderr, "  save%s %.3f s\n", how.c_str(), seconds_since(t0));
    for (Split load : {loads[si], loads[(si + 2) % std::size(loads)]}) {
      Store got;
      const auto loading = make_tensors(kSpecs, load, step, &got, comm);
      t0 = std::chrono::steady_clock::now();
      const CkptMeta m = load_checkpoint(path, meta_for(step).model_signature, loading, comm);
      if (times) std::fprintf(stderr, "  load %.3f s\n", seconds_since(t0));
      std::string first;
      const int64_t bad = mismatches(loading, got, step, &first);
      check(bad == 0, std::string("save ") + split_name(saves[si]) + how + " / load " + split_name(load) + ": " +
                          std::to_string(bad) + " elements differ; first: " + first);
      const CkptMeta want = meta_for(step);
      check(m.step == want.step && m.seed == want.seed && m.config_toml == want.config_toml &&
                m.layout == want.layout && m.model_signature == want.model_signature,
            "meta round trip (step " + std::to_string(m.step) + ", seed " + std::to_string(m.seed) + ")");
    }
  }
}

std::vector<std::string> step_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

void test_keep_and_latest(const std::string& dir, MPI_Comm comm) {
  const std::vector<Spec> small = {{"model/w", {8, 4}}};
  Store unused;
  for (int64_t step = 1; step <= 4; ++step)
    save_checkpoint(dir, meta_for(step), make_tensors(small, Split::rows, step, &unused, comm), 2, comm);
  const std::vector<std::string> want1 = {"latest", "step_000003.h5", "step_000004.h5"};
  check(step_files(dir) == want1, "keep=2 after steps 1..4 leaves steps 3 and 4");
  check(resolve_checkpoint("latest", dir) == dir + "/step_000004.h5", "latest names step 4");
  check(resolve_checkpoint(dir, "") == dir + "/step_000004.h5", "a directory resolves to its latest");
  check(latest_checkpoint(dir) == dir + "/step_000004.h5", "latest_checkpoint(dir)");

  MPI_Barrier(comm);
  if (g_rank == 0) std::fclose(std::fopen((dir + "/step_000009.h5.tmp").c_str(), "w"));  // a killed writer's
  save_checkpoint(dir, meta_for(5), make_tensors(small, Split::rows, 5, &unused, comm), 0, comm);
  const std::vector<std::string> want2 = {"latest", "step_000003.h5", "step_000004.h5", "step_000005.h5"};
  check(step_files(dir) == want2, "keep=0 keeps all; a stale .tmp is removed");

  // Resumed from an older step: the new (lower-numbered) file is kept and is latest.
  save_checkpoint(dir, meta_for(2), make_tensors(small, Split::rows, 2, &unused, comm), 2, comm);
  const std::vector<std::string> want3 = {"latest", "step_000002.h5", "step_000005.h5"};
  check(step_files(dir) == want3, "keep=2 never deletes the checkpoint just written");
  check(resolve_checkpoint("latest", dir) == dir + "/step_000002.h5", "latest follows the last commit");

  expect_error("missing file", error_of([&] { resolve_checkpoint(dir + "/nope.h5", dir); }),
               {dir + "/nope.h5", "does not exist"});
  expect_error("a .tmp file", error_of([&] { resolve_checkpoint(dir + "/step_000002.h5.tmp", dir); }),
               {"step_000002.h5.tmp", "uncommitted"});
  const std::string empty_dir = dir + "/empty";
  MPI_Barrier(comm);
  if (g_rank == 0) fs::create_directories(empty_dir);
  MPI_Barrier(comm);
  check(latest_checkpoint(empty_dir).empty(), "latest_checkpoint of a directory without one is \"\"");
  expect_error("latest in an empty directory", error_of([&] { resolve_checkpoint("latest", empty_dir); }),
               {empty_dir + "/latest"});
  MPI_Barrier(comm);
  if (g_rank == 0) {
    std::ofstream(empty_dir + "/latest") << "step_000042.h5\n";
  }
  MPI_Barrier(comm);
  expect_error("latest names a missing file", error_of([&] { resolve_checkpoint("latest", empty_dir); }),
               {"step_000042.h5", "does not exist"});
  MPI_Barrier(comm);
}

void test_errors(const std::string& dir, MPI_Comm comm) {
  Store unused, got;
  const int64_t step = 77;
  const std::string path =
      save_checkpoint(dir, meta_for(step), make_tensors(kSpecs, Split::rows, step, &unused, comm), 0, comm);
  const auto good = make_tensors(kSpecs, Split::grid, step, &got, comm);
  const std::string sig = meta_for(step).model_signature;

  expect_error("model signature mismatch",
               error_of([&] { load_checkpoint(path, "gpt2 L=99", good, comm); }),
               {path, sig, "gpt2 L=99"});

  std::vector<Spec> reshaped = kSpecs;
  reshaped[0].shape = {37, 25};
  expect_error("shape mismatch",
               error_of([&] { load_checkpoint(path, sig, make_tensors(reshaped, Split::rows, step, &got, comm), comm); }),
               {path, "'model/wte'", "(37, 24)", "(37, 25)"});

  std::vector<Spec> extra = kSpecs;
  extra.push_back({"model/layers/0/attn/nope", {3}});
  expect_error("missing tensor",
               error_of([&] { load_checkpoint(path, sig, make_tensors(extra, Split::cols, step, &got, comm), comm); }),
               {path, "no tensor 'model/layers/0/attn/nope'"});

  // Corruption: one byte inside the last chunk of big/rows, which only the
  // last rank reads under a row split; and inside model/wte, read by all.
  const std::string bad1 = dir + "/corrupt_rows.h5", bad2 = dir + "/corrupt_wte.h5";
  const std::string trunc = dir + "/truncated.h5", zeroed = dir + "/zeroed.h5", text = dir + "/text.h5";
  int located = 1;
  if (g_rank == 0) {
    haddr_t addr = 0;
    hsize_t size = 0;
    copy_file(path, bad1);
    located &= chunk_location(bad1, "big/rows", 2, &addr, &size);
    flip_byte(bad1, int64_t(addr + size / 2));
    copy_file(path, bad2);
    located &= chunk_location(bad2, "model/wte", 0, &addr, &size);
    flip_byte(bad2, int64_t(addr + 7));
    copy_file(path, trunc);
    fs::resize_file(trunc, fs::file_size(trunc) / 2);
    copy_file(path, zeroed);
    zero_prefix(zeroed, 512);
    std::ofstream(text) << "this is not a checkpoint\n";
  }
  MPI_Bcast(&located, 1, MPI_INT, 0, comm);
  check(located == 1, "H5Dget_chunk_info found the chunks to corrupt");
  expect_error("corrupt chunk read by one rank",
               error_of([&] { load_checkpoint(bad1, sig, make_tensors(kSpecs, Split::rows, step, &got, comm), comm); }),
               {"checkpoint '" + bad1 + "': tensor 'big/rows' failed its checksum (file corrupted)"});
  expect_error("corrupt chunk read by every rank",
               error_of([&] { load_checkpoint(bad2, sig, good, comm); }),
               {"checkpoint '" + bad2 + "': tensor 'model/wte' failed its checksum (file corrupted)"});
  expect_error("ckpt info on a corrupt file", error_of([&] { ckpt_info(bad1, comm); }),
               {bad1, "'big/rows' failed its checksum"});
  expect_error("truncated file", error_of([&] { load_checkpoint(trunc, sig, good, comm); }),
               {"checkpoint '" + trunc + "'", "truncated"});
  expect_error("zeroed header", error_of([&] { load_checkpoint(zeroed, sig, good, comm); }),
               {"checkpoint '" + zeroed + "'", "not an HDF5 file"});
  expect_error("not HDF5", error_of([&] { load_checkpoint(text, sig, good, comm); }),
               {"checkpoint '" + text + "'", "not an HDF5 file"});

  // Save-side errors, agreed on every rank.
  MPI_Barrier(comm);
  if (g_rank == 0) std::ofstream(dir + "/afile") << "x";
  MPI_Barrier(comm);
  expect_error("unwritable directory",
               error_of([&] { save_checkpoint(dir + "/afile/sub", meta_for(1), good, 0, comm); }),
               {"checkpoint.dir", dir + "/afile/sub"});
  std::vector<Spec> differ = kSpecs;
  if (g_rank == 1 % g_size) differ[1].shape = {24, 23};
  expect_error("ranks disagree on the tensor list",
               error_of([&] { save_checkpoint(dir, meta_for(1), make_tensors(differ, Split::rows, 1, &got, comm), 0, comm); }),
               {"different tensor lists"});
  auto doubled = make_tensors(kSpecs, Split::repl0, 1, &got, comm);
  for (auto& t : doubled)  // every rank writes the same block (or, alone, none)
    if (t.name == "model/layers/0/mlp/b_up") t.writer = g_size > 1;
  expect_error("a block with no single writer",
               error_of([&] { save_checkpoint(dir, meta_for(1), doubled, 0, comm); }),
               {"'model/layers/0/mlp/b_up'", "exactly one writer"});
  auto outside = make_tensors(kSpecs, Split::rows, 1, &got, comm);
  outside[0].local_start[0] = 30;
  outside[0].local_shape[0] = 10;
  expect_error("a block outside its tensor",
               error_of([&] { save_checkpoint(dir, meta_for(1), outside, 0, comm); }),
               {"'model/wte'", "outside"});
  check(!fs::exists(dir + "/step_000001.h5"), "failed saves leave no checkpoint");
}

// A tiny GPT-2 (V=200 -> Vp=256, C=16, T=8, L=2, NH=2), exported for llm.c.
void test_export(const std::string& dir, MPI_Comm comm) {
  const int64_t V = 200, C = 16, T = 8, L = 2, Vp = 256, step = 5;
  std::vector<Spec> specs = {{"model/wte", {V, C}}, {"model/wpe", {T, C}}};
  const std::vector<std::pair<const char*, std::vector<int64_t>>> leaves = {
      {"attn_norm/w", {C}}, {"attn_norm/b", {C}}, {"attn/wq", {C, C}},     {"attn/wk", {C, C}},
      {"attn/wv", {C, C}},  {"attn/wo", {C, C}},  {"attn/bq", {C}},        {"attn/bk", {C}},
      {"attn/bv", {C}},     {"attn/bo", {C}},     {"mlp_norm/w", {C}},     {"mlp_norm/b", {C}},
      {"mlp/w_up", {4 * C, C}}, {"mlp/b_up", {4 * C}}, {"mlp/w_down", {C, 4 * C}}, {"mlp/b_down", {C}}};
  for (int l = 0; l < L; ++l)
    for (const auto& [leaf, shape] : leaves) specs.push_back({"model/layers/" + std::to_string(l) + "/" + leaf, shape});
  specs.push_back({"model/final_norm/w", {C}});
  specs.push_back({"model/final_norm/b", {C}});
  specs.push_back({"optim/m/model/wte", {V, C}});
  CkptMeta meta = meta_for(step);
  meta.config_toml = "[model]\nfamily = \"gpt2\"\nn_layers = 2\nn_heads = 2\nd_model = 16\n";
  Store unused;
  const std::string gdir = dir + "/gpt2";
  // Saved by rank 0 alone (the split is not what this test is about), then
  // exported by the job.
  if (g_rank == 0) save_checkpoint(gdir, meta, make_tensors(specs, Split::rows, step, &unused, MPI_COMM_SELF), 0, MPI_COMM_SELF);
  MPI_Barrier(comm);
  const std::string out = dir + "/export";
  const int rc = ckpt_export(gdir, out, comm);
  check(rc == 0, "ckpt export returns 0");

  int ok_bin = 1, ok_h5 = 1;
  std::string why;
  if (g_rank == 0) {
    std::ifstream f(out + "/gpt2_model.bin", std::ios::binary);
    std::vector<int32_t> header(256);
    f.read(reinterpret_cast<char*>(header.data()), 1024);
    const std::vector<int32_t> want_header = {20240326, 3, int32_t(T), int32_t(V), int32_t(L), 2, int32_t(C), int32_t(Vp)};
    if (!std::equal(want_header.begin(), want_header.end(), header.begin())) {
      ok_bin = 0;
      why = "header";
    }
    // The expected float stream: llm.c's order, built from f(name, step, index).
    std::vector<float> want;
    const auto add = [&](const std::string& name, int64_t n) {
      for (int64_t i = 0; i < n; ++i) want.push_back(value_of(hash_str(name), step, i));
    };
    add("model/wte", V * C);
    want.insert(want.end(), size_t((Vp - V) * C), 0.0f);
    add("model/wpe", T * C);
    const auto layers = [&](std::initializer_list<const char*> ls, int64_t n) {
      for (int l = 0; l < L; ++l)
        for (const char* leaf : ls) add("model/layers/" + std::to_string(l) + "/" + leaf, n);
    };
    layers({"attn_norm/w"}, C);
    layers({"attn_norm/b"}, C);
    layers({"attn/wq", "attn/wk", "attn/wv"}, C * C);
    layers({"attn/bq", "attn/bk", "attn/bv"}, C);
    layers({"attn/wo"}, C * C);
    layers({"attn/bo"}, C);
    layers({"mlp_norm/w"}, C);
    layers({"mlp_norm/b"}, C);
    layers({"mlp/w_up"}, 4 * C * C);
    layers({"mlp/b_up"}, 4 * C);
    layers({"mlp/w_down"}, 4 * C * C);
    layers({"mlp/b_down"}, C);
    add("model/final_norm/w", C);
    add("model/final_norm/b", C);
    std::vector<float> got(want.size() + 1);
    f.read(reinterpret_cast<char*>(got.data()), std::streamsize(got.size() * sizeof(float)));
    const size_t n_read = size_t(f.gcount()) / sizeof(float);
    if (n_read != want.size()) {
      ok_bin = 0;
      why += " size " + std::to_string(n_read) + " floats, want " + std::to_string(want.size());
    } else if (std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) != 0) {
      ok_bin = 0;
      why += " contents";
    }
    std::vector<int64_t> shape;
    const auto wte = h5_read_floats(out + "/model.h5", "model/wte", &shape);
    for (int64_t i = 0; i < V * C && ok_h5; ++i) ok_h5 = wte[size_t(i)] == value_of(hash_str("model/wte"), step, i);
    ok_h5 = ok_h5 && shape == std::vector<int64_t>{V, C};
    ok_h5 = ok_h5 && !error_of([&] { h5_read_floats(out + "/model.h5", "optim/m/model/wte"); }).empty();
  }
  MPI_Bcast(&ok_bin, 1, MPI_INT, 0, comm);
  MPI_Bcast(&ok_h5, 1, MPI_INT, 0, comm);
  check(ok_bin == 1, "gpt2_model.bin has llm.c's header and parameter order (" + why + ")");
  check(ok_h5 == 1, "model.h5 holds model/ tensors only, global and exact");
}

void test_signals() {
  check(!signal_received(), "no signal before one arrives");
  install_signal_handlers();
  std::raise(SIGUSR1);
  check(signal_received(), "SIGUSR1 sets the flag");
}

// ---------------------------------------------------------------- modes

const std::vector<Spec> kLoopSpecs = {
    {"model/a", {256, 512}}, {"model/b", {1000, 100}}, {"model/c", {4096}}, {"optim/m/model/a", {256, 512}}};

int write_loop(const std::string& dir, int64_t n_steps, MPI_Comm comm) {
  std::ofstream(dir + "/pid." + std::to_string(g_rank)) << getpid() << "\n";
  int64_t first = 1;
  if (g_rank == 0) {
    const std::string latest = latest_checkpoint(dir);
    if (!latest.empty()) {
      first = load_checkpoint(latest, "", {}, MPI_COMM_SELF).step + 1;
    }
  }
  MPI_Bcast(&first, 1, MPI_INT64_T, 0, comm);
  for (int64_t step = first; step < first + n_steps; ++step) {
    Store unused;
    CkptMeta m = meta_for(step);
    // Odd steps written by every rank (MPI-IO), even steps gathered to rank 0.
    const CkptWriter writer{step % 2 ? 0 : int64_t{1} << 40};
    save_checkpoint(dir, m, make_tensors(kLoopSpecs, Split::mixed, step, &unused, comm), 2, comm, writer);
  }
  return 0;
}

int verify_latest(const std::string& dir, MPI_Comm comm) {
  int ok = 1;
  std::string path;
  try {
    path = latest_checkpoint(dir);
    if (path.empty()) {
      bool any = false;
      for (const auto& e : fs::directory_iterator(dir)) {
        const std::string n = e.path().filename().string();
        any = any || (n.rfind("step_", 0) == 0 && n.size() > 3 && n.substr(n.size() - 3) == ".h5");
      }
      if (g_rank == 0) std::printf("verify: no checkpoint committed yet%s\n", any ? " BUT step files exist" : "");
      return any ? 1 : 0;
    }
    if (path.size() >= 4 && path.substr(path.size() - 4) == ".tmp") ok = 0;
    Store got;
    const auto tensors = make_tensors(kLoopSpecs, Split::rows, 0, &got, comm);
    const CkptMeta m = load_checkpoint(path, meta_for(0).model_signature, tensors, comm);
    std::string first;
    const int64_t bad = mismatches(tensors, got, m.step, &first);
    if (bad != 0) {
      ok = 0;
      std::fprintf(stderr, "verify (rank %d): %lld elements differ in %s: %s\n", g_rank, (long long)bad,
                   path.c_str(), first.c_str());
    }
    if (g_rank == 0) std::printf("verify: %s (step %lld) loads and verifies on %d ranks\n", path.c_str(), (long long)m.step, g_size);
  } catch (const InputError& e) {
    ok = 0;
    if (g_rank == 0) std::fprintf(stderr, "verify: %s\n", e.what());
  }
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
  return all ? 0 : 1;
}

int bench(const std::string& dir, int64_t mb, MPI_Comm comm) {
  const int64_t cols = 4096, rows_total = mb * (1 << 20) / (4 * cols);
  std::vector<Spec> specs;
  for (int i = 0; i < 10; ++i) specs.push_back({"model/t" + std::to_string(i), {rows_total / 10, cols}});
  Store got, ready;
  auto tensors = make_tensors(specs, Split::rows, 1, &got, comm);
  for (auto& t : tensors) {  // contents computed before the clock starts
    auto& b = ready[t.name];
    b.resize(size_t(numel(t.local_shape)));
    t.get(b.data());
    t.get = [&b](float* p) { std::memcpy(p, b.data(), b.size() * sizeof(float)); };
  }
  MPI_Barrier(comm);
  auto t0 = std::chrono::steady_clock::now();
  const std::string path = save_checkpoint(dir, meta_for(1), tensors, 1, comm);
  const double t_save = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MPI_Barrier(comm);
  t0 = std::chrono::steady_clock::now();
  load_checkpoint(path, "", tensors, comm);
  MPI_Barrier(comm);
  const double t_load = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string first;
  const int64_t bad = mismatches(tensors, got, 1, &first);
  const double bytes = double(rows_total / 10 * 10 * cols * 4);
  if (g_rank == 0)
    std::printf("bench ranks=%d size=%.0f MB: save %.2f s (%.0f MB/s incl. fsync), load %.2f s (%.0f MB/s)%s\n",
                g_size, bytes / 1e6, t_save, bytes / 1e6 / t_save, t_load, bytes / 1e6 / t_load,
                bad ? " MISMATCH" : "");
  return bad ? 1 : 0;
}

// The tests' scratch directory, made by rank 0 under DIR (the first
// argument) or the temp directory, and removed when every test passed.
// Collective over MPI_COMM_WORLD.
class ScratchDir : public ::testing::Environment {
 public:
  void SetUp() override {
    init_job();
    std::string root;
    if (g_rank == 0) {
      const auto& args = pentad::test::test_args();
      std::string tmpl = (args.empty() ? fs::temp_directory_path().string() : args[0]) + "/pentad_ckpt_XXXXXX";
      if (!mkdtemp(tmpl.data())) {
        std::perror("mkdtemp");
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
      root = tmpl;
    }
    path = bcast_string(root, MPI_COMM_WORLD);
  }
  void TearDown() override {
    int failed = ::testing::UnitTest::GetInstance()->failed_test_count() > 0 ? 1 : 0, any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (g_rank == 0 && any == 0) fs::remove_all(path);
  }
  std::string path;
};

ScratchDir& scratch = *static_cast<ScratchDir*>(::testing::AddGlobalTestEnvironment(new ScratchDir));

// One test over its own subdirectory; an InputError escaping it fails it on
// the ranks that threw (PENTAD_CKPT_TIMES: its time, printed by rank 0).
void in_subdir(const char* name, void (*fn)(const std::string&, MPI_Comm)) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    fn(scratch.path + "/" + name, MPI_COMM_WORLD);
  } catch (const InputError& e) {
    check(false, std::string(name) + ": unexpected error: " + e.what());
  }
  if (g_rank == 0 && std::getenv("PENTAD_CKPT_TIMES"))
    std::printf("%s: %.2f s\n", name, seconds_since(t0));
}

TEST(Checkpoint, RoundTripsUnderEverySplit) { in_subdir("roundtrips", test_roundtrips); }
TEST(Checkpoint, KeepAndLatest) { in_subdir("keep_latest", test_keep_and_latest); }
TEST(Checkpoint, ErrorsOnEveryRank) { in_subdir("errors", test_errors); }
TEST(Checkpoint, ExportLlmc) { in_subdir("export", test_export); }
TEST(Checkpoint, Signals) { test_signals(); }

// The crash-safety script's and the benchmark's modes.
const bool kModes[] = {
    pentad::test::add_mode("--write-loop",
                           [](const std::vector<std::string>& a) {
                             init_job();
                             if (a.size() < 2) return 2;
                             return write_loop(a[1], a.size() >= 3 ? std::stoll(a[2]) : int64_t{1} << 40,
                                               MPI_COMM_WORLD);
                           }),
    pentad::test::add_mode("--verify-latest",
                           [](const std::vector<std::string>& a) {
                             init_job();
                             return a.size() < 2 ? 2 : verify_latest(a[1], MPI_COMM_WORLD);
                           }),
    pentad::test::add_mode("--bench",
                           [](const std::vector<std::string>& a) {
                             init_job();
                             return a.size() < 3 ? 2 : bench(a[1], std::stoll(a[2]), MPI_COMM_WORLD);
                           }),
};

}  // namespace
