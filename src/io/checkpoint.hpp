// Checkpoints: one HDF5 file per checkpoint, written collectively with
// parallel HDF5 (MPI-IO). Every tensor (parameters, AdamW moments) is a
// dataset with its GLOBAL shape; each rank writes / reads the block it holds
// (local_start, local_shape), so a checkpoint written under one layout loads
// under any other. Commit is atomic: <dir>/step_NNNNNN.h5.tmp is written,
// closed, fsynced and renamed, the directory fsynced, then <dir>/latest (a
// one-line text file naming the committed file) is replaced the same way.
// Implemented in checkpoint.cpp (save/load), checkpoint_commit.cpp (latest,
// pruning, resolving), checkpoint_tools.cpp, llmc_export.cpp and
// hf_export.cpp (the `ckpt` commands) and signals.cpp (preemption);
// init_from.hpp loads weights only, from here or elsewhere.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pentad {

// One tensor as this rank sees it. The trainer builds these; the checkpoint
// code never knows about TP/PP/ZeRO: it only moves blocks of global tensors.
struct CkptTensor {
  std::string name;                  // dataset path, e.g. "model/wte", "optim/m/model/wte"
  std::vector<int64_t> shape;        // global shape
  std::vector<int64_t> local_start;  // this rank's block: start per dimension
  std::vector<int64_t> local_shape;  // this rank's block: extent per dimension
  // Save: this rank writes its block (ranks holding replicas of the same
  // block: exactly one of them has writer = true).
  bool writer = true;
  // Host-side access to the block, row-major over local_shape (collective
  // calls inside, e.g. a ZeRO all-gather, are allowed: every rank calls get()
  // / set() for every tensor in the same order, writer or not).
  std::function<void(float* host)> get;
  std::function<void(const float* host)> set;
};

struct CkptMeta {
  int64_t step = 0;                // optimizer steps completed
  uint64_t seed = 0;               // data/init seed (the batch of step s is f(seed, s))
  std::string config_toml;         // the resolved deck that wrote it
  std::string layout;              // e.g. "dp=2 tp=2 pp=2 cp=1 ep=1 zero=1"
  std::string model_signature;     // family + shapes; loading checks it matches
  // Sequences each data.train source had supplied after `step` steps (the
  // epoch order's position, io/dataset.hpp); empty: not recorded (a
  // checkpoint written before it was).
  std::vector<int64_t> data_sequences;
};

// How a checkpoint file is written. A checkpoint whose global tensors total
// fewer than `gather_below_bytes` is gathered, one tensor at a time, to rank
// 0 of the communicator, which writes the file alone with HDF5's serial
// driver; a larger one is written by every rank, its own blocks, with
// parallel HDF5 (MPI-IO, collective). Both give the same file format. The
// gathered write needs none of MPI-IO's collectives (several per tensor,
// each a scheduler time slice when ranks outnumber cores); the parallel one
// never holds more than a rank's own blocks. checkpoint.gather_below_mb.
struct CkptWriter {
  int64_t gather_below_bytes = int64_t{256} << 20;
};

// Collective over `comm`. Writes <dir>/step_<step:06d>.h5 atomically, updates
// <dir>/latest, then deletes older step files beyond the newest `keep`
// (keep = 0: keep all). Returns the committed path. Throws InputError (on
// every rank) if the directory cannot be written.
std::string save_checkpoint(const std::string& dir, const CkptMeta& meta,
                            const std::vector<CkptTensor>& tensors, int keep, MPI_Comm comm,
                            const CkptWriter& writer = {});

// Collective over `comm`. The atomic write behind save_checkpoint, to an
// exact path (e.g. <dir>/final.h5): no `latest` update, no pruning.
std::string write_checkpoint_file(const std::string& path, const CkptMeta& meta,
                                  const std::vector<CkptTensor>& tensors, MPI_Comm comm,
                                  const CkptWriter& writer = {});

// Resolve "latest" (via <dir>/latest), a directory, DIR/latest (the pointer
// file itself: DIR's latest), or a file path to a
// committed checkpoint file. Throws InputError naming what is missing. A
// directory whose pointer is missing or unreadable (or names a missing file)
// but which holds step files resolves to the newest step file that opens as
// a pentad checkpoint, with a warning (rank 0 of the job) saying so; if none
// does, the InputError says so.
std::string resolve_checkpoint(const std::string& spec, const std::string& dir);

// resolve_checkpoint("latest", dir) without its warning, or "" when <dir>
// holds neither a pointer nor a step file (checkpoint.resume = "latest" then
// starts fresh). Throws InputError as resolve_checkpoint does.
std::string latest_checkpoint(const std::string& dir);

// Collective over `comm`. Reads meta and every tensor's block (calls set()).
// Verifies checksums (Fletcher32), the model signature and every dataset's
// global shape; any mismatch, missing dataset or corrupt/truncated file is an
// InputError naming the file and tensor, raised on every rank. An empty
// model_signature skips the signature check (tools).
CkptMeta load_checkpoint(const std::string& path, const std::string& model_signature,
                         const std::vector<CkptTensor>& tensors, MPI_Comm comm);

// `pentad ckpt info PATH`: human-readable summary (step, layout, tensors,
// shapes, checksum verification). Rank 0 prints; collective over comm.
int ckpt_info(const std::string& spec, MPI_Comm comm);

// `pentad ckpt export PATH --to DIR`: DIR/model.h5 with the global parameter
// tensors only, and for the GPT-2 family DIR/gpt2_model.bin in llm.c's
// checkpoint layout. Rank 0 works; collective over comm.
int ckpt_export(const std::string& spec, const std::string& out_dir, MPI_Comm comm);

// `pentad ckpt export PATH --to DIR --format hf|llmc [--dtype fp32|bf16]
// [--tokenizer FILE [--pattern NAME]]`.
// llmc (the default): as above. hf: DIR/model.safetensors (or shards of at
// most max_shard_bytes with model.safetensors.index.json), config.json and
// generation_config.json for GPT2LMHeadModel, LlamaForCausalLM or
// MixtralForCausalLM (io/hf_map.hpp); a model without such a class is an
// InputError saying why. With a tokenizer (a tiktoken rank file, or "bytes"
// for the byte tokenizer; hf only) also its tokenizer.json and
// tokenizer_config.json (tok/hf_tokenizer.hpp) and its bos/eos ids in the
// configs; a tokenizer with more ids than the model's vocabulary is an
// InputError, raised before anything is written.
// Rank 0 works; collective over comm.
struct ExportOptions {
  std::string format = "llmc";  // llmc | hf
  std::string dtype = "fp32";   // fp32 | bf16 (hf only)
  std::string tokenizer;        // tiktoken rank file, or "bytes"; "" = no tokenizer files (hf only)
  std::string pattern;          // its pattern (tok/bpe.hpp); "" = from its rank count
  int64_t max_shard_bytes = int64_t{2} << 30;
  std::string hf_class;         // hf: the class to write; "" = the deck's (hf::arch_of), or Phi3ForCausalLM for a Llama
};
int ckpt_export(const std::string& spec, const std::string& out_dir, const ExportOptions& opt, MPI_Comm comm);

// Preemption: SIGUSR1 / SIGTERM set a flag; the trainer polls it every step,
// agrees on it over the job (max), checkpoints and exits 0.
void install_signal_handlers();
bool signal_received();  // this rank's flag (async-signal-safe read)

}  // namespace pentad
