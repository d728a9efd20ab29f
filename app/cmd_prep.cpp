// `pentad prep [--tokenizer FILE [--pattern NAME]] --out DIR
// [--val-fraction F] [--shard-tokens N] [--json-key NAME | --prompt-key NAME
// --completion-key NAME | --messages-key NAME] FILE...`: rank 0
// turns text and JSON Lines files into token files (io/prep.hpp), byte-level
// or BPE over a tiktoken rank file (tok/bpe.hpp), printing its progress to
// stderr every 30 s; a stop signal ends it with nothing written; every rank
// agrees on the outcome. With --choices it turns one HellaSwag JSON Lines
// file into a multiple-choice eval file, DIR/<name>.bin (io/choice_eval.hpp).
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "comm/host.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/checkpoint.hpp"
#include "io/choice_eval.hpp"
#include "io/prep.hpp"
#include "io/signals.hpp"
#include "tok/bpe.hpp"
#include "tok/chat.hpp"
#include "tok/hf_tokenizer.hpp"

namespace pentad {
namespace {

struct PrepArgs {
  std::string out, val_fraction, shard_tokens, tokenizer, pattern, json_key = "text", prompt_key, completion_key,
      messages_key;
  std::vector<std::string> files;
  bool choices = false;
};

// --choices: FILE.jsonl -> DIR/FILE.bin; the summary line.
std::string prep_choices(const PrepArgs& a, const Tokenizer& tok) {
  namespace fs = std::filesystem;
  const std::vector<ChoiceExample> examples = read_choices_jsonl(a.files[0], tok);
  if (!make_dirs(a.out)) throw InputError("prep: cannot create --out '" + a.out + "': " + std::strerror(errno));
  const std::string out = (fs::path(a.out) / fs::path(a.files[0]).stem()).string() + ".bin";
  write_choice_file(out, examples);
  size_t endings = 0, longest = 0;
  for (const ChoiceExample& e : examples) {
    endings += e.endings.size();
    for (const auto& end : e.endings) longest = std::max(longest, e.context.size() + end.size());
  }
  return "prep: " + std::to_string(examples.size()) + " multiple-choice examples (" + std::to_string(endings) +
         " endings) from " + a.files[0] + " -> " + out + ", tokenizer " + tok.describe() +
         "; the longest context + ending is " + std::to_string(longest) + " tokens (model.seq_len >= " +
         std::to_string(longest - 1) + " scores it whole)";
}

// --messages-key: the tokenizer's chat format and what its own template
// writes of its own (Qwen2.5's default system turn, Llama 3.2's date).
void chat_setup(const PrepArgs& a, const Tokenizer& tok, PrepOptions& o) {
  o.messages_key = a.messages_key;
  try {
    o.chat_format = chat_format(tok);
  } catch (const InputError& e) {
    std::string why = e.what();
    if (why.rfind("--chat: ", 0) == 0) why = why.substr(8);
    throw InputError("prep --messages-key: " + why);
  }
  const ChatTemplateFacts t = read_chat_template(hf::tokenizer_file(a.tokenizer));
  check_chat_template(t, *o.chat_format);
  o.chat_options.date = chat_date(t, "");
  if (*o.chat_format == ChatFormat::chatml) o.chat_options.default_system = t.default_system;
  // Qwen3's (a ChatML tokenizer with thinking tokens): its reasoning rule.
  o.chat_options.strip_reasoning = *o.chat_format == ChatFormat::chatml && special_token_id(tok, "<think>") >= 0 &&
                                   special_token_id(tok, "</think>") >= 0;
}

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
  if (a.json_key.empty()) throw CliUsageError("prep: --json-key must name a field");
  if (a.prompt_key.empty() != a.completion_key.empty())
    throw CliUsageError("prep: --prompt-key and --completion-key go together (prompt/completion pairs)");
  if (!a.prompt_key.empty() && cmd.count("--json-key") > 0)
    throw CliUsageError("prep: --json-key reads one text field; with --prompt-key and --completion-key it does not apply");
  if (!a.prompt_key.empty() && a.choices) throw CliUsageError("prep: --choices takes no --prompt-key or --completion-key");
  if (!a.messages_key.empty() && (!a.prompt_key.empty() || a.choices || cmd.count("--json-key") > 0))
    throw CliUsageError("prep: --messages-key reads conversations; it goes with none of --prompt-key, --completion-key, "
                        "--json-key, --choices");
  if (!a.messages_key.empty() && a.tokenizer.empty())
    throw CliUsageError("prep: --messages-key needs --tokenizer: a tokenizer with a chat format's tokens");
  if (a.choices && a.files.size() != 1) throw CliUsageError("prep: --choices takes one JSON Lines file");
  if (a.choices && (!a.val_fraction.empty() || !a.shard_tokens.empty()))
    throw CliUsageError("prep: --choices writes one eval file: no --val-fraction or --shard-tokens");
  PrepOptions options;
  options.val_fraction = val_fraction;
  options.shard_tokens = shard_tokens;
  options.json_key = a.json_key;
  options.prompt_key = a.prompt_key;
  options.completion_key = a.completion_key;
  // SIGINT, SIGTERM, SIGUSR1 (mpiexec and srun forward them): prep stops at
  // the next batch, leaving --out as it was; exit 130 after SIGINT, else 1.
  install_signal_handlers();
  options.stop = [] { return signal_received(); };
  options.progress = [](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  };
  std::string summary, err;
  int32_t interrupted = 0;
  if (job.rank == 0) {
    try {
      const std::unique_ptr<Tokenizer> tok =
          a.tokenizer.empty() ? make_byte_tokenizer() : load_tokenizer(a.tokenizer, a.pattern);
      if (!a.messages_key.empty()) chat_setup(a, *tok, options);
      if (a.choices) {
        summary = prep_choices(a, *tok);
      } else {
        const PrepResult r = prep_corpus(a.files, a.out, *tok, options);
        summary = r.summary() + "\nprep: " + std::to_string(r.documents) +
                  (r.documents == 1 ? " document" : " documents") + ", tokenizer " + tok->describe() + ", vocabulary " +
                  std::to_string(tok->vocab_size()) + ", token files version " + std::to_string(r.version) +
                  (r.version == 1 || r.version == 3 ? " (uint16" : " (uint32") +
                  (r.masked ? ", with the loss mask)" : ")");
      }
    } catch (const PrepStopped& e) {
      // Ctrl-C ends as a stopped training run does: 130 on every rank.
      interrupted = interrupt_received() ? 1 : 0;
      if (!interrupted) err = e.what();
    } catch (const InputError& e) {
      err = e.what();
    }
  }
  // The other ranks sleep meanwhile rather than spin (prep may take hours).
  host::idle_barrier(MPI_COMM_WORLD);
  host::bcast(MPI_COMM_WORLD, &interrupted, 1, 0);
  if (interrupted != 0) {
    if (job.rank == 0)
      std::printf("signal received: prep stopped before it finished, no token file written or replaced; "
                  "exiting with code %d (SIGINT)\n", kInterruptedExitCode);
    return kInterruptedExitCode;
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
  cmd->add_option("--pattern", a->pattern, "pre-tokenization pattern: gpt2, cl100k, llama3 or qwen2 (default: from the rank count)");
  cmd->add_option("--out", a->out, "output directory");
  cmd->add_option("--val-fraction", a->val_fraction, "fraction of the tokens for validation (default 0.1)");
  cmd->add_option("--shard-tokens", a->shard_tokens,
                  "tokens per file: train_000000.bin, ... and val_000000.bin, ... (default: one train.bin, one val.bin)");
  cmd->add_option("--json-key", a->json_key,
                  "the document's field in a JSON Lines file (*.jsonl, *.ndjson: one object per line; default text)");
  cmd->add_option("--prompt-key", a->prompt_key,
                  "with --completion-key: JSON Lines of prompt/completion pairs; the loss trains the completions "
                  "only (token files with a loss mask)");
  cmd->add_option("--completion-key", a->completion_key, "the completion's field (with --prompt-key)");
  cmd->add_option("--messages-key", a->messages_key,
                  "JSON Lines of conversations: the field holding each line's [{\"role\", \"content\"}, ...] "
                  "messages, written in the tokenizer's chat format; the loss trains the assistant's turns only");
  cmd->add_flag("--choices", a->choices,
               "one HellaSwag JSON Lines file (ctx, endings, label) -> DIR/<name>.bin, a multiple-choice eval file "
               "(data.choice_eval)");
  cmd->add_option("files", a->files,
                  "text files (one document each) and JSON Lines files (one document a line); *.gz and *.zst "
                  "are decompressed");
  return {cmd, [cmd, a, job] { return prep(*cmd, *a, job); }, unknown};
}

}  // namespace pentad
