#!/usr/bin/env bash
# The project's test command (see README): unit, integration, example and doc
# tests, with the fault-injection points compiled in. Benchmarks are built
# (so they keep compiling) but not run here: `cargo bench` runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --lib --bins --tests --examples --features failpoints
cargo build --benches --features failpoints
cargo test --doc
