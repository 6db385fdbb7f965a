#!/usr/bin/env bash
# Prints the persisted share-group state of a stopped Kafka node, decoded by
# Kafka's own tool (DumpLogSegments with its share-group-state decoder):
# every record of every __share_group_state segment, one "| offset: ..."
# line each, with the key and the value as JSON.
#
#   scripts/kafka/dump-share-state.sh DIR
#
# DIR is the --dir given to start.sh. Run it after stop.sh: the segments are
# then complete. Prints nothing when the node never wrote share state.
set -euo pipefail
source "$(dirname "$0")/common.sh"

dir="${1:?usage: dump-share-state.sh DIR}"
shopt -s nullglob
files=("$dir"/data/__share_group_state-*/*.log)
[[ ${#files[@]} -gt 0 ]] || exit 0
# DumpLogSegments takes a comma-separated list.
list="$(IFS=,; echo "${files[*]}")"
KAFKA_HEAP="${KAFKA_HEAP:-256m}" kafka_java org.apache.kafka.tools.DumpLogSegments \
  --files "$list" --print-data-log --share-group-state-decoder
