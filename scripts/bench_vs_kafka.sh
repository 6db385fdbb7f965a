#!/usr/bin/env bash
# Side-by-side benchmark (docs/BENCHMARKS.md): the embedded broker versus
# Apache Kafka on this machine, driven by the same Java load tools, one
# broker at a time; then sharestream's Rust ShareConsumer versus Kafka's
# Java share consumer against the same Apache Kafka node.
#
#   scripts/bench_vs_kafka.sh
#
# Brokers, each started fresh, then stopped:
#   sharestream-memory   `sharestream broker --memory` (records in RAM)
#   sharestream-disk     `sharestream broker --data-dir D --fsync never`
#                        (like Kafka: written to files, no fsync per batch)
#   apache-kafka         scripts/kafka/start.sh (one KRaft node, 512 MiB heap)
# For 100 B and 1 KiB records, on a fresh 1-partition topic:
#   produce  org.apache.kafka.tools.ProducerPerformance (kafka-producer-perf-test),
#            --throughput -1, acks=$BENCH_ACKS (default all), other settings default
#   consume  dev.sharestream.bench.AssignConsumerPerf (interop/java): a
#            KafkaConsumer in assign mode from the beginning (our broker has
#            no consumer groups, so kafka-consumer-perf-test cannot run on it)
# Memory: the broker's VmRSS when idle after start, and VmHWM (peak resident
# set, from the kernel) at the end of its runs.
# CPU: the broker's utime+stime (/proc/PID/stat) before and after each
# produce and consume phase, and the load tool's own (the script's waited
# children, cutime+cstime of /proc/$$/stat) over the same phase; reported as
# CPU-seconds per million records and per GB of record payload. On a 2-core
# machine the load tool competes with the broker for the CPU, so throughput
# can be bounded by the tool; CPU per record is the broker's own cost.
# Share consumers (on Apache Kafka, the 100 B topic, each in a fresh group
# reading every record from the earliest offset):
#   java  org.apache.kafka.tools.ShareConsumerPerformance (kafka-share-consumer-perf-test)
#   rust  examples/share_perf.rs (implicit acknowledgement, like Java's default)
#
# Environment: BENCH_RECORDS_100 (default 1000000), BENCH_RECORDS_1K
# (default 200000), BENCH_IDLE_SECS (5: idle CPU measured after start), BENCH_ACKS (all), BENCH_OUT (default
# target/bench/bench_vs_kafka.md), BENCH_NO_BUILD=1 (use the release
# binaries already in CARGO_TARGET_DIR), CARGO_TARGET_DIR, KAFKA_VERSION.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
source scripts/kafka/common.sh
export KAFKA_LOG_LEVEL="${KAFKA_LOG_LEVEL:-WARN}"

n100="${BENCH_RECORDS_100:-1000000}"
n1k="${BENCH_RECORDS_1K:-200000}"
idle_secs="${BENCH_IDLE_SECS:-5}"
acks="${BENCH_ACKS:-all}"
target="${CARGO_TARGET_DIR:-$root/target}"
out="${BENCH_OUT:-$root/target/bench/bench_vs_kafka.md}"
mkdir -p "$(dirname "$out")"

for tool in java javac jar python3 cargo; do
  command -v "$tool" >/dev/null || { echo "bench_vs_kafka.sh: $tool is not installed" >&2; exit 3; }
done
lib="$(scripts/kafka/fetch.sh)"
if [[ -z "${BENCH_NO_BUILD:-}" ]]; then
  cargo build --release -p sharestream-cli >&2
  cargo build --release --example share_perf >&2
fi
bin="$target/release/sharestream"
share_perf="$target/release/examples/share_perf"

