// io/dtype.h: element types a tensor or a safetensors entry may hold. Names are safetensors'
// ("F32", "U8", "I64", "I32", "BF16", "F16"; I32 holds max pooling's argmax indices; BF16 and F16
// are 16-bit floats held as their bits, converted by kernels/half.h), long names PyTorch's
// ("float32", ...). A file-format notion, so it lives in io; core's Tensor uses it. F64 is for
// the collectives alone (sums a step keeps in double); no name parses to it: no tensor, file or
// flag holds one yet.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace engine {

// The values travel in frame headers (comm/base/frame.h): append, never renumber.
enum class DType : uint8_t { F32, U8, I64, I32, BF16, F16, F64 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
      return 4;
    case DType::U8:
      return 1;
    case DType::I64:
    case DType::F64:
      return 8;
    case DType::I32:
      return 4;
    case DType::BF16:
    case DType::F16:
      return 2;
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::U8:
      return "U8";
    case DType::I64:
      return "I64";
    case DType::I32:
      return "I32";
    case DType::BF16:
      return "BF16";
    case DType::F16:
      return "F16";
    case DType::F64:
      return "F64";
  }
  return "?";
}

// PyTorch's name: "float32", "uint8", "int64", "int32", "bfloat16", "float16".
inline const char* dtype_long_name(DType t) {
  switch (t) {
    case DType::F32:
      return "float32";
    case DType::U8:
      return "uint8";
    case DType::I64:
      return "int64";
    case DType::I32:
      return "int32";
    case DType::BF16:
      return "bfloat16";
    case DType::F16:
      return "float16";
    case DType::F64:
      return "float64";
  }
  return "?";
}

// Parses a long name (dtype_long_name's) or a safetensors name; false when it is neither.
inline bool dtype_from_any_name(const std::string& s, DType* out) {
  for (DType t : {DType::F32, DType::U8, DType::I64, DType::I32, DType::BF16, DType::F16})
    if (s == dtype_long_name(t) || s == dtype_name(t)) {
      *out = t;
      return true;
    }
  return false;
}

// True for F32, BF16, F16 and F64.
inline bool dtype_is_floating(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16 || t == DType::F64;
}

// Parses a safetensors dtype name; returns false when it is not one files may hold (F32, U8,
// I64: I32 tensors are max pooling's indices, never saved; BF16 and F16 tensors are not loaded).
inline bool dtype_from_name(const std::string& s, DType* out) {
  if (s == "F32")
    *out = DType::F32;
  else if (s == "U8")
    *out = DType::U8;
  else if (s == "I64")
    *out = DType::I64;
  else
    return false;
  return true;
}

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::F32;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::U8;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::I64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::I32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::F64;
}

}  // namespace engine
