#!/usr/bin/env bash
# Interoperability suite (docs/INTEROP.md): real Kafka clients against our
# embedded broker and, to validate the checks themselves, against a real
# Apache Kafka node started with scripts/kafka/start.sh.
#
#   scripts/interop.sh [--embedded-only] [--no-docs]
#
# First run: Maven fetches Apache Kafka into $SHARESTREAM_CACHE (default
# ~/.cache/sharestream), the Java checks are compiled against those jars,
# confluent-kafka goes into a venv there and kcat comes from apt. Later runs
# reuse all of it. Exit codes: 0 = suite passed (or skipped for a missing
# toolchain, printed as SKIP), 1 = a real failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
embedded_only=0 docs=1
for a in "$@"; do
  case "$a" in
    --embedded-only) embedded_only=1 ;;
    --no-docs) docs=0 ;;
    *) echo "interop.sh: unknown option $a" >&2; exit 2 ;;
  esac
done
source scripts/kafka/common.sh

for tool in java javac jar mvn python3; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP interop: $tool is not installed"
    exit 0
  fi
done

lib="$(scripts/kafka/fetch.sh)"

# Java checks: compiled with javac against the fetched jars (no Maven
# plugins needed); rebuilt when the sources change.
src_hash="$( (cat interop/java/src/dev/sharestream/interop/*.java; echo "$KAFKA_VERSION") | sha256sum | cut -c1-16)"
jar="${SHARESTREAM_CACHE}/interop-java/check-${src_hash}.jar"
if [[ ! -f "$jar" ]]; then
  out="$(mktemp -d)"
  javac -nowarn -d "$out" -cp "${lib}/*" interop/java/src/dev/sharestream/interop/*.java
  mkdir -p "$(dirname "$jar")"
  jar cf "$jar.partial" -C "$out" .
  mv "$jar.partial" "$jar"
  rm -rf "$out"
fi

# confluent-kafka (optional: the suite marks its rows 'skip' without it).
venv="${SHARESTREAM_CACHE}/python-venv"
py=""
if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c 'import confluent_kafka' 2>/dev/null; then
  py="$venv/bin/python"
elif python3 -m venv "$venv" >/dev/null 2>&1 \
  && timeout 300 "$venv/bin/pip" install -q 'confluent-kafka>=2.15' >&2; then
  py="$venv/bin/python"
else
  echo "interop.sh: confluent-kafka unavailable; its rows will be skipped" >&2
fi

# kcat from the distribution (optional as well).
if ! command -v kcat >/dev/null && [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
  timeout 300 apt-get install -y -q kcat >/dev/null 2>&1 \
    || { timeout 300 apt-get update -q >/dev/null 2>&1 && timeout 300 apt-get install -y -q kcat >/dev/null 2>&1; } \
    || echo "interop.sh: kcat unavailable; its rows will be skipped" >&2
fi

export SHARESTREAM_INTEROP_CP="${jar}:${lib}/*"
export SHARESTREAM_INTEROP_LOG4J="${root}/scripts/kafka/log4j2.properties"
export KAFKA_LOG_LEVEL="${KAFKA_LOG_LEVEL:-WARN}"
[[ -z "$py" ]] || export SHARESTREAM_INTEROP_PYTHON="$py"
if command -v kcat >/dev/null; then export SHARESTREAM_INTEROP_KCAT="$(command -v kcat)"; fi
export RUST_LOG="${RUST_LOG:-info}"

rm -f target/interop/matrix-*.json
# The same features as scripts/test.sh, so that CI reuses the test build
# instead of linking a second set of binaries (time, and disk: see the
# [profile.dev] note in Cargo.toml). The failpoints are inert unless a test
# arms them.
features="--features failpoints"
status=0
echo "==> interop: real clients against the embedded broker"
# For these rows the embedded broker logs a line per request at debug level
# (docs/INTEROP.md) to target/interop/embedded-broker.log: what a failed row
# needs to be read. Only here: the other steps print their logs to stdout.
if ! RUST_LOG="${RUST_LOG},sharestream_broker=debug" \
  cargo test $features --test suite -- --include-ignored --nocapture interop_embedded::; then
  status=1
  log=target/interop/embedded-broker.log
  if [[ -f "$log" ]]; then
    echo "--- the embedded broker's refusals, warnings and errors (last 40; all in $log)"
    grep -E "refused| WARN | ERROR " "$log" | tail -40 || true
  fi
fi
echo "==> interop: byte equality with kafka-clients' codecs"
golden_skip=(--skip capture_golden_frames)
[[ -z "${SHARESTREAM_CAPTURE_GOLDEN:-}" ]] || golden_skip=()
cargo test $features --test suite -- --include-ignored "${golden_skip[@]}" --nocapture jvm_bytes:: || status=1
# Our own clients' scenarios (tests/suite/scenarios.rs; scripts/test.sh runs them
# too): here for their matrix rows.
cargo test $features --test suite -- --nocapture scenarios:: || status=1

if ((!embedded_only)); then
  echo "==> interop: the same checks against Apache Kafka ${KAFKA_VERSION}"
  kdir="$(mktemp -d "${TMPDIR:-/tmp}/sharestream-kafka.XXXXXX")"
  # Never leave the Kafka JVM behind (it runs in its own session).
  trap 'scripts/kafka/stop.sh "$kdir" --clean >/dev/null 2>&1 || true' EXIT
  # A SASL_PLAINTEXT PLAIN listener too, for our clients' SASL check.
  sasl_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  if scripts/kafka/start.sh --dir "$kdir" --sasl-port "$sasl_port" >"$kdir/start.out"; then
    source "$kdir/env"
    SHARESTREAM_INTEROP_BOOTSTRAP="$KAFKA_BOOTSTRAP" \
      SHARESTREAM_INTEROP_BACKEND="apache-kafka-${KAFKA_VERSION}" \
      cargo test $features --test suite -- --include-ignored --nocapture interop_embedded:: || status=1
    echo "==> interop: our clients over SASL_PLAINTEXT (PLAIN) against Apache Kafka"
    SHARESTREAM_KAFKA_SASL_BOOTSTRAP="$KAFKA_SASL_BOOTSTRAP" \
      cargo test $features --test suite -- --include-ignored --nocapture client_security::real_kafka || status=1
    echo "==> interop: sharestream's clients (tests/suite/scenarios.rs) against Apache Kafka ${KAFKA_VERSION}"
    SHARESTREAM_SCENARIO_BOOTSTRAP="$KAFKA_BOOTSTRAP" \
      SHARESTREAM_SCENARIO_BACKEND="apache-kafka-${KAFKA_VERSION}" \
      cargo test $features --test suite -- --nocapture scenarios:: || status=1
  else
    echo "interop.sh: Apache Kafka did not start" >&2
    status=1
  fi
fi

if ((docs)); then
  python3 scripts/interop_matrix.py target/interop/matrix-*.json >docs/INTEROP.md.new \
    && mv docs/INTEROP.md.new docs/INTEROP.md
  echo "==> interop: docs/INTEROP.md regenerated"
fi
exit "$status"
