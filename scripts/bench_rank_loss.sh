#!/usr/bin/env bash
# scripts/bench_rank_loss.sh: a job that loses ranks and goes on (train --on-rank-loss continue
# under launch --on-rank-loss continue), as a user tries it. An undisturbed run first, then MOMENTS
# runs of the same job, each with one rank SIGKILLed (or, KIND=stop, frozen with SIGSTOP) at a
# different moment: a delay after the job's first progress line, the ranks in turn. Each row: the
# rank, the delay, whether launch exited 0, the seconds from the signal to the line that says the
# survivors go on (the regrouped world has the state; its next step follows at once), whether the
# replacement was re-admitted, and whether the saved weights equal the undisturbed run's.
#
#   scripts/bench_rank_loss.sh                      # 20 kills of 4 ranks of the net, 1,500 steps
#   MOMENTS=5 KIND=stop TIMEOUT_S=3 scripts/bench_rank_loss.sh
#   MODEL=convnet MOMENTS=4 scripts/bench_rank_loss.sh   # BatchNorm: its statistics travel too
#
# Quiet machine for the timings (a loaded one stretches them); the bytes must match either way.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$repo/build}
moments=${MOMENTS:-20}
kind=${KIND:-kill}
ranks=${RANKS:-4}
timeout_s=${TIMEOUT_S:-10}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
model=${MODEL:-net}
train=(--model "$model" --batch-size 96 --steps 1500 --world-invariant --threads 1 --timeout "$timeout_s")
port=$((23000 + $$ % 4000))

"$build/apps/launch" --nproc-per-node "$ranks" --master-port "$port" -- "$build/apps/train" \
  "${train[@]}" --save "$out/plain.safetensors" >"$out/plain.log" 2>&1

python3 - "$build" "$out" "$moments" "$kind" "$ranks" "$port" "${train[@]}" <<'PY'
import os, signal, subprocess, sys, time, statistics
build, out, moments, kind, ranks, port = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
train = sys.argv[7:]
sig = signal.SIGKILL if kind == "kill" else signal.SIGSTOP
plain = open(f"{out}/plain.safetensors", "rb").read()

def rank_pid(root, rank):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        if exe.endswith("/apps/train") and f"RANK={rank}".encode() in env and f"MASTER_PORT={port + 1}".encode() in env:
            return int(pid)
    return None

print(f"{kind} of one rank of {ranks} ({train[1]}), {moments} moments; CPU: {open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}")
print("| moment | rank | delay s | exit | signal -> survivors go on, s | re-admitted | same bytes |")
print("|---|---|---|---|---|---|---|")
gaps, same = [], 0
for m in range(moments):
    rank, delay = m % ranks, 0.2 + 1.6 * m / max(1, moments - 1)
    save = f"{out}/lost{m}.safetensors"
    cmd = [f"{build}/apps/launch", "--nproc-per-node", str(ranks), "--master-port", str(port + 1),
           "--on-rank-loss", "continue", "--", f"{build}/apps/train", *train, "--on-rank-loss",
           "continue", "--save", save]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines, sent, gap = [], None, None
    for line in p.stdout:
        lines.append(line)
        if sent is None and ", batch " in line:
            time.sleep(delay)
            pid = rank_pid(p.pid, rank)
            if pid:
                os.kill(pid, sig)
                sent = time.monotonic()
        if sent is not None and gap is None and " go on as ranks" in line:
            gap = time.monotonic() - sent
    code = p.wait()
    text = "".join(lines)
    open(f"{out}/lost{m}.log", "w").write(text)
    equal = os.path.exists(save) and open(save, "rb").read() == plain
    same += equal
    if gap is not None:
        gaps.append(gap)
    readmitted = f"rank {rank} re-admitted" in text
    print(f"| {m} | {rank} | {delay:.2f} | {code} | {'-' if gap is None else f'{gap:.3f}'} | {'yes' if readmitted else 'no'} | {'yes' if equal else 'NO'} |")
    port += 2
if gaps:
    print(f"\nsame bytes in {same} of {moments}; signal -> survivors go on: median {statistics.median(gaps):.3f} s, max {max(gaps):.3f} s")
sys.exit(0 if same == moments else 1)
PY
