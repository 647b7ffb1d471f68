// comm/algorithms/all_to_all.h: all_to_all by direct exchange (all_to_all.cpp). Host memory only.
#pragma once
#include <cstddef>

#include "comm/algorithms/context.h"

namespace engine::comm {

// Rank r's chunk j of `in` lands in rank j's chunk r of `out`. Chunks lie back to back; with
// send_counts / recv_counts null every chunk is c.fp.count elements (in and out: world * count),
// else chunk j holds send_counts[j] elements in `in` and recv_counts[j] in `out` (PyTorch's
// all_to_all_single with input_split_sizes / output_split_sizes). Each message carries a
// fingerprint whose count is that pair's count, so split sizes the pair disagrees on are an error
// naming both ranks.
void direct_all_to_all(const CollContext& c, const void* in, void* out, const size_t* send_counts,
                       const size_t* recv_counts);

}  // namespace engine::comm
