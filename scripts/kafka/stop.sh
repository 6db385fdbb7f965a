#!/usr/bin/env bash
# Stops a node started by scripts/kafka/start.sh: SIGTERM (controlled
# shutdown), then SIGKILL after a bound (default 30 s).
#
#   scripts/kafka/stop.sh DIR [--wait SECONDS] [--clean]
#
# --clean  also removes DIR afterwards.
set -euo pipefail
dir="${1:?usage: stop.sh DIR [--wait SECONDS] [--clean]}"
shift
wait_s=30 clean=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --wait) wait_s="$2"; shift 2 ;;
    --clean) clean=1; shift ;;
    *) echo "stop.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
pidfile="$dir/kafka.pid"
if [[ -f "$pidfile" ]]; then
  pid="$(cat "$pidfile")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + wait_s))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
      sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "stop.sh: pid $pid still alive after ${wait_s}s, sending SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$pidfile"
  echo "stop.sh: stopped (pid $pid)"
else
  echo "stop.sh: no pid file in $dir"
fi
if ((clean)); then
  rm -rf "$dir"
fi
