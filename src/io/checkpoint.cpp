// Checkpoints, save and load (checkpoint.hpp, ARCHITECTURE.md section 8): one
// HDF5 file of global tensors, each a chunked float32 dataset with the
// Fletcher32 filter, read back block by block under any layout. A small
// checkpoint is gathered to rank 0 and written there with HDF5's serial
// driver; a large one is written by every rank with parallel HDF5,
// collectively (HDF5 requires collective I/O to write filtered datasets in
// parallel). The file is written as .tmp, fsynced on every node that wrote
// and renamed by rank 0 (core/fs.hpp), so a crash leaves the previous file
// or the new one.
#include "io/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <numeric>

#include "comm/host.hpp"
#include "comm/watchdog.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/checkpoint_internal.hpp"

namespace pentad {

using namespace ckpt_detail;

namespace {

namespace fs = std::filesystem;

constexpr int64_t kChunkBytes = int64_t{1} << 20;  // target chunk size (whole rows when they fit)

// Whole trailing dimensions while they fit in kChunkBytes, so a chunk is a
// block of complete rows for every tensor whose row is under 1 MiB.
std::vector<hsize_t> chunk_dims(const std::vector<int64_t>& shape) {
  const int64_t budget = kChunkBytes / int64_t(sizeof(float));
  std::vector<hsize_t> c(shape.size(), 1);
  int64_t prod = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] <= budget / prod) {
      c[d] = hsize_t(shape[d]);
      prod *= shape[d];
    } else {
      c[d] = hsize_t(std::max<int64_t>(1, budget / prod));
      break;
    }
  }
  return c;
}

// FNV-1a continued over raw bytes from h (rng.hpp's fnv1a64 hashes one string
// from the offset basis; here a whole tensor list is chained).
uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Local checks of the tensor list: shapes, blocks inside the global shape,
// unique names. "" or the problem.
std::string check_tensors_local(const std::vector<CkptTensor>& tensors) {
  std::vector<std::string> names;
  for (const auto& t : tensors) {
    const std::string what = "checkpoint tensor '" + t.name + "'";
    if (t.name.empty() || t.name[0] == '/' || t.name.back() == '/' ||
        t.name.find("//") != std::string::npos)
      return what + ": a name must be a relative path like 'model/wte'";
    if (t.shape.empty()) return what + ": scalars are not supported (use shape (1,))";
    if (t.local_start.size() != t.shape.size() || t.local_shape.size() != t.shape.size())
      return what + ": local_start/local_shape must have " + std::to_string(t.shape.size()) +
             " dimensions like its shape " + shape_str(t.shape);
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (t.shape[d] < 0 || t.local_start[d] < 0 || t.local_shape[d] < 0 ||
          t.local_start[d] + t.local_shape[d] > t.shape[d])
        return what + ": block start " + shape_str(t.local_start) + " extent " +
               shape_str(t.local_shape) + " is outside its shape " + shape_str(t.shape);
    }
    names.push_back(t.name);
  }
  std::sort(names.begin(), names.end());
  const auto dup = std::adjacent_find(names.begin(), names.end());
  if (dup != names.end()) return "checkpoint tensor '" + *dup + "' is listed twice";
  return {};
}

// Every rank passes the same names and global shapes, in the same order.
// Collective over comm.
void agree_tensor_list(const std::vector<CkptTensor>& tensors, MPI_Comm comm) {
  const std::string local = check_tensors_local(tensors);
  agree_or_throw(local.empty(), local, comm);
  uint64_t h = 14695981039346656037ull;
  for (const auto& t : tensors) {
    h = fnv1a(h, t.name.data(), t.name.size() + 1);
    h = fnv1a(h, t.shape.data(), t.shape.size() * sizeof(int64_t));
  }
  uint64_t lo[2] = {h, ~h};  // equal on every rank iff min(h) == ~min(~h)
  host::allreduce(comm, lo, 2, host::Op::min);
  agree_or_throw(lo[0] == ~lo[1],
                 "checkpoint: the ranks passed different tensor lists (names, shapes or order)", comm);
}

std::string parent_of(const std::string& path) {
  const std::string p = fs::path(path).parent_path().string();
  return p.empty() ? "." : p;
}

