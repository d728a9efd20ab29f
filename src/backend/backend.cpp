// Backend-independent parts of the backend interface: the op names, the
// default capability answer, the block map and per-category memory
// accounting shared by every backend, and the host fallback of
// attention_merge.
#include "backend/backend.hpp"

#include <new>
#include <vector>

#include "core/error.hpp"
#include "core/text.hpp"

namespace pentad {

const char* mem_name(Mem m) {
  switch (m) {
    case Mem::params: return "params";
    case Mem::grads: return "grads";
    case Mem::optim: return "optim";
    case Mem::activations: return "activations";
    case Mem::comm: return "comm";
    case Mem::scratch: return "scratch";
    case Mem::count: break;
  }
  return "?";
}

const char* op_name(Op op) {
  switch (op) {
#define PENTAD_OP(ret, name, params) \
  case Op::name:                     \
    return #name;
#define PENTAD_OP_HOST_FALLBACK(ret, name, params) PENTAD_OP(ret, name, params)
#include "backend/ops.def"
    case Op::count: break;
  }
  return "?";
}

bool Backend::supports(Op op) const { return implements_op<Backend>(op); }

void* Backend::alloc_bytes(size_t n_bytes, Mem category) {
  // An allocation failure stops the job with the buffer named (fatal_at adds
  // the rank): an escaping std::bad_alloc would abort one rank unnamed.
  try {
    void* p = device_alloc(n_bytes, category);
    std::lock_guard<std::mutex> lock(alloc_mutex_);
    allocs_[p] = {n_bytes, category};
    track_alloc(n_bytes, category);
    return p;
  } catch (const std::bad_alloc&) {
    PENTAD_FATAL("out of memory: backend " + name() + " could not allocate " + std::to_string(n_bytes) + " bytes (" +
                 format_bytes(double(n_bytes), 2) + ") for " + mem_name(category) + " (" +
                 std::to_string(mem_.total_cur_bytes) +
                 " bytes already allocated); reduce the model or train.micro_batch, or spread it over more ranks");
  }
}

void Backend::free_bytes(void* p) {
  if (p == nullptr) return;
  drop_weight_copy(static_cast<const float*>(p));
  size_t n_bytes = 0;
  {
    std::lock_guard<std::mutex> lock(alloc_mutex_);
    auto it = allocs_.find(p);
    if (it == allocs_.end()) PENTAD_FATAL("Backend::free_bytes (" + name() + "): pointer not allocated here");
    n_bytes = it->second.first;
    track_free(it->second.first, it->second.second);
    allocs_.erase(it);
  }
  drop_held(p, n_bytes);
  device_free(p);
}

// ---- weight copies ----------------------------------------------------------

namespace {
uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }
}  // namespace

void Backend::keep_weight_copy(const float* w, size_t n) {
  if (!keeps_weight_copies() || n == 0) return;
  {
    std::lock_guard<std::mutex> lock(weight_copy_mutex_);
    for (const WeightCopy& c : weight_copies_)
      if (c.src == w && c.n == n) return;
  }
  drop_weight_copy(w);
  void* copy = alloc_bytes(n * weight_copy_elem_bytes(), Mem::params);
  std::lock_guard<std::mutex> lock(weight_copy_mutex_);
  weight_copies_.push_back({w, n, copy, true});
}

void Backend::hold_gemm_form(const float* p, size_t n) {
  if (!keeps_bf16_activations() || n == 0) return;
  std::lock_guard<std::mutex> lock(weight_copy_mutex_);
  for (const WeightCopy& c : weight_copies_)
    if (c.src == p) {
      if (c.in_place && c.n == n) return;
      PENTAD_FATAL("Backend::hold_gemm_form (" + name() + "): the range is already registered with another size");
    }
  weight_copies_.push_back({p, n, const_cast<float*>(p), false, true});
}

bool Backend::held_in_gemm_form(const void* p) {
  if (!keeps_bf16_activations()) return false;
  std::lock_guard<std::mutex> lock(weight_copy_mutex_);
  for (const WeightCopy& c : weight_copies_)
    if (c.in_place && c.src == p) return true;
  return false;
}

bool Backend::qkv_held(const void* q, const void* k, const void* v) {
  const int n = int(held_in_gemm_form(q)) + int(held_in_gemm_form(k)) + int(held_in_gemm_form(v));
  if (n != 0 && n != 3)
    PENTAD_FATAL("Backend::qkv_held (" + name() + "): attention's q, k and v are not all held in GEMM form");
  return n == 3;
}

void Backend::drop_held(const void* p, size_t n_bytes) {
  const uintptr_t lo = addr(p), hi = lo + n_bytes;
  std::lock_guard<std::mutex> lock(weight_copy_mutex_);
  std::erase_if(weight_copies_,
                [&](const WeightCopy& c) { return c.in_place && addr(c.src) >= lo && addr(c.src) < hi; });
}

void Backend::drop_weight_copy(const float* w) {
  void* copy = nullptr;
  {
    std::lock_guard<std::mutex> lock(weight_copy_mutex_);
    for (size_t i = 0; i < weight_copies_.size(); ++i)
      if (weight_copies_[i].src == w && !weight_copies_[i].in_place) {
        copy = weight_copies_[i].copy;
        weight_copies_.erase(weight_copies_.begin() + long(i));
        break;
      }
  }
  if (copy) free_bytes(copy);
}

void Backend::weights_written(const void* p, size_t n_bytes) {
  const uintptr_t lo = addr(p), hi = lo + n_bytes;
  std::lock_guard<std::mutex> lock(weight_copy_mutex_);
  for (WeightCopy& c : weight_copies_)
    if (!c.in_place && lo < addr(c.src + c.n) && addr(c.src) < hi) c.stale = true;
}

