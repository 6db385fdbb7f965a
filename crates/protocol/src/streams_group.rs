//! KIP-1071 streams groups: StreamsGroupHeartbeat (apiKey 88) and
//! StreamsGroupDescribe (apiKey 89), request and response v0.
//!
//! `kafka-protocol` 0.18 has neither API, so both are coded here by hand,
//! in the manner of [`super::txn_share_ack`]. All versions are flexible:
//! compact strings and arrays, a tagged-field section after every struct
//! (none of them carries a known tagged field at v0, so every tag read is
//! skipped), request header v2 and response header v1.
//!
//! Two encodings appear here that TxnShareAcknowledge does not use:
//! - a *nullable struct* (`Topology`, `UserEndpoint`) is preceded by one
//!   INT8 marker, 1 when present and -1 when null; any other marker is
//!   refused;
//! - a *nullable array* is a compact array whose length 0 means null, so
//!   `None` and `Some(vec![])` stay apart (length 0 and length 1).
//!
//! A BOOL is written 0 or 1 and, as Kafka reads it, any non-zero byte reads
//! as true. `Endpoint.Port` is a UINT16, hence [`Endpoint::port`]: `u16`.
//! The Describe schema's `TopicPartitions` common struct is used by no v0
//! field and has no type here.
//!
//! Wire layout (v0; `?` marks a nullable field, `_tagged` a tagged-field
//! section, `STRING` a compact string):
//! ```text
//! HeartbeatRequest => GroupId:STRING MemberId:STRING MemberEpoch:INT32
//!     EndpointInformationEpoch:INT32 InstanceId:STRING? RackId:STRING?
//!     RebalanceTimeoutMs:INT32 Topology? ActiveTasks:[TaskIds]?
//!     StandbyTasks:[TaskIds]? WarmupTasks:[TaskIds]? ProcessId:STRING?
//!     UserEndpoint:Endpoint? ClientTags:[KeyValue]? TaskOffsets:[TaskOffset]?
//!     TaskEndOffsets:[TaskOffset]? ShutdownApplication:BOOL _tagged
//!   Topology => Epoch:INT32 [Subtopology] _tagged
//!     Subtopology => SubtopologyId:STRING SourceTopics:[STRING]
//!         SourceTopicRegex:[STRING] StateChangelogTopics:[TopicInfo]
//!         RepartitionSinkTopics:[STRING] RepartitionSourceTopics:[TopicInfo]
//!         [CopartitionGroup] _tagged
//!       CopartitionGroup => SourceTopics:[INT16] SourceTopicRegex:[INT16]
//!           RepartitionSourceTopics:[INT16] _tagged   (indexes into the subtopology's arrays)
//! HeartbeatResponse => ThrottleTimeMs:INT32 ErrorCode:INT16 ErrorMessage:STRING?
//!     MemberId:STRING MemberEpoch:INT32 HeartbeatIntervalMs:INT32
//!     AcceptableRecoveryLag:INT32 TaskOffsetIntervalMs:INT32 [Status]?
//!     ActiveTasks:[TaskIds]? StandbyTasks:[TaskIds]? WarmupTasks:[TaskIds]?
//!     [EndpointToPartitions]? _tagged
//!   Status => StatusCode:INT8 StatusDetail:STRING _tagged
//!   EndpointToPartitions => UserEndpoint:Endpoint ActivePartitions:[TopicPartition]
//!       StandbyPartitions:[TopicPartition] _tagged
//!     TopicPartition => Topic:STRING Partitions:[INT32] _tagged
//! DescribeRequest => GroupIds:[STRING] IncludeAuthorizedOperations:BOOL _tagged
//! DescribeResponse => ThrottleTimeMs:INT32 [DescribedGroup] _tagged
//!   DescribedGroup => ErrorCode:INT16 ErrorMessage:STRING? GroupId:STRING
//!       GroupState:STRING GroupEpoch:INT32 AssignmentEpoch:INT32
//!       Topology:DescribeTopology? [Member] AuthorizedOperations:INT32 _tagged
//!     DescribeTopology => Epoch:INT32 [DescribeSubtopology]? _tagged
//!       DescribeSubtopology => SubtopologyId:STRING SourceTopics:[STRING]
//!           RepartitionSinkTopics:[STRING] StateChangelogTopics:[TopicInfo]
//!           RepartitionSourceTopics:[TopicInfo] _tagged
//!     Member => MemberId:STRING MemberEpoch:INT32 InstanceId:STRING? RackId:STRING?
//!         ClientId:STRING ClientHost:STRING TopologyEpoch:INT32 ProcessId:STRING
//!         UserEndpoint:Endpoint? ClientTags:[KeyValue] TaskOffsets:[TaskOffset]
//!         TaskEndOffsets:[TaskOffset] Assignment TargetAssignment:Assignment
//!         IsClassic:BOOL _tagged
//!       Assignment => ActiveTasks:[TaskIds] StandbyTasks:[TaskIds] WarmupTasks:[TaskIds] _tagged
//! Shared by both APIs:
//!   TopicInfo => Name:STRING Partitions:INT32 ReplicationFactor:INT16 [KeyValue] _tagged
//!   KeyValue => Key:STRING Value:STRING _tagged
//!   Endpoint => Host:STRING Port:UINT16 _tagged
//!   TaskIds => SubtopologyId:STRING Partitions:[INT32] _tagged
//!   TaskOffset => SubtopologyId:STRING Partition:INT32 Offset:INT64 _tagged
//! ```

use bytes::{BufMut, Bytes, BytesMut};

use super::api::{ApiRequest, Versions};
use super::error::ProtocolError;
use super::wire::{
    Reader, put_compact_array_len, put_compact_nullable_string, put_compact_string,
    put_tagged_fields,
};

/// The API key of StreamsGroupHeartbeat, for request and response alike.
pub const STREAMS_GROUP_HEARTBEAT_API_KEY: i16 = 88;
/// The API key of StreamsGroupDescribe, for request and response alike.
pub const STREAMS_GROUP_DESCRIBE_API_KEY: i16 = 89;

/// Status code: the member's topology epoch is below the group's.
pub const STATUS_STALE_TOPOLOGY: i8 = 0;
/// Status code: source topics are missing (named in the detail).
pub const STATUS_MISSING_SOURCE_TOPICS: i8 = 1;
/// Status code: topics that should be copartitioned are not, or a
/// changelog's partition count is wrong (named in the detail).
pub const STATUS_INCORRECTLY_PARTITIONED_TOPICS: i8 = 2;
/// Status code: internal topics are missing (named in the detail).
pub const STATUS_MISSING_INTERNAL_TOPICS: i8 = 3;
/// Status code: a member asked the whole application to shut down.
pub const STATUS_SHUTDOWN_APPLICATION: i8 = 4;

/// A configuration entry (topic configs, client tags).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyValue {
    /// Key.
    pub key: String,
    /// Value.
    pub value: String,
}

/// An internal topic of a subtopology (changelog or repartition source).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicInfo {
    /// Topic name.
    pub name: String,
    /// Partition count; 0 when not enforced (always 0 for changelogs).
    pub partitions: i32,
    /// Replication factor; 0 for the broker's default.
    pub replication_factor: i16,
    /// Topic-level configs.
    pub topic_configs: Vec<KeyValue>,
}

/// A host and port (Interactive Queries endpoint).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Endpoint {
    /// Host.
    pub host: String,
    /// Port.
    pub port: u16,
}

/// Tasks of one subtopology: one task per partition listed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskIds {
    /// Subtopology id.
    pub subtopology_id: String,
    /// Partitions.
    pub partitions: Vec<i32>,
}

/// A cumulative changelog offset of one task.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskOffset {
    /// Subtopology id.
    pub subtopology_id: String,
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
}

/// Source topics of a subtopology that must be copartitioned, as indexes
/// into the arrays of the enclosing [`Subtopology`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CopartitionGroup {
    /// Indexes into [`Subtopology::source_topics`].
    pub source_topics: Vec<i16>,
    /// Indexes into [`Subtopology::source_topic_regex`].
    pub source_topic_regex: Vec<i16>,
    /// Indexes into [`Subtopology::repartition_source_topics`].
    pub repartition_source_topics: Vec<i16>,
}

/// A subtopology as a member declares it in its heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subtopology {
    /// Subtopology id, unique within the topology.
    pub subtopology_id: String,
    /// Topics read.
    pub source_topics: Vec<String>,
    /// Regular expressions of topics read.
    pub source_topic_regex: Vec<String>,
    /// State changelog topics.
    pub state_changelog_topics: Vec<TopicInfo>,
    /// Repartition topics written.
    pub repartition_sink_topics: Vec<String>,
    /// Repartition topics read.
    pub repartition_source_topics: Vec<TopicInfo>,
    /// Copartitioning constraints.
    pub copartition_groups: Vec<CopartitionGroup>,
}

/// The topology a member declares (sent when it joins).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Topology {
    /// Topology epoch.
    pub epoch: i32,
    /// Subtopologies.
    pub subtopologies: Vec<Subtopology>,
}

/// StreamsGroupHeartbeat request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamsGroupHeartbeatRequest {
    /// Group id.
    pub group_id: String,
    /// Member id, chosen by the client.
    pub member_id: String,
    /// Member epoch: 0 to join, -1 to leave, -2 for a static member leaving
    /// to rejoin.
    pub member_epoch: i32,
    /// The latest endpoint epoch the member received.
    pub endpoint_information_epoch: i32,
    /// Static membership instance id; null if unset or unchanged.
    pub instance_id: Option<String>,
    /// Rack; null if unset or unchanged.
    pub rack_id: Option<String>,
    /// Rebalance timeout; -1 if unchanged (the default).
    pub rebalance_timeout_ms: i32,
    /// The topology, sent when joining; null otherwise.
    pub topology: Option<Topology>,
    /// Owned active tasks; null if unchanged.
    pub active_tasks: Option<Vec<TaskIds>>,
    /// Owned standby tasks; null if unchanged.
    pub standby_tasks: Option<Vec<TaskIds>>,
    /// Owned warm-up tasks; null if unchanged.
    pub warmup_tasks: Option<Vec<TaskIds>>,
    /// Process id (one per Streams instance); null if unchanged.
    pub process_id: Option<String>,
    /// Interactive Queries endpoint; null if unchanged or undefined.
    pub user_endpoint: Option<Endpoint>,
    /// Client tags for rack-aware assignment; null if unchanged.
    pub client_tags: Option<Vec<KeyValue>>,
    /// Cumulative changelog offsets; null if unchanged.
    pub task_offsets: Option<Vec<TaskOffset>>,
    /// Cumulative changelog end offsets; null if unchanged.
    pub task_end_offsets: Option<Vec<TaskOffset>>,
    /// Ask every member of the group to shut down.
    pub shutdown_application: bool,
}