src_hash="$( (cat interop/java/src/dev/sharestream/bench/*.java; echo "$KAFKA_VERSION") | sha256sum | cut -c1-16)"
jar="${SHARESTREAM_CACHE}/interop-java/bench-${src_hash}.jar"
if [[ ! -f "$jar" ]]; then
  classes="$(mktemp -d)"
  javac -nowarn -d "$classes" -cp "${lib}/*" interop/java/src/dev/sharestream/bench/*.java
  mkdir -p "$(dirname "$jar")"
  jar cf "$jar.partial" -C "$classes" .
  mv "$jar.partial" "$jar"
  rm -rf "$classes"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/sharestream-bench.XXXXXX")"
broker_pid=""
cleanup() {
  if [[ -n "$broker_pid" ]] && kill -0 "$broker_pid" 2>/dev/null; then
    kill -TERM "$broker_pid" 2>/dev/null || true
    sleep 1
    kill -KILL "$broker_pid" 2>/dev/null || true
  fi
  if [[ -f "$work/kafka/kafka.pid" ]]; then
    scripts/kafka/stop.sh "$work/kafka" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# The load tools: same JVM settings against every broker.
jrun() {
  java -Xms64m -Xmx512m -XX:+UseSerialGC \
    -Dlog4j2.configurationFile="${KAFKA_SCRIPTS}/log4j2.properties" \
    -cp "${jar}:${lib}/*" "$@"
}
kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
clk_tck="$(getconf CLK_TCK)"
# cpu_ticks PID: sets `ticks` to the process's utime+stime and `child_ticks`
# to its waited children's cutime+cstime, in clock ticks (builtins only, so
# reading adds no child time of its own).
cpu_ticks() {
  local line f
  read -r line <"/proc/$1/stat"
  read -ra f <<<"${line##*) }"
  ticks=$((f[11] + f[12]))
  child_ticks=$((f[13] + f[14]))
}
# run_measured PID LOG CMD...: runs CMD (output to LOG) and sets
# `broker_cpu` and `tool_cpu` (seconds) for its duration.
run_measured() {
  local pid="$1" log="$2" b0 t0 rc=0
  shift 2
  cpu_ticks "$pid"
  b0="$ticks"
  cpu_ticks $$
  t0="$child_ticks"
  "$@" >"$log" 2>&1 || rc=$?
  cpu_ticks "$pid"
  broker_cpu="$(awk -v a="$b0" -v b="$ticks" -v h="$clk_tck" 'BEGIN {printf "%.2f", (b - a) / h}')"
  cpu_ticks $$
  tool_cpu="$(awk -v a="$t0" -v b="$child_ticks" -v h="$clk_tck" 'BEGIN {printf "%.2f", (b - a) / h}')"
  return "$rc"
}
mib() { awk -v x="$1" 'BEGIN {printf "%.0f", x / 1024}'; }

bootstrap=""
rows="$work/rows.tsv"
: >"$rows"

# run_suite NAME BOOTSTRAP PID
run_suite() {
  local name="$1" b="$2" pid="$3" idle size n topic line prod_rps prod_mbs cons_rps cons_mbs
  local prod_cpu prod_tool cons_cpu cons_tool broker_cpu tool_cpu ticks child_ticks
  idle="$(kb "$pid" VmRSS)"
  # Background CPU of the idle broker (timers, a JVM's threads), to read
  # next to the per-phase figures, which include it.
  local idle_t0 idle_cpu
  cpu_ticks "$pid"
  idle_t0="$ticks"
  sleep "$idle_secs"
  cpu_ticks "$pid"
  idle_cpu="$(awk -v a="$idle_t0" -v b="$ticks" -v h="$clk_tck" -v s="$idle_secs" 'BEGIN {printf "%.0f", (b - a) / h / s * 1000}')"
  for size in 100 1024; do
    if [[ "$size" == 100 ]]; then n="$n100"; else n="$n1k"; fi
    topic="bench-$size"
    jrun org.apache.kafka.tools.TopicCommand --bootstrap-server "$b" --create \
      --topic "$topic" --partitions 1 --replication-factor 1 >"$work/$name-topic-$size.log" 2>&1
    run_measured "$pid" "$work/$name-produce-$size.log" \
      jrun org.apache.kafka.tools.ProducerPerformance --topic "$topic" --num-records "$n" \
      --record-size "$size" --throughput -1 \
      --producer-props bootstrap.servers="$b" acks="$acks" || {
      echo "bench: produce failed on $name, see log:" >&2
      tail -5 "$work/$name-produce-$size.log" >&2
      return 1
    }
    # "N records sent, X records/sec (Y MB/sec), ..."
    line="$(grep 'records sent' "$work/$name-produce-$size.log" | tail -1)"
    prod_rps="$(sed -E 's/.*sent, ([0-9.]+) records\/sec.*/\1/' <<<"$line")"
    prod_mbs="$(sed -E 's/.*\(([0-9.]+) MB\/sec\).*/\1/' <<<"$line")"
    prod_cpu="$broker_cpu" prod_tool="$tool_cpu"
    run_measured "$pid" "$work/$name-consume-$size.log" \
      jrun dev.sharestream.bench.AssignConsumerPerf "$b" "$topic" "$n" || {
      echo "bench: consume failed on $name, see log:" >&2
      tail -5 "$work/$name-consume-$size.log" >&2
      return 1
    }
    line="$(grep '^RESULT' "$work/$name-consume-$size.log" | tail -1)"
    cons_rps="$(sed -E 's/.*records_per_s=([0-9.]+).*/\1/' <<<"$line")"
    cons_mbs="$(sed -E 's/.*mb_per_s=([0-9.]+).*/\1/' <<<"$line")"
    cons_cpu="$broker_cpu" cons_tool="$tool_cpu"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$size" "$n" "$prod_rps" "$prod_mbs" "$cons_rps" "$cons_mbs" \
      "$prod_cpu" "$prod_tool" "$cons_cpu" "$cons_tool" >>"$rows"
    echo "bench: $name ${size}B: produce $prod_rps rec/s ($prod_mbs MB/s, broker ${prod_cpu}s CPU, tool ${prod_tool}s)," \
      "consume $cons_rps rec/s ($cons_mbs MB/s, broker ${cons_cpu}s CPU, tool ${cons_tool}s)" >&2
  done
  printf '%s\tmem\t%s\t%s\t%s\n' "$name" "$(mib "$idle")" "$(mib "$(kb "$pid" VmHWM)")" "$idle_cpu" >>"$rows"
}

