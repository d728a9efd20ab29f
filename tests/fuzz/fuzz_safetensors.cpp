// libFuzzer target: the safetensors reader (io/safetensors.*). The bytes go
// to a file; any content must open and read every float tensor, or give an
// InputError naming the file.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "fuzz_file.hpp"
#include "io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = pentad::fuzz::input_path("st", ".safetensors");
  if (!pentad::fuzz::write_input(path, data, size)) return 0;
  try {
    const pentad::safetensors::Reader r(path);
    double sum = 0;
    for (const auto& t : r.tensors()) {
      if (t.dtype != "F32" && t.dtype != "BF16" && t.dtype != "F16") continue;
      for (float x : r.read(t.name)) sum += double(x == x ? 0.0f : 1.0f);  // every element readable
    }
    if (sum < 0) std::abort();
  } catch (const pentad::InputError&) {
  }
  std::remove(path.c_str());
  return 0;
}
