//! The `sharestream` command: the standalone broker and tools.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use sharestream_broker::{Broker, BrokerConfig, FsyncPolicy, StorageMode};

/// Huge allocations announced by hostile frames must not abort the broker
/// (see `sharestream::alloc`). Transparent huge pages are decided earlier,
/// from the arguments (`thp_off_at_load`), so the guard leaves them alone.
#[global_allocator]
static GLOBAL: sharestream_protocol::alloc::GuardedAlloc =
    sharestream_protocol::alloc::GuardedAlloc::new().with_transparent_huge_pages();

/// sharestream: exactly-once stream processing over Kafka share groups.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start: the size of the broker's arguments does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Run the embedded Kafka-compatible broker as a standalone process.
    Broker(BrokerArgs),
    /// Describe or change finalized feature levels (share.version,
    /// transaction.version) of a running broker.
    Features(FeaturesArgs),
    /// Print the API keys and versions this build can encode and decode.
    Apis,
}

#[derive(Args)]
struct FeaturesArgs {
    /// Broker address.
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap_server: String,
    #[command(subcommand)]
    action: FeaturesAction,
}

#[derive(Subcommand)]
enum FeaturesAction {
    /// Print the finalized and supported feature levels.
    Describe,
    /// Raise a feature, e.g. `upgrade --feature share.version=3`.
    Upgrade {
        /// NAME=LEVEL, repeatable.
        #[arg(long = "feature", required = true)]
        features: Vec<String>,
    },
    /// Lower a feature, e.g. `downgrade --feature share.version=2`.
    Downgrade {
        /// NAME=LEVEL, repeatable.
        #[arg(long = "feature", required = true)]
        features: Vec<String>,
        /// Allow a downgrade that may lose metadata (UNSAFE_DOWNGRADE).
        #[arg(long)]
        unsafe_downgrade: bool,
    },
}

