// JSON text read with one message for a file that is not JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.hpp"

namespace pentad {

// text parsed, or an InputError "WHERE is not valid JSON: <the parser's reason>".
inline nlohmann::json parse_json(const std::string& text, const std::string& where) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(where + " is not valid JSON: " + e.what());
  }
}

}  // namespace pentad
