#!/usr/bin/env bash
# scripts/gpu_first_run.sh: first contact with a machine that has NVIDIA GPUs, in one command.
# It builds with CUDA, runs the CUDA test cases, gpu_selftest, compute-sanitizer (memcheck,
# racecheck, synccheck) over the CUDA tests and 20 training steps of each model, one epoch of
# simplecnn on one GPU against the CPU's accuracy, two-rank training over NCCL, the IPC ring and
# the staged ring (each must end where one rank ends), counts the CUDA contexts per GPU during a
# two-rank run (issue 14 finding 1), and times bench_kernels and allreduce_bench on the GPU.
# Every step is a command that docs/gpu.md's "The first-run script" section documents.
#
# Writes one markdown report (every figure, every failure; default gpu_first_run.md) and exits
# 0 when every step passed (a skipped step, e.g. NCCL with one GPU, is listed, not a failure),
# 1 on any failure, 2 at once when this machine has no NVIDIA GPU.
#
#   scripts/gpu_first_run.sh                     # from the repository root
#   REPORT=out.md BUILD_DIR=build-gpu DATA_DIR=/usr/share/datasets/fashion-mnist scripts/gpu_first_run.sh
#   BUILD=0 SANITIZER_TOOLS=memcheck STEP_LIMIT=120 scripts/gpu_first_run.sh   # a short run
# BUILD=0 uses BUILD_DIR as it is (built elsewhere, e.g. on a machine without a GPU); SANITIZER_TOOLS
# picks compute-sanitizer's tools (default: memcheck racecheck synccheck; "" for none); STEP_LIMIT
# caps every step's time limit in seconds (a step past it is killed and FAILs).
# NVIDIA_SMI names the nvidia-smi to ask (the test suite points it at /bin/false).
set -u
cd "$(dirname "$0")/.." || exit 1
SMI=${NVIDIA_SMI:-nvidia-smi}
if ! gpus=$("$SMI" --query-gpu=index,uuid,name,driver_version --format=csv,noheader 2>/dev/null) ||
  [ -z "$gpus" ]; then
  echo "gpu_first_run: no NVIDIA GPU on this machine ($SMI lists none): nothing to run here;" \
    "run it where nvidia-smi shows a GPU" >&2
  exit 2
fi

B=${BUILD_DIR:-build-gpu}
REPORT=${REPORT:-gpu_first_run.md}
DATA=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
NGPU=$(printf '%s\n' "$gpus" | wc -l)
TMP=$(mktemp -d /tmp/gpu_first_run.XXXXXX)
SAMPLER=""
trap '[ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null; rm -rf "$TMP"' EXIT
DETAILS="$TMP/details.md"
: >"$DETAILS"
ROWS=()
FAILED=0
SKIPPED=0
N=0

# row STEP RESULT SECONDS NOTE: one line of the summary table.
row() {
  ROWS+=("| $1 | $2 | $3 | $4 |")
  case $2 in
    FAIL) FAILED=$((FAILED + 1)) ;;
    skip) SKIPPED=$((SKIPPED + 1)) ;;
  esac
}

# run NAME LIMIT_S CMD...: runs CMD (its output in the report), sets RC, SECS and LOG.
run() {
  local name=$1 limit=$2
  shift 2
  [ -n "${STEP_LIMIT:-}" ] && [ "$STEP_LIMIT" -lt "$limit" ] && limit=$STEP_LIMIT
  N=$((N + 1))
  LOG="$TMP/step$N.log"
  echo "== $name: $*" >&2
  local t0
  t0=$(date +%s.%N)
  timeout --kill-after=10 "$limit" "$@" >"$LOG" 2>&1
  RC=$?
  SECS=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  {
    echo "### $N. $name"
    echo
    echo '```'
    echo "\$ $*"
    echo '```'
    echo
    echo "exit code $RC, $SECS s$([ $RC -eq 124 ] && echo " (killed at the $limit s limit)")"
    echo
    echo '```'
    if [ "$(wc -l <"$LOG")" -gt 400 ]; then
      head -n 150 "$LOG"
      echo "... ($(wc -l <"$LOG") lines; the middle left out) ..."
      tail -n 250 "$LOG"
    else
      cat "$LOG"
    fi
    echo '```'
    echo
  } >>"$DETAILS"
}