#[derive(Args)]
struct BrokerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9092")]
    listen: SocketAddr,
    /// Data directory (created if missing). Required unless --memory.
    #[arg(long, conflicts_with = "memory")]
    data_dir: Option<PathBuf>,
    /// Keep everything in memory; nothing survives the process.
    #[arg(long)]
    memory: bool,
    /// Let the kernel back the process's memory with transparent huge
    /// pages (2 MiB). Off by default: the allocator's heap is sparse, and
    /// with huge pages the broker's peak resident memory was 2.5 times as
    /// large (46.1 against 17.9 MiB, medians of 7 runs producing and
    /// share-reading 700 000 records) at the same throughput
    /// (docs/BENCHMARKS.md, "Session 16"). Linux only; elsewhere it
    /// changes nothing.
    #[arg(long)]
    transparent_huge_pages: bool,
    /// Host advertised to clients (default: the listen address).
    #[arg(long)]
    advertised_host: Option<String>,
    /// Port advertised to clients (default: the listen port).
    #[arg(long)]
    advertised_port: Option<u16>,
    /// This broker's node id (node.id): the broker and controller id every
    /// answer names. Nothing on disk depends on it.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(i32).range(0..))]
    node_id: i32,
    /// Flush policy: `every-batch`, `never`, or an interval such as `100ms`.
    #[arg(long, default_value = "every-batch", value_parser = parse_fsync)]
    fsync: FsyncPolicy,
    /// Create unknown topics on Metadata requests (auto.create.topics.enable).
    #[arg(long)]
    auto_create_topics: bool,
    /// Partitions of auto-created topics (num.partitions).
    #[arg(long, default_value_t = 1)]
    num_partitions: i32,
    /// In-flight (acquired, not yet acknowledged) records per share partition
    /// (group.share.partition.max.record.locks, Kafka's default 2000, at
    /// most 10000; raises group.share.max.partition.max.record.locks to it
    /// when above that bound's 4000). Under exactly_once records stay
    /// acquired until their transaction commits, so this caps a partition
    /// at about N records per commit interval; raise it for high-rate
    /// exactly-once consumption.
    #[arg(long, value_parser = clap::value_parser!(i32).range(100..=10000))]
    share_max_record_locks: Option<i32>,
    /// Default acquisition lock of share groups, ms
    /// (group.share.record.lock.duration.ms; lowers the minimum to it when
    /// below Kafka's 15 s).
    #[arg(long, value_parser = clap::value_parser!(i32).range(1000..=60000))]
    share_record_lock_duration_ms: Option<i32>,
    /// Default member session timeout of share groups, ms
    /// (group.share.session.timeout.ms; lowers the minimum to it when below
    /// Kafka's 45 s; must exceed the 5 s heartbeat interval).
    #[arg(long, value_parser = clap::value_parser!(i32).range(6000..=60000))]
    share_session_timeout_ms: Option<i32>,
    /// A Kafka broker setting as NAME=VALUE (repeatable; applied after the
    /// flags above, later ones win), as kafka-server-start.sh's --override.
    /// Supported: the consumer-protocol group settings
    /// group.consumer.{,min.,max.}session.timeout.ms and
    /// group.consumer.{,min.,max.}heartbeat.interval.ms (defaults and
    /// bounds of the group configs consumer.session.timeout.ms and
    /// consumer.heartbeat.interval.ms), the share-group settings
    /// group.share.{,min.,max.}record.lock.duration.ms,
    /// group.share.{,min.,max.}session.timeout.ms,
    /// group.share.{,min.,max.}heartbeat.interval.ms,
    /// group.share.{,min.,max.}delivery.count.limit,
    /// group.share.{,min.,max.}partition.max.record.locks,
    /// group.share.max.size and group.share.max.share.sessions, the
    /// dead-letter queue's errors.deadletterqueue.auto.create.topics.enable
    /// and errors.deadletterqueue.topic.name.prefix (KIP-1191), and ours,
    /// group.share.transaction.abort.record.state=available|acquired (where
    /// the records of a KIP-1289 transaction the producer aborted go,
    /// docs/DESIGN.md D25), e.g.
    /// --override group.share.min.record.lock.duration.ms=1000.
    #[arg(long = "override", value_name = "NAME=VALUE")]
    overrides: Vec<String>,
    /// Finalized share.version at first start (3 enables KIP-1289).
    #[arg(long, default_value_t = 3)]
    share_version: i16,
    /// Finalized transaction.version at first start.
    #[arg(long, default_value_t = 2)]
    transaction_version: i16,
    /// Maximum concurrent connections.
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,
    /// Serve Prometheus metrics at http://ADDR/metrics.
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
    /// Listener security protocol: PLAINTEXT, SASL_PLAINTEXT, SSL or SASL_SSL.
    #[arg(long, default_value = "PLAINTEXT")]
    security_protocol: String,
    /// PEM certificate chain of the broker (SSL and SASL_SSL listeners).
    #[arg(long)]
    ssl_cert: Option<PathBuf>,
    /// PEM private key of the broker (SSL and SASL_SSL listeners).
    #[arg(long)]
    ssl_key: Option<PathBuf>,
    /// PEM CA file: require client certificates signed by it (mTLS).
    #[arg(long)]
    ssl_client_ca: Option<PathBuf>,
    /// SASL session lifetime announced to clients, in ms (KIP-368
    /// re-authentication; Kafka's connections.max.reauth.ms).
    #[arg(long)]
    sasl_reauth_ms: Option<u64>,
    /// A SASL user as NAME:PASSWORD (repeatable).
    #[arg(long = "sasl-user")]
    sasl_users: Vec<String>,
    /// Also offer OAUTHBEARER, with unsecured (unsigned) JWS tokens checked
    /// as Kafka's default validator does: any client may claim any
    /// principal. For development clusters only.
    #[arg(long)]
    sasl_oauthbearer_unsecured: bool,
    /// A super user principal, e.g. User:admin (repeatable).
    #[arg(long = "super-user")]
    super_users: Vec<String>,
    /// Authorize every request with ACLs (stored in DATA_DIR/acls.json).
    #[arg(long)]
    acl: bool,
    /// With --acl: a resource that no ACL covers is open to everyone
    /// (Kafka's allow.everyone.if.no.acl.found; for development clusters).
    #[arg(long, requires = "acl")]
    allow_everyone_if_no_acl_found: bool,
    /// How long a consumer group leaving Empty waits for more members before
    /// its first rebalance, ms (group.initial.rebalance.delay.ms).
    #[arg(long, default_value_t = 3000)]
    group_initial_rebalance_delay_ms: i32,
}

