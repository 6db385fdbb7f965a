#!/usr/bin/env bash
# The embedded broker with and without transparent huge pages, interleaved:
# each run starts a fresh broker (--data-dir, --fsync never), produces
# 500 000 x 100 B and 200 000 x 1 KiB with produce_perf, reads each topic
# with one share group (share_perf, explicit ACCEPT, record_limit), and
# records the broker's peak RSS (VmHWM). Prints the medians per mode.
# docs/BENCHMARKS.md, "Session 16".
#
#   cargo build --release -p sharestream-cli
#   cargo build --release -p sharestream --example produce_perf --example share_perf
#   scripts/broker_thp_ab.sh [ROUNDS]          # default 5
set -euo pipefail
rounds=${1:-5}
port=${PORT:-39500}
bin=target/release/sharestream
ex=target/release/examples
out=$(mktemp)
data=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  rm -rf "$out" "$data"
}
trap cleanup EXIT
rate() { grep -o 'records_per_s=[0-9]*' | cut -d= -f2; }
for ((r = 1; r <= rounds; r++)); do
  for mode in on off; do
    rm -rf "$data"/*
    flag=()
    [ "$mode" = on ] && flag=(--transparent-huge-pages)
    "$bin" broker --listen "127.0.0.1:$port" --data-dir "$data" --fsync never "${flag[@]}" \
      >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 50); do
      (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
      sleep 0.1
    done
    b="127.0.0.1:$port"
    p1=$("$ex/produce_perf" --bootstrap-server "$b" --topic t100 --num-records 500000 --record-size 100 | rate)
    p2=$("$ex/produce_perf" --bootstrap-server "$b" --topic t1k --num-records 200000 --record-size 1024 | rate)
    s1=$("$ex/share_perf" --bootstrap-server "$b" --topic t100 --group g100 --num-records 500000 \
      --explicit --consumer-prop share.acquire.mode=record_limit | rate)
    s2=$("$ex/share_perf" --bootstrap-server "$b" --topic t1k --group g1k --num-records 200000 \
      --explicit --consumer-prop share.acquire.mode=record_limit | rate)
    hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=
    echo "$mode $p1 $p2 $s1 $s2 $hwm" | tee -a "$out"
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
print("| | produce 100 B | produce 1 KiB | share 100 B | share 1 KiB | broker peak RSS MiB |")
print("|---|---|---|---|---|---|")
med = {}
for m in ("on", "off"):
    cols = list(zip(*[list(map(float, r[1:])) for r in rows if r[0] == m]))
    med[m] = [st.median(c) for c in cols]
    v = med[m]
    print(f"| {m} | {v[0]:.0f} | {v[1]:.0f} | {v[2]:.0f} | {v[3]:.0f} | {v[4] / 1024:.1f} |")
print("| off / on | " + " | ".join(f"{a / b:.2f}" for a, b in zip(med["off"], med["on"])) + " |")
PY
