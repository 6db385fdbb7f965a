#!/usr/bin/env bash
# Side-by-side benchmark (docs/BENCHMARKS.md): the embedded broker versus
# Apache Kafka on this machine, driven by the same Java load tools, all
# brokers running at once and the runs interleaved (round 1 on every
# broker, then round 2, ...; the order of the brokers rotates from round to
# round), medians over the rounds; then sharestream's Rust ShareConsumer
# versus Kafka's Java share consumer against the same Apache Kafka node.
#
#   scripts/bench_vs_kafka.sh [throughput] [rebalance] [share]
#
# With no argument all three parts run. Brokers (BENCH_BROKERS, default
# "sharestream-memory sharestream-disk apache-kafka"), started before the
# first round and stopped after the last:
#   sharestream-memory   `sharestream broker --memory` (records in RAM)
#   sharestream-disk     `sharestream broker --data-dir D --fsync never`
#                        (like Kafka: written to files, no fsync per batch)
#   apache-kafka         scripts/kafka/start.sh (one KRaft node, 512 MiB heap)
# Both kinds run with group.initial.rebalance.delay.ms=$BENCH_INITIAL_DELAY_MS
# (default 0, start.sh's setting; Kafka's default is 3000).
#
# throughput: per round, for 100 B and 1 KiB records, on a fresh 1-partition topic:
#   produce   org.apache.kafka.tools.ProducerPerformance (kafka-producer-perf-test),
#             --throughput -1, acks=$BENCH_ACKS (default all), other settings default
#   classic   org.apache.kafka.tools.ConsumerPerformance (kafka-consumer-perf-test)
#             in a fresh consumer group, group.protocol=classic
#   consumer  the same with group.protocol=consumer (KIP-848)
#   The consumers must read every record. Reported: records/s over the
#   whole run (the tool's nMsg.sec, which includes joining the group) and
#   over the fetch phase (fetch.nMsg.sec), and the join (rebalance.time.ms).
# rebalance: per round, dev.sharestream.bench.RebalanceBench (interop/java):
#   4 KafkaConsumers join a group on an 8-partition topic one after another,
#   then the first leaves; the time until the members own every partition
#   exactly once, for classic eager (range), classic cooperative-sticky and
#   the consumer protocol (uniform). Client settings at their defaults.
# share (against Apache Kafka only, the round-1 100 B topic, each a fresh
#   share group reading every record from the earliest offset; rounds of
#   one run of each, the order alternating, medians and their ratio):
#   java  org.apache.kafka.tools.ShareConsumerPerformance (kafka-share-consumer-perf-test)
#   rust  examples/share_perf.rs (implicit acknowledgement, like Java's default)
#   Java's tool sets fetch.max.bytes to its --fetch-size (1 MiB); ours asks
#   for max.partition.fetch.bytes (1 MiB) per partition (docs/DESIGN.md D38).
# Memory: each broker's VmRSS when idle after start, and VmHWM (peak
# resident set, from the kernel) at the end.
# CPU: the broker's utime+stime (/proc/PID/stat) before and after each
# phase, and the load tool's own (the script's waited children, cutime+cstime
# of /proc/$$/stat) over the same phase; reported as CPU-seconds per million
# records. On a 2-core machine the load tool competes with the broker for
# the CPU, so throughput can be bounded by the tool; CPU per record is the
# broker's own cost. The idle brokers of a round keep running (Kafka's
# background work, about 50 ms of CPU per second, competes too).
# Every figure carries the 1-minute load average read when it was taken.
#
# Environment: BENCH_ROUNDS (3), BENCH_SHARE_ROUNDS (BENCH_ROUNDS), BENCH_RECORDS_100 (default 1000000),
# BENCH_RECORDS_1K (default 200000), BENCH_IDLE_SECS (5: idle CPU measured
# after start), BENCH_ACKS (all), BENCH_BROKERS, BENCH_INITIAL_DELAY_MS (0),
# BENCH_REBALANCE_PARTITIONS (8), BENCH_OUT (default
# target/bench/bench_vs_kafka.md), BENCH_NO_BUILD=1 (use the release
# binaries already in CARGO_TARGET_DIR), CARGO_TARGET_DIR, KAFKA_VERSION.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
source scripts/kafka/common.sh
export KAFKA_LOG_LEVEL="${KAFKA_LOG_LEVEL:-WARN}"

parts="$*"
[[ -n "$parts" ]] || parts="throughput rebalance share"
for p in $parts; do
  case "$p" in
    throughput | rebalance | share) ;;
    *) echo "bench_vs_kafka.sh: unknown part $p (throughput, rebalance, share)" >&2; exit 2 ;;
  esac
done
want() { [[ " $parts " == *" $1 "* ]]; }

