// io/safetensors.cpp: encoder and strict validating decoder for safetensors files.
#include "io/safetensors.h"

#include <algorithm>
#include <set>

#include "io/atomic_file.h"
#include "io/json.h"

namespace engine {

namespace {

constexpr const char* kMetadataKey = "__metadata__";
// The spec's limit on the header; the reference implementation refuses larger ones too.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// numel * elem_size, or -1 on a negative dimension or an overflow of int64.
int64_t checked_nbytes(const std::vector<int64_t>& shape, size_t elem_size) {
  int64_t n = static_cast<int64_t>(elem_size);
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void put_u64_le(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

uint64_t get_u64_le(std::string_view s) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[i]);
  return v;
}

// A JSON integer in [0, INT64_MAX]: what a dimension or an offset may be. Numbers with a '.' or
// an exponent are not integers, even when integral ("2.0").
bool is_index(const Json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX);
  return v.is_number_integer() && v.get<int64_t>() >= 0;
}

// Reads one tensor's header record; checks types, dtype, shape and that the offsets span
// exactly shape * dtype bytes inside the buffer. Overlaps and holes are checked afterwards.
StEntry parse_record(const std::string& src, const std::string& name, const Json& rec,
                     uint64_t buffer_size, uint64_t* begin, uint64_t* end) {
  auto where = [&] { return "safetensors file '" + src + "': tensor '" + name + "'"; };
  ENGINE_CHECK(rec.is_object(), where(), ": header entry is not an object");
  StEntry e;
  e.name = name;

  const auto dtype = rec.find("dtype");
  ENGINE_CHECK(dtype != rec.end() && dtype->is_string(), where(),
               ": missing or non-string \"dtype\"");
  const std::string& dt = dtype->get_ref<const std::string&>();
  // Files from PyTorch may hold F16, BF16, F64, I32, ...: say which and how to fix it.
  ENGINE_CHECK(dtype_from_name(dt, &e.dtype), where(), " has dtype ", dt,
               ", which the engine does not hold (it holds F32, U8 and I64); convert it before "
               "saving, e.g. tensor.float() in PyTorch");

  const auto shape = rec.find("shape");
  ENGINE_CHECK(shape != rec.end() && shape->is_array(), where(),
               ": missing or non-array \"shape\"");
  for (const Json& d : *shape) {
    ENGINE_CHECK(is_index(d), where(), ": \"shape\" holds ", dump_json(d),
                 ", not a non-negative integer");
    e.shape.push_back(d.get<int64_t>());
  }
  int64_t nbytes = checked_nbytes(e.shape, dtype_size(e.dtype));
  ENGINE_CHECK(nbytes >= 0, where(), ": shape ", shape_text(e.shape), " is too large");

  const auto offs = rec.find("data_offsets");
  ENGINE_CHECK(offs != rec.end() && offs->is_array() && offs->size() == 2, where(),
               ": \"data_offsets\" must be an array [begin, end]");
  for (const Json& o : *offs)
    ENGINE_CHECK(is_index(o), where(), ": \"data_offsets\" holds ", dump_json(o),
                 ", not a non-negative integer");
  *begin = (*offs)[0].get<uint64_t>();
  *end = (*offs)[1].get<uint64_t>();
  ENGINE_CHECK(*begin <= *end, where(), ": data_offsets [", *begin, ", ", *end,
               "] end before they begin");
  ENGINE_CHECK(*end <= buffer_size, where(), ": data_offsets [", *begin, ", ", *end,
               "] run past the end of the byte buffer (", buffer_size, " bytes)");
  ENGINE_CHECK(*end - *begin == static_cast<uint64_t>(nbytes), where(), ": data_offsets [", *begin,
               ", ", *end, "] span ", *end - *begin, " bytes but ", dt, " ", shape_text(e.shape),
               " needs ", nbytes);
  return e;
}

}  // namespace

int64_t StEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const StEntry* StFile::find(const std::string& name) const {
  for (const StEntry& e : entries)
    if (e.name == name) return &e;
  return nullptr;
}

