// core/cuda_absent.cpp: engine::cuda in a build without CUDA. No device ever answers; every call
// that would need one throws engine::Error saying so.
#ifndef ENGINE_WITH_CUDA

#include "core/cuda_backend.h"
#include "core/cuda_graph.h"
#include "core/error.h"

namespace engine::cuda {
namespace {

[[noreturn]] void not_built(const char* what) {
  ENGINE_FAIL("engine::cuda::", what,
              ": CUDA is not built in (configure with -DENGINE_CUDA=ON on a machine with nvcc)");
}

}  // namespace

int device_count() {
  return 0;
}

std::string unavailable_reason() {
  return "no CUDA device: this build has no CUDA support (configure with -DENGINE_CUDA=ON)";
}

std::string device_uuid(int) {
  not_built("device_uuid");
}
bool can_access_peer(int, int) {
  not_built("can_access_peer");
}

void set_home_device(int) {
  not_built("set_home_device");
}
int home_device() {
  return -1;
}
void enter_home_device() noexcept {}
void set_thread_device(int) {
  not_built("set_thread_device");
}

void* alloc(int, size_t) {
  not_built("alloc");
}
void free(int, void*, size_t) {
  not_built("free");
}
AllocatorStats stats(int) {
  not_built("stats");
}
void empty_cache(int) {
  not_built("empty_cache");
}
void copy(void*, Device, const void*, Device, size_t) {
  not_built("copy");
}
void fill_f32(int, float*, float, int64_t) {
  not_built("fill_f32");
}
void axpy_f32(int, float*, const float*, float, int64_t) {
  not_built("axpy_f32");
}
void scale_f32(int, float*, float, int64_t) {
  not_built("scale_f32");
}

void* alloc_pinned(size_t, int) {
  not_built("alloc_pinned");
}
void free_pinned(void* p, int) {
  if (p) not_built("free_pinned");
}
void copy_async(void*, Device, const void*, Device, size_t, int, Stream) {
  not_built("copy_async");
}
size_t free_memory(int) {
  not_built("free_memory");
}
void synchronize(int, Stream) {
  not_built("synchronize");
}
Event::~Event() = default;
Event& Event::operator=(Event&& o) noexcept {
  ev_ = o.ev_;
  device_ = o.device_;
  o.ev_ = nullptr;
  return *this;
}
Event Event::record(int, Stream) {
  not_built("Event::record");
}
void Event::block(Stream) const {
  not_built("Event::block");
}
bool Event::done() const {
  return true;
}
void Event::synchronize() const {}
void comm_after(int, const Event*) {
  not_built("comm_after");
}

Graph::Graph(int device) : device_(device) {
  not_built("Graph");
}
Graph::~Graph() = default;
void Graph::begin_capture(const std::string&) {
  not_built("Graph::begin_capture");
}
void Graph::end_capture() {
  not_built("Graph::end_capture");
}
void Graph::abort_capture() noexcept {}
void Graph::replay() {
  not_built("Graph::replay");
}
void write_u64(int, uint64_t*, uint64_t) {
  not_built("write_u64");
}

}  // namespace engine::cuda

#endif  // ENGINE_WITH_CUDA
