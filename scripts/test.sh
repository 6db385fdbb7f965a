#!/usr/bin/env bash
# The project's test command (see README): unit, integration, example and doc
# tests, with the fault-injection points compiled in. Benchmarks are built
# (so they keep compiling) but not run here: `cargo bench` runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
# The runnable example binaries first: tests/scale_out.rs starts the mirror
# example as several processes (`cargo test --examples` builds them only as
# test harnesses).
cargo build --examples --features failpoints
cargo test --lib --bins --tests --examples --features failpoints
cargo build --benches --features failpoints
cargo test --doc