std::string encode_safetensors(const std::vector<StEntry>& entries,
                               const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const StEntry& e : entries) {
    ENGINE_CHECK(e.name != kMetadataKey, "safetensors: a tensor may not be named ", kMetadataKey);
    ENGINE_CHECK(names.insert(e.name).second, "safetensors: duplicate tensor name '", e.name, "'");
    int64_t nbytes = checked_nbytes(e.shape, dtype_size(e.dtype));
    ENGINE_CHECK(nbytes >= 0, "safetensors: tensor '", e.name, "' has a bad shape ",
                 shape_text(e.shape));
    ENGINE_CHECK(e.bytes.size() == static_cast<uint64_t>(nbytes), "safetensors: tensor '", e.name,
                 "' has ", e.bytes.size(), " bytes but ", dtype_name(e.dtype), " ",
                 shape_text(e.shape), " needs ", nbytes);
    header[e.name] = {{"dtype", dtype_name(e.dtype)},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + nbytes}}};
    offset += static_cast<uint64_t>(nbytes);
  }
  std::string text;
  try {
    text = header.dump();  // strict: a name that is not UTF-8 would not read back the same
  } catch (const Json::type_error& e) {
    ENGINE_FAIL("safetensors: a tensor name or metadata string is not valid UTF-8 (", e.what(),
                ")");
  }
  // Pad with spaces so the byte buffer starts 8-aligned, as the reference writer does.
  text.append((8 - text.size() % 8) % 8, ' ');

  std::string out;
  out.reserve(8 + text.size() + offset);
  put_u64_le(out, text.size());
  out += text;
  for (const StEntry& e : entries) out += e.bytes;
  return out;
}

StFile decode_safetensors(std::string_view file, const std::string& source) {
  const std::string where = "safetensors file '" + source + "'";
  ENGINE_CHECK(file.size() >= 8, where, ": ", file.size(),
               " bytes, too short for the 8-byte header length");
  uint64_t n = get_u64_le(file);
  ENGINE_CHECK(n <= kMaxHeaderBytes, where, ": header length ", n, " is above the limit of ",
               kMaxHeaderBytes, " bytes");
  ENGINE_CHECK(n <= file.size() - 8, where, ": header length ", n,
               " runs past the end of the file (", file.size(), " bytes)");
  std::string_view text = file.substr(8, n);
  ENGINE_CHECK(!text.empty() && text[0] == '{', where, ": header does not start with '{'");

  const Json header =
      parse_json(text, where + ": header (bytes 8 to " + std::to_string(8 + n) + ")");
  ENGINE_CHECK(header.is_object(), where, ": header is not a JSON object");

  const uint64_t buffer_size = file.size() - 8 - n;
  const char* buffer = file.data() + 8 + n;
  StFile out;
  struct Span {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Span> spans;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      ENGINE_CHECK(value.is_object(), where, ": \"", kMetadataKey, "\" is not an object");
      for (const auto& [mk, mv] : value.items()) {
        ENGINE_CHECK(mv.is_string(), where, ": metadata \"", mk,
                     "\" is not a string (safetensors metadata maps strings to strings)");
        out.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    uint64_t begin = 0, end = 0;
    out.entries.push_back(parse_record(source, key, value, buffer_size, &begin, &end));
    spans.push_back({begin, end, out.entries.size() - 1});
  }

  // The spans must tile the buffer exactly: no overlap, no hole, no trailing bytes.
  std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const Span* prev = nullptr;
  for (const Span& s : spans) {
    const std::string& name = out.entries[s.index].name;
    ENGINE_CHECK(s.begin >= covered, where, ": tensor '", name, "' at data_offsets [", s.begin,
                 ", ", s.end, "] overlaps tensor '", prev ? out.entries[prev->index].name : "",
                 "' at [", prev ? prev->begin : 0, ", ", prev ? prev->end : 0, "]");
    ENGINE_CHECK(s.begin == covered, where, ": bytes [", covered, ", ", s.begin,
                 ") of the byte buffer belong to no tensor (hole before tensor '", name, "')");
    covered = s.end;
    prev = &s;
  }
  ENGINE_CHECK(covered == buffer_size, where, ": the last ", buffer_size - covered,
               " bytes of the byte buffer belong to no tensor");

  for (const Span& s : spans) out.entries[s.index].bytes.assign(buffer + s.begin, s.end - s.begin);
  return out;
}

void save_safetensors(const std::string& path, const std::vector<StEntry>& entries,
                      const std::map<std::string, std::string>& metadata) {
  std::string bytes;
  try {
    bytes = encode_safetensors(entries, metadata);
  } catch (const Error& e) {
    ENGINE_FAIL("cannot save '", path, "': ", e.what());
  }
  write_file_atomic(path, bytes);
}

StFile load_safetensors(const std::string& path) {
  return decode_safetensors(read_file(path), path);
}

}  // namespace engine
