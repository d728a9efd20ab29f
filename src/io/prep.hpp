// `pentad prep`: text to token files, streamed in bounded memory.
//
// Inputs: a plain file is one document; a JSON Lines file (name ending in
// .jsonl or .ndjson) holds one document per line, the string field
// `json_key` ("text") of the line's object (blank lines are skipped), or a
// prompt and a completion (PrepOptions::prompt_key, below). A
// name ending in .gz is gunzipped as it is read, one ending in .zst
// decompressed from zstd (a.jsonl.gz and a.jsonl.zst are JSON Lines). When
// the tokenizer has a document separator (<|endoftext|> for GPT-2 and
// cl100k, <|begin_of_text|> for Llama 3) it goes before every document (so
// documents are separated and the first one is preceded by it, as llm.c's
// data scripts write them).
//
// Streaming: documents are read a batch at a time (about batch_bytes of
// text), encoded on all cores (OpenMP, in chunks cut where the ids cannot
// change: tok/parallel.hpp), and their ids appended to a staging file in
// out_dir. A plain file longer than piece_bytes is read in pieces cut at such
// places too (the tokenizer's safe_cut), so memory does not grow with the
// corpus; only a piece with no such place (for BPE, no line break between
// printable ASCII characters; for a SentencePiece BPE, no line break) or a
// single JSON line is held whole.
//
// The last val_fraction of the tokens is the validation file. Where that
// begins is known only at the end, so the token files are written from the
// staging file then (free disk for about twice the output while prep runs),
// each atomically, and the staging file is removed; on any error before the
// final renames nothing is left in out_dir. Token files are version 1
// (uint16) when the vocabulary fits, version 2 (uint32) otherwise
// (data.hpp). With shard_tokens > 0 each
// part is cut into files of that many tokens (the last one shorter),
// train_000000.bin, ... and val_000000.bin, ..., which a deck names with a
// glob (data.train = "DIR/train_*.bin"); one file holds at most 2^31 - 1
// tokens (the header's int32 count), so larger corpora need shards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "tok/chat.hpp"
#include "tok/tokenizer.hpp"

namespace pentad {

struct PrepOptions {
  double val_fraction = 0.1;
  int64_t shard_tokens = 0;          // 0: one train.bin and one val.bin
  std::string json_key = "text";     // the document's field in a JSON Lines file
  // Prompt/completion pairs (supervised fine-tuning), both set or neither:
  // each JSON Lines line's two string fields are one document, the prompt
  // then the completion, encoded apart (the completion as a continuation),
  // and only the completion's tokens, with the end-of-text token after it,
  // are trained targets: the token files carry a loss mask (versions 3 and
  // 4, data.hpp). Where the end-of-text token is also the document
  // separator (GPT-2, cl100k) the next document's separator is that end,
  // and one more closes the corpus; a tokenizer without one (bytes) marks
  // no end. Every input must then be JSON Lines.
  std::string prompt_key, completion_key;
  // Conversations (supervised fine-tuning of a chat model): each JSON Lines
  // line's field messages_key is an array of {"role": "system" | "user" |
  // "assistant", "content": "..."} objects, one document, written in
  // chat_format (tok/chat.hpp, chat_segments with chat_options, no
  // assistant turn opened at the end) and encoded with its turn tokens as
  // their ids; the ids of each assistant message's content and of the
  // end-of-turn token after it are the trained targets (encode_chat). A
  // conversation in Llama 3's or Gemma's format starts with their begin
  // token (<|begin_of_text|>, <bos>); in ChatML, which has none, the
  // document separator goes before it; neither is trained. Every line needs
  // an assistant message.
  std::string messages_key;
  std::optional<ChatFormat> chat_format;  // required with messages_key
  ChatOptions chat_options;
  size_t batch_bytes = 0;            // text encoded at once; 0: max(32 MiB, 4 MiB x OpenMP threads)
  size_t piece_bytes = size_t(1) << 20;  // a plain file is read in pieces of about this size
  // Called with a progress line ("prep: 1.2 GB of 4.0 GB read (30.0%), ...")
  // at most every progress_s seconds while prep runs; none when empty.
  std::function<void(const std::string&)> progress;
  double progress_s = 30.0;
  // Polled between batches and between output files: true stops prep with
  // PrepStopped, nothing written or replaced (`pentad prep`: a signal).
  std::function<bool()> stop;
};

// What prep_corpus throws when PrepOptions::stop says so.
struct PrepStopped : InputError {
  PrepStopped() : InputError("prep: stopped by a signal before it finished; no token file was written or replaced") {}
};

struct PrepResult {
  int n_files = 0;
  int64_t bytes = 0;                 // of document text tokenized
  int64_t documents = 0;
  // <out_dir>/train.bin and val.bin, or with shards the patterns
  // <out_dir>/train_*.bin and val_*.bin (the deck's data.train and data.val)
  std::string train_path, val_path;
  int64_t train_tokens = 0, val_tokens = 0;
  int64_t train_files = 1, val_files = 1;
  bool sharded = false;
  int version = 1;                   // of the token files written
  bool masked = false;               // prompt/completion pairs or conversations: a loss mask
  int64_t trained_tokens = 0;        // with masked: the tokens whose bit is set (train and val)
  std::string chat_format;           // with messages_key: the format's name
  // "prep: 3 files, 3111 bytes -> DIR/train.bin (2800 tokens), DIR/val.bin (311 tokens)"
  std::string summary() const;
};

// Throws InputError on an unreadable input, a JSON Lines line that is not an
// object with a string field json_key (naming file and line), an empty
// corpus, an unwritable out_dir or a full disk, or (with shards) a shard file
// of an earlier prep in out_dir that this one would not overwrite (a glob
// would read it as part of the data), naming the file; no token file is
// written or replaced then (only a rename refused part-way through the final
// renames can leave some new files beside old ones).
PrepResult prep_corpus(const std::vector<std::string>& inputs, const std::string& out_dir,
                       const Tokenizer& tokenizer, const PrepOptions& options);
PrepResult prep_corpus(const std::vector<std::string>& inputs, const std::string& out_dir,
                       double val_fraction, const Tokenizer& tokenizer, int64_t shard_tokens = 0);

// prep_corpus with the byte tokenizer (vocabulary 256); returns the summary.
std::string prep_bytes(const std::vector<std::string>& inputs, const std::string& out_dir,
                       double val_fraction);

}  // namespace pentad
