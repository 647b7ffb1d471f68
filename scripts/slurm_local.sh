#!/usr/bin/env bash
# scripts/slurm_local.sh: a throwaway single-node Slurm cluster on localhost, to try and test
# `srun -n N train ...` without a real cluster. Needs Debian's slurm-wlm and munge, and root
# (slurmd starts the tasks). It never reads or writes /etc/slurm or the system's munge: it makes
# its own munge key and socket, picks free ports for slurmctld and slurmd, and keeps config,
# state and logs in one temporary folder.
#
#   scripts/slurm_local.sh start [--watch PID]   start it; waits (up to 60 s) for the node to be
#                                                 idle, then prints the folder and two lines to
#                                                 eval: export SLURM_CONF=... ENGINE_SLURM_DIR=...
#                                                 --watch PID: stop it by itself once PID exits.
#   The node offers max(cores, 8) CPUs (ENGINE_SLURM_CPUS sets it): srun -n N runs for N up to that.
#   scripts/slurm_local.sh env DIR               prints the export line again
#   scripts/slurm_local.sh stop DIR              cancels its jobs, stops the daemons it started
#                                                 (by their recorded pids) and removes DIR
#
#   eval "$(scripts/slurm_local.sh start)"; srun -n 2 hostname; scripts/slurm_local.sh stop "$ENGINE_SLURM_DIR"
set -euo pipefail

MARK=engine-slurm-local # a file of this name marks a folder made by this script
TIMEOUT_S=${ENGINE_SLURM_TIMEOUT_S:-60}

die() {
  echo "slurm_local.sh: $*" >&2
  exit 1
}

need() {
  for t in "$@"; do command -v "$t" >/dev/null || die "$t not found (apt-get install slurm-wlm munge)"; done
}

# A TCP port nobody listens on, in 17000-18999.
free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((17000 + RANDOM % 2000))
    if [[ -z $(ss -Hltn "sport = :$p" 2>/dev/null) ]]; then
      echo "$p"
      return
    fi
  done
  die "no free port found in 17000-18999"
}

# Starts a daemon in the foreground mode of its own, detached, and records its pid.
spawn() {
  local name=$1
  shift
  setsid "$@" </dev/null >"$D/log/$name.out" 2>&1 &
  echo $! >"$D/pid/$name"
}

start_munge() {
  dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 status=none
  chmod 600 "$D/munge/munge.key"
  spawn munged munged -F --socket="$D/munge/munge.socket" --key-file="$D/munge/munge.key" \
    --log-file="$D/log/munged.log" --pid-file="$D/munge/munged.pid" \
    --seed-file="$D/munge/munged.seed"
  wait_for "munged to answer on $D/munge/munge.socket" \
    "munge -n -S '$D/munge/munge.socket' | unmunge -S '$D/munge/munge.socket'" munged
}

write_conf() {
  local host cpus
  host=$(hostname -s)
  # More CPUs than cores, so that srun -n 3.. runs on a 2-core machine (config_overrides below).
  cpus=${ENGINE_SLURM_CPUS:-$(($(nproc) > 8 ? $(nproc) : 8))}
  cat >"$D/slurm.conf" <<EOF
# Written by scripts/slurm_local.sh: a throwaway single-node cluster on localhost.
ClusterName=enginelocal
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/munge.socket
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/pid/slurmctld.pidfile
SlurmdPidFile=$D/pid/slurmd.pidfile
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
PlugStackConfig=$D/plugstack.conf
TmpFS=$D/tmp
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
ReturnToService=2
FirstJobId=$((1000 + RANDOM)) # job ids, hence srun store ports, differ between clusters
SlurmdParameters=config_overrides
MailProg=/bin/true
KillWait=5
InactiveLimit=0
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
  : >"$D/plugstack.conf"
}

