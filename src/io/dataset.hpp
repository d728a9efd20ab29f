// Datasets of many token files: shards read as one body of text, weighted
// blends of several such bodies, and the two orders in which a run reads them.
// Every choice is a pure function of (train.seed, step, sequence index),
// the global batch size and, in epoch order, the sequences each source had
// supplied when the run started (0, or a checkpoint's data_sequences), so
// any layout reads the same tokens and a resumed run continues the stream.
//   random: sequence j of step s starts at Philox(seed, s, j) mod the number
//           of start positions (with replacement; for one file the rule
//           pentad always had, so older runs read the same tokens).
//   epoch:  the disjoint windows of T+1 tokens at stride T, in an order
//           shuffled anew each epoch by a keyed bijection (a Feistel network
//           with cycle walking), so each window is read once per epoch.
// A blend gives each source a fixed number of the global batch's sequences
// (largest remainder of its weight), interleaved evenly over the batch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "io/data.hpp"

namespace pentad {

// Token files read as one body of text: a sequence never crosses from one
// file into the next. Holds pointers to files owned elsewhere.
class TokenShards {
 public:
  // Every file holds at least T + 1 tokens (TokenFile's min_tokens).
  TokenShards(std::vector<const TokenFile*> files, int T);

  int T() const { return T_; }
  const std::vector<const TokenFile*>& files() const { return files_; }
  int64_t n_tokens() const { return n_tokens_; }
  // Positions a random-order sequence may start at: sum of (size - T).
  int64_t start_count() const { return start_end_.back(); }
  // Disjoint windows (inputs [w*T, w*T+T), targets one later), file by
  // file: sum of (size - 1) / T.
  int64_t window_count() const { return window_end_.back(); }

  // T inputs and T targets of start position s in [0, start_count()).
  void read_start(int64_t s, int32_t* inputs, int32_t* targets) const;
  // T inputs and T targets of window w in [0, window_count()).
  void read_window(int64_t w, int32_t* inputs, int32_t* targets) const;
  // Does any file carry a loss mask (token file versions 3 and 4)?
  bool has_loss_mask() const;
  // The trained targets of windows [0, n): n * T without a loss mask.
  int64_t trained_targets(int64_t n) const;

 private:
  std::vector<const TokenFile*> files_;
  int T_;
  int64_t n_tokens_ = 0;
  std::vector<int64_t> start_end_{0}, window_end_{0};  // running sums, one entry per file after the 0
};

// The files named by a data key (data.train or data.val): comma-separated
// paths and glob patterns (a pattern's matches sorted by name). With
// `weights` (one per entry) each entry is one source of a blend; without,
// every file is one source.
class TokenDataset {
 public:
  struct Source {
    std::string spec;  // the entry as the deck wrote it ("all files" when unweighted)
    double weight;     // 1 when unweighted
    TokenShards shards;
  };

  // Throws InputError naming `key` for a pattern that matches no file or a
  // file listed twice, and naming the file for any TokenFile error. Every
  // file's header is checked here; the token ids against vocab_size only in
  // part `part` of n_parts equal parts of all the files' tokens in order, so
  // that the ranks of a job read the data once between them (rank r passes
  // part r of the job's size; then the lowest failing rank names the first
  // bad file in order, host::agree_or_throw).
  TokenDataset(const std::string& key, const std::string& value, const std::vector<double>& weights,
               int vocab_size, int T, int part = 0, int n_parts = 1);

  const std::vector<Source>& sources() const { return sources_; }
  // Every file, in deck order, as one body of text (validation windows).
  const TokenShards& all() const { return all_; }
  const TokenFile& first_file() const { return *files_.front(); }
  size_t n_files() const { return files_.size(); }
  bool has_loss_mask() const { return all_.has_loss_mask(); }

 private:
  std::vector<std::unique_ptr<TokenFile>> files_;
  std::vector<Source> sources_;
  TokenShards all_;
};

// The global batch of every step: which source and which tokens each of its
// batch_seqs sequences reads.
class BatchSampler {
 public:
  // Throws InputError naming data.weights when a source's share of the
  // global batch rounds to no sequence.
  BatchSampler(const TokenDataset& data, DataOrder order, uint64_t seed, int64_t batch_seqs);

  // inputs/targets (n_seq * T each) of sequences [first_seq, first_seq + n_seq)
  // of the global batch of `step`, counted from 1 as the run counts them
  // (epoch order: source k's sequences of step s are its ordinals from
  // seqs_done(k, s - 1) on).
  void fill(int64_t step, int64_t first_seq, int n_seq, int32_t* inputs, int32_t* targets) const;

  // Continue after step `steps_done` from a position other than this
  // batch's own: source k has supplied seqs_done[k] sequences so far (a
  // checkpoint's data_sequences, written by a run of another global batch
  // or other weights). The epoch order then goes on where it was; the
  // random order, keyed by the step, is unchanged.
  void resume_from(int64_t steps_done, const std::vector<int64_t>& seqs_done);
  // Sequences source k has supplied after `steps` steps.
  int64_t seqs_done(size_t k, int64_t steps) const {
    return base_seqs_[k] + (steps - base_step_) * per_batch_[k];
  }

  // Sequences of each global batch that source k supplies.
  int64_t per_batch(size_t k) const { return per_batch_[k]; }
  // Source of sequence j of every global batch.
  size_t source_of(int64_t j) const { return slot_source_.empty() ? 0 : size_t(slot_source_[size_t(j)]); }
  // Epochs of source k read after `steps` steps (epoch order: its windows;
  // random order: its start positions, as a measure of exposure).
  double epochs_read(size_t k, int64_t steps) const;
  // One line per source for the start-up log.
  std::string describe() const;

 private:
  const TokenDataset& data_;
  DataOrder order_;
  uint64_t seed_;
  int64_t batch_seqs_;
  std::vector<int64_t> per_batch_;    // per source
  // Per sequence of the batch, for a blend (one source: empty, sequence j
  // is its source's j-th): its source, its index among that source's.
  std::vector<int32_t> slot_source_;
  std::vector<int64_t> slot_rank_;
  int64_t base_step_ = 0;             // resume_from: steps done before this sampler's batches
  std::vector<int64_t> base_seqs_;    // per source, sequences supplied by then
};

// The validation set: the windows of every file of `data`, file by file
// (TokenShards::read_window). Window w >= n_valid is padding: the inputs of
// window w mod n_valid and targets -1, which the loss ignores.
int64_t val_window_count(const TokenShards& data);
void val_windows(const TokenShards& data, int64_t first, int n, int64_t n_valid, int32_t* inputs,
                 int32_t* targets);

// A keyed bijection of [0, n) (the epoch shuffle), exposed for its tests.
class WindowPermutation {
 public:
  WindowPermutation(uint64_t n, uint64_t seed, uint64_t stream);
  uint64_t operator()(uint64_t i) const;

 private:
  uint64_t n_;
  int half_bits_;
  uint64_t seed_, stream_;
};

}  // namespace pentad