# Sets broker_pid and bootstrap (not in a subshell: the pid must survive).
start_ours() {
  local name="$1"
  shift
  local port
  port="$(free_port)"
  setsid "$bin" broker --listen "127.0.0.1:$port" "$@" >"$work/$name.log" 2>&1 </dev/null &
  broker_pid=$!
  local deadline=$((SECONDS + 30))
  until port_open "$port"; do
    ((SECONDS < deadline)) || { echo "bench: $name did not start" >&2; exit 1; }
    sleep 0.2
  done
  bootstrap="127.0.0.1:$port"
}
stop_ours() {
  kill -TERM "$broker_pid" 2>/dev/null || true
  local deadline=$((SECONDS + 20))
  while kill -0 "$broker_pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
  kill -KILL "$broker_pid" 2>/dev/null || true
  broker_pid=""
}

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
started_at="$(date -u +%FT%TZ)"

echo "==> bench: sharestream broker --memory" >&2
start_ours sharestream-memory --memory
run_suite sharestream-memory "$bootstrap" "$broker_pid"
stop_ours

echo "==> bench: sharestream broker --data-dir --fsync never" >&2
start_ours sharestream-disk --data-dir "$work/ss-data" --fsync never
run_suite sharestream-disk "$bootstrap" "$broker_pid"
stop_ours
rm -rf "$work/ss-data"

echo "==> bench: Apache Kafka ${KAFKA_VERSION}" >&2
scripts/kafka/start.sh --dir "$work/kafka" >"$work/kafka-start.out"
source "$work/kafka/env"
run_suite "apache-kafka-${KAFKA_VERSION}" "$KAFKA_BOOTSTRAP" "$KAFKA_PID"

echo "==> bench: share consumers against Apache Kafka (topic bench-100, $n100 records)" >&2
share_rows="$work/share.tsv"
: >"$share_rows"
g="java-share-$$"
jrun org.apache.kafka.tools.ConfigCommand --bootstrap-server "$KAFKA_BOOTSTRAP" --alter \
  --entity-type groups --entity-name "$g" --add-config share.auto.offset.reset=earliest \
  >"$work/java-share-config.log" 2>&1
jrun org.apache.kafka.tools.ShareConsumerPerformance --bootstrap-server "$KAFKA_BOOTSTRAP" \
  --topic bench-100 --group "$g" --num-records "$n100" --timeout 20000 \
  >"$work/java-share.log" 2>&1 || { tail -5 "$work/java-share.log" >&2; exit 1; }
