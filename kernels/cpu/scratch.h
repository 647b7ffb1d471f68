// kernels/cpu/scratch.h: a kernel's scratch memory: count T from the CPU allocator's size-class
// cache (no fresh page faults in a training step), returned when the scope ends.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/allocator.h"

namespace engine::kernels::cpu {

template <class T>
class Scratch {
 public:
  // At least min_count elements (a kernel that reads a whole vector past the end asks for more).
  explicit Scratch(int64_t count, int64_t min_count = 1)
      : n_(static_cast<size_t>(std::max(count, min_count)) * sizeof(T)),
        p_(static_cast<T*>(cpu_allocator::alloc(n_))) {}
  ~Scratch() { cpu_allocator::free(p_, n_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* get() const { return p_; }

 private:
  size_t n_;
  T* p_;
};

}  // namespace engine::kernels::cpu