# check NAME LIMIT_S CMD...: run, then a row: pass on exit 0, FAIL otherwise.
check() {
  local name=$1
  run "$@"
  if [ $RC -eq 0 ]; then row "$name" pass "$SECS" ""; else row "$name" FAIL "$SECS" "exit $RC"; fi
}

note() { printf '%s\n\n' "$*" >>"$DETAILS"; }

# --- 1. build ---------------------------------------------------------------------------------
if [ "${BUILD:-1}" = 0 ]; then
  check "the build as it is (BUILD=0): $B/apps/train runs" 60 "$B/apps/train" --help
  cfg=$RC
else
  check "configure (CUDA on)" 900 cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DENGINE_CUDA=ON
  cfg=$RC
  check "build" 3600 cmake --build "$B" -j"$(nproc)"
fi
if [ $cfg -ne 0 ] || [ $RC -ne 0 ]; then
  row "everything after the build" skip 0 "the build failed"
  BUILD_FAILED=1
else
  BUILD_FAILED=0
fi
A="$B/apps"
T="$B/tests"

steps_after_build() {
  # --- 2. the CUDA test cases ---------------------------------------------------------------
  run "CUDA test cases" 3600 ctest --test-dir "$B" -R 'Cuda|cuda|DeviceOps|Nccl|RingPeers|Watchdog|Gpu|DataParallel|TwoGpu' --output-on-failure
  local skipped_tests
  skipped_tests=$(grep -c '(Skipped)' "$LOG")
  if [ $RC -eq 0 ]; then
    row "CUDA test cases" pass "$SECS" "$(grep -o '[0-9]*% tests passed.*' "$LOG"); $skipped_tests skipped (listed below)"
  else
    row "CUDA test cases" FAIL "$SECS" "$(grep -o '[0-9]* tests failed out of [0-9]*' "$LOG")"
  fi

  # --- 3. gpu_selftest ----------------------------------------------------------------------
  run "gpu_selftest" 1800 "$A/gpu_selftest"
  case $RC in
    0) row "gpu_selftest" pass "$SECS" "$(tail -n 1 "$LOG")" ;;
    3) row "gpu_selftest" skip "$SECS" "$(tail -n 1 "$LOG") (none failed)" ;;
    *) row "gpu_selftest" FAIL "$SECS" "exit $RC: $(tail -n 1 "$LOG")" ;;
  esac

  accuracy_step
  two_rank_steps
  bench_steps
  sanitizer_steps  # last: the slowest, and the others' figures matter first
}

# --- 4. compute-sanitizer ---------------------------------------------------------------------
sanitizer_steps() {
  local cs
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  if [ -z "$cs" ]; then
    row "compute-sanitizer" skip 0 "missing: not on PATH nor in /usr/local/cuda/bin"
    note "compute-sanitizer is missing from this toolkit: memcheck, racecheck and synccheck did not run."
    return
  fi
  local tool model
  [ -z "${SANITIZER_TOOLS-x}" ] && row "compute-sanitizer" skip 0 "SANITIZER_TOOLS is empty"
  for tool in ${SANITIZER_TOOLS-memcheck racecheck synccheck}; do
    check "$tool: CUDA kernels" 3600 "$cs" --tool "$tool" --error-exitcode 99 "$T/test_kernels" --gtest_filter='CudaKernels.*'
    check "$tool: core CUDA" 3600 "$cs" --tool "$tool" --error-exitcode 99 "$T/test_core" --gtest_filter='Cuda*'
    check "$tool: device ops" 3600 "$cs" --tool "$tool" --error-exitcode 99 "$T/test_nn" --gtest_filter='DeviceOps.*'
    for model in simplecnn convnet net linear; do
      check "$tool: train $model, 20 steps" 3600 "$cs" --tool "$tool" --error-exitcode 99 "$A/train" --model "$model" --steps 20 --device cuda --data-dir "$DATA"
    done
  done
}

# test_acc of the last line of a --metrics file.
test_acc() { sed -n 's/.*"test_acc": *\([0-9.eE+-]*\).*/\1/p' "$1" | tail -n 1; }