# wait_for WHAT CMD [DAEMON]: runs CMD until it succeeds, up to TIMEOUT_S seconds; gives up at
# once when DAEMON (a name spawn recorded) has exited.
wait_for() {
  local what=$1 cmd=$2 daemon=${3-} end=$((SECONDS + TIMEOUT_S)) why
  until eval "$cmd" >/dev/null 2>&1; do
    why=""
    ((SECONDS < end)) || why="timed out after ${TIMEOUT_S} s"
    if [[ -n $daemon ]] && ! kill -0 "$(cat "$D/pid/$daemon")" 2>/dev/null; then why="$daemon exited"; fi
    if [[ -n $why ]]; then
      echo "slurm_local.sh: $why waiting for $what; logs in $D/log:" >&2
      tail -n 20 "$D"/log/* >&2 || true
      return 1
    fi
    sleep 0.2
  done
}

node_idle() {
  [[ $(sinfo -h -N -o %t 2>/dev/null) == idle ]]
}

no_jobs() {
  [[ -z $(squeue -h -o %i 2>/dev/null) ]]
}

start() {
  local watch=""
  [[ ${1-} == --watch ]] && watch=${2:?--watch needs a pid}
  need munged munge unmunge slurmctld slurmd sinfo srun ss setsid
  [[ $(id -u) == 0 ]] || die "must run as root (slurmd starts the tasks)"
  unset "${!SLURM_@}"
  D=$(mktemp -d "${TMPDIR:-/tmp}/engine-slurm.XXXXXX")
  chmod 755 "$D"
  touch "$D/$MARK"
  mkdir -p "$D"/{munge,state,spool,pid,log,tmp}
  export SLURM_CONF=$D/slurm.conf
  if ! start_all; then
    stop "$D" >/dev/null 2>&1 || true
    die "the cluster did not come up"
  fi
  if [[ -n $watch ]]; then
    spawn watcher bash -c "tail --pid=$watch -f /dev/null; ENGINE_SLURM_WATCHER=1 '$0' stop '$D'"
  fi
  print_env "$D"
}

start_all() {
  start_munge || return 1
  write_conf
  spawn slurmctld slurmctld -D -i -f "$SLURM_CONF"
  wait_for "slurmctld to answer" "scontrol ping | grep -q UP" slurmctld || return 1
  spawn slurmd slurmd -D -f "$SLURM_CONF" -N "$(hostname -s)"
  wait_for "the node $(hostname -s) to be idle" node_idle slurmd
}

print_env() {
  echo "export SLURM_CONF=$1/slurm.conf ENGINE_SLURM_DIR=$1"
}

check_dir() {
  [[ -n ${1-} && -f $1/$MARK ]] || die "'${1-}' is not a folder made by slurm_local.sh start"
}

# Stops the recorded daemons named: SIGTERM to all at once, SIGKILL to those left after 10 s.
stop_pids() {
  local pids=() pid
  for name in "$@"; do
    [[ -f $D/pid/$name ]] || continue
    pid=$(cat "$D/pid/$name")
    kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
  done
  for _ in $(seq 1 100); do
    local alive=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    ((${#alive[@]})) || return 0
    pids=("${alive[@]}")
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

stop() {
  check_dir "$1"
  D=$1
  export SLURM_CONF=$D/slurm.conf
  unset "${!SLURM_@}"
  export SLURM_CONF=$D/slurm.conf
  if [[ -f $D/pid/slurmctld ]] && kill -0 "$(cat "$D/pid/slurmctld")" 2>/dev/null; then
    scancel --full --quiet --partition=local 2>/dev/null || true
    TIMEOUT_S=15 wait_for "the jobs to end" no_jobs || true
  fi
  stop_pids slurmd slurmctld munged
  if [[ -z ${ENGINE_SLURM_WATCHER-} && -f $D/pid/watcher ]]; then
    kill -TERM -- "-$(cat "$D/pid/watcher")" 2>/dev/null || true # its group: bash and tail
  fi
  rm -rf "$D"
}

case ${1-} in
start)
  shift
  start "$@"
  ;;
env)
  check_dir "${2-}"
  print_env "$2"
  ;;
stop) stop "${2-}" ;;
*)
  echo "usage: $0 start [--watch PID] | env DIR | stop DIR" >&2
  exit 2
  ;;
esac