rounds="${BENCH_ROUNDS:-3}"
n100="${BENCH_RECORDS_100:-1000000}"
n1k="${BENCH_RECORDS_1K:-200000}"
idle_secs="${BENCH_IDLE_SECS:-5}"
acks="${BENCH_ACKS:-all}"
brokers="${BENCH_BROKERS:-sharestream-memory sharestream-disk apache-kafka}"
initial_delay="${BENCH_INITIAL_DELAY_MS:-0}"
rb_partitions="${BENCH_REBALANCE_PARTITIONS:-8}"
target="${CARGO_TARGET_DIR:-$root/target}"
out="${BENCH_OUT:-$root/target/bench/bench_vs_kafka.md}"
mkdir -p "$(dirname "$out")"
if want share && [[ " $brokers " != *" apache-kafka "* ]]; then
  echo "bench_vs_kafka.sh: the share part needs apache-kafka in BENCH_BROKERS" >&2
  exit 2
fi

for tool in java javac jar python3 cargo; do
  command -v "$tool" >/dev/null || { echo "bench_vs_kafka.sh: $tool is not installed" >&2; exit 3; }
done
lib="$(scripts/kafka/fetch.sh)"
if [[ -z "${BENCH_NO_BUILD:-}" ]]; then
  cargo build --release -p sharestream-cli >&2
  if want share; then cargo build --release --example share_perf >&2; fi
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
declare -A pid_of boot_of
cleanup() {
  local name
  for name in "${!pid_of[@]}"; do
    [[ "$name" == apache-kafka ]] && continue
    kill -TERM "${pid_of[$name]}" 2>/dev/null || true
  done
  sleep 1
  for name in "${!pid_of[@]}"; do
    [[ "$name" == apache-kafka ]] && continue
    kill -KILL "${pid_of[$name]}" 2>/dev/null || true
  done
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
load1() { cut -d' ' -f1 /proc/loadavg; }
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
fail() {
  echo "bench: $1, see log $2:" >&2
  tail -5 "$2" >&2
  exit 1
}

# start_ours NAME ARGS...: a sharestream broker in its own session.
start_ours() {
  local name="$1" port
  shift
  port="$(free_port)"
  setsid "$bin" broker --listen "127.0.0.1:$port" \
    --group-initial-rebalance-delay-ms "$initial_delay" "$@" >"$work/$name.log" 2>&1 </dev/null &
  pid_of[$name]=$!
  local deadline=$((SECONDS + 30))
  until port_open "$port"; do
    ((SECONDS < deadline)) || { echo "bench: $name did not start" >&2; exit 1; }
    sleep 0.2
  done
  boot_of[$name]="127.0.0.1:$port"
}

rows="$work/rows.tsv"   # broker size round phase records rps mbs fetch_rps join_ms broker_cpu tool_cpu load1
rb_rows="$work/rebalance.tsv" # broker round mode first_ms join_ms leave_ms load1
mem_rows="$work/mem.tsv" # broker idle_kib hwm_kib idle_cpu_ms_per_s
share_rows="$work/share.tsv"
: >"$rows"
: >"$rb_rows"
: >"$mem_rows"
: >"$share_rows"

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
started_at="$(date -u +%FT%TZ)"

for name in $brokers; do
  echo "==> bench: starting $name" >&2
  case "$name" in
    sharestream-memory) start_ours "$name" --memory ;;
    sharestream-disk) start_ours "$name" --data-dir "$work/ss-data" --fsync never ;;
    apache-kafka)
      KAFKA_EXTRA_PROPERTIES="group.initial.rebalance.delay.ms=$initial_delay" \
        scripts/kafka/start.sh --dir "$work/kafka" >"$work/kafka-start.out"
      source "$work/kafka/env"
      pid_of[$name]="$KAFKA_PID"
      boot_of[$name]="$KAFKA_BOOTSTRAP"
      ;;
    *) echo "bench_vs_kafka.sh: unknown broker $name" >&2; exit 2 ;;
  esac
done

# Idle figures, all brokers idle at once.
declare -A idle_rss idle_t0
for name in $brokers; do
  idle_rss[$name]="$(kb "${pid_of[$name]}" VmRSS)"
  cpu_ticks "${pid_of[$name]}"
  idle_t0[$name]="$ticks"
done
sleep "$idle_secs"
declare -A idle_cpu
for name in $brokers; do
  cpu_ticks "${pid_of[$name]}"
  idle_cpu[$name]="$(awk -v a="${idle_t0[$name]}" -v b="$ticks" -v h="$clk_tck" -v s="$idle_secs" 'BEGIN {printf "%.0f", (b - a) / h / s * 1000}')"
done

# The brokers of round R, rotated so that none is always first.
order() {
  local r="$1"
  local -a all
  read -ra all <<<"$brokers"
  local n="${#all[@]}" i
  for ((i = 0; i < n; i++)); do echo "${all[$(((i + r - 1) % n))]}"; done
}

