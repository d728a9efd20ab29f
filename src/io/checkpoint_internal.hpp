// Internals shared by the checkpoint files (not a public header): the format
// tag, shape helpers, the meta attributes, and the rank-0-does-the-work
// collectives. checkpoint.cpp saves and loads (parallel hyperslabs),
// checkpoint_commit.cpp keeps the `latest` pointer and prunes,
// checkpoint_tools.cpp and llmc_export.cpp are `pentad ckpt info|export`.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/checkpoint.hpp"
#include "io/h5.hpp"

namespace pentad::ckpt_detail {

constexpr const char* kFormat = "pentad-checkpoint";
constexpr int64_t kFormatVersion = 1;

int64_t n_elements(const std::vector<int64_t>& shape);
std::string shape_str(const std::vector<int64_t>& shape);  // "(2, 3)", "(4,)"
bool ends_with(const std::string& s, const std::string& suffix);

// Meta attributes of an open checkpoint, or the problem ("" when fine).
std::string read_meta(hid_t file, const std::string& path, CkptMeta* meta);
// Rank 0 classifies a file that cannot be opened: a clear message, or "".
std::string precheck_file(const std::string& path);

// mkdir -p on rank 0; an InputError on every rank if it fails. Collective over comm.
void make_dir_collective(const std::string& dir, const std::string& what, MPI_Comm comm);
// Runs fn on rank 0 (serial HDF5, default driver); an InputError there is
// raised on every rank. Collective over comm.
void on_root(MPI_Comm comm, const std::function<void()>& fn);
// resolve_checkpoint on rank 0, broadcast; InputError on every rank.
// Collective over comm.
std::string resolve_collective(const std::string& spec, const std::string& dir, MPI_Comm comm);

// A checkpoint opened serially by one process (tools), meta verified.
struct SerialCkpt {
  h5::Id file;
  CkptMeta meta;
  std::vector<std::string> datasets;  // every dataset path, natural order
};
SerialCkpt open_serial(const std::string& path);

// Reads a whole float dataset (verifying its checksums) in row slabs of at
// most ~64 MiB, handing each slab to `sink`; returns the dataset's shape.
std::vector<int64_t> read_whole(hid_t file, const std::string& path, const std::string& name,
                                const std::function<void(const float*, int64_t)>& sink);

// DIR/gpt2_model.bin in llm.c's layout (llmc_export.cpp). Rank 0 only.
void write_llmc_gpt2(const SerialCkpt& c, const std::string& path, const std::string& out_path,
                     int64_t n_layers, int64_t n_heads);

// DIR/model.safetensors (+ shards, index), config.json and
// generation_config.json (hf_export.cpp); appends what it wrote to report.
// Rank 0 only.
void write_hf(const SerialCkpt& c, const std::string& path, const std::string& out_dir, const ExportOptions& opt,
              std::string* report);

}  // namespace pentad::ckpt_detail
