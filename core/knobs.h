// core/knobs.h: the ENGINE_* environment variables, read here and nowhere else, as NCCL keeps
// NCCL_ALGO and NCCL_PROTO: knobs that force a choice the engine would otherwise make itself.
// docs/knobs.md is their table (tests/core/test_knobs.cpp checks that it names exactly these).
// Each accessor reads its variable when called; an unset or empty variable gives the default; a
// value outside the listed ones throws engine::Error "ENGINE_X=v: expected a|b|c".
#pragma once
#include <string>
#include <vector>

namespace engine::knobs {

// One variable as docs/knobs.md lists it: its name, the values it takes, its default.
struct Knob {
  const char* name;
  const char* values;
  const char* fallback;
};
// Every variable the accessors below read, in the table's order.
const std::vector<Knob>& all();
// Reads every variable once, so that a bad value fails at a program's start, not at first use.
void check_all();
// Whether the variable called name is set to a non-empty value (for programs whose own default
// differs from the variable's, e.g. a benchmark that sweeps both values when it is unset).
bool given(const char* name);

// ENGINE_ALGO: auto|ring|rd|rh|tree, the host algorithm of all_reduce, broadcast and reduce.
std::string algo();
// ENGINE_CUDA_KERNELS: library|engine (default engine), which CUDA kernels the ops run.
std::string cuda_kernels();
// ENGINE_CUDA_RING: auto|staged|ipc, how the ring backend moves GPU tensors.
std::string cuda_ring();
// ENGINE_RING_PROTOCOL: auto|ll|simple|events, the CUDA IPC ring's protocol.
std::string ring_protocol();
// ENGINE_RING_CHANNELS: 0..32, the CUDA IPC ring's thread blocks; 0: the ring's default.
int ring_channels();
// ENGINE_CUDA_GRAPH: auto|on|off, the training step captured as one CUDA graph.
std::string cuda_graph();
// ENGINE_DATA_ON_DEVICE: auto|on|off, the training set held on the GPU.
std::string data_on_device();
// ENGINE_THREADS: 1..1024 kernel threads; 0 when unset (core/threads.h then decides).
int threads();
// ENGINE_POWERSGD_START: 0 .. 1e9 (default 100), the optimizer steps train averages
// uncompressed before --grad-compression powersgd:R starts (PowerSGD's start_powerSGD_iter).
int powersgd_start();
// ENGINE_FLIGHT_RECORDER: 0|1 (default 1), every communicator records its collectives
// (comm/health/flight_recorder.h); 0 to measure what recording costs.
bool flight_recorder();
// ENGINE_SYNC_GUARD: 0|1 (default 0), a host sync inside a training step throws
// (core/sync_guard.h).
bool sync_guard();
// ENGINE_MAX_CPU_ISA: avx512_core_bf16|avx512_core|avx2, the highest instruction set the CPU
// kernels use; "" when unset (what the CPU has).
std::string max_cpu_isa();
// ENGINE_COMM_HOST_ID: any text, the host identity ranks compare to find who shares memory;
// "" when unset (host name, boot id and IPC namespace).
std::string comm_host_id();

}  // namespace engine::knobs
