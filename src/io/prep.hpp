// `pentad prep`: text files to token files. Each input file is one document;
// when the tokenizer has a document separator (<|endoftext|> for GPT-2 and
// cl100k, <|begin_of_text|> for Llama 3) it goes before every document (so
// documents are separated and the first one is preceded by it, as llm.c's
// data scripts write them). Documents are encoded in parallel (OpenMP), in
// chunks cut where the ids cannot change. The last val_fraction of the tokens is the
// validation file. Token files are version 1 (uint16) when the vocabulary
// fits, version 2 (uint32) otherwise (data.hpp). With shard_tokens > 0 each
// part is cut into files of that many tokens (the last one shorter),
// train_000000.bin, ... and val_000000.bin, ..., which a deck names with a
// glob (data.train = "DIR/train_*.bin"); one file holds at most 2^31 - 1
// tokens (the header's int32 count), so larger corpora need shards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tok/tokenizer.hpp"

namespace pentad {

struct PrepResult {
  int n_files = 0;
  int64_t bytes = 0;                 // of text read
  // <out_dir>/train.bin and val.bin, or with shards the patterns
  // <out_dir>/train_*.bin and val_*.bin (the deck's data.train and data.val)
  std::string train_path, val_path;
  int64_t train_tokens = 0, val_tokens = 0;
  int64_t train_files = 1, val_files = 1;
  bool sharded = false;
  int version = 1;                   // of the token files written
  // "prep: 3 files, 3111 bytes -> DIR/train.bin (2800 tokens), DIR/val.bin (311 tokens)"
  std::string summary() const;
};

// Throws InputError on unreadable inputs, an empty corpus, an unwritable
// out_dir, or (with shards) a shard file of an earlier prep in out_dir that
// this one would not overwrite (a glob would read it as part of the data),
// naming the file; nothing is written then.
PrepResult prep_corpus(const std::vector<std::string>& inputs, const std::string& out_dir,
                       double val_fraction, const Tokenizer& tokenizer, int64_t shard_tokens = 0);

// prep_corpus with the byte tokenizer (vocabulary 256); returns the summary.
std::string prep_bytes(const std::vector<std::string>& inputs, const std::string& out_dir,
                       double val_fraction);

}  // namespace pentad
