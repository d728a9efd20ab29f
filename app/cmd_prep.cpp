// `pentad prep [--tokenizer FILE [--pattern NAME]] --out DIR
// [--val-fraction F] [--shard-tokens N] FILE...`: rank 0 turns text files into token files
// (io/prep.hpp), byte-level or BPE over a tiktoken rank file (tok/bpe.hpp);
// every rank agrees on the outcome.
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "comm/host.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "io/prep.hpp"
#include "tok/bpe.hpp"

namespace pentad {
namespace {

struct PrepArgs {
  std::string out, val_fraction, shard_tokens, tokenizer, pattern;
  std::vector<std::string> files;
};

std::string unknown(const std::string& arg) { return "prep: unknown or incomplete option '" + arg + "'"; }

// Collective over MPI_COMM_WORLD (rank 0 writes, every rank agrees).
int prep(const CLI::App& cmd, const PrepArgs& a, Job job) {
  for (const auto& f : a.files)
    if (looks_like_option(f)) throw CliUsageError(unknown(f));
  if (const std::string x = first_extra(cmd); !x.empty()) throw CliUsageError(unknown(x));
  double val_fraction = 0.1;
  if (!a.val_fraction.empty()) {
    char* end = nullptr;
    val_fraction = std::strtod(a.val_fraction.c_str(), &end);
    if (*end != '\0' || !(val_fraction >= 0 && val_fraction < 1))
      throw CliUsageError("--val-fraction must be a number in [0, 1)");
  }
  int64_t shard_tokens = 0;
  if (!a.shard_tokens.empty()) {
    char* end = nullptr;
    errno = 0;
    shard_tokens = std::strtoll(a.shard_tokens.c_str(), &end, 10);
    if (*end != '\0' || errno != 0 || shard_tokens < 1 || shard_tokens > INT32_MAX)
      throw CliUsageError("--shard-tokens must be a whole number in [1, 2^31-1] (tokens per file)");
  }
  if (a.out.empty()) throw CliUsageError("prep: --out DIR is required");
  if (!a.pattern.empty() && a.tokenizer.empty()) throw CliUsageError("prep: --pattern needs --tokenizer FILE");
  std::string summary, err;
  if (job.rank == 0) {
    try {
      const std::unique_ptr<Tokenizer> tok =
          a.tokenizer.empty() ? make_byte_tokenizer() : load_tiktoken(a.tokenizer, a.pattern);
      const PrepResult r = prep_corpus(a.files, a.out, val_fraction, *tok, shard_tokens);
      summary = r.summary() + "\nprep: tokenizer " + tok->describe() + ", vocabulary " +
                std::to_string(tok->vocab_size()) + ", token files version " + std::to_string(r.version) +
                (r.version == 1 ? " (uint16)" : " (uint32)");
    } catch (const InputError& e) {
      err = e.what();
    }
  }
  agree_or_throw(err.empty(), err, MPI_COMM_WORLD);
  if (job.rank == 0) std::printf("%s\n", summary.c_str());
  return 0;
}

}  // namespace

Command add_prep(CLI::App& pentad, Job job) {
  auto a = std::make_shared<PrepArgs>();
  CLI::App* cmd = add_command(pentad, "prep", "text files -> token files (bytes, or BPE with --tokenizer)");
  cmd->add_option("--tokenizer", a->tokenizer, "tiktoken rank file (BPE); default: one token per byte");
  cmd->add_option("--pattern", a->pattern, "pre-tokenization pattern: gpt2, cl100k or llama3 (default: from the rank count)");
  cmd->add_option("--out", a->out, "output directory");
  cmd->add_option("--val-fraction", a->val_fraction, "fraction of the tokens for validation (default 0.1)");
  cmd->add_option("--shard-tokens", a->shard_tokens,
                  "tokens per file: train_000000.bin, ... and val_000000.bin, ... (default: one train.bin, one val.bin)");
  cmd->add_option("files", a->files, "text files");
  return {cmd, [cmd, a, job] { return prep(*cmd, *a, job); }, unknown};
}

}  // namespace pentad
