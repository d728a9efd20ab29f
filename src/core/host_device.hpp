// PENTAD_HD marks a small inline function that both the host and CUDA
// kernels call (one definition, compiled by the host compiler and by nvcc).
#pragma once

#ifdef __CUDACC__
#define PENTAD_HD __host__ __device__
#else
#define PENTAD_HD
#endif
