#!/usr/bin/env bash
# scripts/two_hosts_bench.sh: two "hosts" of two ranks each on this machine - network namespaces
# joined by a bridge, each host's link limited by tc tbf - and allreduce_bench's all_reduce over
# them, with the two-level algorithm (--two-level on) and with the flat ring (--two-level off).
# Each rank is one allreduce_bench process joining through env://; ENGINE_COMM_HOST_ID tells the
# ranks which host they are on (shared memory inside a host, TCP between hosts). Needs root,
# iproute2 and the tbf qdisc; deletes its namespaces on exit.
#
# Usage: bash scripts/two_hosts_bench.sh [RATE [BYTES [BUILD_DIR]]]   (defaults: 1gbit 32M build)
set -euo pipefail
rate=${1:-1gbit}
bytes=${2:-32M}
build=${3:-build}
tag=engbench$$
sw=${tag}_sw
cleanup() {
  for ns in "${tag}_h0" "${tag}_h1" "$sw"; do ip netns del "$ns" 2>/dev/null || true; done
}
trap cleanup EXIT

ip netns add "$sw"
ip -n "$sw" link add br0 type bridge
ip -n "$sw" link set br0 up
for i in 0 1; do
  h=${tag}_h$i
  ip netns add "$h"
  ip link add eth0 netns "$h" type veth peer name "v$i" netns "$sw"
  ip -n "$sw" link set "v$i" master br0 up
  ip -n "$h" addr add "10.77.1.$((i + 1))/24" dev eth0
  ip -n "$h" link set eth0 up
  ip -n "$h" link set lo up
  # What leaves each host: rate-limited as a NIC of that speed would be.
  ip netns exec "$h" tc qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 100ms
done

# One run of 4 ranks, 2 per host; $1: the --two-level choice. Rank 0 prints the table.
run() {
  local port=$((20000 + RANDOM % 20000)) pids=() code=0
  for r in 0 1 2 3; do
    local h=$((r / 2))
    ip netns exec "${tag}_h$h" env RANK=$r WORLD_SIZE=4 LOCAL_RANK=$((r % 2)) LOCAL_WORLD_SIZE=2 \
      MASTER_ADDR=10.77.1.1 MASTER_PORT=$port ENGINE_COMM_HOST_ID=host$h \
      "$build/apps/allreduce_bench" --min-bytes "$bytes" --max-bytes "$bytes" --iters 5 \
      --warmup 2 --two-level "$1" --timeout 300 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || code=$?; done
  return $code
}

echo "## two hosts x two ranks, each host's link: tbf rate $rate; --two-level on"
run on
echo "## the same, flat ring: --two-level off"
run off
