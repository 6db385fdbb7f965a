#!/usr/bin/env bash
# The project's test command (see README): unit, integration and doc tests.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --all-targets --features failpoints
cargo test --doc
