// encode_documents (parallel.hpp).
#include "tok/parallel.hpp"

#include <cstdint>
#include <string>


namespace pentad {

std::vector<std::vector<uint32_t>> encode_documents(const Tokenizer& tokenizer,
                                                    const std::vector<std::string_view>& docs,
                                                    const std::vector<bool>& continued, size_t chunk_bytes) {
  struct Chunk {
    size_t doc;
    std::string_view text;
    bool continued;  // encode_continued: not the start of its text
  };
  std::vector<Chunk> chunks;
  for (size_t d = 0; d < docs.size(); ++d)
    for (size_t begin = 0; begin < docs[d].size();) {
      const size_t end = tokenizer.safe_cut(docs[d], begin + chunk_bytes);
      chunks.push_back({d, docs[d].substr(begin, end - begin), begin > 0 || (d < continued.size() && continued[d])});
      begin = end;
    }
  std::vector<std::vector<uint32_t>> ids(chunks.size());
  std::string err;
  size_t err_chunk = SIZE_MAX;  // the first failing chunk, whichever thread meets it first
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t k = 0; k < chunks.size(); ++k) {
    try {
      ids[k] = chunks[k].continued ? tokenizer.encode_continued(chunks[k].text) : tokenizer.encode(chunks[k].text);
    } catch (const InputError& e) {
#pragma omp critical(pentad_encode_documents_error)
      if (k < err_chunk) err = e.what(), err_chunk = k;
    }
  }
  if (err_chunk != SIZE_MAX) throw DocumentError(chunks[err_chunk].doc, err);
  std::vector<std::vector<uint32_t>> out(docs.size());
  for (size_t k = 0; k < chunks.size(); ++k) {
    std::vector<uint32_t>& o = out[chunks[k].doc];
    if (o.empty()) o.swap(ids[k]);
    else o.insert(o.end(), ids[k].begin(), ids[k].end());
    std::vector<uint32_t>().swap(ids[k]);
  }
  return out;
}

}  // namespace pentad
