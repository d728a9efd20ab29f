// Sharded token data, weighted blends and the random / epoch orders
// (dataset.hpp). The batch's composition is fixed per step and its order of
// sources is the same every step, so a sequence's source and its ordinal
// within that source (step * per_batch + rank in the batch) are closed-form:
// no state to carry across steps or store in a checkpoint.
#include "io/dataset.hpp"

#include <glob.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>
#include <stdexcept>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace pentad {
namespace {

// Stream id base for random-order starts; the step is added, the sequence
// index j is the counter, so (seed, step, j) each select independent values.
constexpr uint64_t kBatchStream = fnv1a64("pentad.data.sample_batch");
// Stream id base of the epoch shuffles; (source, epoch) is added.
constexpr uint64_t kEpochStream = fnv1a64("pentad.data.epoch_order");

bool has_glob_chars(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

// The files of one entry: a glob pattern's matches sorted by name, or the path itself.
std::vector<std::string> expand_entry(const std::string& key, const std::string& entry) {
  if (!has_glob_chars(entry)) return {entry};
  glob_t g{};
  const int rc = ::glob(entry.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (rc == GLOB_NOMATCH || (rc == 0 && out.empty()))
    throw InputError(key + ": '" + entry + "' matches no file");
  if (rc != 0) throw InputError(key + ": '" + entry + "': the pattern could not be read (glob error " +
                                std::to_string(rc) + ")");
  return out;
}

// Upper bound of x in the running sums `ends` (ends[0] = 0): the file index
// holding item x, and x's offset within it.
std::pair<size_t, int64_t> locate(const std::vector<int64_t>& ends, int64_t x) {
  const auto it = std::upper_bound(ends.begin(), ends.end(), x);
  const size_t f = size_t(it - ends.begin()) - 1;
  return {f, x - ends[f]};
}

void read_at(const TokenFile& file, int64_t o, int T, int32_t* in, int32_t* tgt) {
  for (int t = 0; t < T; ++t) {
    in[t] = int32_t(file[o + t]);
    tgt[t] = file.trained(o + t + 1) ? int32_t(file[o + t + 1]) : -1;  // -1: adds nothing to the loss
  }
}

// Largest-remainder split of `total` over `weights` (ties to the lower index).
std::vector<int64_t> apportion(int64_t total, const std::vector<double>& weights) {
  const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<int64_t> n(weights.size());
  std::vector<std::pair<double, size_t>> rest;
  int64_t given = 0;
  for (size_t k = 0; k < weights.size(); ++k) {
    const double q = double(total) * weights[k] / sum;
    n[k] = int64_t(std::floor(q));
    given += n[k];
    rest.emplace_back(q - double(n[k]), k);
  }
  std::stable_sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; given < total; ++i, ++given) ++n[rest[i % rest.size()].second];
  return n;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

// ---- TokenShards ----

TokenShards::TokenShards(std::vector<const TokenFile*> files, int T) : files_(std::move(files)), T_(T) {
  for (const TokenFile* f : files_) {
    if (f->size() < int64_t(T) + 1)
      throw InputError("data file '" + f->path() + "': holds " + std::to_string(f->size()) +
                       " tokens, needs at least " + std::to_string(int64_t(T) + 1) + " (model.seq_len + 1)");
    n_tokens_ += f->size();
    start_end_.push_back(start_end_.back() + f->size() - T);
    window_end_.push_back(window_end_.back() + (f->size() - 1) / T);
  }
}

void TokenShards::read_start(int64_t s, int32_t* inputs, int32_t* targets) const {
  const auto [f, o] = locate(start_end_, s);
  read_at(*files_[f], o, T_, inputs, targets);
}

void TokenShards::read_window(int64_t w, int32_t* inputs, int32_t* targets) const {
  const auto [f, o] = locate(window_end_, w);
  read_at(*files_[f], o * T_, T_, inputs, targets);
}

bool TokenShards::has_loss_mask() const {
  return std::any_of(files_.begin(), files_.end(), [](const TokenFile* f) { return f->has_loss_mask(); });
}

int64_t TokenShards::trained_targets(int64_t n) const {
  if (!has_loss_mask()) return n * T_;
  int64_t count = 0;
  for (int64_t w = 0; w < n; ++w) {
    const auto [f, o] = locate(window_end_, w);
    const TokenFile& file = *files_[f];
    for (int64_t t = 1; t <= T_; ++t) count += file.trained(o * T_ + t) ? 1 : 0;
  }
  return count;
}

// ---- TokenDataset ----

namespace {

std::vector<const TokenFile*> views(const std::vector<std::unique_ptr<TokenFile>>& files, size_t a, size_t b) {
  std::vector<const TokenFile*> v;
  for (size_t i = a; i < b; ++i) v.push_back(files[i].get());
  return v;
}

}  // namespace

TokenDataset::TokenDataset(const std::string& key, const std::string& value, const std::vector<double>& weights,
                           int vocab_size, int T, int part, int n_parts)
    : all_({}, T) {
  if (n_parts < 1 || part < 0 || part >= n_parts)
    throw std::logic_error("TokenDataset: part " + std::to_string(part) + " of " + std::to_string(n_parts));
  const std::vector<std::string> entries = list_entries(value);
  if (entries.empty()) throw InputError(key + ": names no token file");
  if (!weights.empty() && weights.size() != entries.size())
    throw std::logic_error(key + ": " + std::to_string(weights.size()) + " weights for " +
                     std::to_string(entries.size()) + " entries (config validates this)");
  std::set<std::string> seen;
  std::vector<size_t> entry_end;  // files_ index after each entry
  for (const auto& entry : entries) {
    for (const auto& path : expand_entry(key, entry)) {
      if (!seen.insert(path).second)
        throw InputError(key + ": '" + path + "' is named twice (each file may appear once)");
      files_.push_back(std::make_unique<TokenFile>(path, vocab_size, int64_t(T) + 1, TokenScan::header));
    }
    entry_end.push_back(files_.size());
  }
  all_ = TokenShards(views(files_, 0, files_.size()), T);
  // This part's share of the vocabulary check: tokens [lo, hi) of all files in order.
  const int64_t total = all_.n_tokens();
  const auto cut = [total, n_parts](int64_t p) { return p * (total / n_parts) + std::min(p, total % n_parts); };
  const int64_t lo = cut(part), hi = cut(int64_t(part) + 1);
  int64_t at = 0;
  for (const auto& f : files_) {
    if (at < hi && at + f->size() > lo) f->check_tokens(vocab_size, lo - at, hi - at);
    at += f->size();
  }
  if (weights.empty()) {
    sources_.push_back({entries.size() == 1 ? entries[0] : value, 1.0, all_});
    return;
  }
  for (size_t e = 0; e < entries.size(); ++e)
    sources_.push_back({entries[e], weights[e], TokenShards(views(files_, e ? entry_end[e - 1] : 0, entry_end[e]), T)});
}

// ---- BatchSampler ----

BatchSampler::BatchSampler(const TokenDataset& data, DataOrder order, uint64_t seed, int64_t batch_seqs)
    : data_(data), order_(order), seed_(seed), batch_seqs_(batch_seqs) {
  if (batch_seqs < 1 || batch_seqs > (int64_t(1) << 30))
    throw std::logic_error("BatchSampler: a global batch of " + std::to_string(batch_seqs) + " sequences");
  const auto& src = data.sources();
  std::vector<double> w;
  for (const auto& s : src) w.push_back(s.weight);
  per_batch_ = apportion(batch_seqs, w);
  for (size_t k = 0; k < src.size(); ++k)
    if (per_batch_[k] == 0)
      throw InputError("data.weights: source '" + src[k].spec + "' (weight " + fmt("%g", src[k].weight) +
                       ") gets 0 of the " + std::to_string(batch_seqs) +
                       " sequences of a global batch (train.micro_batch x train.grad_accum x parallel.dp); "
                       "raise its weight or the batch");
  base_seqs_.assign(src.size(), 0);
  if (src.size() == 1) return;  // sequence j is the source's j-th: no table
  // Source k's m-th sequence sits at (m + 1/2) / per_batch[k] of the batch:
  // merging those positions spreads every source evenly over the batch (and
  // so over dp ranks and micro-batches). Compared as exact fractions.
  struct Item {
    int64_t m;
    int32_t k;
  };
  std::vector<Item> items;
  items.reserve(size_t(batch_seqs));
  for (size_t k = 0; k < src.size(); ++k)
    for (int64_t m = 0; m < per_batch_[k]; ++m) items.push_back({m, int32_t(k)});
  std::sort(items.begin(), items.end(), [this](const Item& a, const Item& b) {
    const int64_t l = (2 * a.m + 1) * per_batch_[size_t(b.k)];  // < 2 * 2^30 * 2^30
    const int64_t r = (2 * b.m + 1) * per_batch_[size_t(a.k)];
    return l != r ? l < r : a.k < b.k;
  });
  for (const Item& it : items) {
    slot_source_.push_back(it.k);
    slot_rank_.push_back(it.m);
  }
}

void BatchSampler::resume_from(int64_t steps_done, const std::vector<int64_t>& seqs_done) {
  if (seqs_done.size() != per_batch_.size() || steps_done < 0)
    throw std::logic_error("BatchSampler::resume_from: " + std::to_string(seqs_done.size()) + " counts for " +
                           std::to_string(per_batch_.size()) + " sources");
  base_step_ = steps_done;
  base_seqs_ = seqs_done;
}

void BatchSampler::fill(int64_t step, int64_t first_seq, int n_seq, int32_t* inputs, int32_t* targets) const {
  if (first_seq < 0 || first_seq + n_seq > batch_seqs_)
    throw std::logic_error("BatchSampler::fill: sequences [" + std::to_string(first_seq) + ", " +
                     std::to_string(first_seq + n_seq) + ") outside a batch of " + std::to_string(batch_seqs_));
  if (step <= base_step_)
    throw std::logic_error("BatchSampler::fill: step " + std::to_string(step) + " (the first is " +
                           std::to_string(base_step_ + 1) + ")");
  const CounterRng rng{seed_, kBatchStream + uint64_t(step)};
  for (int i = 0; i < n_seq; ++i) {
    const int64_t j = first_seq + i;
    const size_t k = source_of(j);
    const int64_t rank = slot_rank_.empty() ? j : slot_rank_[size_t(j)];
    const TokenShards& shards = data_.sources()[k].shards;
    int32_t* in = inputs + int64_t(i) * shards.T();    // (T)
    int32_t* tgt = targets + int64_t(i) * shards.T();  // (T)
    if (order_ == DataOrder::random) {
      shards.read_start(int64_t(rng.u64(uint64_t(j)) % uint64_t(shards.start_count())), in, tgt);
    } else {
      const int64_t n = shards.window_count();
      const int64_t ordinal = seqs_done(k, step - 1) + rank;
      const int64_t epoch = ordinal / n;
      const WindowPermutation perm(uint64_t(n), seed_, kEpochStream + (uint64_t(k) << 40) + uint64_t(epoch));
      shards.read_window(int64_t(perm(uint64_t(ordinal % n))), in, tgt);
    }
  }
}

double BatchSampler::epochs_read(size_t k, int64_t steps) const {
  const TokenShards& s = data_.sources()[k].shards;
  const double seqs = double(seqs_done(k, steps));
  return order_ == DataOrder::epoch ? seqs / double(s.window_count()) : seqs * s.T() / double(s.n_tokens());
}

std::string BatchSampler::describe() const {
  const auto& src = data_.sources();
  const double total_w = [&] {
    double t = 0;
    for (const auto& s : src) t += s.weight;
    return t;
  }();
  std::string out;
  for (size_t k = 0; k < src.size(); ++k) {
    const TokenShards& s = src[k].shards;
    std::string line = "data: " + (src.size() > 1 ? "source " + std::to_string(k) + " " : std::string()) + "'" +
                       src[k].spec + "': " + std::to_string(s.files().size()) +
                       (s.files().size() == 1 ? " file, " : " files, ") + std::to_string(s.n_tokens()) +
                       " tokens, " + std::to_string(per_batch_[k]) + " of " + std::to_string(batch_seqs_) +
                       " sequences a batch";
    if (src.size() > 1)
      line += " (weight " + fmt("%.4f", src[k].weight / total_w) + " asked, " +
              fmt("%.4f", double(per_batch_[k]) / double(batch_seqs_)) + " given)";
    if (order_ == DataOrder::epoch)
      line += ", order epoch: " + std::to_string(s.window_count()) + " windows, one epoch every " +
              fmt("%.1f", double(s.window_count()) / double(per_batch_[k])) + " steps";
    else
      line += ", order random";
    out += line + "\n";
  }
  return out;
}

// ---- validation windows ----

int64_t val_window_count(const TokenShards& data) { return data.window_count(); }

void val_windows(const TokenShards& data, int64_t first, int n, int64_t n_valid, int32_t* inputs,
                 int32_t* targets) {
  const int T = data.T();
  if (n_valid < 1 || n_valid > data.window_count()) {
    const std::string what = data.files().size() == 1 ? "data file '" + data.files()[0]->path() + "'"
                                                       : std::to_string(data.files().size()) + " data files";
    throw InputError(what + ": holds " + std::to_string(data.window_count()) + " windows of " + std::to_string(T) +
                     " tokens, " + std::to_string(n_valid) + " asked for");
  }
  for (int s = 0; s < n; ++s) {
    const int64_t w = first + s;
    int32_t* in = inputs + int64_t(s) * T;    // (T)
    int32_t* tgt = targets + int64_t(s) * T;  // (T)
    data.read_window(w % n_valid, in, tgt);
    if (w >= n_valid) std::fill(tgt, tgt + T, -1);
  }
}

// ---- WindowPermutation ----

WindowPermutation::WindowPermutation(uint64_t n, uint64_t seed, uint64_t stream)
    : n_(n), half_bits_(1), seed_(seed), stream_(stream) {
  if (n == 0) throw std::logic_error("WindowPermutation of an empty range");
  while (half_bits_ < 32 && (uint64_t(1) << (2 * half_bits_)) < n) ++half_bits_;
}

// Four Feistel rounds on (left, right) halves of half_bits_ bits each are a
// bijection of [0, 4^half_bits_); values >= n walk the cycle until they land
// back in [0, n), which keeps it a bijection of [0, n) (at most ~4 steps
// expected, since 4^half_bits_ < 4n).
uint64_t WindowPermutation::operator()(uint64_t i) const {
  const uint64_t mask = (uint64_t(1) << half_bits_) - 1;
  const CounterRng rng{seed_, stream_};
  uint64_t x = i;
  do {
    uint64_t l = x >> half_bits_, r = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t f = rng.u64((round << 32) | r) & mask;
      const uint64_t next_r = l ^ f;
      l = r;
      r = next_r;
    }
    x = (l << half_bits_) | r;
  } while (x >= n_);
  return x;
}

}  // namespace pentad