# --- 5. one epoch of simplecnn: GPU against CPU -------------------------------------------------
accuracy_step() {
  run "simplecnn, 1 epoch, cpu" 3600 "$A/train" --model simplecnn --epochs 1 --device cpu --data-dir "$DATA" --metrics "$TMP/cpu.jsonl"
  local cpu_rc=$RC cpu_s=$SECS
  run "simplecnn, 1 epoch, cuda" 3600 "$A/train" --model simplecnn --epochs 1 --device cuda --data-dir "$DATA" --metrics "$TMP/gpu.jsonl"
  if [ $cpu_rc -ne 0 ] || [ $RC -ne 0 ]; then
    row "simplecnn 1 epoch, GPU vs CPU accuracy" FAIL "$((${cpu_s%.*} + ${SECS%.*}))" "cpu exit $cpu_rc, cuda exit $RC"
    return
  fi
  local a_cpu a_gpu verdict
  a_cpu=$(test_acc "$TMP/cpu.jsonl")
  a_gpu=$(test_acc "$TMP/gpu.jsonl")
  note "metrics, cpu: $(cat "$TMP/cpu.jsonl")" "metrics, cuda: $(cat "$TMP/gpu.jsonl")"
  verdict=$(awk -v c="$a_cpu" -v g="$a_gpu" 'BEGIN { d = g - c; if (d < 0) d = -d; print (d <= 0.005 ? "pass" : "FAIL") }')
  row "simplecnn 1 epoch, GPU vs CPU accuracy" "$verdict" "$SECS" "test acc cuda $a_gpu, cpu $a_cpu (within 0.5 points: $verdict)"
}

# Largest |a - b| over the float32 tensors of two safetensors files (python3's stdlib only).
max_abs_diff() { python3 scripts/gpu_bench_report.py --max-abs-diff "$1" "$2"; }

# Samples the compute apps (pid, GPU) every 0.2 s into $1 until killed.
sample_contexts() {
  while :; do
    "$SMI" --query-compute-apps=pid,gpu_uuid --format=csv,noheader 2>/dev/null >>"$1"
    sleep 0.2
  done
}

# --- 6. two ranks: NCCL, the IPC ring, the staged ring; contexts per GPU --------------------------
two_rank_steps() {
  local args="--model simplecnn --dropout 0 --sharding sampler --shuffle off --steps 20 --device cuda --data-dir $DATA --timeout 120"
  # shellcheck disable=SC2086
  run "one rank, reference" 1800 "$A/train" $args --save "$TMP/one.safetensors"
  if [ $RC -ne 0 ]; then
    row "two ranks (reference run)" FAIL "$SECS" "the one-rank reference failed: exit $RC"
    return
  fi
  local path port=29731 d
  local knob flag
  for path in "ENGINE_CUDA_RING=staged" "ENGINE_CUDA_RING=ipc" "--backend nccl"; do
    knob="" flag=""
    case $path in ENGINE_*) knob=$path ;; *) flag=$path ;; esac
    port=$((port + 1))
    if [ "$path" = "--backend nccl" ] && [ "$NGPU" -lt 2 ]; then
      row "two ranks, $path" skip 0 "NCCL needs a GPU per rank: $NGPU GPU here"
      continue
    fi
    if [ "$path" = "ENGINE_CUDA_RING=staged" ]; then
      : >"$TMP/contexts.csv"
      sample_contexts "$TMP/contexts.csv" &
      SAMPLER=$!
    fi
    # shellcheck disable=SC2086
    run "two ranks, $path" 1800 env $knob "$A/launch" --nproc-per-node 2 --master-port "$port" -- "$A/train" $args $flag --save "$TMP/two.safetensors"
    if [ -n "$SAMPLER" ]; then
      kill "$SAMPLER" 2>/dev/null
      wait "$SAMPLER" 2>/dev/null
      SAMPLER=""
      context_report "$TMP/contexts.csv"
    fi
    if [ $RC -ne 0 ]; then
      row "two ranks, $path" FAIL "$SECS" "exit $RC"
      continue
    fi
    d=$(max_abs_diff "$TMP/one.safetensors" "$TMP/two.safetensors" 2>&1)
    if awk -v d="$d" 'BEGIN { exit !(d + 0 == d && d < 1e-4) }'; then
      row "two ranks, $path" pass "$SECS" "ends where one rank ends: max abs diff $d"
    else
      row "two ranks, $path" FAIL "$SECS" "does not end where one rank ends: max abs diff $d"
    fi
  done
}