// ---------------------------------------------------------------------------
// Parallel file access

// v2 object headers and superblock: the file's metadata carries checksums too.
void set_format(hid_t fapl) { HDF5_CHECK(H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18)); }

h5::Id mpio_fapl(MPI_Comm comm, bool collective_metadata) {
  h5::Id fapl = h5::plist(H5P_FILE_ACCESS);
  HDF5_CHECK(H5Pset_fapl_mpio(fapl.get(), comm, MPI_INFO_NULL));
  set_format(fapl.get());
  if (collective_metadata) {
    HDF5_CHECK(H5Pset_all_coll_metadata_ops(fapl.get(), true));
    HDF5_CHECK(H5Pset_coll_metadata_write(fapl.get(), true));
  }
  return fapl;
}

// A file opened or created by every rank of comm, or none: all failed is an
// InputError (same cause everywhere), some failed is a local fault.
void agree_opened(const h5::Id& file, const std::string& msg, MPI_Comm comm) {
  const int32_t n_ok = host::allreduce<int32_t>(comm, file.ok() ? 1 : 0, host::Op::sum);
  const int n = host::size(comm);
  if (n_ok != 0 && n_ok != n) {
    if (!file.ok()) PENTAD_FATAL(msg + " (on this rank only)");
  }
  agree_or_throw(n_ok == n, msg, comm);
}

void write_meta(hid_t file, const CkptMeta& meta) {
  h5::write_attr(file, "format", kFormat);
  h5::write_attr(file, "format_version", kFormatVersion);
  h5::write_attr(file, "step", meta.step);
  h5::write_attr(file, "seed", meta.seed);
  h5::write_attr(file, "config", meta.config_toml);
  h5::write_attr(file, "layout", meta.layout);
  h5::write_attr(file, "model_signature", meta.model_signature);
  if (!meta.data_sequences.empty()) {
    std::string v;
    for (int64_t n : meta.data_sequences) {
      if (!v.empty()) v += ',';
      v += std::to_string(n);
    }
    h5::write_attr(file, "data_sequences", v);
  }
}

// One tensor's dataset: chunked, Fletcher32, never filled (every element is
// written). Under parallel HDF5 (which allocates a filtered dataset's chunks
// when it is created) HDF5 1.10 still writes every chunk once at creation.
h5::Id create_dataset(hid_t file, const std::string& tmp, const CkptTensor& t, hid_t lcpl) {
  const std::vector<hsize_t> dims(t.shape.begin(), t.shape.end());
  h5::Id dcpl = h5::plist(H5P_DATASET_CREATE);
  if (n_elements(t.shape) > 0) {
    const auto chunk = chunk_dims(t.shape);
    HDF5_CHECK(H5Pset_chunk(dcpl.get(), int(chunk.size()), chunk.data()));
    HDF5_CHECK(H5Pset_fletcher32(dcpl.get()));
    HDF5_CHECK(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER));
  }
  h5::Id fspace = h5::space(dims);
  h5::Id ds(H5Dcreate2(file, t.name.c_str(), H5T_IEEE_F32LE, fspace.get(), lcpl, dcpl.get(), H5P_DEFAULT),
            H5Dclose);
  if (!ds.ok()) PENTAD_FATAL("HDF5: cannot create dataset '" + t.name + "' in " + tmp + ": " + h5::error_detail());
  return ds;
}

