#!/usr/bin/env bash
# Starts a single Apache Kafka node (combined broker + KRaft controller) on
# 127.0.0.1 in the background, with share groups enabled and transaction
# protocol v2, and waits until it answers.
#
#   scripts/kafka/start.sh [--dir DIR] [--port N] [--controller-port N]
#                          [--sasl-port N] [--wait SECONDS]
#
# --dir         working folder (config, data, log, pid); default: a new
#               folder under ${TMPDIR:-/tmp}
# --port        PLAINTEXT listener; default: a free port
# --sasl-port   also open a SASL_PLAINTEXT listener (mechanism PLAIN, users
#               alice/alice-secret and bob/bob-secret, admin/admin-secret)
# --wait        how long to wait for the node to answer (default 90 s)
#
# Environment: KAFKA_VERSION, SHARESTREAM_CACHE (see common.sh),
# KAFKA_JVM (small, the default: serial collector, heap from 64m to
# KAFKA_HEAP, default 512m; kafka: Kafka's own broker settings, G1 and a
# fixed heap of KAFKA_HEAP, default 1g), KAFKA_SHARE_VERSION (default: the release's
# latest production level), KAFKA_BROKER_LOG_LEVEL (default INFO),
# KAFKA_EXTRA_PROPERTIES (lines appended to server.properties, e.g.
# "group.share.min.session.timeout.ms=1000"), KAFKA_EXTRA_JAVA_OPTS (JVM
# options, e.g. a Flight Recorder recording).
#
# On success it prints shell assignments (also written to DIR/env):
#   KAFKA_DIR=... KAFKA_BOOTSTRAP=127.0.0.1:PORT KAFKA_PID=...
#   [KAFKA_SASL_BOOTSTRAP=127.0.0.1:PORT]
# Stop it with scripts/kafka/stop.sh DIR.
set -euo pipefail
source "$(dirname "$0")/common.sh"

dir="" port="" cport="" sport="" wait_s=90
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --controller-port) cport="$2"; shift 2 ;;
    --sasl-port) sport="$2"; shift 2 ;;
    --wait) wait_s="$2"; shift 2 ;;
    *) echo "start.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
# Settles the JVM's options now, so that a wrong KAFKA_JVM is reported here.
kafka_java_args

"${KAFKA_SCRIPTS}/fetch.sh" >/dev/null
[[ -n "$dir" ]] || dir="$(mktemp -d "${TMPDIR:-/tmp}/sharestream-kafka.XXXXXX")"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
if [[ -f "$dir/kafka.pid" ]] && kill -0 "$(cat "$dir/kafka.pid")" 2>/dev/null; then
  echo "start.sh: a broker is already running from $dir (pid $(cat "$dir/kafka.pid"))" >&2
  exit 1
fi
[[ -n "$port" ]] || port="$(free_port)"
[[ -n "$cport" ]] || cport="$(free_port)"

listeners="PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${cport}"
advertised="PLAINTEXT://127.0.0.1:${port}"
if [[ -n "$sport" ]]; then
  listeners+=",SASL_PLAINTEXT://127.0.0.1:${sport}"
  advertised+=",SASL_PLAINTEXT://127.0.0.1:${sport}"
fi

cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:${cport}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listeners=${listeners}
advertised.listeners=${advertised}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT
log.dirs=${dir}/data
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=4
group.initial.rebalance.delay.ms=0
# Lets a share group set share.record.lock.duration.ms down to 1000 (tests/suite/scenarios.rs).
group.share.min.record.lock.duration.ms=1000
log.index.size.max.bytes=1048576
log.segment.bytes=67108864
PROPS
if [[ -n "$sport" ]]; then
  cat >>"$dir/server.properties" <<'PROPS'
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";
PROPS
fi

if [[ -n "${KAFKA_EXTRA_PROPERTIES:-}" ]]; then
  printf '%s\n' "$KAFKA_EXTRA_PROPERTIES" >>"$dir/server.properties"
fi

if [[ ! -f "$dir/data/meta.properties" ]]; then
  cluster_id="$(kafka_java kafka.tools.StorageTool random-uuid 2>>"$dir/format.log")"
  features=(--feature "transaction.version=2")
  if [[ -n "${KAFKA_SHARE_VERSION:-}" ]]; then
    features+=(--feature "share.version=${KAFKA_SHARE_VERSION}")
  fi
  kafka_java kafka.tools.StorageTool format -t "$cluster_id" \
    -c "$dir/server.properties" "${features[@]}" >>"$dir/format.log" 2>&1 || {
    echo "start.sh: storage format failed, see $dir/format.log" >&2
    tail -20 "$dir/format.log" >&2
    exit 1
  }
fi

# A restart in the same folder keeps the earlier lives' logs, as kafka.log.1,
# kafka.log.2, ... (oldest first): the chaos test reads them for evidence of
# what Kafka did before it was killed.
if [[ -s "$dir/kafka.log" ]]; then
  n=1
  while [[ -e "$dir/kafka.log.$n" ]]; do n=$((n + 1)); done
  mv "$dir/kafka.log" "$dir/kafka.log.$n"
fi

# setsid: the broker gets its own process group, so stop.sh can signal it alone.
# KAFKA_JAVA_ARGS was settled before anything started (above).
# The start-up wait reads the INFO line "Kafka Server started": the broker
# logs at INFO whatever KAFKA_LOG_LEVEL the clients use.
KAFKA_LOG_LEVEL="${KAFKA_BROKER_LOG_LEVEL:-INFO}" setsid java "${KAFKA_JAVA_ARGS[@]}" kafka.Kafka "$dir/server.properties" >"$dir/kafka.log" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$dir/kafka.pid"

deadline=$((SECONDS + wait_s))
until grep -q "Kafka Server started" "$dir/kafka.log" 2>/dev/null && port_open "$port"; do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "start.sh: Kafka exited during start-up, see $dir/kafka.log" >&2
    tail -30 "$dir/kafka.log" >&2
    exit 1
  fi
  if ((SECONDS >= deadline)); then
    echo "start.sh: Kafka did not answer within ${wait_s}s, stopping it (log: $dir/kafka.log)" >&2
    "${KAFKA_SCRIPTS}/stop.sh" "$dir" >&2 || true
    exit 1
  fi
  sleep 0.5
done

{
  echo "KAFKA_DIR=$dir"
  echo "KAFKA_BOOTSTRAP=127.0.0.1:$port"
  echo "KAFKA_PID=$pid"
  [[ -z "$sport" ]] || echo "KAFKA_SASL_BOOTSTRAP=127.0.0.1:$sport"
} | tee "$dir/env"
