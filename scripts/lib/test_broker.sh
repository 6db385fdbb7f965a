# Sourced by the scripts that run other clients' test suites against our
# broker (franz_go_kgo.sh, krafka_tests.sh).
#
#   with_test_broker [BROKER FLAGS...]
#
# Makes $tmp (removed at exit) and, unless $seeds is already set, builds the
# release CLI, starts `sharestream broker --memory` with the given flags on
# a free port of 127.0.0.1 (log in $tmp/broker.log), waits until it
# accepts connections, sets $seeds to its address, and stops it at exit.
# Expects $root (the repository) to be set.
broker_pid=""
tmp="$(mktemp -d)"
test_broker_cleanup() {
  [[ -n "$broker_pid" ]] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap test_broker_cleanup EXIT

with_test_broker() {
  [[ -n "$seeds" ]] && return 0
  cargo build --release --features failpoints -p sharestream-cli
  local port
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
  "$root/target/release/sharestream" broker --listen "127.0.0.1:$port" --memory "$@" \
    >"$tmp/broker.log" 2>&1 &
  broker_pid=$!
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
  if ! kill -0 "$broker_pid" 2>/dev/null; then
    echo "the sharestream broker did not start:" >&2
    cat "$tmp/broker.log" >&2
    exit 1
  fi
  seeds="127.0.0.1:$port"
}