impl Default for StreamsGroupHeartbeatRequest {
    fn default() -> Self {
        Self {
            group_id: String::new(),
            member_id: String::new(),
            member_epoch: 0,
            endpoint_information_epoch: 0,
            instance_id: None,
            rack_id: None,
            rebalance_timeout_ms: -1,
            topology: None,
            active_tasks: None,
            standby_tasks: None,
            warmup_tasks: None,
            process_id: None,
            user_endpoint: None,
            client_tags: None,
            task_offsets: None,
            task_end_offsets: None,
            shutdown_application: false,
        }
    }
}

/// A status of the group reported to a member (see the `STATUS_*` codes).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Status {
    /// Status code.
    pub status_code: i8,
    /// Human-readable detail.
    pub status_detail: String,
}

/// Partitions of one topic.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partitions.
    pub partitions: Vec<i32>,
}

/// The partitions materialized at one member's endpoint (Interactive Queries).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EndpointToPartitions {
    /// The member's endpoint.
    pub user_endpoint: Endpoint,
    /// Partitions of its active tasks.
    pub active_partitions: Vec<TopicPartition>,
    /// Partitions of its standby tasks.
    pub standby_partitions: Vec<TopicPartition>,
}

/// StreamsGroupHeartbeat response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamsGroupHeartbeatResponse {
    /// Throttle time.
    pub throttle_time_ms: i32,
    /// Top-level error.
    pub error_code: i16,
    /// Top-level error message.
    pub error_message: Option<String>,
    /// Member id.
    pub member_id: String,
    /// Member epoch.
    pub member_epoch: i32,
    /// Heartbeat interval.
    pub heartbeat_interval_ms: i32,
    /// Largest lag for which a warm-up task counts as caught up.
    pub acceptable_recovery_lag: i32,
    /// How often the member should report its task offsets.
    pub task_offset_interval_ms: i32,
    /// Group statuses; null if unchanged.
    pub status: Option<Vec<Status>>,
    /// Assigned active tasks; null if unchanged.
    pub active_tasks: Option<Vec<TaskIds>>,
    /// Assigned standby tasks; null if unchanged.
    pub standby_tasks: Option<Vec<TaskIds>>,
    /// Assigned warm-up tasks; null if unchanged.
    pub warmup_tasks: Option<Vec<TaskIds>>,
    /// The endpoint information epoch the answer's endpoints are at.
    pub endpoint_information_epoch: i32,
    /// Partitions by member endpoint (Interactive Queries); null if unchanged.
    pub partitions_by_user_endpoint: Option<Vec<EndpointToPartitions>>,
}

/// StreamsGroupDescribe request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamsGroupDescribeRequest {
    /// Groups to describe.
    pub group_ids: Vec<String>,
    /// Fill in [`DescribedGroup::authorized_operations`].
    pub include_authorized_operations: bool,
}

/// A subtopology as the group coordinator describes it (partition counts
/// set, regular expressions resolved).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DescribeSubtopology {
    /// Subtopology id.
    pub subtopology_id: String,
    /// Topics read.
    pub source_topics: Vec<String>,
    /// Repartition topics written.
    pub repartition_sink_topics: Vec<String>,
    /// State changelog topics.
    pub state_changelog_topics: Vec<TopicInfo>,
    /// Repartition topics read.
    pub repartition_source_topics: Vec<TopicInfo>,
}

/// The topology initialized for a group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DescribeTopology {
    /// Topology epoch.
    pub epoch: i32,
    /// Subtopologies; null if the group is uninitialized or its source
    /// topics are missing or incorrectly partitioned.
    pub subtopologies: Option<Vec<DescribeSubtopology>>,
}

/// Tasks assigned to a member.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assignment {
    /// Active tasks.
    pub active_tasks: Vec<TaskIds>,
    /// Standby tasks.
    pub standby_tasks: Vec<TaskIds>,
    /// Warm-up tasks.
    pub warmup_tasks: Vec<TaskIds>,
}

/// A member of a described group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Member {
    /// Member id.
    pub member_id: String,
    /// Member epoch.
    pub member_epoch: i32,
    /// Static membership instance id.
    pub instance_id: Option<String>,
    /// Rack.
    pub rack_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// The topology epoch the member runs.
    pub topology_epoch: i32,
    /// Process id.
    pub process_id: String,
    /// Interactive Queries endpoint, null if undefined.
    pub user_endpoint: Option<Endpoint>,
    /// Client tags.
    pub client_tags: Vec<KeyValue>,
    /// Cumulative changelog offsets.
    pub task_offsets: Vec<TaskOffset>,
    /// Cumulative changelog end offsets.
    pub task_end_offsets: Vec<TaskOffset>,
    /// Current assignment.
    pub assignment: Assignment,
    /// Target assignment.
    pub target_assignment: Assignment,
    /// A classic member not yet upgraded.
    pub is_classic: bool,
}

/// One described group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedGroup {
    /// Error, 0 if described.
    pub error_code: i16,
    /// Error message.
    pub error_message: Option<String>,
    /// Group id.
    pub group_id: String,
    /// Group state, or the empty string.
    pub group_state: String,
    /// Group epoch.
    pub group_epoch: i32,
    /// Assignment epoch.
    pub assignment_epoch: i32,
    /// Initialized topology; null on a describe error.
    pub topology: Option<DescribeTopology>,
    /// Members.
    pub members: Vec<Member>,
    /// Bitfield of authorized operations; `i32::MIN` (the default) when not
    /// asked for.
    pub authorized_operations: i32,
}

impl Default for DescribedGroup {
    fn default() -> Self {
        Self {
            error_code: 0,
            error_message: None,
            group_id: String::new(),
            group_state: String::new(),
            group_epoch: 0,
            assignment_epoch: 0,
            topology: None,
            members: Vec::new(),
            authorized_operations: i32::MIN,
        }
    }
}

/// StreamsGroupDescribe response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamsGroupDescribeResponse {
    /// Throttle time.
    pub throttle_time_ms: i32,
    /// One entry per group asked for.
    pub groups: Vec<DescribedGroup>,
}

impl StreamsGroupHeartbeatRequest {
    /// Versions this build encodes and decodes.
    pub const VERSIONS: Versions = Versions { min: 0, max: 0 };
}

impl StreamsGroupDescribeRequest {
    /// Versions this build encodes and decodes.
    pub const VERSIONS: Versions = Versions { min: 0, max: 0 };
}

// ---------------------------------------------------------------------------
// Primitives shared by both APIs.

fn skip_tags(r: &mut Reader, what: &'static str) -> Result<(), ProtocolError> {
    r.tagged_fields(what, |_, _| Ok(false))
}

fn empty_tags(out: &mut BytesMut) {
    put_tagged_fields(out, &[]);
}

/// A non-nullable compact array's length.
fn array(r: &mut Reader, min_size: usize, what: &'static str) -> Result<usize, ProtocolError> {
    r.compact_array_len(min_size, what)?
        .ok_or_else(|| ProtocolError::malformed(what, "null array"))
}

/// A non-nullable array of elements of at least `min_size` bytes each.
fn read_array<T>(
    r: &mut Reader,
    min_size: usize,
    what: &'static str,
    read: impl Fn(&mut Reader) -> Result<T, ProtocolError>,
) -> Result<Vec<T>, ProtocolError> {
    let n = array(r, min_size, what)?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(read(r)?);
    }
    Ok(v)
}

/// A nullable array (length 0 on the wire) of elements of at least
/// `min_size` bytes each.
fn read_nullable_array<T>(
    r: &mut Reader,
    min_size: usize,
    what: &'static str,
    read: impl Fn(&mut Reader) -> Result<T, ProtocolError>,
) -> Result<Option<Vec<T>>, ProtocolError> {
    let Some(n) = r.compact_array_len(min_size, what)? else {
        return Ok(None);
    };
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(read(r)?);
    }
    Ok(Some(v))
}

fn put_array<T>(out: &mut BytesMut, items: &[T], put: impl Fn(&mut BytesMut, &T)) {
    put_compact_array_len(out, Some(items.len()));
    for item in items {
        put(out, item);
    }
}

fn put_nullable_array<T>(out: &mut BytesMut, items: Option<&[T]>, put: impl Fn(&mut BytesMut, &T)) {
    match items {
        None => put_compact_array_len(out, None),
        Some(items) => put_array(out, items, put),
    }
}

/// The marker of a nullable struct: `true` if the struct follows.
fn read_present(r: &mut Reader, what: &'static str) -> Result<bool, ProtocolError> {
    match r.i8(what)? {
        1 => Ok(true),
        -1 => Ok(false),
        m => Err(ProtocolError::malformed(
            what,
            format!("nullable struct marker {m}, expected 1 or -1"),
        )),
    }
}

fn put_present(out: &mut BytesMut, present: bool) {
    out.put_i8(if present { 1 } else { -1 });
}

fn read_bool(r: &mut Reader, what: &'static str) -> Result<bool, ProtocolError> {
    Ok(r.i8(what)? != 0)
}

fn put_bool(out: &mut BytesMut, b: bool) {
    out.put_u8(u8::from(b));
}

fn read_strings(r: &mut Reader, what: &'static str) -> Result<Vec<String>, ProtocolError> {
    read_array(r, 1, what, |r| r.compact_string(what))
}

fn put_strings(out: &mut BytesMut, items: &[String]) {
    put_array(out, items, |out, s| put_compact_string(out, s));
}

fn read_i32s(r: &mut Reader, what: &'static str) -> Result<Vec<i32>, ProtocolError> {
    read_array(r, 4, what, |r| r.i32(what))
}

fn put_i32s(out: &mut BytesMut, items: &[i32]) {
    put_array(out, items, |out, &v| out.put_i32(v));
}

fn read_i16s(r: &mut Reader, what: &'static str) -> Result<Vec<i16>, ProtocolError> {
    read_array(r, 2, what, |r| r.i16(what))
}

fn put_i16s(out: &mut BytesMut, items: &[i16]) {
    put_array(out, items, |out, &v| out.put_i16(v));
}

// Minimum encoded sizes of the structs, for checking array counts: each
// string and array at least 1 byte, plus 1 for the tagged-field section.
const KEY_VALUE_MIN: usize = 3;
const TOPIC_INFO_MIN: usize = 1 + 4 + 2 + 1 + 1;
const ENDPOINT_MIN: usize = 1 + 2 + 1;
const TASK_IDS_MIN: usize = 3;
const TASK_OFFSET_MIN: usize = 1 + 4 + 8 + 1;
const COPARTITION_GROUP_MIN: usize = 4;
const SUBTOPOLOGY_MIN: usize = 1 + 6 + 1;
const STATUS_MIN: usize = 1 + 1 + 1;
const TOPIC_PARTITION_MIN: usize = 3;
const ENDPOINT_TO_PARTITIONS_MIN: usize = ENDPOINT_MIN + 1 + 1 + 1;
const DESCRIBE_SUBTOPOLOGY_MIN: usize = 1 + 4 + 1;
const ASSIGNMENT_MIN: usize = 4;
const MEMBER_MIN: usize = 1 + 4 + 1 + 1 + 1 + 1 + 4 + 1 + 1 + 3 + 2 * ASSIGNMENT_MIN + 1 + 1;
const DESCRIBED_GROUP_MIN: usize = 2 + 1 + 1 + 1 + 4 + 4 + 1 + 1 + 4 + 1;

