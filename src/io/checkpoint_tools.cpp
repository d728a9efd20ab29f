// `pentad ckpt info|export` (checkpoint.hpp): rank 0 opens the checkpoint
// serially, verifies its meta and every checksum while reading whole
// datasets slab by slab, and prints a summary or writes model.h5 (and, for
// GPT-2, llm.c's gpt2_model.bin, llmc_export.cpp) or a Hugging Face model
// (--format hf, hf_export.cpp); the other ranks wait idly.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <toml++/toml.h>

#include "comm/host.hpp"
#include "config/config.hpp"
#include "core/error.hpp"
#include "io/checkpoint_internal.hpp"
#include "io/h5io.hpp"

namespace pentad {

using namespace ckpt_detail;

namespace {

namespace fs = std::filesystem;

// "model/layers/10" sorts after "model/layers/9".
bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t i2 = i, j2 = j;
      while (i2 < a.size() && std::isdigit(static_cast<unsigned char>(a[i2]))) ++i2;
      while (j2 < b.size() && std::isdigit(static_cast<unsigned char>(b[j2]))) ++j2;
      const std::string na = a.substr(i, i2 - i), nb = b.substr(j, j2 - j);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = i2;
      j = j2;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

// model/ datasets of c into a pentad-weights file at h5_path; returns how many.
int write_model_h5(const SerialCkpt& c, const std::string& path, const std::string& h5_path) {
  H5Writer w(h5_path);
  w.attr("format", "pentad-weights");
  w.attr("format_version", int64_t(1));
  w.attr("step", c.meta.step);
  w.attr("config", c.meta.config_toml);
  w.attr("model_signature", c.meta.model_signature);
  int n_model = 0;
  std::vector<float> all;
  for (const auto& n : c.datasets) {
    if (n.rfind("model/", 0) != 0) continue;
    all.clear();
    const auto shape = read_whole(c.file.get(), path, n, [&](const float* p, int64_t k) {
      all.insert(all.end(), p, p + k);
    });
    w.write(n, all.data(), shape);
    ++n_model;
  }
  w.commit();
  return n_model;
}

}  // namespace

namespace ckpt_detail {

SerialCkpt open_serial(const std::string& path) {
  h5::quiet();
  if (std::string err = precheck_file(path); !err.empty()) throw InputError(err);
  SerialCkpt c;
  c.file = h5::Id(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!c.file.ok()) throw InputError("checkpoint '" + path + "' cannot be opened: " + h5::error_detail());
  if (std::string err = read_meta(c.file.get(), path, &c.meta); !err.empty()) throw InputError(err);
  std::vector<std::string> links;
  if (H5Lvisit(c.file.get(), H5_INDEX_NAME, H5_ITER_INC,
               [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
                 static_cast<std::vector<std::string>*>(data)->push_back(name);
                 return 0;
               },
               &links) < 0)
    throw InputError("checkpoint '" + path + "': cannot list its contents: " + h5::error_detail());
  for (const auto& name : links) {
    h5::Id obj(H5Oopen(c.file.get(), name.c_str(), H5P_DEFAULT), H5Oclose);
    if (obj.ok() && H5Iget_type(obj.get()) == H5I_DATASET) c.datasets.push_back(name);
  }
  std::sort(c.datasets.begin(), c.datasets.end(), natural_less);
  return c;
}

std::vector<int64_t> read_whole(hid_t file, const std::string& path, const std::string& name,
                                const std::function<void(const float*, int64_t)>& sink) {
  const std::string what = "checkpoint '" + path + "': tensor '" + name + "'";
  h5::Id ds(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) throw InputError("checkpoint '" + path + "' has no tensor '" + name + "'");
  h5::Id type(H5Dget_type(ds.get()), H5Tclose);
  if (!type.ok() || H5Tget_class(type.get()) != H5T_FLOAT || H5Tget_size(type.get()) != 4)
    throw InputError(what + " is not float32");
  h5::Id fspace(H5Dget_space(ds.get()), H5Sclose);
  const int nd = fspace.ok() ? H5Sget_simple_extent_ndims(fspace.get()) : -1;
  if (nd < 1) throw InputError(what + ": cannot read its shape");
  std::vector<hsize_t> dims(size_t(nd), 0);
  H5Sget_simple_extent_dims(fspace.get(), dims.data(), nullptr);
  const std::vector<int64_t> shape(dims.begin(), dims.end());
  const int64_t row = n_elements(shape) / std::max<int64_t>(1, shape[0]);
  const int64_t rows_per_slab = std::max<int64_t>(1, (int64_t{16} << 20) / std::max<int64_t>(1, row));
  std::vector<float> buf;
  for (int64_t r0 = 0; r0 < shape[0] && row > 0; r0 += rows_per_slab) {
    std::vector<hsize_t> start(dims.size(), 0), count = dims;
    start[0] = hsize_t(r0);
    count[0] = hsize_t(std::min(rows_per_slab, shape[0] - r0));
    buf.resize(size_t(int64_t(count[0]) * row));
    HDF5_CHECK(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr));
    h5::Id mspace = h5::space(count);
    if (H5Dread(ds.get(), H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), H5P_DEFAULT, buf.data()) < 0) {
      bool pipeline = false;
      const std::string detail = h5::error_detail(&pipeline);
      throw InputError(pipeline ? what + " failed its checksum (file corrupted)"
                                : what + ": read error: " + detail);
    }
    sink(buf.data(), int64_t(buf.size()));
  }
  return shape;
}

}  // namespace ckpt_detail