const void* Backend::weight_copy_for(const float* p, int rows, int cols, int ld, long stride, int batch) {
  if (rows <= 0 || cols <= 0 || batch <= 0) return nullptr;
  // The values read: from p to the last row's end of the last matrix.
  const size_t n = size_t(batch - 1) * size_t(stride) + size_t(rows - 1) * size_t(ld) + size_t(cols);
  std::lock_guard<std::mutex> lock(weight_copy_mutex_);
  for (WeightCopy& c : weight_copies_) {
    if (c.in_place) {  // a held activation: its block holds n values of weight_copy_elem_bytes()
      const uintptr_t lo = addr(c.src), hi = lo + c.n * weight_copy_elem_bytes();
      if (addr(p) < lo || addr(p) >= hi) continue;
      if (p != c.src || n > c.n)
        PENTAD_FATAL("Backend (" + name() + "): a GEMM operand reads a bf16 activation from its value " +
                     std::to_string(p - c.src) + " over " + std::to_string(n) + " values (it holds " +
                     std::to_string(c.n) + "); a held activation is read from its first value");
      ++held_reads_;
      return c.copy;
    }
    if (addr(p) < addr(c.src) || addr(p + n) > addr(c.src + c.n)) continue;
    if (c.stale) {
      to_gemm_form(c.copy, c.src, c.n);
      c.stale = false;
      ++weight_copies_made_;
    }
    return static_cast<const char*>(c.copy) + size_t(p - c.src) * weight_copy_elem_bytes();
  }
  return nullptr;
}

void* Backend::device_alloc(size_t, Mem) {
  PENTAD_FATAL("backend " + name() + " has no memory of its own (device_alloc)");
}

void Backend::device_free(void*) {
  PENTAD_FATAL("backend " + name() + " has no memory of its own (device_free)");
}

void Backend::release_all_blocks(void (*release)(void* p)) {
  std::lock_guard<std::mutex> lock(alloc_mutex_);
  for (auto& [p, info] : allocs_) release(p);
  allocs_.clear();
  std::lock_guard<std::mutex> copies(weight_copy_mutex_);  // the one place both are held: alloc first
  weight_copies_.clear();
}

void Backend::track_alloc(size_t n_bytes, Mem category) {
  const int c = static_cast<int>(category);
  mem_.cur_bytes[c] += n_bytes;
  if (mem_.cur_bytes[c] > mem_.peak_bytes[c]) mem_.peak_bytes[c] = mem_.cur_bytes[c];
  mem_.total_cur_bytes += n_bytes;
  if (mem_.total_cur_bytes > mem_.total_peak_bytes) mem_.total_peak_bytes = mem_.total_cur_bytes;
}

void Backend::track_free(size_t n_bytes, Mem category) {
  const int c = static_cast<int>(category);
  mem_.cur_bytes[c] -= n_bytes;
  mem_.total_cur_bytes -= n_bytes;
}

void Backend::attention_merge(float* out, float* lse, const float* out_part, const float* lse_part,
                              int B, int T, int H, int D) {
  attention_merge_host(out, lse, out_part, lse_part, B, T, H, D);
}

void Backend::attention_merge_host(float* out, float* lse, const float* out_part,
                                   const float* lse_part, int B, int T, int H, int D) {
  const size_t n_out = size_t(B) * T * H * D, n_lse = size_t(B) * H * T;
  std::vector<float> o(n_out), op(n_out), l(n_lse), lp(n_lse);
  to_host(o.data(), out, n_out * sizeof(float));
  to_host(op.data(), out_part, n_out * sizeof(float));
  to_host(l.data(), lse, n_lse * sizeof(float));
  to_host(lp.data(), lse_part, n_lse * sizeof(float));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) {
        const size_t row = ((size_t(b) * T + t) * H + h) * D, li = (size_t(b) * H + h) * T + t;
        attention_merge_row(o.data() + row, l.data() + li, op.data() + row, lp[li], D);
      }
  from_host(out, o.data(), n_out * sizeof(float));
  from_host(lse, l.data(), n_lse * sizeof(float));
}

void linear_fwd_each(Backend& be, const LinearPart* parts, int n, const float* x, int N, int n_in) {
  for (int i = 0; i < n; ++i)
    be.linear_fwd(parts[i].y, x, parts[i].w, parts[i].bias, N, parts[i].n_out, n_in, 0.0f, nullptr);
}

void linear_bwd_input_each(Backend& be, float* dx, const LinearGradPart* parts, int n, int N, int n_in,
                           float beta) {
  for (int i = 0; i < n; ++i) {
    const LinearGradPart& p = parts[i];
    be.gemm(false, false, N, n_in, p.n_out, 1.0f, p.dy, p.n_out, p.w, n_in, i == 0 ? beta : 1.0f, dx, n_in);
  }
}

void linear_bwd_input_gelu_unfused(Backend& be, float* dx, const float* dy, const float* w, const float* gelu_in,
                                   int N, int n_out, int n_in) {
  be.gemm(false, false, N, n_in, n_out, 1.0f, dy, n_out, w, n_in, 0.0f, dx, n_in);
  be.gelu_bwd(dx, dx, gelu_in, size_t(N) * size_t(n_in));
}

void linear_bwd_weight_each(Backend& be, const LinearGradPart* parts, int n, const float* x, int N, int n_in) {
  for (int i = 0; i < n; ++i) {
    const LinearGradPart& p = parts[i];
    be.gemm(true, false, p.n_out, n_in, N, 1.0f, p.dy, p.n_out, x, n_in, 1.0f, p.dw, n_in);
    if (p.dbias) be.bias_bwd(p.dbias, p.dy, N, p.n_out);
  }
}

}  // namespace pentad
