// Exit status 0 when the CUDA backend can use a GPU here, else prints why and
// exits 77 (the gpu tests' SKIP_RETURN_CODE).
#include <cstdio>
#include <string>

#include "cuda.hpp"
#include "backend/backend.hpp"

int main() {
  std::string why;
  if (pentad::cuda_device_available(&why)) return 0;
  std::printf("SKIP: no GPU on this machine (%s); the gpu-labelled tests need one\n", why.c_str());
  return 77;
}
