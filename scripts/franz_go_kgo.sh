#!/usr/bin/env bash
# franz-go's own client test suite (package kgo) against our broker.
#
#   scripts/franz_go_kgo.sh [--seeds HOST:PORT] [--run REGEX]
#
# franz-go (github.com/twmb/franz-go, a Go Kafka client nobody here wrote)
# ships integration tests that create topics, produce, consume with classic
# and KIP-848 groups, run transactions (GroupTransactSession ETL) and share
# groups (KIP-932 ETL with REJECT/RELEASE, acknowledgement on close, the
# share-group offsets admin calls). They need a broker at KGO_SEEDS.
#
# The module comes from the Go module proxy (pinned below), is copied into
# $SHARESTREAM_CACHE/franz-go-<version>/src and its kgo tests are compiled
# there once per version. Without --seeds, a
# sharestream broker (release build, in memory) is started on a free port
# and stopped at the end. Every test of the package runs unless --run says
# otherwise; the suite's verdict is the script's: 0 when every test passed
# or skipped, 1 otherwise, with the failed tests listed.
#
# The SCRAM tests (TestSCRAMAuth, TestSCRAMAuthBadCredentials) need a
# SASL listener at KGO_TEST_SCRAM_SEEDS and a user in KGO_TEST_SCRAM, and
# TestOAuthAuth one that takes unsecured OAUTHBEARER tokens at
# KGO_TEST_OAUTH_SEEDS: a second broker of ours is started for them,
# SASL_PLAINTEXT with one user and --sasl-oauthbearer-unsecured.
# KGO_TEST_RF=1: one broker.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
FRANZ_GO_VERSION="${FRANZ_GO_VERSION:-v1.22.3}"
SHARESTREAM_CACHE="${SHARESTREAM_CACHE:-${HOME}/.cache/sharestream}"
seeds="" run="."
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seeds) seeds="$2"; shift 2 ;;
    --run) run="$2"; shift 2 ;;
    *) echo "franz_go_kgo.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

if ! command -v go >/dev/null; then
  echo "SKIP franz-go kgo tests: go is not installed"
  exit 0
fi

# shellcheck source=scripts/lib/test_broker.sh
source "$root/scripts/lib/test_broker.sh"

# Some tests read the package's own sources (config.go): they run from the
# package folder, kept beside the compiled tests.
home="${SHARESTREAM_CACHE}/franz-go-${FRANZ_GO_VERSION}"
pkg="$home/src/pkg/kgo"
bin="$home/kgo.test"
if [[ ! -x "$bin" || ! -f "$pkg/config.go" ]]; then
  rm -rf "$home"
  go_module_copy "github.com/twmb/franz-go@${FRANZ_GO_VERSION}" "$home/src"
  (cd "$pkg" && timeout 600 go test -c -o "$bin.partial" .)
  mv "$bin.partial" "$bin"
fi

scram_seeds=""
if [[ -z "$seeds" ]]; then
  with_test_broker
  # The SASL broker, stopped at exit with the other.
  scram_port="$(free_port)"
  start_broker "$scram_port" "$tmp/scram-broker.log" \
    --security-protocol SASL_PLAINTEXT --sasl-user kgo:kgo-secret --sasl-oauthbearer-unsecured
  scram_seeds="127.0.0.1:$scram_port"
fi

echo "franz-go ${FRANZ_GO_VERSION} kgo tests against ${seeds}"
status=0
# The tests' own clients log at info by default: only the verdicts are kept.
scram_env=()
[[ -n "$scram_seeds" ]] && scram_env=(KGO_TEST_SCRAM_SEEDS="$scram_seeds" KGO_TEST_SCRAM=kgo:kgo-secret:256
  KGO_TEST_OAUTH_SEEDS="$scram_seeds")
(cd "$pkg" && env "${scram_env[@]}" KGO_TEST_RF=1 KGO_SEEDS="$seeds" KGO_LOG_LEVEL=none \
  timeout 900 "$bin" -test.run "$run" -test.v -test.timeout 840s >"$tmp/out.txt" 2>&1) || status=$?
passed="$(grep -c '^--- PASS' "$tmp/out.txt" || true)"
skipped="$(grep -c '^--- SKIP' "$tmp/out.txt" || true)"
failed="$(grep -c '^--- FAIL' "$tmp/out.txt" || true)"
echo "franz-go kgo: ${passed} passed, ${failed} failed, ${skipped} skipped (top-level tests)"
grep '^--- SKIP' "$tmp/out.txt" || true
if [[ $status != 0 || $failed != 0 ]]; then
  # The whole output and the broker's log stay in target/franz-go-kgo/.
  mkdir -p "$root/target/franz-go-kgo"
  cp "$tmp/out.txt" "$root/target/franz-go-kgo/out.txt"
  [[ -f "$tmp/broker.log" ]] && cp "$tmp/broker.log" "$root/target/franz-go-kgo/broker.log"
  # The failed tests with the lines they logged (awk reads it all: no
  # early pipe close under pipefail).
  awk '/^=== (RUN|CONT|NAME) /{cur=$3} /^--- FAIL/{print; bad[$3]=1}
       /^panic:/{print} /^    [a-zA-Z_0-9]+\.go:[0-9]+/{lines[cur]=lines[cur] $0 "\n"}
       END{for (t in bad) printf "%s:\n%s", t, substr(lines[t], 1, 4000)}' "$tmp/out.txt"
  echo "franz-go kgo tests FAILED (exit $status); full output in target/franz-go-kgo/"
  exit 1
fi