# Finding 1: each rank has a context on its own GPU only. With a GPU per rank every GPU holds one
# context; with one GPU it holds one per rank, and no process may appear on two GPUs.
context_report() {
  local f=$1
  if [ ! -s "$f" ]; then
    row "contexts per GPU (2 ranks)" FAIL 0 "nvidia-smi listed no compute apps during the run"
    return
  fi
  local per_pid per_gpu want
  per_pid=$(sort -u "$f" | awk -F', *' '{ n[$1]++ } END { m = 0; for (p in n) if (n[p] > m) m = n[p]; print m }')
  per_gpu=$(sort -u "$f" | awk -F', *' '{ n[$2]++ } END { for (g in n) printf "%s: %d; ", g, n[g] }')
  want=$([ "$NGPU" -ge 2 ] && echo 1 || echo 2)
  note "Compute apps seen during the two-rank staged run (pid, GPU):" "$(sort -u "$f" | sed 's/^/    /')"
  local max_gpu
  max_gpu=$(sort -u "$f" | awk -F', *' '{ n[$2]++ } END { m = 0; for (g in n) if (n[g] > m) m = n[g]; print m }')
  if [ "$per_pid" -le 1 ] && [ "$max_gpu" -le "$want" ]; then
    row "contexts per GPU (2 ranks)" pass 0 "at most $per_pid GPU per process; per GPU: $per_gpu"
  else
    row "contexts per GPU (2 ranks)" FAIL 0 "a process on $per_pid GPUs; per GPU: $per_gpu(expected at most $want)"
  fi
}

# --- 7. benchmarks on the GPU ---------------------------------------------------------------------
bench_steps() {
  check "bench_kernels --device cuda" 3600 "$A/bench_kernels" --device cuda
  local w_nccl=$((NGPU >= 2 ? 2 : 1))
  check "allreduce_bench, ring staged" 1800 "$A/allreduce_bench" --world-size 2 --device cuda --backend ring --collective all
  check "allreduce_bench, ring ipc" 1800 "$A/allreduce_bench" --world-size 2 --device cuda --backend ring --ring-transport ipc
  check "allreduce_bench, nccl ($w_nccl ranks)" 1800 "$A/allreduce_bench" --world-size "$w_nccl" --device cuda --backend nccl --collective all
}

# Stopped from outside (a timeout): the report still says what ran.
stopped() {
  row "the rest" FAIL 0 "stopped from outside (SIGTERM)"
  [ -n "${LOG:-}" ] && { printf '### Stopped during step %s; its output so far\n\n```\n' "$N"; tail -n 100 "$LOG"; printf '```\n'; } >>"$DETAILS"
  write_report
  exit 124
}
trap stopped TERM
[ $BUILD_FAILED -eq 0 ] && steps_after_build

# --- the report ---------------------------------------------------------------------------------
write_report() {
  {
    echo "# GPU first run, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "Commit $(git rev-parse --short HEAD 2>/dev/null || echo '?') on $(hostname)."
    echo "GPUs (index, uuid, name, driver):"
    echo
    printf '%s\n' "$gpus" | sed 's/^/    /'
    echo
    echo "Toolkit: $(nvcc --version 2>/dev/null | tail -n 1 || echo 'nvcc not found')"
    echo
    echo "**$([ $FAILED -eq 0 ] && echo "every step passed" || echo "$FAILED step(s) FAILED")**, $SKIPPED skipped."
    echo
    echo "| step | result | s | figures / notes |"
    echo "|---|---|---|---|"
    printf '%s\n' "${ROWS[@]}"
    echo
    echo "## Every step's command and output"
    echo
    cat "$DETAILS"
  } >"$REPORT"
}
write_report
echo "gpu_first_run: $FAILED failed, $SKIPPED skipped; report: $REPORT" >&2
[ $FAILED -eq 0 ]