# consume NAME B PID SIZE N R PROTOCOL TOPIC: one ConsumerPerformance run.
consume() {
  local name="$1" b="$2" pid="$3" size="$4" n="$5" r="$6" protocol="$7" topic="$8" log line load
  local mbs got rps join_ms fetch_rps
  log="$work/$name-consume-$protocol-$size-r$r.log"
  load="$(load1)"
  run_measured "$pid" "$log" \
    jrun org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$b" --topic "$topic" \
    --group "cperf-$protocol-$size-r$r" --num-records "$n" --timeout 30000 \
    --command-property "group.protocol=$protocol" || fail "consume ($protocol) failed on $name" "$log"
  # Header "start.time, end.time, data.consumed.in.MB, MB.sec,
  # data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms,
  # fetch.MB.sec, fetch.nMsg.sec", then the data line.
  line="$(grep -E '^[0-9]{4}-' "$log" | tail -1 | tr -d ' ')"
  IFS=, read -r _ _ _ mbs got rps join_ms _ _ fetch_rps <<<"$line"
  [[ "$got" == "$n" ]] || fail "consume ($protocol) on $name read ${got:-no} records of $n" "$log"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$size" "$r" "$protocol" "$n" \
    "$rps" "$mbs" "$fetch_rps" "$join_ms" "$broker_cpu" "$tool_cpu" "$load" >>"$rows"
  echo "bench: r$r $name ${size}B consume ($protocol): $rps rec/s, fetch $fetch_rps rec/s, join ${join_ms} ms," \
    "broker ${broker_cpu}s CPU, tool ${tool_cpu}s, load $load" >&2
}

if want throughput; then
  for ((r = 1; r <= rounds; r++)); do
    for size in 100 1024; do
      if [[ "$size" == 100 ]]; then n="$n100"; else n="$n1k"; fi
      for name in $(order "$r"); do
        b="${boot_of[$name]}" pid="${pid_of[$name]}" topic="bench-$size-r$r"
        jrun org.apache.kafka.tools.TopicCommand --bootstrap-server "$b" --create \
          --topic "$topic" --partitions 1 --replication-factor 1 >"$work/$name-topic-$size-r$r.log" 2>&1 \
          || fail "topic creation failed on $name" "$work/$name-topic-$size-r$r.log"
        log="$work/$name-produce-$size-r$r.log"
        load="$(load1)"
        run_measured "$pid" "$log" \
          jrun org.apache.kafka.tools.ProducerPerformance --topic "$topic" --num-records "$n" \
          --record-size "$size" --throughput -1 \
          --producer-props bootstrap.servers="$b" acks="$acks" || fail "produce failed on $name" "$log"
        # "N records sent, X records/sec (Y MB/sec), ..."
        line="$(grep 'records sent' "$log" | tail -1)"
        rps="$(sed -E 's/.*sent, ([0-9.]+) records\/sec.*/\1/' <<<"$line")"
        mbs="$(sed -E 's/.*\(([0-9.]+) MB\/sec\).*/\1/' <<<"$line")"
        printf '%s\t%s\t%s\tproduce\t%s\t%s\t%s\t\t\t%s\t%s\t%s\n' "$name" "$size" "$r" "$n" \
          "$rps" "$mbs" "$broker_cpu" "$tool_cpu" "$load" >>"$rows"
        echo "bench: r$r $name ${size}B produce: $rps rec/s, broker ${broker_cpu}s CPU, tool ${tool_cpu}s, load $load" >&2
        consume "$name" "$b" "$pid" "$size" "$n" "$r" classic "$topic"
        consume "$name" "$b" "$pid" "$size" "$n" "$r" consumer "$topic"
      done
    done
  done
fi

if want rebalance; then
  for ((r = 1; r <= rounds; r++)); do
    for name in $(order "$r"); do
      for mode in eager cooperative consumer; do
        log="$work/$name-rebalance-$mode-r$r.log"
        load="$(load1)"
        timeout 600 java -Xms64m -Xmx256m -XX:+UseSerialGC \
          -Dlog4j2.configurationFile="${KAFKA_SCRIPTS}/log4j2.properties" -cp "${jar}:${lib}/*" \
          dev.sharestream.bench.RebalanceBench "${boot_of[$name]}" "rebalance-$mode-r$r" \
          "$rb_partitions" "$mode" 4 >"$log" 2>&1 || fail "rebalance ($mode) failed on $name" "$log"
        line="$(grep '^RESULT' "$log" | tail -1)"
        first="$(sed -E 's/.*first_ms=([0-9]+).*/\1/' <<<"$line")"
        join="$(sed -E 's/.*join_ms=([0-9]+).*/\1/' <<<"$line")"
        leave="$(sed -E 's/.*leave_ms=([0-9]+).*/\1/' <<<"$line")"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$r" "$mode" "$first" "$join" "$leave" "$load" >>"$rb_rows"
        echo "bench: r$r $name rebalance $mode: first ${first} ms, 4th join ${join} ms, leave ${leave} ms, load $load" >&2
      done
    done
  done
