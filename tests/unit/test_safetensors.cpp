// safetensors (src/io/safetensors.*): write/read round trips in F32 and
// BF16, F16 reading against known bit patterns, sharding with the index,
// and every malformed-file case the reader must refuse with a message naming
// the file and the tensor.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/safetensors.hpp"

namespace {

namespace fs = std::filesystem;
namespace st = pentad::safetensors;

struct TmpDir {
  fs::path p;
  TmpDir() {
    char tmpl[] = "/tmp/pentad_st_XXXXXX";
    p = mkdtemp(tmpl);
  }
  ~TmpDir() { fs::remove_all(p); }
  std::string file(const std::string& n) const { return (p / n).string(); }
};

// A file with a hand-written header and data section.
void write_raw(const std::string& path, const std::string& header, const std::vector<uint8_t>& data,
               int64_t claimed_size = -1) {
  std::ofstream f(path, std::ios::binary);
  const uint64_t n = claimed_size >= 0 ? uint64_t(claimed_size) : header.size();
  for (int i = 0; i < 8; ++i) f.put(char(uint8_t(n >> (8 * i))));
  f.write(header.data(), std::streamsize(header.size()));
  f.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
}

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * (float(i) - float(n) / 3.0f) + 1.0f / float(i + 3);
  return v;
}

// "t<i>" (appended, not concatenated: GCC 12 warns falsely on "t" + to_string).
std::string tname(int i) {
  std::string s = "t";
  s += std::to_string(i);
  return s;
}

// The message of the InputError fn throws ("" if none).
template <class F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const pentad::InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, Float32RoundTripIsBitwise) {
  TmpDir d;
  const auto a = ramp(12, 0.37f), b = ramp(5, -1.5f);
  std::vector<st::OutTensor> ts = {{"a.weight", {3, 4}, [&](std::vector<float>& o) { o = a; }},
                                   {"b", {5}, [&](std::vector<float>& o) { o = b; }}};
  const auto files = st::write_model(d.p.string(), ts, st::OutDtype::f32, {{"format", "pt"}}, int64_t{1} << 30);
  ASSERT_EQ(files, std::vector<std::string>{"model.safetensors"});
  st::Reader r(d.file("model.safetensors"));
  ASSERT_EQ(r.tensors().size(), 2u);
  EXPECT_EQ(r.metadata().at("format"), "pt");
  EXPECT_EQ(r.find("a.weight")->shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(r.find("a.weight")->dtype, "F32");
  const auto ga = r.read("a.weight"), gb = r.read("b");
  EXPECT_EQ(std::memcmp(ga.data(), a.data(), a.size() * 4), 0);
  EXPECT_EQ(std::memcmp(gb.data(), b.data(), b.size() * 4), 0);
  // The header's JSON is what the format says: sizes and offsets, 8-byte aligned data.
  std::ifstream f(d.file("model.safetensors"), std::ios::binary);
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
  std::string text(n, '\0');
  f.read(text.data(), std::streamsize(n));
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["a.weight"]["data_offsets"], nlohmann::json({0, 48}));
  EXPECT_EQ(j["b"]["data_offsets"], nlohmann::json({48, 68}));
  EXPECT_EQ(fs::file_size(d.file("model.safetensors")), 8 + n + 68);
}