fn read_key_value(r: &mut Reader) -> Result<KeyValue, ProtocolError> {
    let key = r.compact_string("KeyValue.Key")?;
    let value = r.compact_string("KeyValue.Value")?;
    skip_tags(r, "KeyValue tagged fields")?;
    Ok(KeyValue { key, value })
}

fn put_key_value(out: &mut BytesMut, kv: &KeyValue) {
    put_compact_string(out, &kv.key);
    put_compact_string(out, &kv.value);
    empty_tags(out);
}

fn read_topic_info(r: &mut Reader) -> Result<TopicInfo, ProtocolError> {
    let name = r.compact_string("TopicInfo.Name")?;
    let partitions = r.i32("TopicInfo.Partitions")?;
    let replication_factor = r.i16("TopicInfo.ReplicationFactor")?;
    let topic_configs = read_array(r, KEY_VALUE_MIN, "TopicInfo.TopicConfigs", read_key_value)?;
    skip_tags(r, "TopicInfo tagged fields")?;
    Ok(TopicInfo {
        name,
        partitions,
        replication_factor,
        topic_configs,
    })
}

fn put_topic_info(out: &mut BytesMut, t: &TopicInfo) {
    put_compact_string(out, &t.name);
    out.put_i32(t.partitions);
    out.put_i16(t.replication_factor);
    put_array(out, &t.topic_configs, put_key_value);
    empty_tags(out);
}

fn read_endpoint(r: &mut Reader) -> Result<Endpoint, ProtocolError> {
    let host = r.compact_string("Endpoint.Host")?;
    let port = r.i16("Endpoint.Port")? as u16;
    skip_tags(r, "Endpoint tagged fields")?;
    Ok(Endpoint { host, port })
}

fn put_endpoint(out: &mut BytesMut, e: &Endpoint) {
    put_compact_string(out, &e.host);
    out.put_u16(e.port);
    empty_tags(out);
}

fn read_nullable_endpoint(r: &mut Reader) -> Result<Option<Endpoint>, ProtocolError> {
    if read_present(r, "UserEndpoint")? {
        read_endpoint(r).map(Some)
    } else {
        Ok(None)
    }
}

fn put_nullable_endpoint(out: &mut BytesMut, e: Option<&Endpoint>) {
    put_present(out, e.is_some());
    if let Some(e) = e {
        put_endpoint(out, e);
    }
}

fn read_task_ids(r: &mut Reader) -> Result<TaskIds, ProtocolError> {
    let subtopology_id = r.compact_string("TaskIds.SubtopologyId")?;
    let partitions = read_i32s(r, "TaskIds.Partitions")?;
    skip_tags(r, "TaskIds tagged fields")?;
    Ok(TaskIds {
        subtopology_id,
        partitions,
    })
}

fn put_task_ids(out: &mut BytesMut, t: &TaskIds) {
    put_compact_string(out, &t.subtopology_id);
    put_i32s(out, &t.partitions);
    empty_tags(out);
}

fn read_task_offset(r: &mut Reader) -> Result<TaskOffset, ProtocolError> {
    let subtopology_id = r.compact_string("TaskOffset.SubtopologyId")?;
    let partition = r.i32("TaskOffset.Partition")?;
    let offset = r.i64("TaskOffset.Offset")?;
    skip_tags(r, "TaskOffset tagged fields")?;
    Ok(TaskOffset {
        subtopology_id,
        partition,
        offset,
    })
}

fn put_task_offset(out: &mut BytesMut, t: &TaskOffset) {
    put_compact_string(out, &t.subtopology_id);
    out.put_i32(t.partition);
    out.put_i64(t.offset);
    empty_tags(out);
}

// ---------------------------------------------------------------------------
// StreamsGroupHeartbeat.

fn read_copartition_group(r: &mut Reader) -> Result<CopartitionGroup, ProtocolError> {
    let source_topics = read_i16s(r, "CopartitionGroup.SourceTopics")?;
    let source_topic_regex = read_i16s(r, "CopartitionGroup.SourceTopicRegex")?;
    let repartition_source_topics = read_i16s(r, "CopartitionGroup.RepartitionSourceTopics")?;
    skip_tags(r, "CopartitionGroup tagged fields")?;
    Ok(CopartitionGroup {
        source_topics,
        source_topic_regex,
        repartition_source_topics,
    })
}

fn put_copartition_group(out: &mut BytesMut, g: &CopartitionGroup) {
    put_i16s(out, &g.source_topics);
    put_i16s(out, &g.source_topic_regex);
    put_i16s(out, &g.repartition_source_topics);
    empty_tags(out);
}

fn read_subtopology(r: &mut Reader) -> Result<Subtopology, ProtocolError> {
    let subtopology_id = r.compact_string("Subtopology.SubtopologyId")?;
    let source_topics = read_strings(r, "Subtopology.SourceTopics")?;
    let source_topic_regex = read_strings(r, "Subtopology.SourceTopicRegex")?;
    let state_changelog_topics = read_array(
        r,
        TOPIC_INFO_MIN,
        "Subtopology.StateChangelogTopics",
        read_topic_info,
    )?;
    let repartition_sink_topics = read_strings(r, "Subtopology.RepartitionSinkTopics")?;
    let repartition_source_topics = read_array(
        r,
        TOPIC_INFO_MIN,
        "Subtopology.RepartitionSourceTopics",
        read_topic_info,
    )?;
    let copartition_groups = read_array(
        r,
        COPARTITION_GROUP_MIN,
        "Subtopology.CopartitionGroups",
        read_copartition_group,
    )?;
    skip_tags(r, "Subtopology tagged fields")?;
    Ok(Subtopology {
        subtopology_id,
        source_topics,
        source_topic_regex,
        state_changelog_topics,
        repartition_sink_topics,
        repartition_source_topics,
        copartition_groups,
    })
}

fn put_subtopology(out: &mut BytesMut, s: &Subtopology) {
    put_compact_string(out, &s.subtopology_id);
    put_strings(out, &s.source_topics);
    put_strings(out, &s.source_topic_regex);
    put_array(out, &s.state_changelog_topics, put_topic_info);
    put_strings(out, &s.repartition_sink_topics);
    put_array(out, &s.repartition_source_topics, put_topic_info);
    put_array(out, &s.copartition_groups, put_copartition_group);
    empty_tags(out);
}

fn read_topology(r: &mut Reader) -> Result<Topology, ProtocolError> {
    let epoch = r.i32("Topology.Epoch")?;
    let subtopologies = read_array(
        r,
        SUBTOPOLOGY_MIN,
        "Topology.Subtopologies",
        read_subtopology,
    )?;
    skip_tags(r, "Topology tagged fields")?;
    Ok(Topology {
        epoch,
        subtopologies,
    })
}

fn put_topology(out: &mut BytesMut, t: &Topology) {
    out.put_i32(t.epoch);
    put_array(out, &t.subtopologies, put_subtopology);
    empty_tags(out);
}

fn encode_heartbeat_request(req: &StreamsGroupHeartbeatRequest, out: &mut BytesMut) {
    put_compact_string(out, &req.group_id);
    put_compact_string(out, &req.member_id);
    out.put_i32(req.member_epoch);
    out.put_i32(req.endpoint_information_epoch);
    put_compact_nullable_string(out, req.instance_id.as_deref());
    put_compact_nullable_string(out, req.rack_id.as_deref());
    out.put_i32(req.rebalance_timeout_ms);
    put_present(out, req.topology.is_some());
    if let Some(t) = &req.topology {
        put_topology(out, t);
    }
    put_nullable_array(out, req.active_tasks.as_deref(), put_task_ids);
    put_nullable_array(out, req.standby_tasks.as_deref(), put_task_ids);
    put_nullable_array(out, req.warmup_tasks.as_deref(), put_task_ids);
    put_compact_nullable_string(out, req.process_id.as_deref());
    put_nullable_endpoint(out, req.user_endpoint.as_ref());
    put_nullable_array(out, req.client_tags.as_deref(), put_key_value);
    put_nullable_array(out, req.task_offsets.as_deref(), put_task_offset);
    put_nullable_array(out, req.task_end_offsets.as_deref(), put_task_offset);
    put_bool(out, req.shutdown_application);
    empty_tags(out);
}

fn decode_heartbeat_request(
    buf: &mut Bytes,
) -> Result<StreamsGroupHeartbeatRequest, ProtocolError> {
    let mut r = Reader::new(std::mem::take(buf));
    let group_id = r.compact_string("GroupId")?;
    let member_id = r.compact_string("MemberId")?;
    let member_epoch = r.i32("MemberEpoch")?;
    let endpoint_information_epoch = r.i32("EndpointInformationEpoch")?;
    let instance_id = r.compact_nullable_string("InstanceId")?;
    let rack_id = r.compact_nullable_string("RackId")?;
    let rebalance_timeout_ms = r.i32("RebalanceTimeoutMs")?;
    let topology = if read_present(&mut r, "Topology")? {
        Some(read_topology(&mut r)?)
    } else {
        None
    };
    let active_tasks = read_nullable_array(&mut r, TASK_IDS_MIN, "ActiveTasks", read_task_ids)?;
    let standby_tasks = read_nullable_array(&mut r, TASK_IDS_MIN, "StandbyTasks", read_task_ids)?;
    let warmup_tasks = read_nullable_array(&mut r, TASK_IDS_MIN, "WarmupTasks", read_task_ids)?;
    let process_id = r.compact_nullable_string("ProcessId")?;
    let user_endpoint = read_nullable_endpoint(&mut r)?;
    let client_tags = read_nullable_array(&mut r, KEY_VALUE_MIN, "ClientTags", read_key_value)?;
    let task_offsets =
        read_nullable_array(&mut r, TASK_OFFSET_MIN, "TaskOffsets", read_task_offset)?;
    let task_end_offsets =
        read_nullable_array(&mut r, TASK_OFFSET_MIN, "TaskEndOffsets", read_task_offset)?;
    let shutdown_application = read_bool(&mut r, "ShutdownApplication")?;
    skip_tags(&mut r, "StreamsGroupHeartbeatRequest tagged fields")?;
    *buf = r.into_rest();
    Ok(StreamsGroupHeartbeatRequest {
        group_id,
        member_id,
        member_epoch,
        endpoint_information_epoch,
        instance_id,
        rack_id,
        rebalance_timeout_ms,
        topology,
        active_tasks,
        standby_tasks,
        warmup_tasks,
        process_id,
        user_endpoint,
        client_tags,
        task_offsets,
        task_end_offsets,
        shutdown_application,
    })
}

