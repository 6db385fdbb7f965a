//! Reading record batches the way a read_committed consumer does.

use kafka_protocol::messages::fetch_response::PartitionData;
use sharestream::protocol::records::RecordBatchView;

/// The values a read_committed consumer returns from one fetched
/// partition: data below the LSO, minus batches of aborted transactions
/// (from the aborted list, each ended by its producer's next control
/// batch).
pub fn committed_values(p: &PartitionData) -> Vec<String> {
    let mut aborted: Vec<(i64, i64)> = p
        .aborted_transactions
        .clone()
        .unwrap_or_default()
        .iter()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    let mut skipping: Vec<i64> = Vec::new();
    let mut out = Vec::new();
    for b in RecordBatchView::parse_all(p.records.clone().unwrap_or_default()).unwrap() {
        if b.base_offset() >= p.last_stable_offset {
            break;
        }
        aborted.retain(|&(pid, first)| {
            if pid == b.producer_id() && first <= b.base_offset() {
                skipping.push(pid);
                false
            } else {
                true
            }
        });
        if b.is_control() {
            skipping.retain(|&x| x != b.producer_id());
            continue;
        }
        if b.is_transactional() && skipping.contains(&b.producer_id()) {
            continue;
        }
        for r in b.records(1 << 24).unwrap() {
            out.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
        }
    }
    out
}
