// Backend-independent parts of the backend interface: memory accounting.
#include "backend.hpp"

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

}  // namespace pentad
