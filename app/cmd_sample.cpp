// `pentad sample CKPT [--prompt TEXT | --prompt-file F] [--tokens N] ...`:
// text from a trained model, on one rank (src/infer: the KV-cache engine and
// the sampler). CKPT is a checkpoint file, a checkpoint directory (its
// latest) or its latest pointer, latest (ckpt/latest), an export
// directory (`pentad ckpt export`: DIR/model.h5), or a Hugging Face model
// directory (config.json, safetensors, and its tokenizer.json if present).
// The text goes to stdout (or the token ids, --ids), the counts and rates
// to stderr.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <filesystem>
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
#include "io/hf_import.hpp"
#include "runtime.hpp"
#include "tok/chat.hpp"
#include "tok/hf_tokenizer.hpp"
#include "tok/tokenizer.hpp"

namespace pentad {
namespace {

namespace fs = std::filesystem;

struct SampleArgs {
  std::string spec, tokenizer, pattern, prompt, prompt_file, backend = "cpu";
  bool prompt_given = false;
  int tokens = 64;
  int threads = 0;
  SampleParams p;
  bool ids = false;
  bool special = false;  // special tokens' texts in the prompt are their ids; no begin token added
  bool chat = false;     // the prompt as one user turn of the tokenizer's chat format (tok/chat.hpp)
  std::string system;    // with chat: a system turn before it
  std::string messages;  // a JSON file of the whole conversation (implies chat)
  bool no_think = false;  // with chat: Qwen3's empty thinking block (enable_thinking = false)
  std::string date;       // with chat, Llama 3.1+'s format: its "Today Date" ("today": the local date)
  ChatTemplateFacts tmpl;  // with chat: what the tokenizer's own chat template writes of its own
  std::vector<std::string> stop_strings;  // --stop: generation ends once the generated text holds one
};

// The tokenizer for the model: the file given (a tiktoken rank file or a
// tokenizer.json), else a Hugging Face directory's own tokenizer.json, else
// the byte tokenizer (a vocabulary of 256). A tokenizer with more ids than
// the model has is the wrong one.
std::unique_ptr<Tokenizer> choose_tokenizer(const SampleArgs& a, int64_t model_vocab, const std::string& hf_dir) {
  std::string file = a.tokenizer;
  if (file.empty() && !hf_dir.empty()) {
    const std::string own = (fs::path(hf_dir) / "tokenizer.json").string();
    std::error_code ec;
    if (fs::exists(own, ec)) file = own;
  }
  if (file.empty() && !a.pattern.empty()) throw InputError("--pattern needs --tokenizer FILE");
  if (file.empty() && model_vocab > 256)
    throw InputError("the model's vocabulary is model.vocab_size=" + std::to_string(model_vocab) +
                     ", more than the byte tokenizer's 256: give its --tokenizer FILE" +
                     (hf_dir.empty() ? "" : " (the directory has no tokenizer.json)"));
  std::unique_ptr<Tokenizer> tok = file.empty() ? make_byte_tokenizer() : load_tokenizer(file, a.pattern);
  if (tok->vocab_size() > model_vocab)
    throw InputError("the model does not match the tokenizer: tokenizer " + tok->describe() + " has " +
                     std::to_string(tok->vocab_size()) + " ids, the model's vocabulary model.vocab_size=" +
                     std::to_string(model_vocab));
  return tok;
}

std::string prompt_text(const SampleArgs& a) {
  if (a.prompt_given && !a.prompt_file.empty()) throw InputError("give --prompt or --prompt-file, not both");
  if (!a.messages.empty() && (a.prompt_given || !a.prompt_file.empty() || !a.system.empty() || a.special))
    throw InputError("--messages holds the whole conversation: give it without --prompt, --prompt-file, --system "
                     "and --special");
  if (!a.messages.empty()) return {};
  if (a.prompt_file.empty()) return a.prompt;
  std::optional<std::string> t = read_text(a.prompt_file);
  if (!t) throw InputError("--prompt-file: cannot read '" + a.prompt_file + "'");
  return *t;
}

// The text the prompt's ids encode: the prompt, or with --chat its chat
// turn (*format set).
std::string encoded_text(const SampleArgs& a, const Tokenizer& tok, const std::string& text,
                         std::optional<ChatFormat>* format) {
  if (!a.system.empty() && !a.chat) throw InputError("--system needs --chat");
  if (a.no_think && !a.chat) throw InputError("--no-think needs --chat");
  if (!a.date.empty() && !a.chat) throw InputError("--date needs --chat");
  if (!a.chat) return text;
  // (The file first: its errors are named whatever the tokenizer.)
  const std::vector<ChatMessage> messages =
      a.messages.empty() ? std::vector<ChatMessage>() : read_chat_messages(a.messages);
  *format = chat_format(tok);
  check_chat_template(a.tmpl, **format);
  const bool think = special_token_id(tok, "<think>") >= 0 && special_token_id(tok, "</think>") >= 0;
  if (a.no_think && **format == ChatFormat::chatml && !think)
    throw InputError("--no-think: tokenizer " + tok.describe() + " has no <think> and </think> tokens (Qwen3's)");
  if (!a.date.empty() && **format != ChatFormat::llama3_1)
    throw InputError(std::string("--date: the tokenizer's chat format (") + chat_format_name(**format) +
                     ") writes no date; Llama 3.1's and later's does (a tokenizer with <|eom_id|>)");
  ChatOptions o;
  o.no_think = a.no_think;
  // Qwen3's (a ChatML tokenizer with thinking tokens) drops earlier answers' reasoning.
  o.strip_reasoning = **format == ChatFormat::chatml && think;
  o.date = chat_date(a.tmpl, a.date);
  if (**format == ChatFormat::chatml) o.default_system = a.tmpl.default_system;
  return a.messages.empty() ? chat_prompt(**format, a.system, text, o) : chat_prompt(**format, messages, o);
}

// The prompt's ids: the tokenizer's begin token first where it has one
// (Llama 3's <|begin_of_text|>), then the text's; an empty text with no
// begin token starts from the document separator, what `pentad prep` put
// before every document (the end-of-text token of GPT-2 and cl100k; Qwen2's
// <|endoftext|> also where its end-of-text token is <|im_end|>).
// With --special or --chat the text's own ids only (encode_with_specials:
// the text names its begin token where it wants one).
std::vector<int32_t> prompt_ids(const Tokenizer& tok, const std::string& text, bool specials) {
  std::vector<int32_t> prompt;
  if (specials) {
    for (uint32_t id : encode_with_specials(tok, text)) prompt.push_back(int32_t(id));
    if (prompt.empty()) throw InputError("the prompt is empty: with --special nothing is added to it");
    return prompt;
  }
  if (tok.bos() >= 0) prompt.push_back(int32_t(tok.bos()));
  for (uint32_t id : tok.encode(text)) prompt.push_back(int32_t(id));
  if (prompt.empty() && tok.doc_separator() >= 0) prompt.push_back(int32_t(tok.doc_separator()));
  if (prompt.empty())
    throw InputError("the prompt is empty and tokenizer " + tok.describe() +
                     " has no end-of-text token to start from: give --prompt TEXT");
  return prompt;
}

std::string stop_text(const Generation& g) {
  switch (g.stop) {
    case StopReason::eot: return "end-of-text, id " + std::to_string(g.stop_id);
    case StopReason::seq_len: return "model.seq_len reached";
    case StopReason::text: return "a --stop string";
    case StopReason::tokens: break;
  }
  return "--tokens reached";
}

// The ids generation stops at: the tokenizer's end-of-text, and for a
// Hugging Face directory the ones its generation_config.json names (Llama 3
// Instruct's <|eot_id|>, Qwen2.5 Instruct's <|im_end|> beside <|endoftext|>).
std::vector<int64_t> stop_ids(const Tokenizer& tok, const std::string& hf_dir) {
  std::vector<int64_t> stop;
  if (tok.eot() >= 0) stop.push_back(tok.eot());
  if (!hf_dir.empty())
    for (int64_t id : hf::generation_eos_ids(hf_dir))
      if (std::find(stop.begin(), stop.end(), id) == stop.end()) stop.push_back(id);
  return stop;
}

// A Hugging Face directory's generation_config.json settings where the
// command line gives none: its temperature, top_k, top_p, min_p and
// repetition_penalty (do_sample false: greedy), as its authors set them for
// transformers' generate(). stderr says which came from the file.
void apply_generation_defaults(const CLI::App& cmd, const hf::GenerationDefaults& g, SampleParams* p) {
  std::string from;
  const auto note = [&](const std::string& x) { from += (from.empty() ? "" : ", ") + x; };
  const auto num = [](double x) {
    char buf[32];
    *std::to_chars(buf, buf + sizeof buf - 1, x).ptr = '\0';
    return std::string(buf);
  };
  if (cmd.count("--temperature") == 0) {
    if (g.do_sample && !*g.do_sample) {
      p->temperature = 0;
      note("greedy (do_sample false)");
    } else if (g.temperature) {
      p->temperature = *g.temperature;
      note("temperature " + num(*g.temperature));
    }
  }
  if (cmd.count("--top-k") == 0 && g.top_k) {
    p->top_k = *g.top_k;
    note("top-k " + std::to_string(*g.top_k));
  }
  if (cmd.count("--top-p") == 0 && g.top_p) {
    p->top_p = *g.top_p;
    note("top-p " + num(*g.top_p));
  }
  if (cmd.count("--repetition-penalty") == 0 && g.repetition_penalty) {
    p->repetition_penalty = *g.repetition_penalty;
    note("repetition penalty " + num(*g.repetition_penalty));
  }
  if (cmd.count("--min-p") == 0 && g.min_p) {
    p->min_p = *g.min_p;
    note("min-p " + num(*g.min_p));
  }
  if (!from.empty()) std::fprintf(stderr, "sample: %s from generation_config.json\n", from.c_str());
}

// The model as the banner names it: "llama (q/k norms) L=28 C=1024
// H=16x128 E=128 top-8 rope=yarn x4 of 32768 V=151936 seq_len=40960"
// ("rotary=96/128" after the heads for a partial rotary).
std::string model_description(const ModelConfig& mc) {
  std::string family = mc.family == Family::gpt2 ? "gpt2" : "llama", parts;
  const auto part = [&](bool on, const char* what) {
    if (on) parts += (parts.empty() ? "" : ", ") + std::string(what);
  };
  if (mc.family == Family::llama) {
    part(mc.has_qkv_bias(), "q/k/v biases");
    part(mc.qk_norm, "q/k norms");
    part(mc.mlp_act == GateAct::gelu_tanh, "GeGLU");  // Gemma's three
    part(mc.norm_plus_one, "norms 1 + w");
    part(mc.embed_scale, "embeddings x sqrt(C)");
  }
  if (!parts.empty()) family += " (" + parts + ")";
  std::string heads =
      int64_t(mc.head_dim()) * mc.n_heads != mc.d_model ? " H=" + std::to_string(mc.n_heads) + "x" +
                                                               std::to_string(mc.head_dim())
                                                         : std::string();
  if (mc.family == Family::llama && mc.rotary_channels() < mc.head_dim())  // "rotary=96/128": a partial rotary
    heads += " rotary=" + std::to_string(mc.rotary_channels()) + "/" + std::to_string(mc.head_dim());
  std::string experts;  // "E=128 top-8", moe_every when not every block is MoE, "shared=5632 gated"
  if (mc.n_experts > 0)
    experts = " E=" + std::to_string(mc.n_experts) + " top-" + std::to_string(mc.top_k) +
              (mc.moe_every > 1 ? " moe_every=" + std::to_string(mc.moe_every) : std::string()) +
              (mc.shared_expert_ffn > 0
                   ? " shared=" + std::to_string(mc.shared_expert_ffn) + (mc.shared_expert_gate ? " gated" : "")
                   : std::string());
  // "rope=yarn x4 of 32768": a scaled RoPE as read, its factor over the
  // original context ("rope=linear x4": every pair).
  std::string rope;
  if (mc.family == Family::llama && mc.rope_scaling != RopeScaling::none) {
    char factor[32];
    *std::to_chars(factor, factor + sizeof factor - 1, mc.rope_scaling_factor).ptr = '\0';
    rope = std::string(" rope=") + deck_name(mc.rope_scaling) + " x" + factor;
    if (mc.rope_scaling != RopeScaling::linear) rope += " of " + std::to_string(mc.rope_original_context);
  }
  return family + " L=" + std::to_string(mc.n_layers) + " C=" + std::to_string(mc.d_model) + heads + experts + rope +
         " V=" + std::to_string(mc.vocab_size) + " seq_len=" + std::to_string(mc.seq_len);
}

// The chat turn's end added to the stop ids, and stderr's lines on the chat
// format, the prompt's ids (--ids) and the stop ids.
void report_stops(const SampleArgs& a, const Tokenizer& tok, const std::optional<ChatFormat>& chat,
                  const std::vector<int32_t>& prompt, std::vector<int64_t>* stop) {
  if (chat) {
    const int64_t end = chat_end_of_turn(tok, *chat);
    if (std::find(stop->begin(), stop->end(), end) == stop->end()) stop->push_back(end);
    const std::string dated =
        *chat == ChatFormat::llama3_1 ? " (Today Date: " + chat_date(a.tmpl, a.date) + ")"
        : *chat == ChatFormat::chatml && !a.tmpl.default_system.empty()
            ? " (the template's default system prompt where no system message comes first)"
            : "";
    std::fprintf(stderr, "sample: chat format %s%s%s, the turn ends at id %lld\n", chat_format_name(*chat),
                 dated.c_str(),
                 !a.messages.empty() ? " (the messages of --messages)"
                 : a.system.empty()  ? ""
                                     : " with a system turn",
                 static_cast<long long>(end));
  }
  if (a.ids) {
    std::string list;
    for (int32_t id : prompt) list += " " + std::to_string(id);
    std::fprintf(stderr, "sample: prompt ids%s\n", list.c_str());
  }
  if (stop->size() > 1 || chat) {
    std::string list;
    for (int64_t id : *stop) list += " " + std::to_string(id);
    std::fprintf(stderr,
                 "sample: stops at ids%s (the tokenizer's end-of-text, generation_config.json's eos_token_id, the "
                 "chat turn's end)\n",
                 list.c_str());
  }
}

int sample(const CLI::App& cmd, SampleArgs a, Job job) {
  if (looks_like_option(a.spec)) throw CliUsageError("sample: unknown option '" + a.spec + "'");
  if (const std::string x = first_extra(cmd); !x.empty())
    throw CliUsageError(looks_like_option(x) ? "sample: unknown option '" + x + "'"
                                             : "sample: more than one checkpoint given ('" + a.spec + "' and '" + x + "')");
  if (a.spec.empty()) throw CliUsageError("sample: no checkpoint given");
  a.prompt_given = cmd.count("--prompt") > 0;
  if (!a.messages.empty()) a.chat = true;  // --messages: the conversation in the chat format
  // Every rank sees the same command line and world: the same error everywhere.
  if (job.size != 1)
    throw InputError("sample runs on exactly one rank (this job has " + std::to_string(job.size) +
                     "): run it without mpiexec, or with -n 1");
  check_sample_params(a.p);
  for (const std::string& s : a.stop_strings)
    if (s.empty()) throw InputError("--stop: an empty string (every text holds it)");
  if (a.tokens < 0) throw InputError("--tokens " + std::to_string(a.tokens) + ": must be >= 0");
  Config run;
  if (a.backend == "cpu") run.backend = BackendKind::cpu;
  else if (a.backend == "cuda") run.backend = BackendKind::cuda;
  else throw InputError("--backend " + a.backend + ": expected cpu or cuda");
  if (a.threads < 0) throw InputError("--threads " + std::to_string(a.threads) + ": must be >= 0 (0 = default)");
  run.train.threads = a.threads;

  // A Hugging Face directory: the model from its config.json, the weights
  // read once the context is known. Anything else: a pentad file.
  const bool hf_dir = hf::is_model_dir(a.spec);
  const std::string path = hf_dir ? a.spec : resolve_weights_path(a.spec);
  ModelWeights w;
  if (hf_dir) w.cfg = hf::model_of_dir(path);
  else w = load_model_weights(path);
  const std::unique_ptr<Tokenizer> tok = choose_tokenizer(a, w.cfg.vocab_size, hf_dir ? path : "");
  // The chat template beside the tokenizer.json in use (a rank file has none).
  if (a.chat && (a.tokenizer.empty() || hf::is_tokenizer_json(hf::tokenizer_file(a.tokenizer))))
    a.tmpl = read_chat_template(!a.tokenizer.empty() ? hf::tokenizer_file(a.tokenizer) : hf_dir ? path : "");
  std::optional<ChatFormat> chat;
  const std::string text = encoded_text(a, *tok, prompt_text(a), &chat);
  const std::vector<int32_t> prompt = prompt_ids(*tok, text, a.special || a.chat);
  if (int64_t(prompt.size()) > w.cfg.seq_len)
    throw InputError("the prompt has " + std::to_string(prompt.size()) + " tokens, more than model.seq_len=" +
                     std::to_string(w.cfg.seq_len) + " of " + path);
  std::string context_note;
  if (hf_dir) {
    // The cache holds what this sample needs, not the model's whole context
    // (131072 positions for Llama 3.1).
    const int64_t need = std::min<int64_t>(w.cfg.seq_len, int64_t(prompt.size()) + a.tokens);
    if (need < w.cfg.seq_len) context_note = " (of " + std::to_string(w.cfg.seq_len) + ": the prompt and --tokens)";
    w.cfg.seq_len = int(need);
    w = load_hf_weights(path, w.cfg);
  }
  const ModelConfig& mc = w.cfg;

  run.source = "--backend";
  std::unique_ptr<Backend> be = make_backend(run, MPI_COMM_WORLD);
  InferenceEngine engine(w, *be);
  const std::string origin = hf_dir ? "Hugging Face" : "step " + std::to_string(w.step);
  std::fprintf(stderr, "sample: %s (%s), %s%s, tokenizer %s, backend %s\n", path.c_str(), origin.c_str(),
               model_description(mc).c_str(), context_note.c_str(), tok->describe().c_str(), be->name().c_str());
  SampleParams p = a.p;
  p.vocab = int(tok->vocab_size());
  if (hf_dir) apply_generation_defaults(cmd, hf::generation_defaults(path), &p);
  std::vector<int64_t> stop = stop_ids(*tok, hf_dir ? path : "");
  report_stops(a, *tok, chat, prompt, &stop);
  // --stop: after each token, the generated text so far is decoded and
  // searched (a string may span tokens); the text printed ends before the
  // first stop string, the ids include the token that completed it.
  std::vector<uint32_t> so_far;
  size_t cut = std::string::npos;
  const auto stop_after = [&](int32_t id) -> bool {
    so_far.push_back(uint32_t(id));
    const std::string t = tok->decode(so_far);
    for (const std::string& s : a.stop_strings) cut = std::min(cut, t.find(s));
    return cut != std::string::npos;
  };
  const Generation g =
      a.tokens > 0 ? generate(engine, prompt, a.tokens, p, stop,
                              a.stop_strings.empty() ? std::function<bool(int32_t)>() : stop_after)
                   : Generation{};
  if (a.ids) {
    for (size_t i = 0; i < g.ids.size(); ++i) std::printf("%s%d", i ? " " : "", g.ids[i]);
    std::printf("\n");
  } else {
    std::vector<uint32_t> out(g.ids.begin(), g.ids.end());
    std::string generated = tok->decode(out);
    if (g.stop == StopReason::text) generated.resize(cut);
    std::printf("%s%s\n", utf8_replace(text).c_str(), utf8_replace(generated).c_str());
  }
  std::fflush(stdout);
  const size_t n_new = g.ids.size();
  std::fprintf(stderr,
               "sample: prompt %zu tokens, generated %zu tokens (stopped: %s) | prefill %.1f ms, %.0f tokens/s | "
               "decode %d forwards of one position in %.1f ms, %.1f tokens/s\n",
               prompt.size(), n_new, a.tokens > 0 ? stop_text(g).c_str() : "--tokens 0", g.prefill_s * 1e3,
               g.prefill_s > 0 ? double(prompt.size()) / g.prefill_s : 0.0, g.n_forwards, g.decode_s * 1e3,
               g.decode_s > 0 ? double(g.n_forwards) / g.decode_s : 0.0);
  return 0;
}

}  // namespace

Command add_sample(CLI::App& pentad, Job job) {
  auto a = std::make_shared<SampleArgs>();
  CLI::App* cmd = add_command(pentad, "sample", "generate text from a checkpoint or exported weights");
  cmd->add_option("ckpt", a->spec,
                  "checkpoint file, directory, latest, export directory, or Hugging Face model directory");
  cmd->add_option("--tokenizer", a->tokenizer,
                  "tiktoken rank file or tokenizer.json (default: a Hugging Face directory's own, else bytes)");
  cmd->add_option("--pattern", a->pattern, "the tokenizer's pre-tokenization pattern");
  cmd->add_option("--prompt", a->prompt, "prompt text");
  cmd->add_option("--prompt-file", a->prompt_file, "file holding the prompt");
  cmd->add_option("--tokens", a->tokens, "tokens to generate (default 64)");
  cmd->add_option("--temperature", a->p.temperature, "softmax temperature; 0 = greedy (default 1)");
  cmd->add_option("--top-k", a->p.top_k, "sample among the k most likely tokens; 0 = all (default)");
  cmd->add_option("--top-p", a->p.top_p, "nucleus: the smallest set with this probability mass (default 1)");
  cmd->add_option("--min-p", a->p.min_p,
                  "keep only tokens at least this many times as likely as the most likely one (default 0: off)");
  cmd->add_option("--repetition-penalty", a->p.repetition_penalty,
                  "divide (multiply, if negative) the logits of ids already in the text by this (default 1: none)");
  cmd->add_option("--stop", a->stop_strings,
                  "end generation once the generated text holds this string (printed up to it; repeatable)");
  cmd->add_option("--seed", a->p.seed, "random seed (default 0)");
  cmd->add_option("--backend", a->backend, "cpu (default) or cuda");
  cmd->add_option("--threads", a->threads, "OpenMP/BLAS threads (cpu); 0 = default");
  cmd->add_flag("--ids", a->ids, "print the generated token ids instead of text (the prompt's to stderr)");
  cmd->add_flag("--special", a->special,
                "special tokens written in the prompt (e.g. <|im_start|>) are their ids; no begin token added");
  cmd->add_flag("--chat", a->chat,
                "the prompt as one user turn of the tokenizer's chat format (ChatML, Llama 3, Gemma)");
  cmd->add_option("--system", a->system, "with --chat: a system turn before the user's");
  cmd->add_flag("--no-think", a->no_think, "with --chat (Qwen3): an empty thinking block, so the answer comes at once");
  cmd->add_option("--messages", a->messages,
                  "a JSON file of the conversation ([{\"role\": \"user\", \"content\": ...}, ...]; implies --chat)");
  cmd->add_option("--date", a->date,
                  "with --chat, Llama 3.1+: the system turn's Today Date (default 26 Jul 2024; today: the local date)");
  return {cmd, [cmd, a, job] { return sample(*cmd, *a, job); },
          [](const std::string& opt) { return "sample: option '" + opt + "' needs a value"; }};
}

}  // namespace pentad
