# Shared settings for scripts/kafka/*.sh (sourced, not run).
#
# KAFKA_VERSION      Apache Kafka release taken from Maven Central (4.2 or later).
# SHARESTREAM_CACHE  cache root (default ~/.cache/sharestream); the jars land in
#                    $SHARESTREAM_CACHE/kafka-$KAFKA_VERSION/lib
KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
SHARESTREAM_CACHE="${SHARESTREAM_CACHE:-${HOME}/.cache/sharestream}"
KAFKA_HOME_DIR="${SHARESTREAM_CACHE}/kafka-${KAFKA_VERSION}"
KAFKA_LIB="${KAFKA_HOME_DIR}/lib"
KAFKA_SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# java with a bounded heap and our log4j2 configuration.
kafka_java_args() {
  # KAFKA_JVM=small (the default): a small heap that grows from 64 MiB and
  # the serial collector, so that tests can run several nodes on a small
  # host. KAFKA_JVM=kafka: the heap and collector Kafka's own
  # kafka-server-start.sh and kafka-run-class.sh give a broker (1 GiB
  # fixed, G1 with 20 ms pause goals), for benchmarks that compare with
  # Kafka as it is deployed (docs/BENCHMARKS.md, session 34).
  case "${KAFKA_JVM:-small}" in
    small) KAFKA_JAVA_ARGS=(-Xms64m -Xmx"${KAFKA_HEAP:-512m}" -XX:+UseSerialGC) ;;
    kafka) KAFKA_JAVA_ARGS=(-Xms"${KAFKA_HEAP:-1g}" -Xmx"${KAFKA_HEAP:-1g}" -XX:+UseG1GC
      -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
      -XX:+ExplicitGCInvokesConcurrent) ;;
    *) echo "KAFKA_JVM must be 'small' or 'kafka', not '${KAFKA_JVM}'" >&2; return 2 ;;
  esac
  KAFKA_JAVA_ARGS+=(-Dlog4j2.configurationFile="${KAFKA_SCRIPTS}/log4j2.properties"
    -cp "${KAFKA_LIB}/*")
  # KAFKA_EXTRA_JAVA_OPTS: more JVM options, split on spaces (e.g. a Java
  # Flight Recorder recording while a benchmark runs).
  if [ -n "${KAFKA_EXTRA_JAVA_OPTS:-}" ]; then
    read -r -a extra <<<"$KAFKA_EXTRA_JAVA_OPTS"
    KAFKA_JAVA_ARGS=("${extra[@]}" "${KAFKA_JAVA_ARGS[@]}")
  fi
}
kafka_java() {
  kafka_java_args
  java "${KAFKA_JAVA_ARGS[@]}" "$@"
}

# A free TCP port on 127.0.0.1 (asked from the kernel).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Succeeds once something accepts TCP connections on 127.0.0.1:$1.
port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