fn read_status(r: &mut Reader) -> Result<Status, ProtocolError> {
    let status_code = r.i8("Status.StatusCode")?;
    let status_detail = r.compact_string("Status.StatusDetail")?;
    skip_tags(r, "Status tagged fields")?;
    Ok(Status {
        status_code,
        status_detail,
    })
}

fn put_status(out: &mut BytesMut, s: &Status) {
    out.put_i8(s.status_code);
    put_compact_string(out, &s.status_detail);
    empty_tags(out);
}

fn read_topic_partition(r: &mut Reader) -> Result<TopicPartition, ProtocolError> {
    let topic = r.compact_string("TopicPartition.Topic")?;
    let partitions = read_i32s(r, "TopicPartition.Partitions")?;
    skip_tags(r, "TopicPartition tagged fields")?;
    Ok(TopicPartition { topic, partitions })
}

fn put_topic_partition(out: &mut BytesMut, t: &TopicPartition) {
    put_compact_string(out, &t.topic);
    put_i32s(out, &t.partitions);
    empty_tags(out);
}

fn read_endpoint_to_partitions(r: &mut Reader) -> Result<EndpointToPartitions, ProtocolError> {
    let user_endpoint = read_endpoint(r)?;
    let active_partitions = read_array(
        r,
        TOPIC_PARTITION_MIN,
        "EndpointToPartitions.ActivePartitions",
        read_topic_partition,
    )?;
    let standby_partitions = read_array(
        r,
        TOPIC_PARTITION_MIN,
        "EndpointToPartitions.StandbyPartitions",
        read_topic_partition,
    )?;
    skip_tags(r, "EndpointToPartitions tagged fields")?;
    Ok(EndpointToPartitions {
        user_endpoint,
        active_partitions,
        standby_partitions,
    })
}

fn put_endpoint_to_partitions(out: &mut BytesMut, e: &EndpointToPartitions) {
    put_endpoint(out, &e.user_endpoint);
    put_array(out, &e.active_partitions, put_topic_partition);
    put_array(out, &e.standby_partitions, put_topic_partition);
    empty_tags(out);
}

fn encode_heartbeat_response(resp: &StreamsGroupHeartbeatResponse, out: &mut BytesMut) {
    out.put_i32(resp.throttle_time_ms);
    out.put_i16(resp.error_code);
    put_compact_nullable_string(out, resp.error_message.as_deref());
    put_compact_string(out, &resp.member_id);
    out.put_i32(resp.member_epoch);
    out.put_i32(resp.heartbeat_interval_ms);
    out.put_i32(resp.acceptable_recovery_lag);
    out.put_i32(resp.task_offset_interval_ms);
    put_nullable_array(out, resp.status.as_deref(), put_status);
    put_nullable_array(out, resp.active_tasks.as_deref(), put_task_ids);
    put_nullable_array(out, resp.standby_tasks.as_deref(), put_task_ids);
    put_nullable_array(out, resp.warmup_tasks.as_deref(), put_task_ids);
    out.put_i32(resp.endpoint_information_epoch);
    put_nullable_array(
        out,
        resp.partitions_by_user_endpoint.as_deref(),
        put_endpoint_to_partitions,
    );
    empty_tags(out);
}

fn decode_heartbeat_response(
    buf: &mut Bytes,
) -> Result<StreamsGroupHeartbeatResponse, ProtocolError> {
    let mut r = Reader::new(std::mem::take(buf));
    let throttle_time_ms = r.i32("ThrottleTimeMs")?;
    let error_code = r.i16("ErrorCode")?;
    let error_message = r.compact_nullable_string("ErrorMessage")?;
    let member_id = r.compact_string("MemberId")?;
    let member_epoch = r.i32("MemberEpoch")?;
    let heartbeat_interval_ms = r.i32("HeartbeatIntervalMs")?;
    let acceptable_recovery_lag = r.i32("AcceptableRecoveryLag")?;
    let task_offset_interval_ms = r.i32("TaskOffsetIntervalMs")?;
    let status = read_nullable_array(&mut r, STATUS_MIN, "Status", read_status)?;
    let active_tasks = read_nullable_array(&mut r, TASK_IDS_MIN, "ActiveTasks", read_task_ids)?;
    let standby_tasks = read_nullable_array(&mut r, TASK_IDS_MIN, "StandbyTasks", read_task_ids)?;
    let warmup_tasks = read_nullable_array(&mut r, TASK_IDS_MIN, "WarmupTasks", read_task_ids)?;
    let endpoint_information_epoch = r.i32("EndpointInformationEpoch")?;
    let partitions_by_user_endpoint = read_nullable_array(
        &mut r,
        ENDPOINT_TO_PARTITIONS_MIN,
        "PartitionsByUserEndpoint",
        read_endpoint_to_partitions,
    )?;
    skip_tags(&mut r, "StreamsGroupHeartbeatResponse tagged fields")?;
    *buf = r.into_rest();
    Ok(StreamsGroupHeartbeatResponse {
        throttle_time_ms,
        error_code,
        error_message,
        member_id,
        member_epoch,
        heartbeat_interval_ms,
        acceptable_recovery_lag,
        task_offset_interval_ms,
        status,
        active_tasks,
        standby_tasks,
        warmup_tasks,
        endpoint_information_epoch,
        partitions_by_user_endpoint,
    })
}

// ---------------------------------------------------------------------------
// StreamsGroupDescribe.

fn encode_describe_request(req: &StreamsGroupDescribeRequest, out: &mut BytesMut) {
    put_strings(out, &req.group_ids);
    put_bool(out, req.include_authorized_operations);
    empty_tags(out);
}

fn decode_describe_request(buf: &mut Bytes) -> Result<StreamsGroupDescribeRequest, ProtocolError> {
    let mut r = Reader::new(std::mem::take(buf));
    let group_ids = read_strings(&mut r, "GroupIds")?;
    let include_authorized_operations = read_bool(&mut r, "IncludeAuthorizedOperations")?;
    skip_tags(&mut r, "StreamsGroupDescribeRequest tagged fields")?;
    *buf = r.into_rest();
    Ok(StreamsGroupDescribeRequest {
        group_ids,
        include_authorized_operations,
    })
}

fn read_describe_subtopology(r: &mut Reader) -> Result<DescribeSubtopology, ProtocolError> {
    let subtopology_id = r.compact_string("Subtopology.SubtopologyId")?;
    let source_topics = read_strings(r, "Subtopology.SourceTopics")?;
    let repartition_sink_topics = read_strings(r, "Subtopology.RepartitionSinkTopics")?;
    let state_changelog_topics = read_array(
        r,
        TOPIC_INFO_MIN,
        "Subtopology.StateChangelogTopics",
        read_topic_info,
    )?;
    let repartition_source_topics = read_array(
        r,
        TOPIC_INFO_MIN,
        "Subtopology.RepartitionSourceTopics",
        read_topic_info,
    )?;
    skip_tags(r, "Subtopology tagged fields")?;
    Ok(DescribeSubtopology {
        subtopology_id,
        source_topics,
        repartition_sink_topics,
        state_changelog_topics,
        repartition_source_topics,
    })
}

fn put_describe_subtopology(out: &mut BytesMut, s: &DescribeSubtopology) {
    put_compact_string(out, &s.subtopology_id);
    put_strings(out, &s.source_topics);
    put_strings(out, &s.repartition_sink_topics);
    put_array(out, &s.state_changelog_topics, put_topic_info);
    put_array(out, &s.repartition_source_topics, put_topic_info);
    empty_tags(out);
}

fn read_describe_topology(r: &mut Reader) -> Result<DescribeTopology, ProtocolError> {
    let epoch = r.i32("Topology.Epoch")?;
    let subtopologies = read_nullable_array(
        r,
        DESCRIBE_SUBTOPOLOGY_MIN,
        "Topology.Subtopologies",
        read_describe_subtopology,
    )?;
    skip_tags(r, "Topology tagged fields")?;
    Ok(DescribeTopology {
        epoch,
        subtopologies,
    })
}

fn put_describe_topology(out: &mut BytesMut, t: &DescribeTopology) {
    out.put_i32(t.epoch);
    put_nullable_array(out, t.subtopologies.as_deref(), put_describe_subtopology);
    empty_tags(out);
}

fn read_assignment(r: &mut Reader) -> Result<Assignment, ProtocolError> {
    let active_tasks = read_array(r, TASK_IDS_MIN, "Assignment.ActiveTasks", read_task_ids)?;
    let standby_tasks = read_array(r, TASK_IDS_MIN, "Assignment.StandbyTasks", read_task_ids)?;
    let warmup_tasks = read_array(r, TASK_IDS_MIN, "Assignment.WarmupTasks", read_task_ids)?;
    skip_tags(r, "Assignment tagged fields")?;
    Ok(Assignment {
        active_tasks,
        standby_tasks,
        warmup_tasks,
    })
}

fn put_assignment(out: &mut BytesMut, a: &Assignment) {
    put_array(out, &a.active_tasks, put_task_ids);
    put_array(out, &a.standby_tasks, put_task_ids);
    put_array(out, &a.warmup_tasks, put_task_ids);
    empty_tags(out);
}

fn read_member(r: &mut Reader) -> Result<Member, ProtocolError> {
    let member_id = r.compact_string("Member.MemberId")?;
    let member_epoch = r.i32("Member.MemberEpoch")?;
    let instance_id = r.compact_nullable_string("Member.InstanceId")?;
    let rack_id = r.compact_nullable_string("Member.RackId")?;
    let client_id = r.compact_string("Member.ClientId")?;
    let client_host = r.compact_string("Member.ClientHost")?;
    let topology_epoch = r.i32("Member.TopologyEpoch")?;
    let process_id = r.compact_string("Member.ProcessId")?;
    let user_endpoint = read_nullable_endpoint(r)?;
    let client_tags = read_array(r, KEY_VALUE_MIN, "Member.ClientTags", read_key_value)?;
    let task_offsets = read_array(r, TASK_OFFSET_MIN, "Member.TaskOffsets", read_task_offset)?;
    let task_end_offsets = read_array(
        r,
        TASK_OFFSET_MIN,
        "Member.TaskEndOffsets",
        read_task_offset,
    )?;
    let assignment = read_assignment(r)?;
    let target_assignment = read_assignment(r)?;
    let is_classic = read_bool(r, "Member.IsClassic")?;
    skip_tags(r, "Member tagged fields")?;
    Ok(Member {
        member_id,
        member_epoch,
        instance_id,
        rack_id,
        client_id,
        client_host,
        topology_epoch,
        process_id,
        user_endpoint,
        client_tags,
        task_offsets,
        task_end_offsets,
        assignment,
        target_assignment,
        is_classic,
    })
}