/// The share-group settings of the broker flags and `--override`s; a bad
/// one is named in the error.
fn share_groups(
    args: &BrokerArgs,
) -> Result<sharestream_broker::group::ShareGroupBrokerConfig, String> {
    let mut c = sharestream_broker::group::ShareGroupBrokerConfig::default();
    if let Some(n) = args.share_max_record_locks {
        c.partition_max_record_locks = n;
        c.max_partition_max_record_locks = c.max_partition_max_record_locks.max(n);
        c.min_partition_max_record_locks = c.min_partition_max_record_locks.min(n);
    }
    if let Some(ms) = args.share_record_lock_duration_ms {
        c.record_lock_duration_ms = ms;
        c.min_record_lock_duration_ms = c.min_record_lock_duration_ms.min(ms);
    }
    if let Some(ms) = args.share_session_timeout_ms {
        c.session_timeout_ms = ms;
        c.min_session_timeout_ms = c.min_session_timeout_ms.min(ms);
    }
    let mut pairs = Vec::new();
    for o in &args.overrides {
        let (name, value) = o
            .split_once('=')
            .ok_or_else(|| format!("--override takes NAME=VALUE, not {o:?}"))?;
        pairs.push((name.trim(), value));
    }
    c.with_overrides(pairs)
        .map_err(|e| format!("invalid broker setting: {e}"))
}

/// Turns transparent huge pages off for this process before anything
/// allocates (the allocator maps and touches its first area before
/// `main`), unless `--transparent-huge-pages` is among the arguments. The
/// loader calls the functions of `.init_array` with argc, argv and envp;
/// a numbered section runs before the unnumbered ones, where the
/// allocator's own constructor is.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array.00500")]
static THP_OFF_AT_LOAD: extern "C" fn(libc::c_int, *const *const libc::c_char) = thp_off_at_load;

#[cfg(target_os = "linux")]
extern "C" fn thp_off_at_load(argc: libc::c_int, argv: *const *const libc::c_char) {
    let wanted = (0..usize::try_from(argc).unwrap_or(0)).any(|i| {
        // SAFETY: the loader passes argc valid, NUL-terminated strings.
        let arg = unsafe { std::ffi::CStr::from_ptr(*argv.add(i)) };
        arg.to_bytes() == b"--transparent-huge-pages"
    });
    if !wanted {
        // SAFETY: PR_SET_THP_DISABLE takes integer arguments only and sets
        // a flag of this process; it touches no memory of ours.
        THP_OFF_RC.store(
            unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) },
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

/// What the prctl at load returned (0: transparent huge pages are off).
#[cfg(target_os = "linux")]
static THP_OFF_RC: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Logs it if transparent huge pages could not be turned off at load.
fn report_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    if THP_OFF_RC.load(std::sync::atomic::Ordering::Relaxed) != 0 {
        tracing::warn!(
            "could not turn transparent huge pages off (prctl PR_SET_THP_DISABLE failed); \
             the broker runs with the kernel's setting"
        );
    }
}

