// core/cuda/allocator.cuh: the caching allocator's private pools for captured CUDA graphs
// (core/block_pool.h says the rules); core/cuda/graph.cu is their one user.
#pragma once
#include <cstdint>

namespace engine::cuda {

uint64_t create_graph_pool(int device);
// While captured, every allocation and free on `device` goes to pool id.
void begin_graph_pool_capture(int device, uint64_t id);
void end_graph_pool_capture(int device);
// The graph is gone: its pool's free blocks join the general cache.
void release_graph_pool(int device, uint64_t id);

}  // namespace engine::cuda
