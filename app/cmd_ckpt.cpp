// `pentad ckpt info SPEC` and `pentad ckpt export SPEC --to DIR [--format
// hf|llmc] [--dtype fp32|bf16] [--tokenizer FILE [--pattern NAME]] [--class C]`:
// summarise and verify a checkpoint, or write its global weights
// (checkpoint.hpp).
// SPEC is a checkpoint file, a checkpoint directory (its latest) or latest.
#include <memory>
#include <string>

#include "commands.hpp"
#include "io/checkpoint.hpp"

namespace pentad {
namespace {

struct CkptArgs {
  std::string spec, to;
  ExportOptions exp;
  int64_t max_shard_mb = 2048;
};

// The spec of `ckpt <sub>` as parsed, or a CliUsageError in the words of the
// hand-written parser.
void check_spec(const CLI::App& sub, const std::string& spec) {
  const std::string where = "ckpt " + sub.get_name() + ": ";
  if (looks_like_option(spec)) throw CliUsageError(where + "unknown or incomplete option '" + spec + "'");
  if (const std::string x = first_extra(sub); !x.empty())
    throw CliUsageError(where + (looks_like_option(x) ? "unknown or incomplete option '" + x + "'"
                                                      : "more than one checkpoint given ('" + spec + "' and '" + x +
                                                            "')"));
  if (spec.empty()) throw CliUsageError(where + "no checkpoint given");
}

// Collective over MPI_COMM_WORLD.
int ckpt(const CLI::App& cmd, const CLI::App& info, const CLI::App& exp, const CkptArgs& a) {
  const std::string x = first_extra(cmd);
  if (!x.empty()) throw CliUsageError("ckpt: unknown subcommand '" + x + "'");
  if (info.parsed()) {
    check_spec(info, a.spec);
    return ckpt_info(a.spec, MPI_COMM_WORLD);
  }
  if (!exp.parsed()) throw CliUsageError("ckpt: expected 'info SPEC' or 'export SPEC --to DIR'");
  check_spec(exp, a.spec);
  if (a.to.empty()) throw CliUsageError("ckpt export: --to DIR is required");
  if (a.max_shard_mb < 1) throw CliUsageError("ckpt export: --max-shard-mb must be at least 1");
  ExportOptions o = a.exp;
  o.max_shard_bytes = a.max_shard_mb << 20;
  return ckpt_export(a.spec, a.to, o, MPI_COMM_WORLD);
}

}  // namespace

Command add_ckpt(CLI::App& pentad) {
  auto a = std::make_shared<CkptArgs>();
  CLI::App* cmd = add_command(pentad, "ckpt", "inspect or export a checkpoint");
  CLI::App* info = add_command(*cmd, "info", "summarise and verify a checkpoint");
  info->add_option("spec", a->spec, "checkpoint file, directory or latest");
  CLI::App* exp = add_command(*cmd, "export", "global weights (+ llm.c GPT-2 .bin), or a Hugging Face model");
  exp->add_option("spec", a->spec, "checkpoint file, directory or latest");
  exp->add_option("--to", a->to, "output directory");
  exp->add_option("--format", a->exp.format, "llmc (model.h5 + llm.c GPT-2 .bin; default) or hf (safetensors)");
  exp->add_option("--dtype", a->exp.dtype, "hf tensors: fp32 (default) or bf16");
  exp->add_option("--max-shard-mb", a->max_shard_mb, "hf: largest safetensors shard in MiB (default 2048)");
  exp->add_option("--tokenizer", a->exp.tokenizer, "hf: tiktoken rank file or tokenizer.json (or bytes: the byte tokenizer), written as tokenizer.json");
  exp->add_option("--class", a->exp.hf_class,
                  "hf: the class written (default: the deck's; Phi3ForCausalLM for a Llama: q/k/v and gate/up fused)");
  exp->add_option("--pattern", a->exp.pattern, "hf: the tokenizer's pattern (gpt2, cl100k, llama3, qwen2; default: from its rank count)");
  return {cmd, [cmd, info, exp, a] { return ckpt(*cmd, *info, *exp, *a); },
          [](const std::string& opt) { return "ckpt export: unknown or incomplete option '" + opt + "'"; }};
}

}  // namespace pentad