// One tensor: create its dataset, fetch this rank's block (get() may be
// collective) and write it with the collective transfer dxpl; ranks without
// a block take part with an empty selection. Collective over the file's comm.
void write_tensor(hid_t file, const std::string& tmp, const CkptTensor& t, hid_t lcpl, hid_t dxpl,
                  std::vector<float>* buf) {
  const std::vector<hsize_t> dims(t.shape.begin(), t.shape.end());
  const int64_t n_global = n_elements(t.shape);
  h5::Id ds = create_dataset(file, tmp, t, lcpl);
  h5::Id fspace = h5::space(dims);

  const int64_t n_local = n_elements(t.local_shape);
  buf->resize(size_t(n_local));
  if (t.get) {
    t.get(buf->data());
  } else if (t.writer && n_local > 0) {
    PENTAD_FATAL("checkpoint tensor '" + t.name + "': a writer without get()");
  }
  if (n_global == 0) return;  // nothing to write, on every rank

  const bool writes = t.writer && n_local > 0;
  h5::Id mspace = h5::space(writes ? std::vector<hsize_t>(t.local_shape.begin(), t.local_shape.end())
                                   : std::vector<hsize_t>{1});
  if (writes) {
    const std::vector<hsize_t> start(t.local_start.begin(), t.local_start.end());
    const std::vector<hsize_t> count(t.local_shape.begin(), t.local_shape.end());
    HDF5_CHECK(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr,
                                   count.data(), nullptr));
  } else {
    HDF5_CHECK(H5Sselect_none(fspace.get()));
    HDF5_CHECK(H5Sselect_none(mspace.get()));
  }
  static float dummy = 0;
  if (H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), dxpl,
               writes ? buf->data() : &dummy) < 0)
    PENTAD_FATAL("HDF5: writing tensor '" + t.name + "' to " + tmp + " failed: " + h5::error_detail());
}

// One rank per node fsyncs `path`: the page cache is per node. Collective over comm.
void fsync_on_every_node(const std::string& path, MPI_Comm comm) {
  if (host::node_rank(comm) == 0)
    if (FsStatus e = fsync_path(path, false)) PENTAD_FATAL(e->message());
  host::idle_barrier(comm);
}

// Writes one checkpoint to path + ".tmp", closes it, fsyncs it on every node.
// Collective over comm.
void write_tmp(const std::string& tmp, const CkptMeta& meta, const std::vector<CkptTensor>& tensors,
               MPI_Comm comm) {
  const WatchGroupScope hdf5_group(comm_name(comm) + " (as copied by HDF5, writing " + tmp + ")");
  h5::Id fapl = mpio_fapl(comm, true);
  h5::Id file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
  agree_opened(file, "cannot create checkpoint file '" + tmp + "': " + h5::error_detail(), comm);
  write_meta(file.get(), meta);

  h5::Id lcpl = h5::plist(H5P_LINK_CREATE);
  HDF5_CHECK(H5Pset_create_intermediate_group(lcpl.get(), 1));
  h5::Id dxpl = h5::plist(H5P_DATASET_XFER);
  HDF5_CHECK(H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_COLLECTIVE));
  std::vector<float> buf;
  for (const auto& t : tensors) write_tensor(file.get(), tmp, t, lcpl.get(), dxpl.get(), &buf);
  file.close_checked(tmp);
  fsync_on_every_node(tmp, comm);
}