int ckpt_info(const std::string& spec, MPI_Comm comm) {
  const std::string path = resolve_collective(spec, CheckpointConfig{}.dir, comm);
  std::string report;
  on_root(comm, [&] {
    SerialCkpt c = open_serial(path);
    char line[1024];
    report += "checkpoint: " + path + "\n";
    report += "step: " + std::to_string(c.meta.step) + "\n";
    report += "seed: " + std::to_string(c.meta.seed) + "\n";
    report += "layout: " + c.meta.layout + "\n";
    if (!c.meta.data_sequences.empty()) {
      report += "data sequences read:";
      for (size_t k = 0; k < c.meta.data_sequences.size(); ++k)
        report += (k ? ", " : " ") + std::to_string(c.meta.data_sequences[k]) + " (source " + std::to_string(k) + ")";
      report += "\n";
    }
    report += "model: " + c.meta.model_signature + "\n";
    report += "tensors:\n";
    size_t width = 0;
    for (const auto& n : c.datasets) width = std::max(width, n.size());
    int64_t n_total = 0;
    for (const auto& n : c.datasets) {
      const auto shape = read_whole(c.file.get(), path, n, [](const float*, int64_t) {});
      const int64_t count = n_elements(shape);
      n_total += count;
      std::snprintf(line, sizeof line, "  %-*s  %-16s %12lld\n", int(width), n.c_str(),
                    shape_str(shape).c_str(), static_cast<long long>(count));
      report += line;
    }
    std::snprintf(line, sizeof line, "total: %zu tensors, %lld elements, %lld bytes (float32)\n",
                  c.datasets.size(), static_cast<long long>(n_total),
                  static_cast<long long>(n_total * 4));
    report += line;
    report += "checksums OK\n";
  });
  const int rank = host::rank(comm);
  if (rank == 0) std::fputs(report.c_str(), stdout);
  return 0;
}

int ckpt_export(const std::string& spec, const std::string& out_dir, MPI_Comm comm) {
  return ckpt_export(spec, out_dir, ExportOptions{}, comm);
}

int ckpt_export(const std::string& spec, const std::string& out_dir, const ExportOptions& opt, MPI_Comm comm) {
  if (opt.format != "llmc" && opt.format != "hf")
    throw InputError("ckpt export: --format '" + opt.format + "': expected hf or llmc");
  if (opt.dtype != "fp32" && opt.dtype != "bf16")
    throw InputError("ckpt export: --dtype '" + opt.dtype + "': expected fp32 or bf16");
  if (opt.format == "llmc" && opt.dtype != "fp32")
    throw InputError("ckpt export: --dtype " + opt.dtype + " is for --format hf (the llm.c export is float32)");
  if (opt.format == "llmc" && !opt.tokenizer.empty())
    throw InputError("ckpt export: --tokenizer is for --format hf (tokenizer.json)");
  if (opt.format == "llmc" && !opt.hf_class.empty())
    throw InputError("ckpt export: --class is for --format hf (the Hugging Face class written)");
  if (!opt.pattern.empty() && (opt.tokenizer.empty() || opt.tokenizer == "bytes"))
    throw InputError("ckpt export: --pattern needs --tokenizer FILE");
  const std::string path = resolve_collective(spec, CheckpointConfig{}.dir, comm);
  make_dir_collective(out_dir, "ckpt export --to", comm);
  std::string report;
  on_root(comm, [&] {
    SerialCkpt c = open_serial(path);
    if (opt.format == "hf") {
      write_hf(c, path, out_dir, opt, &report);
      return;
    }
    toml::table cfg;
    try {
      cfg = toml::parse(c.meta.config_toml, path + ":config");
    } catch (const toml::parse_error& e) {
      throw InputError("checkpoint '" + path + "': its config attribute is not valid TOML: " +
                       std::string(e.description()));
    }
    const std::string family = cfg["model"]["family"].value_or(std::string());

    // model.h5: the same layout as the trainer's final weights file.
    const std::string h5_path = (fs::path(out_dir) / "model.h5").string();
    const int n_model = write_model_h5(c, path, h5_path);
    report += "wrote " + h5_path + " (" + std::to_string(n_model) + " tensors, step " +
              std::to_string(c.meta.step) + ")\n";

    if (family == "gpt2") {
      const int64_t L = cfg["model"]["n_layers"].value_or(int64_t{-1});
      const int64_t NH = cfg["model"]["n_heads"].value_or(int64_t{-1});
      if (L < 0 || NH <= 0)
        throw InputError("checkpoint '" + path + "': its config lacks model.n_layers / model.n_heads");
      const std::string bin = (fs::path(out_dir) / "gpt2_model.bin").string();
      write_llmc_gpt2(c, path, bin, L, NH);
      report += "wrote " + bin + " (llm.c GPT-2 checkpoint, version 3, float32)\n";
    }
  });
  const int rank = host::rank(comm);
  if (rank == 0) std::fputs(report.c_str(), stdout);
  return 0;
}

}  // namespace pentad
