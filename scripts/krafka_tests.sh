#!/usr/bin/env bash
# krafka's own integration tests against our broker.
#
#   scripts/krafka_tests.sh [--seeds HOST:PORT] [--filter NAME]
#
# krafka (crates.io, a pure-Rust Kafka client nobody here wrote; it is our
# benchmark peer, so it is already a dev-dependency and its published crate,
# tests included, is in cargo's registry) keeps an integration suite,
# tests/integration_tests.rs: producing (idempotent, batched, compressed,
# headers, large and empty records, tombstones on a compacted topic,
# auto-created topics), consumer groups (subscribe, rebalance, commit and
# resume, pause/resume, seek, offsets for times), admin (topics, configs,
# partitions, groups, cluster) and transactions (commit, abort, several
# partitions, epoch fencing, sendOffsetsToTransaction). Its tests are
# #[ignore]d and start an Apache Kafka container for themselves (Docker).
#
# This script copies the crate into target/krafka-tests/src and changes one
# thing: the function that returns the shared broker's address returns
# $KRAFKA_TEST_BOOTSTRAP when it is set, so no container is started. Then it
# builds the suite (its Cargo.lock pins versions the registry may no longer
# serve, so the versions are resolved afresh), starts our broker (release
# build, in memory) the way the suite's container runs Kafka
# (auto.create.topics.enable on, as Kafka's default;
# group.initial.rebalance.delay.ms=0, as the suite sets), and runs every test
# with --ignored, one at a time as the suite's own recipe does (without
# --seeds or --filter: two brokers, half the tests each, one at a time on
# each). Exit 0 when all passed.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
seeds="" filter=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seeds) seeds="$2"; shift 2 ;;
    --filter) filter="$2"; shift 2 ;;
    *) echo "krafka_tests.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

# The version our Cargo.lock pins, from cargo's registry (fetched for this
# host if it is not there yet).
ver="$(python3 -c 'import re,sys
m=re.search(r"name = \"krafka\"\nversion = \"([^\"]+)\"", open("Cargo.lock").read())
print(m.group(1) if m else sys.exit("krafka is not in Cargo.lock"))')"
version="krafka-$ver"
registry="${CARGO_HOME:-$HOME/.cargo}/registry/src"
crate="$(ls -d "$registry"/*/"$version" 2>/dev/null | head -1 || true)"
if [[ -z "$crate" ]]; then
  cargo fetch --locked --target "$(rustc -vV | sed -n 's/^host: //p')"
  crate="$(ls -d "$registry"/*/"$version" | head -1)"
fi
home="$root/target/krafka-tests"
src="$home/src"
if [[ ! -f "$src/.copied-$version" ]]; then
  rm -rf "$src"
  mkdir -p "$home"
  cp -r "$crate" "$src"
  chmod -R u+w "$src"
  rm -f "$src/Cargo.lock"
  # A workspace of its own: the copy sits under our target/, inside our
  # workspace's folder.
  printf '\n[workspace]\n' >>"$src/Cargo.toml"
  python3 - "$src/tests/integration_tests.rs" <<'EOF'
import sys
path = sys.argv[1]
text = open(path).read()
head = "fn kafka() -> String {\n"
if text.count(head) != 1:
    sys.exit(f"{path}: the suite's broker function changed; update scripts/krafka_tests.sh")
shim = '    if let Ok(b) = std::env::var("KRAFKA_TEST_BOOTSTRAP") {\n        return b;\n    }\n'
open(path, "w").write(text.replace(head, head + shim))
EOF
  touch "$src/.copied-$version"
fi
bin="$(cd "$src" && CARGO_TARGET_DIR="$home/target" cargo test --test integration_tests --no-run \
  --message-format json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m["target"]["name"]=="integration_tests" and m.get("executable"):
        print(m["executable"])' | tail -1)"
if [[ -z "$bin" ]]; then
  # Show the build errors.
  (cd "$src" && CARGO_TARGET_DIR="$home/target" cargo test --test integration_tests --no-run)
  exit 1
fi

# shellcheck source=scripts/lib/test_broker.sh
source "$root/scripts/lib/test_broker.sh"
broker_flags=(--auto-create-topics --group-initial-rebalance-delay-ms 0)
shards=1
[[ -z "$seeds" && -z "$filter" ]] && shards=2
with_test_broker "${broker_flags[@]}"
shard_seeds=("$seeds")
if [[ $shards == 2 ]]; then
  # Most of the suite's time is its own waits (sessions, polls, sleeps;
  # the same on Kafka 4.4), and its tests share one broker's topic and
  # group names, so they run one at a time. Two brokers, each serving half
  # the tests one at a time, halve the wall time without sharing a name.
  port2="$(free_port)"
  start_broker "$port2" "$tmp/broker2.log" "${broker_flags[@]}"
  shard_seeds+=("127.0.0.1:$port2")
fi

echo "krafka ${version#krafka-} integration tests against ${shard_seeds[*]}"
status=0
if [[ $shards == 1 ]]; then
  args=(--ignored --test-threads=1)
  [[ -n "$filter" ]] && args+=("$filter")
  (cd "$src" && KRAFKA_TEST_BOOTSTRAP="$seeds" timeout 900 "$bin" "${args[@]}" >"$tmp/out.txt" 2>&1) || status=$?
else
  mapfile -t names < <("$bin" --ignored --list 2>/dev/null | sed -n 's/: test$//p')
  if [[ ${#names[@]} == 0 ]]; then
    echo "krafka tests: the suite lists no test" >&2
    exit 1
  fi
  pids=()
  for i in 0 1; do
    mine=()
    for j in "${!names[@]}"; do
      (( j % 2 == i )) && mine+=("${names[$j]}")
    done
    (cd "$src" && KRAFKA_TEST_BOOTSTRAP="${shard_seeds[$i]}" timeout 900 "$bin" --ignored --test-threads=1 \
      --exact "${mine[@]}" >"$tmp/out$i.txt" 2>&1) &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || status=$?
  done
  cat "$tmp/out0.txt" "$tmp/out1.txt" >"$tmp/out.txt"
  [[ -f "$tmp/broker2.log" ]] && cat "$tmp/broker2.log" >>"$tmp/broker.log"
fi
passed="$(grep -cE '^test .* \.\.\. ok$' "$tmp/out.txt" || true)"
failed="$(grep -cE '^test .* \.\.\. FAILED$' "$tmp/out.txt" || true)"
echo "krafka tests: ${passed} passed, ${failed} failed"
if [[ $status != 0 || $failed != 0 ]]; then
  mkdir -p "$home/logs"
  cp "$tmp/out.txt" "$home/logs/out.txt"
  [[ -f "$tmp/broker.log" ]] && cp "$tmp/broker.log" "$home/logs/broker.log"
  grep -E '^test .* \.\.\. FAILED$' "$tmp/out.txt" || true
  # Each failure's panic message.
  grep -A5 -E '^---- .* stdout ----$' "$tmp/out.txt" | head -c 8000 || true
  echo "krafka tests FAILED (exit $status); full output in target/krafka-tests/logs/"
  exit 1
fi
