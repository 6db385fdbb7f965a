#!/usr/bin/env bash
# The project's test command (see README): unit, integration, example and doc
# tests of every crate of the workspace, with the fault-injection points
# compiled in. Benchmarks are built (so they keep compiling) but not run
# here: `cargo bench` runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
# The binaries first: tests/suite/scale_out.rs starts the mirror (package
# sharestream-mirror) as several processes.
cargo build --workspace --bins --examples --features failpoints
cargo test --workspace --lib --bins --tests --examples --features failpoints
cargo build --workspace --benches --features failpoints
cargo test --workspace --doc --features failpoints
