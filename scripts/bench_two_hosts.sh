#!/usr/bin/env bash
# scripts/bench_two_hosts.sh: two "hosts" on one machine, one rank each, over a link limited by
# tc's token bucket filter: network namespaces bench2h0 and bench2h1 joined by a veth pair
# (10.78.0.1 and 10.78.0.2), `tc qdisc ... tbf rate RATE` on both ends. For each gradient
# compression, one run of train with --transport tcp: images/s, test accuracy and
# comm_bytes_per_step (the last epoch's --metrics line). Needs root, iproute2 and tc.
#   scripts/bench_two_hosts.sh [BUILD_DIR]   (default build)
# Environment:
#   COMPRESSIONS  (default "none bf16 powersgd:4"); MODEL (simplecnn); RATE (1gbit);
#   EPOCHS (1); THREADS per rank (1); EXTRA more train flags (e.g. "--steps 200")
# The namespaces are deleted on exit. Prints a markdown table.
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
compressions=${COMPRESSIONS:-"none bf16 powersgd:4"}
model=${MODEL:-simplecnn}
rate=${RATE:-1gbit}
epochs=${EPOCHS:-1}
threads=${THREADS:-1}
extra=${EXTRA:-}
drop_hosts() {
  ip netns del bench2h0 2>/dev/null || true
  ip netns del bench2h1 2>/dev/null || true
}
drop_hosts  # those of an earlier run that was killed
tmp=$(mktemp -d)
trap 'drop_hosts; rm -rf "$tmp"' EXIT
ip netns add bench2h0
ip netns add bench2h1
ip link add eth0 netns bench2h0 type veth peer name eth0 netns bench2h1
for i in 0 1; do
  ns=bench2h$i
  ip -n "$ns" addr add "10.78.0.$((i + 1))/24" dev eth0
  ip -n "$ns" link set lo up
  ip -n "$ns" link set eth0 up
  tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 50ms
done

echo "| compression | images/s | test acc | comm_bytes_per_step |"
echo "|---|---|---|---|"
port=29611
for c in $compressions; do
  port=$((port + 1))
  args=(--model "$model" --epochs "$epochs" --threads "$threads" --transport tcp --timeout 120
    --init-method "tcp://10.78.0.1:$port" --world-size 2 --grad-compression "$c")
  # shellcheck disable=SC2086  # EXTRA is a list of flags
  ip netns exec bench2h1 "$build/apps/train" "${args[@]}" --rank 1 $extra >"$tmp/r1.log" 2>&1 &
  r1=$!
  # shellcheck disable=SC2086
  ip netns exec bench2h0 "$build/apps/train" "${args[@]}" --rank 0 $extra \
    --metrics "$tmp/m.jsonl" >"$tmp/r0.log" 2>&1 ||
    { echo "bench_two_hosts.sh: rank 0 failed ($c):" >&2; tail -3 "$tmp/r0.log" >&2; exit 1; }
  wait "$r1" || { echo "bench_two_hosts.sh: rank 1 failed ($c):" >&2; tail -3 "$tmp/r1.log" >&2; exit 1; }
  python3 - "$tmp/m.jsonl" "$c" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readlines()[-1])
print(f"| {sys.argv[2]} | {r['images_per_s']:,.0f} | {r['test_acc']:.4f} | "
      f"{r['comm_bytes_per_step']:,.0f} |")
PY
done
