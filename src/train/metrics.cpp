// FLOP counting, peak measurement and the JSON-lines metrics writer
// (nlohmann-json, one compact object per line).
#include "train/metrics.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace pentad {

double flops_per_token(const ModelConfig& m, double n_params) {
  return 6.0 * n_params + 12.0 * m.n_layers * double(m.d_model) * m.seq_len;
}

double non_embedding_params(const ModelConfig& m, double n_params) {
  const bool tied = m.tied_embeddings == 1 || (m.tied_embeddings == -1 && m.family == Family::gpt2);
  const double VC = double(m.vocab_size) * m.d_model;
  const double positions = m.family == Family::gpt2 ? double(m.seq_len) * m.d_model : 0.0;
  return n_params - VC - positions - (tied ? 0.0 : VC);
}

double standard_flops_per_token(const ModelConfig& m, double n_params) {
  return 6.0 * non_embedding_params(m, n_params) + 6.0 * m.n_layers * double(m.d_model) * m.seq_len;
}

double measure_peak_tflops(Backend& be) {
  const int n = 1024;
  float* a = be.alloc(size_t(n) * n, Mem::scratch);
  float* b = be.alloc(size_t(n) * n, Mem::scratch);
  float* c = be.alloc(size_t(n) * n, Mem::scratch);
  be.fill(a, 0.5f, size_t(n) * n);
  be.fill(b, 0.25f, size_t(n) * n);
  double best = 1e30;
  for (int rep = 0; rep < 6; ++rep) {
    be.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    be.gemm(false, false, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    be.synchronize();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) best = std::min(best, s);  // first call warms up
  }
  be.free_bytes(a);
  be.free_bytes(b);
  be.free_bytes(c);
  return 2.0 * n * n * double(n) / best / 1e12;
}

size_t max_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return size_t(u.ru_maxrss) * 1024;
}

MetricsFile::MetricsFile(const std::string& path) : path_(path) {
  f_ = std::fopen(path.c_str(), "w");
  if (!f_) throw InputError("log.metrics: cannot write '" + path + "': " + std::strerror(errno));
}

// Every row was flushed, but a file system may report a lost write only at
// close (NFS).
MetricsFile::~MetricsFile() {
  if (f_ && std::fclose(f_) != 0)
    PENTAD_FATAL("log.metrics: closing '" + path_ + "' failed: " + std::strerror(errno));
}

namespace {
// The value a row has always carried: rounded to 10 significant digits
// (%.10g); an integer below 1e10 stays an integer ("12", not "12.0"), as
// %.10g prints it, so readers see the same values and the same types.
nlohmann::ordered_json json_number(double v) {
  if (!std::isfinite(v)) return nullptr;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  const double r = std::strtod(buf, nullptr);
  if (std::fabs(r) < 1e10 && r == std::trunc(r)) return int64_t(r);
  return r;
}
}  // namespace

void MetricsFile::write(const std::vector<std::pair<std::string, double>>& numbers,
                        const std::vector<std::pair<std::string, std::string>>& strings) {
  if (!f_) return;
  nlohmann::ordered_json row = nlohmann::ordered_json::object();  // keys in the caller's order
  for (const auto& [k, v] : numbers) row[k] = json_number(v);
  for (const auto& [k, v] : strings) row[k] = v;
  const std::string line =
      row.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  // The flush makes a full disk show here, at the row that is lost.
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0)
    PENTAD_FATAL("log.metrics: writing '" + path_ + "' failed: " + std::strerror(errno));
}

}  // namespace pentad