# Header "start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec, ..." then one line.
python3 - "$work/java-share.log" >>"$share_rows" <<'PY'
import sys
lines = [l.strip() for l in open(sys.argv[1]) if "," in l and "INFO" not in l and "WARN" not in l]
head = [h.strip() for h in lines[0].split(",")]
vals = [v.strip() for v in lines[-1].split(",")]
row = dict(zip(head, vals))
print("java (ShareConsumerPerformance)\t%s\t%s\t%s" % (
    row.get("data.consumed.in.nMsg", "?"), row.get("nMsg.sec", "?"), row.get("MB.sec", "?")))
PY
"$share_perf" --bootstrap-server "$KAFKA_BOOTSTRAP" --topic bench-100 --group "rust-share-$$" \
  --num-records "$n100" >"$work/rust-share.log" 2>&1 || { tail -5 "$work/rust-share.log" >&2; exit 1; }
line="$(grep '^RESULT' "$work/rust-share.log" | tail -1)"
printf 'rust (examples/share_perf)\t%s\t%s\t%s\n' \
  "$(sed -E 's/.*records=([0-9]+).*/\1/' <<<"$line")" \
  "$(sed -E 's/.*records_per_s=([0-9.]+).*/\1/' <<<"$line")" \
  "$(sed -E 's/.*mb_per_s=([0-9.]+).*/\1/' <<<"$line")" >>"$share_rows"
scripts/kafka/stop.sh "$work/kafka" >/dev/null

load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
{
  echo "## Side by side: sharestream broker vs Apache Kafka ${KAFKA_VERSION} ($started_at)"
  echo
  echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr);"
  echo "load average before: $load_before, after: $load_after."
  echo "Command: \`scripts/bench_vs_kafka.sh\` (BENCH_RECORDS_100=$n100 BENCH_RECORDS_1K=$n1k BENCH_ACKS=$acks);"
  echo "load tools: Apache Kafka ${KAFKA_VERSION}'s ProducerPerformance and a KafkaConsumer in assign mode"
  echo "(interop/java/src/dev/sharestream/bench/AssignConsumerPerf.java), one 1-partition topic per size."
  echo
  echo "| broker | record | records | produce rec/s | produce MB/s | consume rec/s | consume MB/s |"
  echo "|---|---|---|---|---|---|---|"
  awk -F'\t' '$2 != "mem" {printf "| %s | %s B | %s | %.0f | %s | %.0f | %s |\n", $1, $2, $3, $4, $5, $6, $7}' "$rows"
  echo
  echo "CPU-seconds (utime+stime from /proc) per million records and per GB of record payload, over each"
  echo "phase: the broker's, and the load tool's (its JVM) in parentheses."
  echo
  echo "| broker | record | produce: broker CPU s | per M records | per GB | (tool per M) | consume: broker CPU s | per M records | per GB | (tool per M) |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  awk -F'\t' '$2 != "mem" {m = $3 / 1e6; g = $3 * $2 / 1e9;
    printf "| %s | %s B | %.2f | %.2f | %.1f | (%.2f) | %.2f | %.2f | %.1f | (%.2f) |\n",
      $1, $2, $8, $8 / m, $8 / g, $9 / m, $10, $10 / m, $10 / g, $11 / m}' "$rows"
  echo
  echo "| broker | RSS idle after start (MiB) | peak RSS, VmHWM (MiB) | idle CPU after start (ms/s, over ${idle_secs} s) |"
  echo "|---|---|---|---|"
  awk -F'\t' '$2 == "mem" {printf "| %s | %s | %s | %s |\n", $1, $3, $4, $5}' "$rows"
  echo
  echo "Share consumers against Apache Kafka ${KAFKA_VERSION} (topic bench-100, each a fresh share group from the earliest offset):"
  echo
  echo "| share consumer | records | records/s | MB/s |"
  echo "|---|---|---|---|"
  awk -F'\t' '{printf "| %s | %s | %.0f | %s |\n", $1, $2, $3, $4}' "$share_rows"
} | tee "$out"
echo "bench: written to $out" >&2
