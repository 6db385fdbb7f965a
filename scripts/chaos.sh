#!/usr/bin/env bash
# The copier chaos test (docs/RELIABILITY.md): builds the release broker and
# the chaos example, then runs seeder -> copiers + chaos driver -> checker.
# Exits non-zero when the guarantee's promise broke (or the run failed).
#
#   scripts/chaos.sh                  bounded: the chaos run, then the
#                                     elastic run (what .ci/run does)
#   CHAOS_SCENARIO=chaos scripts/chaos.sh    only the bounded chaos run
#   CHAOS_SCENARIO=elastic scripts/chaos.sh  only the bounded elastic run
#   CHAOS_LONG=1 scripts/chaos.sh     long chaos run
#   CHAOS_GUARANTEE=at-least-once scripts/chaos.sh
#   CHAOS_MECHANISM=ledger scripts/chaos.sh   exactly-once through the intent
#                                     ledger instead of KIP-1289
#   CHAOS_BACKEND=kafka scripts/chaos.sh      against Apache Kafka
#                                     (scripts/kafka/start.sh; the ledger,
#                                     since Kafka has no KIP-1289)
#   CHAOS_TWO_CLUSTERS=1 scripts/chaos.sh     input and share group on one
#                                     cluster, outputs on another
#   scripts/chaos.sh --records 50000  extra flags go to `chaos run`
#
# Every copier process is one instance of ONE application (same
# application.id and configuration, random instance ids). The broker runs
# with a 8 s acquisition lock and a 10 s member session timeout, the
# copiers with a 10 s transaction timeout; the pauses (SIGSTOP/SIGCONT)
# last 3.2, 9, 12 and 20 s against those.
set -euo pipefail
cd "$(dirname "$0")/.."
# `failpoints`: the copiers arm the runtime's pause points (the kill windows).
cargo build --release --features failpoints --example chaos
cargo build --release --features failpoints -p sharestream-cli
target_dir="${CARGO_TARGET_DIR:-target}"
guarantee="${CHAOS_GUARANTEE:-exactly-once}"
mechanism="${CHAOS_MECHANISM:-auto}"
backend=()
if [[ "${CHAOS_BACKEND:-embedded}" == "kafka" ]]; then
  backend+=(--kafka-scripts "$PWD/scripts/kafka")
fi
if [[ "${CHAOS_TWO_CLUSTERS:-0}" == "1" ]]; then
  backend+=(--two-clusters)
fi
workdir="${CHAOS_WORKDIR:-${TMPDIR:-/tmp}/sharestream-chaos-$$}"
report="${CHAOS_REPORT:-$workdir.json}"
if [[ "${CHAOS_LONG:-0}" == "1" ]]; then
  scenarios=("${CHAOS_SCENARIO:-chaos}")
else
  scenario="${CHAOS_SCENARIO:-both}"
  if [[ "$scenario" == "both" ]]; then scenarios=(chaos elastic); else scenarios=("$scenario"); fi
fi
sizing() {
  if [[ "$1" == "elastic" ]]; then
    # 1 -> 4 -> 1 copiers over 60 s (SIGTERM, SIGKILL, SIGTERM down).
    echo --scenario elastic --records 100000 --chaos-secs 60 --drain-secs 90
  elif [[ "${CHAOS_LONG:-0}" == "1" ]]; then
    echo --records 1000000 --copiers 4 --copier-kills 60 --copier-pauses 16 \
      --broker-kills 8 --chaos-secs 600 --drain-secs 300
  else
    echo --records 200000 --copiers 3 --copier-kills 10 --copier-pauses 4 \
      --broker-kills 2 --chaos-secs 60 --drain-secs 150
  fi
}
# Private copies of the two binaries: a build in a shared target directory
# during the run must not swap the broker or the copiers under it.
bindir="$workdir.bin"
mkdir -p "$bindir"
cp "$target_dir/release/examples/chaos" "$target_dir/release/sharestream" "$bindir/"
trap 'rm -rf "$bindir"' EXIT
status=0
for sc in "${scenarios[@]}"; do
  rep="$report"
  if [[ ${#scenarios[@]} -gt 1 ]]; then rep="${report%.json}-$sc.json"; fi
  one=0
  # shellcheck disable=SC2046
  "$bindir/chaos" run \
    --broker-bin "$bindir/sharestream" \
    --workdir "$workdir-$sc" --report "$rep" \
    --guarantee "$guarantee" --mechanism "$mechanism" --port "${CHAOS_PORT:-19092}" \
    "${backend[@]}" \
    $(sizing "$sc") "$@" >/dev/null || one=$?
  echo "chaos report ($sc): $rep"
  if [[ -f "$rep" ]]; then cat "$rep"; fi
  if [[ $one -ne 0 ]]; then
    status=$one
    # The run keeps its work directory when it fails: show what the copiers
    # warned about, so that a failure in CI can be read from its log.
    for log in "$workdir-$sc"/copier-*.log; do
      [[ -f "$log" ]] || continue
      echo "==> $log: its last warnings and errors"
      grep -aE "^=== |WARN|ERROR|copier [0-9]+: " "$log" | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-600 | tail -n 60
    done
  fi
done
exit $status