fn put_member(out: &mut BytesMut, m: &Member) {
    put_compact_string(out, &m.member_id);
    out.put_i32(m.member_epoch);
    put_compact_nullable_string(out, m.instance_id.as_deref());
    put_compact_nullable_string(out, m.rack_id.as_deref());
    put_compact_string(out, &m.client_id);
    put_compact_string(out, &m.client_host);
    out.put_i32(m.topology_epoch);
    put_compact_string(out, &m.process_id);
    put_nullable_endpoint(out, m.user_endpoint.as_ref());
    put_array(out, &m.client_tags, put_key_value);
    put_array(out, &m.task_offsets, put_task_offset);
    put_array(out, &m.task_end_offsets, put_task_offset);
    put_assignment(out, &m.assignment);
    put_assignment(out, &m.target_assignment);
    put_bool(out, m.is_classic);
    empty_tags(out);
}

fn read_described_group(r: &mut Reader) -> Result<DescribedGroup, ProtocolError> {
    let error_code = r.i16("DescribedGroup.ErrorCode")?;
    let error_message = r.compact_nullable_string("DescribedGroup.ErrorMessage")?;
    let group_id = r.compact_string("DescribedGroup.GroupId")?;
    let group_state = r.compact_string("DescribedGroup.GroupState")?;
    let group_epoch = r.i32("DescribedGroup.GroupEpoch")?;
    let assignment_epoch = r.i32("DescribedGroup.AssignmentEpoch")?;
    let topology = if read_present(r, "DescribedGroup.Topology")? {
        Some(read_describe_topology(r)?)
    } else {
        None
    };
    let members = read_array(r, MEMBER_MIN, "DescribedGroup.Members", read_member)?;
    let authorized_operations = r.i32("DescribedGroup.AuthorizedOperations")?;
    skip_tags(r, "DescribedGroup tagged fields")?;
    Ok(DescribedGroup {
        error_code,
        error_message,
        group_id,
        group_state,
        group_epoch,
        assignment_epoch,
        topology,
        members,
        authorized_operations,
    })
}

fn put_described_group(out: &mut BytesMut, g: &DescribedGroup) {
    out.put_i16(g.error_code);
    put_compact_nullable_string(out, g.error_message.as_deref());
    put_compact_string(out, &g.group_id);
    put_compact_string(out, &g.group_state);
    out.put_i32(g.group_epoch);
    out.put_i32(g.assignment_epoch);
    put_present(out, g.topology.is_some());
    if let Some(t) = &g.topology {
        put_describe_topology(out, t);
    }
    put_array(out, &g.members, put_member);
    out.put_i32(g.authorized_operations);
    empty_tags(out);
}

fn encode_describe_response(resp: &StreamsGroupDescribeResponse, out: &mut BytesMut) {
    out.put_i32(resp.throttle_time_ms);
    put_array(out, &resp.groups, put_described_group);
    empty_tags(out);
}

fn decode_describe_response(
    buf: &mut Bytes,
) -> Result<StreamsGroupDescribeResponse, ProtocolError> {
    let mut r = Reader::new(std::mem::take(buf));
    let throttle_time_ms = r.i32("ThrottleTimeMs")?;
    let groups = read_array(&mut r, DESCRIBED_GROUP_MIN, "Groups", read_described_group)?;
    skip_tags(&mut r, "StreamsGroupDescribeResponse tagged fields")?;
    *buf = r.into_rest();
    Ok(StreamsGroupDescribeResponse {
        throttle_time_ms,
        groups,
    })
}

// ---------------------------------------------------------------------------
// Versions, errors and the ApiRequest implementations.

const HEARTBEAT_NAME: &str = "StreamsGroupHeartbeat";
const DESCRIBE_NAME: &str = "StreamsGroupDescribe";

fn check_version(
    api_key: i16,
    api_name: &'static str,
    versions: Versions,
    version: i16,
) -> Result<(), ProtocolError> {
    if versions.contains(version) {
        Ok(())
    } else {
        Err(ProtocolError::UnsupportedVersion {
            api_key,
            api_name,
            version,
        })
    }
}

fn with_context<T>(
    r: Result<T, ProtocolError>,
    api_key: i16,
    api_name: &'static str,
    version: i16,
) -> Result<T, ProtocolError> {
    r.map_err(|e| ProtocolError::Decode {
        api_key,
        api_name,
        version,
        message: e.to_string(),
    })
}

/// `ApiRequest` for one of the two APIs: version checks around its
/// codec functions, and the API named in every decoding error.
macro_rules! streams_api {
    ($req:ty, $resp:ty, $key:expr, $name:expr,
     $enc_req:ident, $dec_req:ident, $enc_resp:ident, $dec_resp:ident) => {
        impl ApiRequest for $req {
            type Response = $resp;
            const API_KEY: i16 = $key;

            fn versions() -> Versions {
                Self::VERSIONS
            }

            fn encode_request(
                &self,
                out: &mut BytesMut,
                version: i16,
            ) -> Result<(), ProtocolError> {
                check_version(Self::API_KEY, $name, Self::VERSIONS, version)?;
                $enc_req(self, out);
                Ok(())
            }

            fn decode_request(buf: &mut Bytes, version: i16) -> Result<Self, ProtocolError> {
                check_version(Self::API_KEY, $name, Self::VERSIONS, version)?;
                with_context($dec_req(buf), Self::API_KEY, $name, version)
            }

            fn encode_response(
                resp: &Self::Response,
                out: &mut BytesMut,
                version: i16,
            ) -> Result<(), ProtocolError> {
                check_version(Self::API_KEY, $name, Self::VERSIONS, version)?;
                $enc_resp(resp, out);
                Ok(())
            }

            fn decode_response(
                buf: &mut Bytes,
                version: i16,
            ) -> Result<Self::Response, ProtocolError> {
                check_version(Self::API_KEY, $name, Self::VERSIONS, version)?;
                with_context($dec_resp(buf), Self::API_KEY, $name, version)
            }
        }
    };
}

streams_api!(
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
    STREAMS_GROUP_HEARTBEAT_API_KEY,
    HEARTBEAT_NAME,
    encode_heartbeat_request,
    decode_heartbeat_request,
    encode_heartbeat_response,
    decode_heartbeat_response
);
streams_api!(
    StreamsGroupDescribeRequest,
    StreamsGroupDescribeResponse,
    STREAMS_GROUP_DESCRIBE_API_KEY,
    DESCRIBE_NAME,
    encode_describe_request,
    decode_describe_request,
    encode_describe_response,
    decode_describe_response
);

#[cfg(test)]
mod tests {
    //! Golden bytes written by hand from the layout in the module docs.
    use super::*;
    use crate::api::{
        api_name, codec_versions, decode_request_header, encode_request_frame,
        encode_response_frame, request_header_version, response_header_version,
    };

    /// A tagged-field section holding one unknown tag (7) of 3 bytes.
    const UNKNOWN_TAG: &[u8] = &[0x01, 0x07, 0x03, 0xaa, 0xbb, 0xcc];
    /// Compact array length 2^32 - 2, in 5 bytes.
    const HUGE: [u8; 5] = [0xff, 0xff, 0xff, 0xff, 0x0f];

    fn encode_req<R: ApiRequest>(r: &R) -> Vec<u8> {
        let mut out = BytesMut::new();
        r.encode_request(&mut out, 0).unwrap();
        out.to_vec()
    }

    fn encode_resp<R: ApiRequest>(resp: &R::Response) -> Vec<u8> {
        let mut out = BytesMut::new();
        R::encode_response(resp, &mut out, 0).unwrap();
        out.to_vec()
    }

    fn decode_req<R: ApiRequest>(b: &[u8]) -> Result<R, ProtocolError> {
        let mut buf = Bytes::copy_from_slice(b);
        let r = R::decode_request(&mut buf, 0)?;
        assert!(buf.is_empty(), "{} bytes left", buf.len());
        Ok(r)
    }

    fn decode_resp<R: ApiRequest>(b: &[u8]) -> Result<R::Response, ProtocolError> {
        let mut buf = Bytes::copy_from_slice(b);
        let r = R::decode_response(&mut buf, 0)?;
        assert!(buf.is_empty(), "{} bytes left", buf.len());
        Ok(r)
    }

    type Heartbeat = StreamsGroupHeartbeatRequest;
    type Describe = StreamsGroupDescribeRequest;

