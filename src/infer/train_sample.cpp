// The training run's sample line (see train_sample.hpp).
#include "infer/train_sample.hpp"

#include <algorithm>
#include <cstdio>

#include "infer/sampler.hpp"
#include "tok/utf8.hpp"

namespace pentad {
namespace {

// "..." with \n, \t, \", \\ and other control bytes escaped: one log line.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '"' || c == '\\') out += std::string("\\") + char(c);
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

std::string text_of(const std::vector<int32_t>& ids, int vocab, const Tokenizer* tok) {
  if (!tok && vocab != 256) {
    std::string s = "ids";
    for (int32_t id : ids) {
      s += ' ';
      s += std::to_string(id);
    }
    return s;
  }
  const std::vector<uint32_t> u(ids.begin(), ids.end());
  const std::string bytes = tok ? tok->decode(u) : make_byte_tokenizer()->decode(u);
  return quoted(utf8_replace(bytes));
}

}  // namespace

std::vector<int32_t> train_sample_prompt(const TokenFile& data, int seq_len, const Tokenizer* tok) {
  if (tok && tok->doc_separator() >= 0) return {int32_t(tok->doc_separator())};
  const int64_t n = std::min<int64_t>({8, std::max(1, seq_len / 2), data.size()});
  std::vector<int32_t> p;
  for (int64_t i = 0; i < n; ++i) p.push_back(int32_t(data[i]));
  return p;
}

std::string train_sample_line(InferenceEngine& engine, int step, const std::vector<int32_t>& prompt, int n_tokens,
                              uint64_t seed, const Tokenizer* tok) {
  SampleParams p;  // temperature 1, every token a candidate
  p.seed = seed;
  p.vocab = tok ? int(tok->vocab_size()) : 0;
  const Generation g = generate(engine, prompt, n_tokens, p, tok ? tok->eot() : -1);
  const int V = engine.config().vocab_size;
  std::string line = "sample at step " + std::to_string(step) + " (temperature 1, seed " + std::to_string(seed) + ", " + std::to_string(g.ids.size()) +
                     " tokens" + (g.stop == StopReason::eot ? ", end-of-text" : g.stop == StopReason::seq_len ? ", model.seq_len reached" : "") +
                     "): " + text_of(prompt, V, tok) + " -> " + text_of(g.ids, V, tok);
  return line;
}

}  // namespace pentad
