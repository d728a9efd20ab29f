// Encoding many documents on all cores (OpenMP): each document is cut into
// chunks of about chunk_bytes at the tokenizer's safe_cut, where the ids
// cannot change, and the chunks of all documents are encoded in parallel;
// `pentad prep` and bench/bench_tokenizer use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "tok/tokenizer.hpp"

namespace pentad {

// An InputError of encode() on document `doc` (of the first failing chunk).
struct DocumentError : InputError {
  DocumentError(size_t doc_index, const std::string& what) : InputError(what), doc(doc_index) {}
  size_t doc;
};

// The ids of each document, equal to tokenizer.encode(doc), or to
// tokenizer.encode_continued(doc) where continued[d] is true (a later part of
// a text cut at safe_cut; continued may be empty: none). Throws DocumentError.
std::vector<std::vector<uint32_t>> encode_documents(const Tokenizer& tokenizer,
                                                    const std::vector<std::string_view>& docs,
                                                    const std::vector<bool>& continued = {},
                                                    size_t chunk_bytes = size_t(1) << 20);

}  // namespace pentad
