#!/usr/bin/env bash
# The copier chaos test (docs/RELIABILITY.md): builds the release broker and
# the chaos example, then runs seeder -> copiers + chaos driver -> checker.
# Exits non-zero when the guarantee's promise broke (or the run failed).
#
#   scripts/chaos.sh                  bounded run (what .ci/run does)
#   CHAOS_LONG=1 scripts/chaos.sh     long run
#   CHAOS_GUARANTEE=at-least-once scripts/chaos.sh
#   scripts/chaos.sh --records 50000  extra flags go to `chaos run`
set -euo pipefail
cd "$(dirname "$0")/.."
# `failpoints`: the copiers arm the runtime's pause points (the kill windows).
cargo build --release --features failpoints --bin sharestream --example chaos
target_dir="${CARGO_TARGET_DIR:-target}"
guarantee="${CHAOS_GUARANTEE:-exactly-once}"
workdir="${CHAOS_WORKDIR:-${TMPDIR:-/tmp}/sharestream-chaos-$$}"
report="${CHAOS_REPORT:-$workdir.json}"
if [[ "${CHAOS_LONG:-0}" == "1" ]]; then
  sizing=(--records 1000000 --copiers 4 --copier-kills 60 --broker-kills 8
          --chaos-secs 600 --drain-secs 300)
else
  sizing=(--records 200000 --copiers 3 --copier-kills 10 --broker-kills 2
          --chaos-secs 60 --drain-secs 150)
fi
# Private copies of the two binaries: a build in a shared target directory
# during the run must not swap the broker or the copiers under it.
bindir="$workdir.bin"
mkdir -p "$bindir"
cp "$target_dir/release/examples/chaos" "$target_dir/release/sharestream" "$bindir/"
trap 'rm -rf "$bindir"' EXIT
status=0
"$bindir/chaos" run \
  --broker-bin "$bindir/sharestream" \
  --workdir "$workdir" --report "$report" \
  --guarantee "$guarantee" --port "${CHAOS_PORT:-19092}" \
  "${sizing[@]}" "$@" >/dev/null || status=$?
echo "chaos report: $report"
if [[ -f "$report" ]]; then cat "$report"; fi
exit $status
