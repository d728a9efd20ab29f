// `pentad prep`: text files to token files. Each input file is one document;
// when the tokenizer has a document separator (<|endoftext|> for GPT-2 and
// cl100k, <|begin_of_text|> for Llama 3) it goes before every document (so
// documents are separated and the first one is preceded by it, as llm.c's
// data scripts write them). Documents are encoded in parallel (OpenMP), in
// chunks cut where the ids cannot change. The last val_fraction of the tokens is the
// validation file. Token files are version 1 (uint16) when the vocabulary
// fits, version 2 (uint32) otherwise (data.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tok/tokenizer.hpp"

namespace pentad {

struct PrepResult {
  int n_files = 0;
  int64_t bytes = 0;                 // of text read
  std::string train_path, val_path;  // <out_dir>/train.bin, <out_dir>/val.bin
  int64_t train_tokens = 0, val_tokens = 0;
  int version = 1;                   // of the token files written
  // "prep: 3 files, 3111 bytes -> DIR/train.bin (2800 tokens), DIR/val.bin (311 tokens)"
  std::string summary() const;
};

// Throws InputError on unreadable inputs, an empty corpus or an unwritable
// out_dir, naming the file.
PrepResult prep_corpus(const std::vector<std::string>& inputs, const std::string& out_dir,
                       double val_fraction, const Tokenizer& tokenizer);

// prep_corpus with the byte tokenizer (vocabulary 256); returns the summary.
std::string prep_bytes(const std::vector<std::string>& inputs, const std::string& out_dir,
                       double val_fraction);

}  // namespace pentad
