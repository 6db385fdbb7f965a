#!/usr/bin/env bash
# Runs a command with its CPU limited to a number of cores, whole or not
# (a Linux cgroup CPU quota), everything else on the host left as it is.
#
#   scripts/with_cpu_quota.sh CORES -- COMMAND [ARG...]
#
# CORES is a decimal number of cores, e.g. 0.5 or 1.25. The command and
# every process it starts run in a new cgroup whose CFS quota is CORES
# times a 10 ms period; the cgroup is removed when the command ends.
#
# What it is for: on a small host where a benchmark and the broker it
# drives share the cores, the throughput measures their CPU together.
# Capping the benchmark's process leaves the broker the rest, as when the
# broker runs on machines of its own; see docs/BENCHMARKS.md, "Session 34".
#
# Needs root (or a delegated cgroup) and either cgroup v2 with the cpu
# controller or cgroup v1's cpu hierarchy under /sys/fs/cgroup/cpu. The
# command's exit status is returned.
set -euo pipefail

usage() {
  echo "usage: $0 CORES -- COMMAND [ARG...]   (CORES e.g. 0.5)" >&2
  exit 2
}
[[ $# -ge 3 && "$2" == "--" ]] || usage
cores="$1"
shift 2
[[ "$cores" =~ ^[0-9]+(\.[0-9]+)?$ ]] || {
  echo "with_cpu_quota.sh: CORES must be a positive decimal number, got '$cores'" >&2
  exit 2
}
period=10000
quota=$(awk -v c="$cores" -v p="$period" 'BEGIN { printf "%d", c * p }')
if (( quota < 1000 )); then
  echo "with_cpu_quota.sh: CORES=$cores is below 0.1 of a core (the kernel's least quota is 1 ms)" >&2
  exit 2
fi

name="sharestream-quota-$$"
if [[ -f /sys/fs/cgroup/cgroup.controllers ]] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then
  cg="/sys/fs/cgroup/$name"
  mkdir "$cg"
  echo "$quota $period" > "$cg/cpu.max"
elif [[ -d /sys/fs/cgroup/cpu ]]; then
  cg="/sys/fs/cgroup/cpu/$name"
  mkdir "$cg"
  echo "$period" > "$cg/cpu.cfs_period_us"
  echo "$quota" > "$cg/cpu.cfs_quota_us"
else
  echo "with_cpu_quota.sh: no cgroup cpu controller found (cgroup v2 with 'cpu' in /sys/fs/cgroup/cgroup.controllers, or v1 /sys/fs/cgroup/cpu)" >&2
  exit 1
fi

cleanup() {
  # The command has ended; anything it left behind goes back to the root.
  if [[ -f "$cg/cgroup.procs" ]]; then
    local root
    root=$(dirname "$cg")
    while read -r p; do echo "$p" > "$root/cgroup.procs" 2>/dev/null || true; done < "$cg/cgroup.procs"
    rmdir "$cg" 2>/dev/null || true
  fi
}
trap cleanup EXIT

echo "with_cpu_quota.sh: $* limited to $cores core(s) ($quota us per $period us, $cg)" >&2
set +e
sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' quota "$cg" "$@"
rc=$?
set -e
if [[ -f "$cg/cpu.stat" ]]; then
  echo "with_cpu_quota.sh: $(tr '\n' ' ' < "$cg/cpu.stat")" >&2
fi
exit $rc
