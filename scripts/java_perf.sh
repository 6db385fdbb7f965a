#!/usr/bin/env bash
# One run of Apache Kafka's own Java load tool, reported as the RESULT line
# of our Rust load tools (examples/perf_common.rs), for the Java rows of
# examples/clients_bench.rs.
#
#   scripts/java_perf.sh share   --bootstrap-server B --topic T --group G --num-records N
#   scripts/java_perf.sh produce --bootstrap-server B --topic T --num-records N --record-size S
#
# share    org.apache.kafka.tools.ShareConsumerPerformance (kafka-share-consumer-perf-test),
#          after setting the group's share.auto.offset.reset to earliest; the
#          consumer at Kafka's defaults (implicit acknowledgement,
#          max.poll.records 500). records_per_s is the tool's nMsg.sec.
# produce  org.apache.kafka.tools.ProducerPerformance (kafka-producer-perf-test),
#          --throughput -1, acks=all, enable.idempotence=true, linger.ms=5,
#          batch.size=16384 (the settings of the Rust rows). records_per_s is
#          the tool's records/sec.
#
# cpu_us_per_record and peak_rss_mib cover the whole JVM (start-up, class
# loading and JIT included; getrusage of the child): the Java tools do not
# report their own CPU. The jars come from scripts/kafka/common.sh's cache
# (scripts/kafka/start.sh fetches them).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=kafka/common.sh
source "$here/kafka/common.sh"

usage() {
  echo "usage: java_perf.sh share|produce --bootstrap-server B --topic T --num-records N [--group G] [--record-size S]" >&2
  exit 2
}
[[ $# -ge 1 ]] || usage
mode="$1"
shift
boot="" topic="" group="" n="" size=100
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bootstrap-server) boot="$2"; shift 2 ;;
    --topic) topic="$2"; shift 2 ;;
    --group) group="$2"; shift 2 ;;
    --num-records) n="$2"; shift 2 ;;
    --record-size) size="$2"; shift 2 ;;
    *) echo "java_perf.sh: unknown argument $1" >&2; usage ;;
  esac
done
[[ -n "$boot" && -n "$topic" && -n "$n" ]] || usage
if ! compgen -G "${KAFKA_LIB}/kafka-tools-*.jar" >/dev/null; then
  echo "RESULT error=no_kafka_jars_in_${KAFKA_LIB}_run_scripts/kafka/start.sh_once"
  exit 1
fi
kafka_java_args

case "$mode" in
  share)
    [[ -n "$group" ]] || usage
    java "${KAFKA_JAVA_ARGS[@]}" org.apache.kafka.tools.ConfigCommand --bootstrap-server "$boot" \
      --alter --entity-type groups --entity-name "$group" \
      --add-config share.auto.offset.reset=earliest >/dev/null 2>&1 \
      || { echo "RESULT error=group_config_refused"; exit 1; }
    cmd=(java "${KAFKA_JAVA_ARGS[@]}" org.apache.kafka.tools.ShareConsumerPerformance
      --bootstrap-server "$boot" --topic "$topic" --group "$group" --num-records "$n"
      --timeout 60000)
    ;;
  produce)
    # The Rust tools create a missing topic (1 partition); so does this.
    java "${KAFKA_JAVA_ARGS[@]}" org.apache.kafka.tools.TopicCommand --bootstrap-server "$boot" \
      --create --if-not-exists --topic "$topic" --partitions 1 --replication-factor 1 \
      >/dev/null 2>&1 || { echo "RESULT error=topic_not_created"; exit 1; }
    cmd=(java "${KAFKA_JAVA_ARGS[@]}" org.apache.kafka.tools.ProducerPerformance
      --topic "$topic" --num-records "$n" --record-size "$size" --throughput -1
      --producer-props bootstrap.servers="$boot" acks=all enable.idempotence=true
      linger.ms=5 batch.size=16384)
    ;;
  *) usage ;;
esac

python3 - "$mode" "$n" "$size" "${cmd[@]}" <<'PY'
import resource
import subprocess
import sys

mode, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
p = subprocess.run(sys.argv[4:], capture_output=True, text=True)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
out = p.stdout
if p.returncode != 0:
    sys.stderr.write(out + p.stderr)
    print("RESULT error=java_tool_exit_%d" % p.returncode)
    sys.exit(1)
records = rps = None
if mode == "produce":
    # "N records sent, X records/sec (Y MB/sec), ..." (the last line is the total)
    lines = [l for l in out.splitlines() if "records sent" in l]
    if lines:
        parts = lines[-1].split()
        records, rps = int(parts[0]), float(parts[3])
else:
    # A header "start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec,
    # data.consumed.in.nMsg, ..." and one line of values.
    rows = [l for l in out.splitlines() if l.count(",") >= 5]
    if len(rows) >= 2:
        head = [h.strip() for h in rows[0].split(",")]
        vals = dict(zip(head, [v.strip() for v in rows[-1].split(",")]))
        records = int(float(vals.get("data.consumed.in.nMsg", "0")))
        rps = float(vals.get("nMsg.sec", "nan"))
if not records or rps is None:
    sys.stderr.write(out + p.stderr)
    print("RESULT error=unparsed_java_tool_output")
    sys.exit(1)
cpu = ru.ru_utime + ru.ru_stime
print(
    "RESULT records=%d bytes=%d seconds=%.3f records_per_s=%.0f mb_per_s=%.2f cpu_s=%.3f "
    "cpu_us_per_record=%.3f peak_rss_mib=%.1f"
    % (records, records * size, records / rps, rps, rps * size / 1e6, cpu,
       cpu * 1e6 / records, ru.ru_maxrss / 1024.0)
)
PY