// The gathered write (CkptWriter): rank 0 creates the file with HDF5's
// serial driver; for each tensor every rank fetches its block (get() may be
// collective), the writers send theirs to rank 0, which places them in the
// global tensor and writes it whole. Rank 0 fsyncs the file. Collective over
// comm.
void write_tmp_gathered(const std::string& tmp, const CkptMeta& meta, const std::vector<CkptTensor>& tensors,
                        MPI_Comm comm) {
  const int me = host::rank(comm), n_ranks = host::size(comm);
  // Every rank's blocks: per tensor, 1 (it sends) or 0, then start and extent.
  std::vector<int64_t> mine;
  for (const auto& t : tensors) {
    mine.push_back(t.writer && n_elements(t.local_shape) > 0 ? 1 : 0);
    mine.insert(mine.end(), t.local_start.begin(), t.local_start.end());
    mine.insert(mine.end(), t.local_shape.begin(), t.local_shape.end());
  }
  const size_t per_rank = mine.size();
  std::vector<int64_t> blocks(me == 0 ? per_rank * size_t(n_ranks) : 0);
  host::gather(comm, mine.data(), int(per_rank), blocks.data(), 0);

  // As in the parallel write: a file that cannot be created (a directory
  // not writable) is an InputError on every rank; a write that fails after
  // it (HDF5 writes its superblock at once: a full disk) is a fatal error.
  std::string why;
  if (me == 0) {
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0) why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
  }
  agree_or_throw(why.empty(), "cannot create checkpoint file '" + tmp + "': " + why, comm);
  h5::Id file;
  if (me == 0) {
    h5::Id fapl = h5::plist(H5P_FILE_ACCESS);
    set_format(fapl.get());
    file = h5::Id(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
    if (!file.ok()) PENTAD_FATAL("HDF5: cannot create checkpoint file '" + tmp + "': " + h5::error_detail());
  }
  h5::Id lcpl = h5::plist(H5P_LINK_CREATE);
  HDF5_CHECK(H5Pset_create_intermediate_group(lcpl.get(), 1));
  if (me == 0) write_meta(file.get(), meta);

  constexpr int kTag = 0x636b;  // "ck"
  std::vector<float> buf, global, part;
  size_t at = 0;  // this tensor's entry in a rank's row of `blocks`
  for (const auto& t : tensors) {
    const size_t nd = t.shape.size();
    const int64_t n_local = n_elements(t.local_shape);
    buf.resize(size_t(n_local));
    if (t.get) {
      t.get(buf.data());
    } else if (t.writer && n_local > 0) {
      PENTAD_FATAL("checkpoint tensor '" + t.name + "': a writer without get()");
    }
    if (me != 0) {
      if (t.writer && n_local > 0) host::send(comm, buf.data(), int(n_local), 0, kTag);
      at += 1 + 2 * nd;
      continue;
    }
    h5::Id ds = create_dataset(file.get(), tmp, t, lcpl.get());
    const int64_t n_global = n_elements(t.shape);
    if (n_global > 0) {
      global.assign(size_t(n_global), 0.0f);  // zeros where no block lands (counts are checked, overlaps not)
      // Row-major strides of the global shape.
      std::vector<int64_t> stride(nd, 1);
      for (size_t d = nd - 1; d-- > 0;) stride[d] = stride[d + 1] * t.shape[d + 1];
      for (int r = 0; r < n_ranks; ++r) {
        const int64_t* b = &blocks[size_t(r) * per_rank + at];
        if (b[0] == 0) continue;
        const int64_t* start = b + 1;
        const int64_t* extent = b + 1 + nd;
        const int64_t n = std::accumulate(extent, extent + nd, int64_t{1}, std::multiplies<>());
        const float* src = buf.data();
        if (r != 0) {
          part.resize(size_t(n));
          host::recv(comm, part.data(), int(n), r, kTag);
          src = part.data();
        }
        // Copy the block's rows (its last dimension contiguous) into place.
        const int64_t row = extent[nd - 1];
        std::vector<int64_t> idx(nd, 0);
        for (int64_t k = 0; k < n; k += row) {
          int64_t off = 0;
          for (size_t d = 0; d < nd; ++d) off += (start[d] + idx[d]) * stride[d];
          std::copy_n(src + k, row, global.data() + off);
          for (size_t d = nd - 1; d-- > 0;) {
            if (++idx[d] < extent[d]) break;
            idx[d] = 0;
          }
        }
      }
      if (H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, global.data()) < 0)
        PENTAD_FATAL("HDF5: writing tensor '" + t.name + "' to " + tmp + " failed: " + h5::error_detail());
    }
    at += 1 + 2 * nd;
  }
  if (me == 0) {
    file.close_checked(tmp);
    if (FsStatus e = fsync_path(tmp, false)) PENTAD_FATAL(e->message());
  }
  host::idle_barrier(comm);
}

