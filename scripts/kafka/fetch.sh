#!/usr/bin/env bash
# Fetches Apache Kafka (broker, controller, tools, Java clients) from Maven
# Central into $SHARESTREAM_CACHE/kafka-$KAFKA_VERSION/lib and prints that
# folder. The first run needs Maven and the network; later runs only check
# the stamp file and touch nothing.
#
#   scripts/kafka/fetch.sh            # default KAFKA_VERSION (see common.sh)
#   KAFKA_VERSION=4.2.0 scripts/kafka/fetch.sh
set -euo pipefail
source "$(dirname "$0")/common.sh"

stamp="${KAFKA_HOME_DIR}/.complete"
if [[ -f "$stamp" ]]; then
  echo "$KAFKA_LIB"
  exit 0
fi
command -v mvn >/dev/null || { echo "fetch.sh: mvn not found" >&2; exit 3; }
command -v java >/dev/null || { echo "fetch.sh: java not found" >&2; exit 3; }

tmp="${KAFKA_HOME_DIR}.partial"
rm -rf "$tmp"
mkdir -p "$tmp"
echo "fetch.sh: resolving Apache Kafka ${KAFKA_VERSION} with Maven (first run only)" >&2
mvn -B -q -f "${KAFKA_SCRIPTS}/pom.xml" \
  -Dkafka.version="${KAFKA_VERSION}" \
  dependency:copy-dependencies \
  -DincludeScope=runtime \
  -DoutputDirectory="${tmp}/lib" >&2
[[ -f "${tmp}/lib/kafka_2.13-${KAFKA_VERSION}.jar" ]] || {
  echo "fetch.sh: kafka_2.13-${KAFKA_VERSION}.jar missing after resolution" >&2
  exit 1
}
echo "$KAFKA_VERSION" >"${tmp}/VERSION"
rm -rf "$KAFKA_HOME_DIR"
mv "$tmp" "$KAFKA_HOME_DIR"
date -u +%FT%TZ >"$stamp"
echo "$KAFKA_LIB"