fi

for name in $brokers; do
  printf '%s\t%s\t%s\t%s\n' "$name" "${idle_rss[$name]}" "$(kb "${pid_of[$name]}" VmHWM)" "${idle_cpu[$name]}" >>"$mem_rows"
done

if want share; then
  echo "==> bench: share consumers against Apache Kafka (topic bench-100-r1, $n100 records)" >&2
  kb_boot="${boot_of[apache-kafka]}"
  if ! want throughput; then
    jrun org.apache.kafka.tools.ProducerPerformance --topic bench-100-r1 --num-records "$n100" \
      --record-size 100 --throughput -1 --producer-props bootstrap.servers="$kb_boot" acks="$acks" \
      >"$work/share-produce.log" 2>&1 || fail "produce failed" "$work/share-produce.log"
  fi
  # java_share R / rust_share R: one run of each consumer, fresh group.
  java_share() {
    local g="java-share-$$-$1"
    jrun org.apache.kafka.tools.ConfigCommand --bootstrap-server "$kb_boot" --alter \
      --entity-type groups --entity-name "$g" --add-config share.auto.offset.reset=earliest \
      >"$work/java-share-config.log" 2>&1
    local load
    load="$(load1)"
    jrun org.apache.kafka.tools.ShareConsumerPerformance --bootstrap-server "$kb_boot" \
      --topic bench-100-r1 --group "$g" --num-records "$n100" --timeout 20000 \
      >"$work/java-share.log" 2>&1 || fail "share consumer failed" "$work/java-share.log"
    # Header "start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec, ..." then one line.
    python3 - "$work/java-share.log" "$load" >>"$share_rows" <<'PY'
import sys
lines = [l.strip() for l in open(sys.argv[1]) if "," in l and "INFO" not in l and "WARN" not in l]
head = [h.strip() for h in lines[0].split(",")]
vals = [v.strip() for v in lines[-1].split(",")]
row = dict(zip(head, vals))
print("java (ShareConsumerPerformance)\t%s\t%s\t%s\t%s" % (
    row.get("data.consumed.in.nMsg", "?"), row.get("nMsg.sec", "?"), row.get("MB.sec", "?"), sys.argv[2]))
PY
  }
  rust_share() {
    local load line
    load="$(load1)"
    "$share_perf" --bootstrap-server "$kb_boot" --topic bench-100-r1 --group "rust-share-$$-$1" \
      --num-records "$n100" >"$work/rust-share.log" 2>&1 || fail "share_perf failed" "$work/rust-share.log"
    line="$(grep '^RESULT' "$work/rust-share.log" | tail -1)"
    printf 'rust (examples/share_perf)\t%s\t%s\t%s\t%s\n' \
      "$(sed -E 's/.*records=([0-9]+).*/\1/' <<<"$line")" \
      "$(sed -E 's/.*records_per_s=([0-9.]+).*/\1/' <<<"$line")" \
      "$(sed -E 's/.*mb_per_s=([0-9.]+).*/\1/' <<<"$line")" "$load" >>"$share_rows"
  }
  # BENCH_SHARE_ROUNDS rounds (default BENCH_ROUNDS), the order alternating.
  for r in $(seq 1 "${BENCH_SHARE_ROUNDS:-$rounds}"); do
    if (( r % 2 )); then java_share "$r"; rust_share "$r"; else rust_share "$r"; java_share "$r"; fi
  done
fi

load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
{
  echo "## Side by side: sharestream broker vs Apache Kafka ${KAFKA_VERSION} ($started_at)"
  echo
  echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr);"
  echo "load average before: $load_before, after: $load_after."
  echo "Command: \`scripts/bench_vs_kafka.sh $parts\` (BENCH_ROUNDS=$rounds BENCH_RECORDS_100=$n100"
  echo "BENCH_RECORDS_1K=$n1k BENCH_ACKS=$acks BENCH_INITIAL_DELAY_MS=$initial_delay"
  echo "BENCH_BROKERS=\"$brokers\"); runs interleaved, medians over $rounds rounds, ratios sharestream / Kafka"
  echo "of the medians. Per-round figures: run/load-1min for each round."
  echo
  python3 scripts/bench_report.py "$rows" "$rb_rows" "$mem_rows" "$share_rows" "$idle_secs" "$rb_partitions"
} | tee "$out"
echo "bench: written to $out" >&2