// One tensor's global shape check and block read; "" or the problem.
std::string read_block(hid_t file, const std::string& path, const CkptTensor& t, std::vector<float>* buf) {
  const std::string what = "checkpoint '" + path + "': tensor '" + t.name + "'";
  if (!h5::path_exists(file, t.name)) return "checkpoint '" + path + "' has no tensor '" + t.name + "'";
  h5::Id ds(H5Dopen2(file, t.name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) return what + " is not a dataset or cannot be opened: " + h5::error_detail();
  h5::Id type(H5Dget_type(ds.get()), H5Tclose);
  if (!type.ok() || H5Tget_class(type.get()) != H5T_FLOAT || H5Tget_size(type.get()) != 4)
    return what + " is not float32";
  h5::Id fspace(H5Dget_space(ds.get()), H5Sclose);
  const int nd = fspace.ok() ? H5Sget_simple_extent_ndims(fspace.get()) : -1;
  if (nd < 0) return what + ": cannot read its shape";
  std::vector<hsize_t> dims(size_t(nd), 0);
  H5Sget_simple_extent_dims(fspace.get(), dims.data(), nullptr);
  const std::vector<int64_t> shape(dims.begin(), dims.end());
  if (shape != t.shape)
    return what + " has shape " + shape_str(shape) + " in the file but this run expects " +
           shape_str(t.shape);

  const int64_t n_local = n_elements(t.local_shape);
  buf->resize(size_t(n_local));
  if (n_local == 0) return {};
  const std::vector<hsize_t> start(t.local_start.begin(), t.local_start.end());
  const std::vector<hsize_t> count(t.local_shape.begin(), t.local_shape.end());
  HDF5_CHECK(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr));
  h5::Id mspace = h5::space(count);
  // Independent transfer: a rank that hits a bad chunk returns at once and
  // the error is agreed on outside HDF5, so no rank waits inside it.
  if (H5Dread(ds.get(), H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), H5P_DEFAULT, buf->data()) < 0) {
    bool pipeline = false;
    const std::string detail = h5::error_detail(&pipeline);
    if (pipeline) return what + " failed its checksum (file corrupted)";
    return what + ": read error: " + detail;
  }
  return {};
}

}  // namespace

std::string write_checkpoint_file(const std::string& path, const CkptMeta& meta,
                                  const std::vector<CkptTensor>& tensors, MPI_Comm comm,
                                  const CkptWriter& writer) {
  h5::quiet();
  agree_tensor_list(tensors, comm);

  // Every element written by exactly one writer (counts per tensor).
  std::vector<int64_t> total(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    total[i] = tensors[i].writer ? n_elements(tensors[i].local_shape) : 0;
  host::allreduce(comm, total.data(), int(total.size()), host::Op::sum);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t want = n_elements(tensors[i].shape);
    if (total[i] != want)
      throw InputError("checkpoint tensor '" + tensors[i].name + "': the writers' blocks cover " +
                       std::to_string(total[i]) + " elements of " + std::to_string(want) +
                       " (each block needs exactly one writer)");
  }

  make_dir_collective(parent_of(path), "checkpoint", comm);
  const std::string tmp = path + ".tmp";
  int64_t bytes = 0;  // the same on every rank: the tensor list is agreed
  for (const auto& t : tensors) bytes += n_elements(t.shape) * int64_t(sizeof(float));
  if (bytes < writer.gather_below_bytes)
    write_tmp_gathered(tmp, meta, tensors, comm);
  else
    write_tmp(tmp, meta, tensors, comm);
  if (host::rank(comm) == 0)
    if (FsStatus e = rename_durable(tmp, path)) PENTAD_FATAL(e->message());
  host::idle_barrier(comm);
  return path;
}

CkptMeta load_checkpoint(const std::string& path, const std::string& model_signature,
                         const std::vector<CkptTensor>& tensors, MPI_Comm comm) {
  h5::quiet();
  const std::string local = check_tensors_local(tensors);
  agree_or_throw(local.empty(), local, comm);
  on_root(comm, [&] {
    if (std::string err = precheck_file(path); !err.empty()) throw InputError(err);
  });

  // Independent metadata reads: every rank reads what it needs on its own,
  // so a damaged object fails on that rank without stranding the others.
  const WatchGroupScope hdf5_group(comm_name(comm) + " (as copied by HDF5, reading " + path + ")");
  h5::Id fapl = mpio_fapl(comm, false);
  h5::Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  agree_opened(file, "checkpoint '" + path + "' cannot be opened: " + h5::error_detail(), comm);

  CkptMeta meta;
  std::string err = read_meta(file.get(), path, &meta);
  if (err.empty() && !model_signature.empty() && meta.model_signature != model_signature)
    err = "checkpoint '" + path + "' was written for another model:\n  checkpoint: " +
          meta.model_signature + "\n  this run:   " + model_signature;
  agree_or_throw(err.empty(), err, comm);

  std::vector<float> buf;
  for (const auto& t : tensors) {
    err = read_block(file.get(), path, t, &buf);
    agree_or_throw(err.empty(), err, comm);
    if (t.set) t.set(buf.data());
  }
  file.close_checked(path);
  return meta;
}

}  // namespace pentad
