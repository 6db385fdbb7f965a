#!/usr/bin/env bash
# Fetches Apache Kafka (broker, controller, tools, Java clients, Kafka
# Streams) from Maven Central into $SHARESTREAM_CACHE/kafka-$KAFKA_VERSION/lib
# and prints that folder. The first run needs Maven and the network; later
# runs only compare the stamp file with pom.xml and touch nothing.
#
#   scripts/kafka/fetch.sh            # default KAFKA_VERSION (see common.sh)
#   KAFKA_VERSION=4.2.0 scripts/kafka/fetch.sh
#
# The stamp records a hash of pom.xml: when the pom gains a dependency (as
# kafka-streams was added), the next run resolves again and brings an
# existing lib folder up to date in place (new jars copied in, jars no
# longer resolved removed), so a JVM started from it meanwhile still finds
# every jar it had.
set -euo pipefail
source "$(dirname "$0")/common.sh"

stamp="${KAFKA_HOME_DIR}/.complete"
want="pom $(sha256sum "${KAFKA_SCRIPTS}/pom.xml" | cut -c1-16)"
if [[ -f "$stamp" ]] && grep -qxF "$want" "$stamp"; then
  echo "$KAFKA_LIB"
  exit 0
fi
command -v mvn >/dev/null || { echo "fetch.sh: mvn not found" >&2; exit 3; }
command -v java >/dev/null || { echo "fetch.sh: java not found" >&2; exit 3; }

tmp="${KAFKA_HOME_DIR}.partial.$$"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"
echo "fetch.sh: resolving Apache Kafka ${KAFKA_VERSION} with Maven (first run, or pom.xml changed)" >&2
mvn -B -q -f "${KAFKA_SCRIPTS}/pom.xml" \
  -Dkafka.version="${KAFKA_VERSION}" \
  dependency:copy-dependencies \
  -DincludeScope=runtime \
  -DoutputDirectory="${tmp}/lib" >&2
for jar in "kafka_2.13-${KAFKA_VERSION}.jar" "kafka-streams-${KAFKA_VERSION}.jar"; do
  [[ -f "${tmp}/lib/${jar}" ]] || {
    echo "fetch.sh: ${jar} missing after resolution" >&2
    exit 1
  }
done
echo "$KAFKA_VERSION" >"${tmp}/VERSION"
if [[ -d "$KAFKA_LIB" ]]; then
  # Update in place: add what is new, then drop what is no longer resolved.
  cp -n "${tmp}/lib/"*.jar "$KAFKA_LIB/"
  for old in "$KAFKA_LIB"/*.jar; do
    [[ -f "${tmp}/lib/$(basename "$old")" ]] || rm -f "$old"
  done
else
  mkdir -p "$KAFKA_HOME_DIR"
  mv "${tmp}/lib" "$KAFKA_LIB"
fi
cp "${tmp}/VERSION" "${KAFKA_HOME_DIR}/VERSION"
{ date -u +%FT%TZ; echo "$want"; } >"$stamp"
echo "$KAFKA_LIB"
