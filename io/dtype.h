// io/dtype.h: element types a tensor or a safetensors entry may hold. Names are safetensors'
// ("F32", "U8", "I64", "I32"; I32 holds max pooling's argmax indices). A file-format notion, so
// it lives in io; core's Tensor uses it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace engine {

enum class DType : uint8_t { F32, U8, I64, I32 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
      return 4;
    case DType::U8:
      return 1;
    case DType::I64:
      return 8;
    case DType::I32:
      return 4;
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
  }
  return "?";
}

// Parses a safetensors dtype name; returns false when it is not one files may hold (F32, U8,
// I64: I32 tensors are max pooling's indices, never saved).
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

}  // namespace engine