    fn kv(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: value.into(),
        }
    }

    fn task_ids(id: &str, partitions: &[i32]) -> TaskIds {
        TaskIds {
            subtopology_id: id.into(),
            partitions: partitions.to_vec(),
        }
    }

    fn endpoint() -> Endpoint {
        Endpoint {
            host: "h".into(),
            port: 8080,
        }
    }

    fn golden_heartbeat_request() -> StreamsGroupHeartbeatRequest {
        StreamsGroupHeartbeatRequest {
            group_id: "g".into(),
            member_id: "m".into(),
            member_epoch: 0,
            endpoint_information_epoch: 1,
            instance_id: Some("i".into()),
            rack_id: None,
            rebalance_timeout_ms: 30_000,
            topology: Some(Topology {
                epoch: 2,
                subtopologies: vec![Subtopology {
                    subtopology_id: "0".into(),
                    source_topics: vec!["a".into()],
                    source_topic_regex: vec!["b.*".into()],
                    state_changelog_topics: vec![TopicInfo {
                        name: "c".into(),
                        partitions: 0,
                        replication_factor: 3,
                        topic_configs: vec![kv("k", "v")],
                    }],
                    repartition_sink_topics: vec!["r".into()],
                    repartition_source_topics: vec![TopicInfo {
                        name: "r".into(),
                        partitions: 4,
                        replication_factor: -1,
                        topic_configs: vec![],
                    }],
                    copartition_groups: vec![CopartitionGroup {
                        source_topics: vec![0],
                        source_topic_regex: vec![],
                        repartition_source_topics: vec![0],
                    }],
                }],
            }),
            active_tasks: Some(vec![task_ids("0", &[0, 1])]),
            standby_tasks: Some(vec![]),
            warmup_tasks: None,
            process_id: Some("p".into()),
            user_endpoint: Some(endpoint()),
            client_tags: Some(vec![kv("z", "1")]),
            task_offsets: Some(vec![TaskOffset {
                subtopology_id: "0".into(),
                partition: 1,
                offset: 5,
            }]),
            task_end_offsets: None,
            shutdown_application: true,
        }
    }

    /// The request above, byte by byte. `t` is spliced in where each
    /// tagged-field section goes.
    fn golden_heartbeat_request_bytes(t: &[u8]) -> Vec<u8> {
        let mut b = vec![];
        b.extend([0x02, b'g']); // GroupId
        b.extend([0x02, b'm']); // MemberId
        b.extend([0, 0, 0, 0]); // MemberEpoch 0
        b.extend([0, 0, 0, 1]); // EndpointInformationEpoch 1
        b.extend([0x02, b'i']); // InstanceId
        b.push(0x00); // RackId: null
        b.extend([0, 0, 0x75, 0x30]); // RebalanceTimeoutMs 30000
        b.push(0x01); // Topology: present
        b.extend([0, 0, 0, 2]); //   Epoch 2
        b.push(0x02); //   Subtopologies: 1
        b.extend([0x02, b'0']); //     SubtopologyId "0"
        b.extend([0x02, 0x02, b'a']); //     SourceTopics ["a"]
        b.extend([0x02, 0x04, b'b', b'.', b'*']); //     SourceTopicRegex ["b.*"]
        b.push(0x02); //     StateChangelogTopics: 1
        b.extend([0x02, b'c']); //       Name "c"
        b.extend([0, 0, 0, 0]); //       Partitions 0
        b.extend([0, 3]); //       ReplicationFactor 3
        b.push(0x02); //       TopicConfigs: 1
        b.extend([0x02, b'k', 0x02, b'v']); //         k=v
        b.extend(t); //         KeyValue tags
        b.extend(t); //       TopicInfo tags
        b.extend([0x02, 0x02, b'r']); //     RepartitionSinkTopics ["r"]
        b.push(0x02); //     RepartitionSourceTopics: 1
        b.extend([0x02, b'r']); //       Name "r"
        b.extend([0, 0, 0, 4]); //       Partitions 4
        b.extend([0xff, 0xff]); //       ReplicationFactor -1
        b.push(0x01); //       TopicConfigs: empty
        b.extend(t); //       TopicInfo tags
        b.push(0x02); //     CopartitionGroups: 1
        b.extend([0x02, 0, 0]); //       SourceTopics [0]
        b.push(0x01); //       SourceTopicRegex []
        b.extend([0x02, 0, 0]); //       RepartitionSourceTopics [0]
        b.extend(t); //       CopartitionGroup tags
        b.extend(t); //     Subtopology tags
        b.extend(t); //   Topology tags
        b.push(0x02); // ActiveTasks: 1
        b.extend([0x02, b'0']); //   SubtopologyId "0"
        b.extend([0x03, 0, 0, 0, 0, 0, 0, 0, 1]); //   Partitions [0, 1]
        b.extend(t); //   TaskIds tags
        b.push(0x01); // StandbyTasks: empty
        b.push(0x00); // WarmupTasks: null
        b.extend([0x02, b'p']); // ProcessId
        b.push(0x01); // UserEndpoint: present
        b.extend([0x02, b'h', 0x1f, 0x90]); //   h:8080
        b.extend(t); //   Endpoint tags
        b.push(0x02); // ClientTags: 1
        b.extend([0x02, b'z', 0x02, b'1']); //   z=1
        b.extend(t); //   KeyValue tags
        b.push(0x02); // TaskOffsets: 1
        b.extend([0x02, b'0']); //   SubtopologyId "0"
        b.extend([0, 0, 0, 1]); //   Partition 1
        b.extend([0, 0, 0, 0, 0, 0, 0, 5]); //   Offset 5
        b.extend(t); //   TaskOffset tags
        b.push(0x00); // TaskEndOffsets: null
        b.push(0x01); // ShutdownApplication: true
        b.extend(t); // request tags
        b
    }

    /// A leave heartbeat: every nullable field null, every default kept.
    const NULLS_HEARTBEAT_REQUEST: &[u8] = &[
        0x01, // GroupId ""
        0x01, // MemberId ""
        0, 0, 0, 0, // MemberEpoch
        0, 0, 0, 0,    // EndpointInformationEpoch
        0x00, // InstanceId: null
        0x00, // RackId: null
        0xff, 0xff, 0xff, 0xff, // RebalanceTimeoutMs -1
        0xff, // Topology: null
        0x00, // ActiveTasks: null
        0x00, // StandbyTasks: null
        0x00, // WarmupTasks: null
        0x00, // ProcessId: null
        0xff, // UserEndpoint: null
        0x00, // ClientTags: null
        0x00, // TaskOffsets: null
        0x00, // TaskEndOffsets: null
        0x00, // ShutdownApplication: false
        0x00, // tags
    ];

    fn golden_heartbeat_response() -> StreamsGroupHeartbeatResponse {
        StreamsGroupHeartbeatResponse {
            throttle_time_ms: 0,
            error_code: 0,
            error_message: None,
            member_id: "m".into(),
            member_epoch: 3,
            heartbeat_interval_ms: 5_000,
            acceptable_recovery_lag: 10_000,
            task_offset_interval_ms: 60_000,
            status: Some(vec![Status {
                status_code: STATUS_MISSING_SOURCE_TOPICS,
                status_detail: "x".into(),
            }]),
            active_tasks: Some(vec![task_ids("0", &[0])]),
            standby_tasks: Some(vec![]),
            warmup_tasks: None,
            endpoint_information_epoch: 7,
            partitions_by_user_endpoint: Some(vec![EndpointToPartitions {
                user_endpoint: endpoint(),
                active_partitions: vec![TopicPartition {
                    topic: "a".into(),
                    partitions: vec![0, 1],
                }],
                standby_partitions: vec![],
            }]),
        }
    }

    fn golden_heartbeat_response_bytes(t: &[u8]) -> Vec<u8> {
        let mut b = vec![];
        b.extend([0, 0, 0, 0]); // ThrottleTimeMs
        b.extend([0, 0]); // ErrorCode
        b.push(0x00); // ErrorMessage: null
        b.extend([0x02, b'm']); // MemberId
        b.extend([0, 0, 0, 3]); // MemberEpoch 3
        b.extend([0, 0, 0x13, 0x88]); // HeartbeatIntervalMs 5000
        b.extend([0, 0, 0x27, 0x10]); // AcceptableRecoveryLag 10000
        b.extend([0, 0, 0xea, 0x60]); // TaskOffsetIntervalMs 60000
        b.push(0x02); // Status: 1
        b.extend([0x01, 0x02, b'x']); //   StatusCode 1, StatusDetail "x"
        b.extend(t); //   Status tags
        b.push(0x02); // ActiveTasks: 1
        b.extend([0x02, b'0', 0x02, 0, 0, 0, 0]); //   "0" [0]
        b.extend(t); //   TaskIds tags
        b.push(0x01); // StandbyTasks: empty
        b.push(0x00); // WarmupTasks: null
        b.extend([0, 0, 0, 7]); // EndpointInformationEpoch 7
        b.push(0x02); // PartitionsByUserEndpoint: 1
        b.extend([0x02, b'h', 0x1f, 0x90]); //   UserEndpoint h:8080 (not nullable: no marker)
        b.extend(t); //   Endpoint tags
        b.push(0x02); //   ActivePartitions: 1
        b.extend([0x02, b'a', 0x03, 0, 0, 0, 0, 0, 0, 0, 1]); //     "a" [0, 1]
        b.extend(t); //     TopicPartition tags
        b.push(0x01); //   StandbyPartitions: empty
        b.extend(t); //   EndpointToPartitions tags
        b.extend(t); // response tags
        b
    }

    fn golden_describe_request() -> StreamsGroupDescribeRequest {
        StreamsGroupDescribeRequest {
            group_ids: vec!["g1".into(), "g2".into()],
            include_authorized_operations: true,
        }
    }

    fn golden_describe_request_bytes(t: &[u8]) -> Vec<u8> {
        let mut b = vec![];
        b.push(0x03); // GroupIds: 2
        b.extend([0x03, b'g', b'1']);
        b.extend([0x03, b'g', b'2']);
        b.push(0x01); // IncludeAuthorizedOperations: true
        b.extend(t); // request tags
        b
    }

    fn golden_describe_response() -> StreamsGroupDescribeResponse {
        StreamsGroupDescribeResponse {
            throttle_time_ms: 0,
            groups: vec![
                DescribedGroup {
                    error_code: 0,
                    error_message: None,
                    group_id: "g".into(),
                    group_state: "Stable".into(),
                    group_epoch: 4,
                    assignment_epoch: 4,
                    topology: Some(DescribeTopology {
                        epoch: 2,
                        subtopologies: Some(vec![DescribeSubtopology {
                            subtopology_id: "0".into(),
                            source_topics: vec!["a".into()],
                            repartition_sink_topics: vec!["r".into()],
                            state_changelog_topics: vec![TopicInfo {
                                name: "c".into(),
                                partitions: 0,
                                replication_factor: 3,
                                topic_configs: vec![],
                            }],
                            repartition_source_topics: vec![TopicInfo {
                                name: "r".into(),
                                partitions: 4,
                                replication_factor: -1,
                                topic_configs: vec![kv("k", "v")],
                            }],
                        }]),
                    }),
                    members: vec![Member {
                        member_id: "m".into(),
                        member_epoch: 4,
                        instance_id: None,
                        rack_id: Some("r1".into()),
                        client_id: "c".into(),
                        client_host: "/h".into(),
                        topology_epoch: 2,
                        process_id: "p".into(),
                        user_endpoint: Some(endpoint()),
                        client_tags: vec![kv("z", "1")],
                        task_offsets: vec![TaskOffset {
                            subtopology_id: "0".into(),
                            partition: 0,
                            offset: 5,
                        }],
                        task_end_offsets: vec![],
                        assignment: Assignment {
                            active_tasks: vec![task_ids("0", &[0])],
                            ..Default::default()
                        },
                        target_assignment: Assignment {
                            active_tasks: vec![task_ids("0", &[0, 1])],
                            ..Default::default()
                        },
                        is_classic: false,
                    }],
                    authorized_operations: i32::MIN,
                },
                DescribedGroup {
                    error_code: 69, // GROUP_ID_NOT_FOUND
                    error_message: Some("no".into()),
                    group_id: "x".into(),
                    group_state: String::new(),
                    group_epoch: -1,
                    assignment_epoch: -1,
                    topology: None,
                    members: vec![],
                    authorized_operations: i32::MIN,
                },
            ],
        }
    }

    fn golden_describe_response_bytes(t: &[u8]) -> Vec<u8> {
        let mut b = vec![];
        b.extend([0, 0, 0, 0]); // ThrottleTimeMs
        b.push(0x03); // Groups: 2
        b.extend([0, 0]); //   ErrorCode
        b.push(0x00); //   ErrorMessage: null
        b.extend([0x02, b'g']); //   GroupId
        b.extend([0x07, b'S', b't', b'a', b'b', b'l', b'e']); //   GroupState
        b.extend([0, 0, 0, 4]); //   GroupEpoch 4
        b.extend([0, 0, 0, 4]); //   AssignmentEpoch 4
        b.push(0x01); //   Topology: present
        b.extend([0, 0, 0, 2]); //     Epoch 2
        b.push(0x02); //     Subtopologies: 1
        b.extend([0x02, b'0']); //       SubtopologyId
        b.extend([0x02, 0x02, b'a']); //       SourceTopics ["a"]
        b.extend([0x02, 0x02, b'r']); //       RepartitionSinkTopics ["r"]
        b.push(0x02); //       StateChangelogTopics: 1
        b.extend([0x02, b'c', 0, 0, 0, 0, 0, 3]); //         "c", 0 partitions, RF 3
        b.push(0x01); //         TopicConfigs: empty
        b.extend(t); //         TopicInfo tags
        b.push(0x02); //       RepartitionSourceTopics: 1
        b.extend([0x02, b'r', 0, 0, 0, 4, 0xff, 0xff]); //         "r", 4 partitions, RF -1
        b.push(0x02); //         TopicConfigs: 1
        b.extend([0x02, b'k', 0x02, b'v']); //           k=v
        b.extend(t); //           KeyValue tags
        b.extend(t); //         TopicInfo tags
        b.extend(t); //       Subtopology tags
        b.extend(t); //     Topology tags
        b.push(0x02); //   Members: 1
        b.extend([0x02, b'm']); //     MemberId
        b.extend([0, 0, 0, 4]); //     MemberEpoch 4
        b.push(0x00); //     InstanceId: null
        b.extend([0x03, b'r', b'1']); //     RackId "r1"
        b.extend([0x02, b'c']); //     ClientId
        b.extend([0x03, b'/', b'h']); //     ClientHost
        b.extend([0, 0, 0, 2]); //     TopologyEpoch 2
        b.extend([0x02, b'p']); //     ProcessId
        b.push(0x01); //     UserEndpoint: present
        b.extend([0x02, b'h', 0x1f, 0x90]); //       h:8080
        b.extend(t); //       Endpoint tags
        b.push(0x02); //     ClientTags: 1
        b.extend([0x02, b'z', 0x02, b'1']); //       z=1
        b.extend(t); //       KeyValue tags
        b.push(0x02); //     TaskOffsets: 1
        b.extend([0x02, b'0', 0, 0, 0, 0]); //       "0", partition 0
        b.extend([0, 0, 0, 0, 0, 0, 0, 5]); //       offset 5
        b.extend(t); //       TaskOffset tags
        b.push(0x01); //     TaskEndOffsets: empty
        b.push(0x02); //     Assignment.ActiveTasks: 1
        b.extend([0x02, b'0', 0x02, 0, 0, 0, 0]); //       "0" [0]
        b.extend(t); //       TaskIds tags
        b.extend([0x01, 0x01]); //     StandbyTasks, WarmupTasks: empty
        b.extend(t); //     Assignment tags
        b.push(0x02); //     TargetAssignment.ActiveTasks: 1
        b.extend([0x02, b'0', 0x03, 0, 0, 0, 0, 0, 0, 0, 1]); //       "0" [0, 1]
        b.extend(t); //       TaskIds tags
        b.extend([0x01, 0x01]); //     StandbyTasks, WarmupTasks: empty
        b.extend(t); //     Assignment tags
        b.push(0x00); //     IsClassic: false
        b.extend(t); //     Member tags
        b.extend([0x80, 0, 0, 0]); //   AuthorizedOperations i32::MIN
        b.extend(t); //   DescribedGroup tags
        b.extend([0, 69]); //   ErrorCode GROUP_ID_NOT_FOUND
        b.extend([0x03, b'n', b'o']); //   ErrorMessage "no"
        b.extend([0x02, b'x']); //   GroupId
        b.push(0x01); //   GroupState ""
        b.extend([0xff, 0xff, 0xff, 0xff]); //   GroupEpoch -1
        b.extend([0xff, 0xff, 0xff, 0xff]); //   AssignmentEpoch -1
        b.push(0xff); //   Topology: null
        b.push(0x01); //   Members: empty
        b.extend([0x80, 0, 0, 0]); //   AuthorizedOperations
        b.extend(t); //   DescribedGroup tags
        b.extend(t); // response tags
        b
    }

    /// Decodes `b` as each of the four messages, by index 0..4.
    fn decode_any(which: usize, b: &[u8]) -> Result<(), ProtocolError> {
        let mut buf = Bytes::copy_from_slice(b);
        match which {
            0 => Heartbeat::decode_request(&mut buf, 0).map(drop),
            1 => Heartbeat::decode_response(&mut buf, 0).map(drop),
            2 => Describe::decode_request(&mut buf, 0).map(drop),
            _ => Describe::decode_response(&mut buf, 0).map(drop),
        }
    }

    fn all_golden_bytes(t: &[u8]) -> [Vec<u8>; 4] {
        [
            golden_heartbeat_request_bytes(t),
            golden_heartbeat_response_bytes(t),
            golden_describe_request_bytes(t),
            golden_describe_response_bytes(t),
        ]
    }

    #[test]
    fn heartbeat_request_golden_bytes() {
        let bytes = golden_heartbeat_request_bytes(&[0x00]);
        assert_eq!(encode_req(&golden_heartbeat_request()), bytes);
        assert_eq!(
            decode_req::<Heartbeat>(&bytes).unwrap(),
            golden_heartbeat_request()
        );
    }

    #[test]
    fn heartbeat_request_with_nulls_golden_bytes() {
        let req = StreamsGroupHeartbeatRequest::default();
        assert_eq!(req.rebalance_timeout_ms, -1);
        assert_eq!(encode_req(&req), NULLS_HEARTBEAT_REQUEST);
        assert_eq!(
            decode_req::<Heartbeat>(NULLS_HEARTBEAT_REQUEST).unwrap(),
            req
        );
    }

    #[test]
    fn heartbeat_request_empty_arrays_are_not_null() {
        let req = StreamsGroupHeartbeatRequest {
            topology: Some(Topology::default()),
            active_tasks: Some(vec![]),
            standby_tasks: Some(vec![]),
            warmup_tasks: Some(vec![]),
            client_tags: Some(vec![]),
            task_offsets: Some(vec![]),
            task_end_offsets: Some(vec![]),
            ..Default::default()
        };
        let mut bytes = NULLS_HEARTBEAT_REQUEST.to_vec();
        // Topology: present, epoch 0, no subtopologies, no tags.
        bytes.splice(16..17, [0x01, 0, 0, 0, 0, 0x01, 0x00]);
        // The six nullable arrays: empty instead of null.
        for at in [23, 24, 25, 28, 29, 30] {
            assert_eq!(bytes[at], 0x00, "byte {at}");
            bytes[at] = 0x01;
        }
        assert_eq!(encode_req(&req), bytes);
        assert_eq!(decode_req::<Heartbeat>(&bytes).unwrap(), req);
    }

    #[test]
    fn heartbeat_response_golden_bytes() {
        let bytes = golden_heartbeat_response_bytes(&[0x00]);
        assert_eq!(
            encode_resp::<Heartbeat>(&golden_heartbeat_response()),
            bytes
        );
        assert_eq!(
            decode_resp::<Heartbeat>(&bytes).unwrap(),
            golden_heartbeat_response()
        );
    }

    #[test]
    fn heartbeat_response_error_golden_bytes() {
        let resp = StreamsGroupHeartbeatResponse {
            throttle_time_ms: 100,
            error_code: 25, // UNKNOWN_MEMBER_ID
            error_message: Some("e".into()),
            ..Default::default()
        };
        let bytes = [
            0, 0, 0, 100, // ThrottleTimeMs
            0, 25, // ErrorCode
            0x02, b'e', // ErrorMessage
            0x01, // MemberId ""
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // four INT32 zeros
            0x00, 0x00, 0x00, 0x00, // four null arrays (Status, the three task lists)
            0, 0, 0, 0,    // EndpointInformationEpoch
            0x00, // PartitionsByUserEndpoint: null
            0x00, // tags
        ];
        assert_eq!(encode_resp::<Heartbeat>(&resp), bytes);
        assert_eq!(decode_resp::<Heartbeat>(&bytes).unwrap(), resp);
    }

    #[test]
    fn describe_request_golden_bytes() {
        let bytes = golden_describe_request_bytes(&[0x00]);
        assert_eq!(encode_req(&golden_describe_request()), bytes);
        assert_eq!(
            decode_req::<Describe>(&bytes).unwrap(),
            golden_describe_request()
        );
        // No groups, no operations.
        let empty = [0x01, 0x00, 0x00];
        let req = StreamsGroupDescribeRequest::default();
        assert_eq!(encode_req(&req), empty);
        assert_eq!(decode_req::<Describe>(&empty).unwrap(), req);
    }

    #[test]
    fn describe_response_golden_bytes() {
        let bytes = golden_describe_response_bytes(&[0x00]);
        assert_eq!(encode_resp::<Describe>(&golden_describe_response()), bytes);
        assert_eq!(
            decode_resp::<Describe>(&bytes).unwrap(),
            golden_describe_response()
        );
    }

    #[test]
    fn describe_topology_with_null_subtopologies_golden_bytes() {
        let resp = StreamsGroupDescribeResponse {
            throttle_time_ms: 0,
            groups: vec![DescribedGroup {
                group_id: "g".into(),
                group_state: "e".into(),
                topology: Some(DescribeTopology {
                    epoch: 1,
                    subtopologies: None,
                }),
                authorized_operations: 0x0f00,
                ..Default::default()
            }],
        };
        let bytes = [
            0, 0, 0, 0,    // ThrottleTimeMs
            0x02, // Groups: 1
            0, 0, 0x00, 0x02, b'g', 0x02,
            b'e', // ErrorCode, ErrorMessage, GroupId, GroupState
            0, 0, 0, 0, 0, 0, 0, 0, // GroupEpoch, AssignmentEpoch
            0x01, 0, 0, 0, 1, 0x00, 0x00, // Topology: epoch 1, Subtopologies null, tags
            0x01, // Members: empty
            0, 0, 0x0f, 0x00, // AuthorizedOperations
            0x00, // group tags
            0x00, // response tags
        ];
        assert_eq!(encode_resp::<Describe>(&resp), bytes);
        assert_eq!(decode_resp::<Describe>(&bytes).unwrap(), resp);
        // Subtopologies empty rather than null: one byte differs.
        let mut empty = resp.clone();
        empty.groups[0].topology.as_mut().unwrap().subtopologies = Some(vec![]);
        let mut b = bytes.to_vec();
        b[25] = 0x01;
        assert_eq!(encode_resp::<Describe>(&empty), b);
        assert_eq!(decode_resp::<Describe>(&b).unwrap(), empty);
    }

    #[test]
    fn round_trips() {
        let hb = golden_heartbeat_request();
        assert_eq!(decode_req::<Heartbeat>(&encode_req(&hb)).unwrap(), hb);
        let hb_resp = golden_heartbeat_response();
        assert_eq!(
            decode_resp::<Heartbeat>(&encode_resp::<Heartbeat>(&hb_resp)).unwrap(),
            hb_resp
        );
        let d = golden_describe_request();
        assert_eq!(decode_req::<Describe>(&encode_req(&d)).unwrap(), d);
        let d_resp = golden_describe_response();
        assert_eq!(
            decode_resp::<Describe>(&encode_resp::<Describe>(&d_resp)).unwrap(),
            d_resp
        );
        // Every nullable array of the response, empty then null.
        let mut r = StreamsGroupHeartbeatResponse {
            status: Some(vec![]),
            active_tasks: Some(vec![]),
            standby_tasks: Some(vec![]),
            warmup_tasks: Some(vec![]),
            partitions_by_user_endpoint: Some(vec![]),
            ..Default::default()
        };
        assert_eq!(
            decode_resp::<Heartbeat>(&encode_resp::<Heartbeat>(&r)).unwrap(),
            r
        );
        r.status = None;
        r.standby_tasks = None;
        assert_eq!(
            decode_resp::<Heartbeat>(&encode_resp::<Heartbeat>(&r)).unwrap(),
            r
        );
        // Extreme values: port 65535, non-ASCII strings, long strings.
        let long = "x".repeat(300);
        let req = StreamsGroupHeartbeatRequest {
            group_id: long.clone(),
            member_id: "ü".into(),
            user_endpoint: Some(Endpoint {
                host: long,
                port: u16::MAX,
            }),
            ..Default::default()
        };
        assert_eq!(decode_req::<Heartbeat>(&encode_req(&req)).unwrap(), req);
    }

    #[test]
    fn unknown_tagged_fields_are_skipped() {
        assert_eq!(
            decode_req::<Heartbeat>(&golden_heartbeat_request_bytes(UNKNOWN_TAG)).unwrap(),
            golden_heartbeat_request()
        );
        assert_eq!(
            decode_resp::<Heartbeat>(&golden_heartbeat_response_bytes(UNKNOWN_TAG)).unwrap(),
            golden_heartbeat_response()
        );
        assert_eq!(
            decode_req::<Describe>(&golden_describe_request_bytes(UNKNOWN_TAG)).unwrap(),
            golden_describe_request()
        );
        assert_eq!(
            decode_resp::<Describe>(&golden_describe_response_bytes(UNKNOWN_TAG)).unwrap(),
            golden_describe_response()
        );
        // Two unknown tags in increasing order, one of them empty.
        let two = [0x02, 0x01, 0x00, 0x09, 0x02, 0x11, 0x22];
        assert_eq!(
            decode_resp::<Describe>(&golden_describe_response_bytes(&two)).unwrap(),
            golden_describe_response()
        );
    }

    #[test]
    fn tagged_fields_out_of_order_are_refused() {
        for (which, golden) in all_golden_bytes(&[0x00]).into_iter().enumerate() {
            for tags in [
                [0x02, 0x05, 0x00, 0x03, 0x00], // decreasing
                [0x02, 0x05, 0x00, 0x05, 0x00], // repeated
            ] {
                let mut b = golden.clone();
                // The last byte is the top-level tagged-field section.
                b.pop();
                b.extend(tags);
                assert!(decode_any(which, &b).is_err(), "message {which}: {tags:?}");
            }
        }
    }

    #[test]
    fn every_truncation_is_an_error() {
        for t in [&[0x00][..], UNKNOWN_TAG] {
            for (which, golden) in all_golden_bytes(t).into_iter().enumerate() {
                for n in 0..golden.len() {
                    assert!(
                        decode_any(which, &golden[..n]).is_err(),
                        "message {which} cut at {n}"
                    );
                }
            }
        }
        for n in 0..NULLS_HEARTBEAT_REQUEST.len() {
            assert!(decode_any(0, &NULLS_HEARTBEAT_REQUEST[..n]).is_err());
        }
    }

    /// Refused by the count check, before anything is allocated, with the
    /// API named.
    fn refused_by_count<T: std::fmt::Debug>(r: Result<T, ProtocolError>, api_key: i16, what: &str) {
        match r {
            Err(ProtocolError::Decode {
                api_key: k,
                version: 0,
                message,
                ..
            }) if k == api_key => {
                assert!(message.contains("cannot fit"), "{message}");
                assert!(message.contains(what), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hostile_compact_array_counts_are_refused() {
        let heartbeat_prefix = [
            0x02, b'g', 0x02, b'm', 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
        ];
        // Topology.Subtopologies: 2^32 - 2 elements.
        let mut b = heartbeat_prefix.to_vec();
        b.extend([0x01, 0, 0, 0, 0]);
        b.extend(HUGE);
        b.push(0x00);
        refused_by_count(decode_req::<Heartbeat>(&b), 88, "Topology.Subtopologies");
        // ActiveTasks (nullable) with a huge count.
        let mut b = heartbeat_prefix.to_vec();
        b.push(0xff);
        b.extend(HUGE);
        b.push(0x00);
        refused_by_count(decode_req::<Heartbeat>(&b), 88, "ActiveTasks");
        // TaskIds.Partitions: 999 INT32s announced, 2 present.
        let mut b = heartbeat_prefix.to_vec();
        b.extend([0xff, 0x02, 0x02, b'0', 0xe8, 0x07, 0, 0, 0, 0, 0, 0, 0, 1]);
        refused_by_count(decode_req::<Heartbeat>(&b), 88, "TaskIds.Partitions");
        // CopartitionGroup.SourceTopics inside the golden request: 126 INT16s.
        let mut b = golden_heartbeat_request_bytes(&[0x00]);
        let at = b.windows(4).position(|w| w == [0x02, 0, 0, 0x01]).unwrap();
        b[at] = 0x7f;
        refused_by_count(
            decode_req::<Heartbeat>(&b),
            88,
            "CopartitionGroup.SourceTopics",
        );
        // Heartbeat response: Status with a huge count.
        let mut b = vec![0, 0, 0, 0, 0, 0, 0x00, 0x01];
        b.extend([0; 16]);
        b.extend(HUGE);
        refused_by_count(decode_resp::<Heartbeat>(&b), 88, "Status");
        // Describe request: GroupIds.
        let mut b = HUGE.to_vec();
        b.extend([0x00, 0x00]);
        refused_by_count(decode_req::<Describe>(&b), 89, "GroupIds");
        // Describe response: 126 groups announced in 25 bytes.
        let mut b = vec![0, 0, 0, 0, 0x7f];
        b.extend([0; 25]);
        refused_by_count(decode_resp::<Describe>(&b), 89, "Groups");
        // Describe response: Members of one group.
        let mut b = vec![0, 0, 0, 0, 0x02, 0, 0, 0x00, 0x02, b'g', 0x01];
        b.extend([0; 8]);
        b.push(0xff); // Topology: null
        b.extend(HUGE);
        refused_by_count(decode_resp::<Describe>(&b), 89, "DescribedGroup.Members");
    }

    /// Overwriting any one byte of the golden messages with a 5-byte
    /// varint of 2^32 - 1 never panics (nor allocates by the count).
    #[test]
    fn hostile_bytes_anywhere_never_panic() {
        for (which, golden) in all_golden_bytes(UNKNOWN_TAG).into_iter().enumerate() {
            for at in 0..golden.len() {
                let mut b = golden.clone();
                b.splice(at..at + 1, HUGE);
                let _ = decode_any(which, &b);
                let mut b = golden.clone();
                b[at] = 0x7f;
                let _ = decode_any(which, &b);
            }
        }
    }

    #[test]
    fn null_non_nullable_arrays_and_bad_markers_are_refused() {
        // GroupIds: null.
        assert!(decode_req::<Describe>(&[0x00, 0x00, 0x00]).is_err());
        // Topology marker 0 and 2: neither present (1) nor null (-1).
        for marker in [0x00, 0x02] {
            let mut b = NULLS_HEARTBEAT_REQUEST.to_vec();
            b[16] = marker;
            assert!(decode_req::<Heartbeat>(&b).is_err(), "marker {marker}");
        }
        // A null where a string is required (MemberId).
        let mut b = NULLS_HEARTBEAT_REQUEST.to_vec();
        b[1] = 0x00;
        assert!(decode_req::<Heartbeat>(&b).is_err());
        // Invalid UTF-8 in GroupId.
        let mut b = NULLS_HEARTBEAT_REQUEST.to_vec();
        b.splice(0..1, [0x02, 0xff]);
        assert!(decode_req::<Heartbeat>(&b).is_err());
    }

    #[test]
    fn only_version_0_is_coded() {
        let mut out = BytesMut::new();
        for v in [-1, 1, 2] {
            assert!(matches!(
                golden_heartbeat_request().encode_request(&mut out, v),
                Err(ProtocolError::UnsupportedVersion { api_key: 88, .. })
            ));
            assert!(matches!(
                Describe::decode_request(&mut Bytes::from_static(&[0x01, 0x00, 0x00]), v),
                Err(ProtocolError::UnsupportedVersion { api_key: 89, .. })
            ));
            assert!(Heartbeat::encode_response(&golden_heartbeat_response(), &mut out, v).is_err());
            assert!(
                Describe::decode_response(&mut Bytes::from_static(&[0, 0, 0, 0, 1, 0]), v).is_err()
            );
        }
        assert!(out.is_empty());
    }

    #[test]
    fn registered_with_the_api_table() {
        assert_eq!(api_name(88), "StreamsGroupHeartbeat");
        assert_eq!(api_name(89), "StreamsGroupDescribe");
        for key in [88, 89] {
            assert_eq!(codec_versions(key), Some(Versions { min: 0, max: 0 }));
            assert_eq!(request_header_version(key, 0), Some(2));
            assert_eq!(response_header_version(key, 0), Some(1));
        }
        assert_eq!(Heartbeat::versions(), Heartbeat::VERSIONS);
        assert_eq!(Describe::versions(), Describe::VERSIONS);

        // A request frame: header v2 (client id, empty tags), then the body.
        let mut out = BytesMut::new();
        encode_request_frame(&golden_describe_request(), 0, 7, Some("c"), &mut out).unwrap();
        let mut frame = out.freeze().slice(4..);
        let h = decode_request_header(&mut frame).unwrap();
        assert_eq!((h.api_key, h.api_version, h.correlation_id), (89, 0, 7));
        assert_eq!(h.client_id.as_deref(), Some("c"));
        assert_eq!(&frame[..], &golden_describe_request_bytes(&[0x00])[..]);

        // A response frame: header v1 (correlation id, empty tags), then the body.
        let mut out = BytesMut::new();
        encode_response_frame::<Heartbeat>(&golden_heartbeat_response(), 0, 9, &mut out).unwrap();
        let body = golden_heartbeat_response_bytes(&[0x00]);
        assert_eq!(&out[..4], &((4 + 1 + body.len()) as i32).to_be_bytes());
        assert_eq!(&out[4..9], &[0, 0, 0, 9, 0x00]);
        assert_eq!(&out[9..], &body[..]);
    }
}
