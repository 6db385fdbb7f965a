# Sourced by the scripts that run other clients' test suites against our
# broker (franz_go_kgo.sh, krafka_tests.sh, kafka_python_tests.sh,
# kafka_go_tests.sh).
#
#   with_test_broker [BROKER FLAGS...]
#
# Makes $tmp (removed at exit) and, unless $seeds is already set, builds the
# release CLI, starts `sharestream broker --memory` with the given flags on
# a free port of 127.0.0.1 (log in $tmp/broker.log), waits until it
# accepts connections, sets $seeds to its address, and stops it at exit.
# Expects $root (the repository) to be set.
#
#   start_broker PORT LOG [BROKER FLAGS...]
#
# Starts one more broker (the release CLI already built) on 127.0.0.1:PORT,
# its log in LOG, waits until it accepts connections and stops it at exit.
#
#   free_port          prints a free TCP port of 127.0.0.1
#   go_module_copy MODULE@VERSION DEST
#                      a writable copy of a Go module, from the module proxy
broker_pid=""
broker_pids=()
tmp="$(mktemp -d)"
test_broker_cleanup() {
  local pid
  for pid in "${broker_pids[@]}"; do
    kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  rm -rf "$tmp"
}
trap test_broker_cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

start_broker() {
  local port="$1" log="$2" pid
  shift 2
  "$root/target/release/sharestream" broker --listen "127.0.0.1:$port" --memory "$@" >"$log" 2>&1 &
  pid=$!
  broker_pids+=("$pid")
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "the sharestream broker did not start:" >&2
    cat "$log" >&2
    exit 1
  fi
  broker_pid="$pid"
}

with_test_broker() {
  [[ -n "$seeds" ]] && return 0
  cargo build --release --features failpoints -p sharestream-cli
  local port
  port="$(free_port)"
  start_broker "$port" "$tmp/broker.log" "$@"
  seeds="127.0.0.1:$port"
}

go_module_copy() {
  local module="$1" dest="$2" dir
  dir="$(timeout 300 go mod download -json "$module" \
    | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error","no Dir")))')"
  rm -rf "$dest"
  mkdir -p "$(dirname "$dest")"
  cp -r "$dir" "$dest"
  chmod -R u+w "$dest"
}