fn parse_fsync(s: &str) -> Result<FsyncPolicy, String> {
    match s {
        "every-batch" => Ok(FsyncPolicy::EveryBatch),
        "never" => Ok(FsyncPolicy::Never),
        other => {
            let ms = other
                .strip_suffix("ms")
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| {
                    format!(
                        "--fsync takes every-batch, never or an interval like 100ms, not {other:?}"
                    )
                })?;
            Ok(FsyncPolicy::Interval(Duration::from_millis(ms)))
        }
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

async fn run_broker(args: BrokerArgs) -> Result<(), String> {
    let share_groups = share_groups(&args)?;
    let storage = match (args.data_dir, args.memory) {
        (Some(dir), false) => StorageMode::Directory(dir),
        (None, true) => StorageMode::Memory,
        (None, false) => {
            return Err(
                "the broker needs --data-dir DIR (durable) or --memory (nothing survives)"
                    .to_string(),
            );
        }
        (Some(_), true) => unreachable!("clap refuses --data-dir with --memory"),
    };
    let protocol = sharestream_broker::security::ListenerProtocol::from_name(
        &args.security_protocol,
    )
    .ok_or_else(|| {
        format!(
            "--security-protocol takes PLAINTEXT, SASL_PLAINTEXT, SSL or SASL_SSL, not {:?}",
            args.security_protocol
        )
    })?;
    let tls = match (args.ssl_cert, args.ssl_key) {
        (Some(cert), Some(key)) => {
            let mut t = sharestream_broker::security::BrokerTls::new(cert, key);
            if let Some(ca) = args.ssl_client_ca {
                t = t.with_client_ca(ca);
            }
            Some(t)
        }
        (None, None) if !protocol.is_tls() => None,
        _ => {
            return Err(
                "--security-protocol SSL/SASL_SSL needs both --ssl-cert and --ssl-key".to_string(),
            );
        }
    };
    let mut users = std::collections::BTreeMap::new();
    for u in &args.sasl_users {
        let (name, pw) = u
            .split_once(':')
            .ok_or_else(|| format!("--sasl-user takes NAME:PASSWORD, not {u:?}"))?;
        users.insert(name.to_string(), pw.to_string());
    }
    if args.sasl_oauthbearer_unsecured {
        if !protocol.is_sasl() {
            return Err(
                "--sasl-oauthbearer-unsecured needs a SASL listener: add --security-protocol \
                 SASL_PLAINTEXT or SASL_SSL"
                    .to_string(),
            );
        }
        tracing::warn!(
            "OAUTHBEARER is offered with unsecured tokens (--sasl-oauthbearer-unsecured): \
             any client can authenticate as any principal; use it on development clusters only"
        );
    }
    let security = sharestream_broker::security::SecurityConfig {
        protocol,
        oauthbearer_unsecured: args.sasl_oauthbearer_unsecured,
        users,
        super_users: args.super_users.clone(),
        acl_enabled: args.acl,
        allow_everyone_if_no_acl_found: args.allow_everyone_if_no_acl_found,
        reauth_ms: args.sasl_reauth_ms.filter(|ms| *ms > 0),
        tls,
        ..Default::default()
    };
    let config = BrokerConfig {
        security,
        listen: args.listen,
        advertised_host: args.advertised_host,
        advertised_port: args.advertised_port,
        node_id: args.node_id,
        storage,
        fsync: args.fsync,
        auto_create_topics: args.auto_create_topics,
        default_partitions: args.num_partitions,
        share_version: args.share_version,
        transaction_version: args.transaction_version,
        max_connections: args.max_connections,
        metrics_listen: args.metrics_listen,
        share_groups,
        consumer_groups: sharestream_broker::consumer_group::ClassicGroupConfig {
            initial_rebalance_delay_ms: args.group_initial_rebalance_delay_ms.max(0),
            ..Default::default()
        },
        ..BrokerConfig::default()
    };
    let handle = Broker::start(config)
        .await
        .map_err(|e| format!("cannot start the broker on {}: {e}", args.listen))?;
    println!(
        "sharestream broker listening on {}",
        handle.bootstrap_servers()
    );
    wait_for_signal().await;
    tracing::info!("shutting down");
    handle.shutdown().await;
    Ok(())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn parse_feature(s: &str) -> Result<(String, i16), String> {
    let (name, level) = s
        .split_once('=')
        .ok_or_else(|| format!("--feature takes NAME=LEVEL, e.g. share.version=3, not {s:?}"))?;
    let level = level
        .parse::<i16>()
        .map_err(|_| format!("--feature {s}: the level must be a small integer"))?;
    Ok((name.to_string(), level))
}

async fn run_features(args: FeaturesArgs) -> Result<(), String> {
    use kafka_protocol::messages::UpdateFeaturesRequest;
    use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
    use kafka_protocol::protocol::StrBytes;
    use sharestream::client::{Connection, ConnectionConfig};

    let conn =
        Connection::connect_tcp(args.bootstrap_server.as_str(), &ConnectionConfig::default())
            .await
            .map_err(|e| format!("cannot reach {}: {e}", args.bootstrap_server))?;
    let (updates, upgrade_type) = match args.action {
        FeaturesAction::Describe => {
            let v = conn.versions();
            println!(
                "finalized features (epoch {}):",
                v.finalized_features_epoch()
            );
            for name in ["share.version", "transaction.version"] {
                match v.finalized_feature(name) {
                    Some(level) => println!("  {name} = {level}"),
                    None => println!("  {name} = 0 (not finalized)"),
                }
            }
            let kip1289 =
                v.peer_range(sharestream_protocol::txn_share_ack::TXN_SHARE_ACKNOWLEDGE_API_KEY);
            println!(
                "TxnShareAcknowledge (KIP-1289, apiKey 95): {}",
                if kip1289.is_some() {
                    "offered"
                } else {
                    "not offered"
                }
            );
            return Ok(());
        }
        FeaturesAction::Upgrade { features } => (features, 1),
        FeaturesAction::Downgrade {
            features,
            unsafe_downgrade,
        } => (features, if unsafe_downgrade { 3 } else { 2 }),
    };
    let mut keys = Vec::new();
    for f in &updates {
        let (name, level) = parse_feature(f)?;
        keys.push(
            FeatureUpdateKey::default()
                .with_feature(StrBytes::from_string(name))
                .with_max_version_level(level)
                .with_upgrade_type(upgrade_type),
        );
    }
    let resp = conn
        .send(
            &UpdateFeaturesRequest::default()
                .with_timeout_ms(30_000)
                .with_feature_updates(keys),
        )
        .await
        .map_err(|e| format!("UpdateFeatures failed: {e}"))?;
    let mut failed = resp.error_code != 0;
    for r in &resp.results {
        if r.error_code != 0 {
            failed = true;
            println!(
                "{}: {} ({})",
                r.feature,
                sharestream_protocol::ErrorCode(r.error_code),
                r.error_message.as_deref().unwrap_or("")
            );
        } else {
            println!("{}: updated", r.feature);
        }
    }
    if failed {
        return Err(resp
            .error_message
            .map(|m| m.to_string())
            .unwrap_or_else(|| "the update was refused".to_string()));
    }
    Ok(())
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Broker(args) => {
            init_tracing();
            if !args.transparent_huge_pages {
                report_transparent_huge_pages();
            }
            let rt = tokio::runtime::Runtime::new().expect("start the tokio runtime");
            if let Err(e) = rt.block_on(run_broker(args)) {
                eprintln!("error: {e}");
                std::process::exit(2);
            }
        }
        Command::Features(args) => {
            let rt = tokio::runtime::Runtime::new().expect("start the tokio runtime");
            if let Err(e) = rt.block_on(run_features(args)) {
                eprintln!("error: {e}");
                std::process::exit(2);
            }
        }
        Command::Apis => {
            for key in 0..=200i16 {
                if let Some(v) = sharestream_protocol::api::codec_versions(key) {
                    println!(
                        "{key:>3} {:<40} v{}..=v{}",
                        sharestream_protocol::api::api_name(key),
                        v.min,
                        v.max
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker_args(extra: &[&str]) -> BrokerArgs {
        let mut argv = vec!["sharestream", "broker", "--memory"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv).expect("parses").command {
            Command::Broker(a) => a,
            _ => unreachable!(),
        }
    }

    /// Issue #18: Kafka's share-group broker settings by their Kafka names,
    /// e.g. the small lock durations librdkafka's CI sets.
    #[test]
    fn overrides_set_kafkas_share_group_settings_by_name() {
        let c = share_groups(&broker_args(&[
            "--override",
            "group.share.min.record.lock.duration.ms=1000",
            "--override",
            "group.share.record.lock.duration.ms=3000",
            "--override",
            "group.share.delivery.count.limit=3",
        ]))
        .unwrap();
        assert_eq!(c.min_record_lock_duration_ms, 1000);
        assert_eq!(c.record_lock_duration_ms, 3000);
        assert_eq!(c.delivery_count_limit, 3);
        let c = share_groups(&broker_args(&[
            "--override",
            "group.consumer.min.session.timeout.ms=10000",
            "--override",
            "group.consumer.session.timeout.ms=10000",
        ]))
        .unwrap();
        assert_eq!(c.consumer_session_timeout_ms, 10_000);
    }

    /// KIP-1191's broker settings go through the same flag.
    #[test]
    fn overrides_set_the_dead_letter_queue_settings() {
        let c = share_groups(&broker_args(&[
            "--override",
            "errors.deadletterqueue.auto.create.topics.enable=true",
            "--override",
            "errors.deadletterqueue.topic.name.prefix=dead.",
        ]))
        .unwrap();
        assert!(c.dlq_auto_create_topics_enable);
        assert_eq!(c.dlq_topic_name_prefix, "dead.");
        let e = share_groups(&broker_args(&[
            "--override",
            "errors.deadletterqueue.topic.name.prefix=__x",
        ]))
        .unwrap_err();
        assert!(
            e.contains("errors.deadletterqueue.topic.name.prefix"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_override_names_the_setting() {
        for (arg, needle) in [
            (
                "group.share.record.lock.duration.ms=3000",
                "group.share.record.lock.duration.ms",
            ),
            (
                "group.share.delivery.count.limit=x",
                "group.share.delivery.count.limit",
            ),
            ("group.share.nope=1", "group.share.nope"),
            ("no-equals-sign", "NAME=VALUE"),
        ] {
            let e = share_groups(&broker_args(&["--override", arg])).unwrap_err();
            assert!(e.contains(needle), "{arg}: {e}");
        }
    }

    /// The older flags keep working and move the bounds they need.
    #[test]
    fn legacy_share_flags_still_apply() {
        let c = share_groups(&broker_args(&[
            "--share-max-record-locks",
            "10000",
            "--share-record-lock-duration-ms",
            "8000",
        ]))
        .unwrap();
        assert_eq!(c.partition_max_record_locks, 10_000);
        assert_eq!(c.max_partition_max_record_locks, 10_000);
        assert_eq!(c.record_lock_duration_ms, 8000);
        assert_eq!(c.min_record_lock_duration_ms, 8000);
    }
}
