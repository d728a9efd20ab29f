// `pentad sample CKPT [--prompt TEXT | --prompt-file F] [--tokens N] ...`:
// text from a trained model, on one rank (src/infer: the KV-cache engine and
// the sampler). CKPT is a checkpoint file, a checkpoint directory (its
// latest) or its latest pointer, latest (ckpt/latest), or an export
// directory (`pentad ckpt export`: DIR/model.h5). The text goes to stdout
// (or the token ids, --ids), the counts and rates to stderr.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "config/config.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "infer/engine.hpp"
#include "infer/sampler.hpp"
#include "tok/bpe.hpp"
#include "tok/utf8.hpp"
#include "infer/weights.hpp"
#include "runtime.hpp"
#include "tok/tokenizer.hpp"

namespace pentad {
namespace {

struct SampleArgs {
  std::string spec, tokenizer, pattern, prompt, prompt_file, backend = "cpu";
  bool prompt_given = false;
  int tokens = 64;
  int threads = 0;
  SampleParams p;
  bool ids = false;
};

// The tokenizer for the model: the file given, or the byte tokenizer (a
// vocabulary of 256). A tokenizer with more ids than the model has is the
// wrong one.
std::unique_ptr<Tokenizer> choose_tokenizer(const SampleArgs& a, int64_t model_vocab) {
  if (a.tokenizer.empty() && !a.pattern.empty()) throw InputError("--pattern needs --tokenizer FILE");
  if (a.tokenizer.empty() && model_vocab > 256)
    throw InputError("the model's vocabulary is model.vocab_size=" + std::to_string(model_vocab) +
                     ", more than the byte tokenizer's 256: give its --tokenizer FILE");
  std::unique_ptr<Tokenizer> tok = a.tokenizer.empty() ? make_byte_tokenizer() : load_tiktoken(a.tokenizer, a.pattern);
  if (tok->vocab_size() > model_vocab)
    throw InputError("the model does not match the tokenizer: tokenizer " + tok->describe() + " has " +
                     std::to_string(tok->vocab_size()) + " ids, the model's vocabulary model.vocab_size=" +
                     std::to_string(model_vocab));
  return tok;
}

std::string prompt_text(const SampleArgs& a) {
  if (a.prompt_given && !a.prompt_file.empty()) throw InputError("give --prompt or --prompt-file, not both");
  if (a.prompt_file.empty()) return a.prompt;
  std::optional<std::string> t = read_text(a.prompt_file);
  if (!t) throw InputError("--prompt-file: cannot read '" + a.prompt_file + "'");
  return *t;
}

const char* stop_text(StopReason r) {
  switch (r) {
    case StopReason::eot: return "end-of-text";
    case StopReason::seq_len: return "model.seq_len reached";
    case StopReason::tokens: break;
  }
  return "--tokens reached";
}

int sample(const CLI::App& cmd, SampleArgs a, Job job) {
  if (looks_like_option(a.spec)) throw CliUsageError("sample: unknown option '" + a.spec + "'");
  if (const std::string x = first_extra(cmd); !x.empty())
    throw CliUsageError(looks_like_option(x) ? "sample: unknown option '" + x + "'"
                                             : "sample: more than one checkpoint given ('" + a.spec + "' and '" + x + "')");
  if (a.spec.empty()) throw CliUsageError("sample: no checkpoint given");
  a.prompt_given = cmd.count("--prompt") > 0;
  // Every rank sees the same command line and world: the same error everywhere.
  if (job.size != 1)
    throw InputError("sample runs on exactly one rank (this job has " + std::to_string(job.size) +
                     "): run it without mpiexec, or with -n 1");
  check_sample_params(a.p);
  if (a.tokens < 0) throw InputError("--tokens " + std::to_string(a.tokens) + ": must be >= 0");
  Config run;
  if (a.backend == "cpu") run.backend = BackendKind::cpu;
  else if (a.backend == "cuda") run.backend = BackendKind::cuda;
  else throw InputError("--backend " + a.backend + ": expected cpu or cuda");
  if (a.threads < 0) throw InputError("--threads " + std::to_string(a.threads) + ": must be >= 0 (0 = default)");
  run.train.threads = a.threads;

  const std::string path = resolve_weights_path(a.spec);
  const ModelWeights w = load_model_weights(path);
  const ModelConfig& mc = w.cfg;
  const std::unique_ptr<Tokenizer> tok = choose_tokenizer(a, mc.vocab_size);
  const std::string text = prompt_text(a);
  std::vector<int32_t> prompt;
  for (uint32_t id : tok->encode(text)) prompt.push_back(int32_t(id));
  if (prompt.empty() && tok->eot() >= 0) prompt.push_back(int32_t(tok->eot()));
  if (prompt.empty())
    throw InputError("the prompt is empty and tokenizer " + tok->describe() +
                     " has no end-of-text token to start from: give --prompt TEXT");
  if (int64_t(prompt.size()) > mc.seq_len)
    throw InputError("the prompt has " + std::to_string(prompt.size()) + " tokens, more than model.seq_len=" +
                     std::to_string(mc.seq_len) + " of " + path);

  run.source = "--backend";
  std::unique_ptr<Backend> be = make_backend(run, MPI_COMM_WORLD);
  InferenceEngine engine(w, *be);
  std::fprintf(stderr, "sample: %s (step %lld), %s L=%d C=%d V=%d seq_len=%d, tokenizer %s, backend %s\n",
               path.c_str(), (long long)w.step, mc.family == Family::gpt2 ? "gpt2" : "llama", mc.n_layers,
               mc.d_model, mc.vocab_size, mc.seq_len, tok->describe().c_str(), be->name().c_str());
  SampleParams p = a.p;
  p.vocab = int(tok->vocab_size());
  const Generation g = a.tokens > 0 ? generate(engine, prompt, a.tokens, p, tok->eot()) : Generation{};
  if (a.ids) {
    for (size_t i = 0; i < g.ids.size(); ++i) std::printf("%s%d", i ? " " : "", g.ids[i]);
    std::printf("\n");
  } else {
    std::vector<uint32_t> out(g.ids.begin(), g.ids.end());
    std::printf("%s%s\n", utf8_replace(text).c_str(), utf8_replace(tok->decode(out)).c_str());
  }
  std::fflush(stdout);
  const size_t n_new = g.ids.size();
  std::fprintf(stderr,
               "sample: prompt %zu tokens, generated %zu tokens (stopped: %s) | prefill %.1f ms, %.0f tokens/s | "
               "decode %d forwards of one position in %.1f ms, %.1f tokens/s\n",
               prompt.size(), n_new, a.tokens > 0 ? stop_text(g.stop) : "--tokens 0", g.prefill_s * 1e3,
               g.prefill_s > 0 ? double(prompt.size()) / g.prefill_s : 0.0, g.n_forwards, g.decode_s * 1e3,
               g.decode_s > 0 ? double(g.n_forwards) / g.decode_s : 0.0);
  return 0;
}

}  // namespace

Command add_sample(CLI::App& pentad, Job job) {
  auto a = std::make_shared<SampleArgs>();
  CLI::App* cmd = add_command(pentad, "sample", "generate text from a checkpoint or exported weights");
  cmd->add_option("ckpt", a->spec, "checkpoint file, directory, latest, or export directory");
  cmd->add_option("--tokenizer", a->tokenizer, "tiktoken rank file (default: bytes, for a vocabulary of 256)");
  cmd->add_option("--pattern", a->pattern, "the tokenizer's pre-tokenization pattern");
  cmd->add_option("--prompt", a->prompt, "prompt text");
  cmd->add_option("--prompt-file", a->prompt_file, "file holding the prompt");
  cmd->add_option("--tokens", a->tokens, "tokens to generate (default 64)");
  cmd->add_option("--temperature", a->p.temperature, "softmax temperature; 0 = greedy (default 1)");
  cmd->add_option("--top-k", a->p.top_k, "sample among the k most likely tokens; 0 = all (default)");
  cmd->add_option("--top-p", a->p.top_p, "nucleus: the smallest set with this probability mass (default 1)");
  cmd->add_option("--seed", a->p.seed, "random seed (default 0)");
  cmd->add_option("--backend", a->backend, "cpu (default) or cuda");
  cmd->add_option("--threads", a->threads, "OpenMP/BLAS threads (cpu); 0 = default");
  cmd->add_flag("--ids", a->ids, "print the generated token ids instead of text");
  return {cmd, [cmd, a, job] { return sample(*cmd, *a, job); },
          [](const std::string& opt) { return "sample: option '" + opt + "' needs a value"; }};
}

}  // namespace pentad
