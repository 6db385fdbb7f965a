#!/usr/bin/env bash
# The layering the crate graph promises (docs/ARCHITECTURE.md), checked:
# - the protocol crate has no tokio (no I/O), not even through a dependency;
# - the framework without its default features has no broker, and builds.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
if cargo tree -p sharestream-protocol -e normal --prefix none | grep -q '^tokio '; then
  echo "check_layers: sharestream-protocol depends on tokio:"
  cargo tree -p sharestream-protocol -e normal -i tokio || true
  fail=1
fi
if cargo tree -p sharestream -e normal --no-default-features --prefix none | grep -q '^sharestream-broker '; then
  echo "check_layers: sharestream --no-default-features still depends on sharestream-broker"
  fail=1
fi
for crate in sharestream-protocol sharestream-common; do
  if cargo tree -p "$crate" -e normal --prefix none | grep -Eq '^sharestream(-broker)? '; then
    echo "check_layers: $crate depends on the framework or the broker"
    fail=1
  fi
done
if cargo tree -p sharestream-broker -e normal --prefix none | grep -Eq '^sharestream '; then
  echo "check_layers: sharestream-broker depends on the framework (client, runtime)"
  fail=1
fi
cargo check -q -p sharestream --lib --no-default-features
((fail == 0)) && echo "check_layers: ok"
exit "$fail"