TEST(Safetensors, Bf16RoundsToNearestEven) {
  // Known bit patterns: 1 + 2^-8 is a tie that stays at 1.0 (even), 1 + 3*2^-8
  // a tie that goes up to the even 0x3f82; -2.75 is exact; NaN stays NaN.
  EXPECT_EQ(st::to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(st::to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(st::to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(st::to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(st::to_bf16(-2.75f), 0xc030);
  EXPECT_TRUE(std::isnan(st::from_bf16(st::to_bf16(std::nanf("")))));
  TmpDir d;
  const auto a = ramp(40, 0.113f);
  std::vector<st::OutTensor> ts = {{"w", {8, 5}, [&](std::vector<float>& o) { o = a; }}};
  st::write_model(d.p.string(), ts, st::OutDtype::bf16, {}, int64_t{1} << 30);
  st::Reader r(d.file("model.safetensors"));
  EXPECT_EQ(r.find("w")->dtype, "BF16");
  const auto g = r.read("w");
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    // The nearest bf16 is within half an ulp (2^-8 relative).
    const double rel = std::abs(double(g[i]) - a[i]) / std::abs(double(a[i]));
    worst = std::max(worst, rel);
    EXPECT_LE(rel, std::ldexp(1.0, -8)) << "element " << i;
    EXPECT_EQ(std::bit_cast<uint32_t>(g[i]) & 0xffffu, 0u);
  }
  std::printf("bf16 worst relative rounding error %.3e (bound %.3e)\n", worst, std::ldexp(1.0, -8));
}

TEST(Safetensors, ReadsFloat16) {
  TmpDir d;
  const std::vector<uint16_t> h = {0x3c00, 0xc000, 0x3800, 0x0001, 0x7c00, 0x3555};
  std::vector<uint8_t> data(h.size() * 2);
  std::memcpy(data.data(), h.data(), data.size());
  write_raw(d.file("h.safetensors"), R"({"x":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]}})", data);
  const auto g = st::Reader(d.file("h.safetensors")).read("x");
  EXPECT_EQ(g[0], 1.0f);
  EXPECT_EQ(g[1], -2.0f);
  EXPECT_EQ(g[2], 0.5f);
  EXPECT_EQ(g[3], std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(g[4]) && g[4] > 0);
  EXPECT_EQ(g[5], std::ldexp(float(0x555 | 0x400), -12));  // 0x3555: exponent 13 -> 2^-2, mantissa 0x155
}

TEST(Safetensors, ShardsWithAnIndex) {
  TmpDir d;
  std::vector<std::vector<float>> vals;
  std::vector<st::OutTensor> ts;
  for (int i = 0; i < 5; ++i) vals.push_back(ramp(size_t(10 + i), float(i) + 0.5f));
  for (int i = 0; i < 5; ++i)
    ts.push_back({tname(i), {int64_t(10 + i)}, [&vals, i](std::vector<float>& o) { o = vals[size_t(i)]; }});
  // 100 bytes per shard: t0 (40) + t1 (44), t2 (48) + ... one shard each after.
  const auto files = st::write_model(d.p.string(), ts, st::OutDtype::f32, {}, 100);
  ASSERT_GE(files.size(), 3u);
  EXPECT_EQ(files.back(), "model.safetensors.index.json");
  EXPECT_FALSE(fs::exists(d.file("model.safetensors")));
  const auto index = nlohmann::json::parse(std::ifstream(d.file("model.safetensors.index.json")));
  EXPECT_EQ(index["metadata"]["total_size"].get<int64_t>(), (10 + 11 + 12 + 13 + 14) * 4);
  EXPECT_EQ(index["weight_map"]["t0"], files[0]);
  st::Model m(d.p.string());
  EXPECT_EQ(m.names().size(), 5u);
  for (int i = 0; i < 5; ++i) {
    const auto g = m.read(tname(i));
    EXPECT_EQ(std::memcmp(g.data(), vals[size_t(i)].data(), g.size() * 4), 0) << "t" << i;
  }
  // An index naming a shard that lacks the tensor is refused.
  auto j = index;
  j["weight_map"]["t4"] = files[0];
  std::ofstream(d.file("model.safetensors.index.json")) << j.dump();
  const std::string e = error_of([&] { st::Model bad(d.p.string()); });
  EXPECT_NE(e.find("'t4'"), std::string::npos) << e;
  EXPECT_NE(e.find(files[0]), std::string::npos) << e;
  // An index that is not JSON is refused by name.
  std::ofstream(d.file("model.safetensors.index.json")) << "{\"weight_map\": ";
  const std::string e2 = error_of([&] { st::Model bad(d.p.string()); });
  EXPECT_NE(e2.find("model.safetensors.index.json' is not valid JSON: "), std::string::npos) << e2;
}

struct BadCase {
  const char* label;
  std::string header;
  size_t data_bytes;
  int64_t claimed;      // header size written (-1: the real one)
  const char* expect1;  // substrings the message must contain (besides the file name)
  const char* expect2;
};

TEST(Safetensors, MalformedFilesAreRefusedNamingFileAndTensor) {
  const std::vector<BadCase> cases = {
      {"header size past the end", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4, 5000,
       "header size 5000", "truncated"},
      {"not JSON", R"({"a":{"dtype":"F32",)", 4, -1, "not valid JSON", ""},
      {"not an object", R"([1,2,3])", 0, -1, "not a JSON object", ""},
      {"offsets past the data", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 12, -1, "tensor 'w'",
       "run past the data section"},
      {"offsets reversed", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", 12, -1, "tensor 'w'",
       "end before they begin"},
      {"wrong byte count", R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", 16, -1, "tensor 'w'",
       "needs 16"},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       12, -1, "tensor 'b'", "overlaps tensor 'a'"},
      {"unknown dtype", R"({"q":{"dtype":"Q4_K","shape":[2],"data_offsets":[0,2]}})", 2, -1, "tensor 'q'",
       "unknown dtype 'Q4_K'"},
      {"negative shape", R"({"n":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4, -1, "tensor 'n'",
       "non-negative"},
      {"metadata not strings", R"({"__metadata__":{"k":3}})", 0, -1, "__metadata__", "'k'"},
  };
  TmpDir d;
  for (const BadCase& c : cases) {
    const std::string path = d.file("bad.safetensors");
    write_raw(path, c.header, std::vector<uint8_t>(c.data_bytes, 0), c.claimed);
    const std::string e = error_of([&] { st::Reader r(path); });
    EXPECT_NE(e.find(path), std::string::npos) << c.label << ": " << e;
    EXPECT_NE(e.find(c.expect1), std::string::npos) << c.label << ": " << e;
    EXPECT_NE(e.find(c.expect2), std::string::npos) << c.label << ": " << e;
  }
  // Shorter than the 8-byte size field.
  std::ofstream(d.file("short.safetensors")) << "abc";
  const std::string e = error_of([&] { st::Reader r(d.file("short.safetensors")); });
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
}

TEST(Safetensors, UnsupportedDtypeAndMissingTensorOnRead) {
  TmpDir d;
  const std::string path = d.file("i.safetensors");
  write_raw(path, R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", std::vector<uint8_t>(16, 0));
  st::Reader r(path);  // a valid file: the dtype is known, only not readable as float
  std::string e = error_of([&] { r.read("ids"); });
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("'ids'"), std::string::npos) << e;
  EXPECT_NE(e.find("I64"), std::string::npos) << e;
  e = error_of([&] { r.read("absent"); });
  EXPECT_NE(e.find("'absent'"), std::string::npos) << e;
  EXPECT_NE(e.find(path), std::string::npos) << e;
  // A directory with neither file.
  e = error_of([&] { st::Model m(d.p.string()); });
  EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
}

}  // namespace
