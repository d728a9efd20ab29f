// libFuzzer target: the safetensors reader (io/safetensors.*). The bytes go
// to a file; any content must open and read every float tensor, or give an
// InputError naming the file.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/pentad_fuzz_st_" + std::to_string(getpid()) + ".safetensors";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
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
