#!/usr/bin/env bash
# Interleaved runs of two or more builds of examples/produce_perf against one
# broker, and the median of each: how a producer change is measured before
# and after (docs/BENCHMARKS.md, "Session 16").
#
#   scripts/produce_ab.sh BOOTSTRAP ROUNDS RECORD_SIZE PARTITIONS BIN...
#
# e.g. with the build of an older commit saved as /tmp/produce_perf.base:
#   scripts/produce_ab.sh 127.0.0.1:9092 8 100 1 /tmp/produce_perf.base \
#     target/release/examples/produce_perf
# Each round runs every binary once, in the order given, 1 000 000 records
# (RECORDS overrides) into topic pab-SIZE-PARTITIONS. Prints, per binary,
# the median records/s, client CPU per record and peak RSS.
set -euo pipefail
if [ $# -lt 5 ]; then
  sed -n '2,13p' "$0" >&2
  exit 2
fi
boot=$1 rounds=$2 size=$3 parts=$4
shift 4
records=${RECORDS:-1000000}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((i = 1; i <= rounds; i++)); do
  for b in "$@"; do
    line=$("$b" --bootstrap-server "$boot" --topic "pab-$size-$parts" --partitions "$parts" \
      --num-records "$records" --record-size "$size" 2>&1 | grep '^RESULT') || {
      echo "produce_ab: $b failed" >&2
      exit 1
    }
    echo "$b $line" >>"$out"
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" "$@" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
for b in sys.argv[2:]:
    runs = [dict(kv.split("=", 1) for kv in r[2:]) for r in rows if r[0] == b]
    med = lambda k: st.median(float(d[k]) for d in runs)
    print(f"{b}: {len(runs)} runs, median {med('records_per_s'):.0f} records/s, "
          f"{med('cpu_us_per_record'):.3f} us CPU/record, peak RSS {med('peak_rss_mib'):.1f} MiB")
PY
