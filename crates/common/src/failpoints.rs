//! Failpoints for fault-injection tests, compiled in only with the
//! `failpoints` cargo feature (the test command enables it; release builds
//! never contain them).
//!
//! A failpoint is a named place in the code that asks [`hit`] whether it
//! should fail now. Tests arm a failpoint for a number of hits (or forever)
//! with [`arm`] and disarm it with [`disarm`]. Without the feature [`hit`] is
//! a constant `false` that the compiler removes.
//!
//! Names in use:
//! - `txn.persist`: appending to the transaction log fails (the coordinator
//!   is rebuilt from its log and the call answers COORDINATOR_NOT_AVAILABLE).
//! - `txn.share_marker`: delivering a marker to a share participant fails
//!   (the coordinator retries it after its backoff).
//! - `log.sync_dir`: the broker's fsync of a directory fails (after a
//!   rename in `write_atomic`, a segment roll, a snapshot).
//! - `log.clean.before_swap`, `log.clean.mid_swap`: the log cleaner stops
//!   after writing a cleaned segment beside the old one, or after renaming
//!   its log into place and before its index (docs/DESIGN.md D28).
//! - `runtime.abort_mid_batch`, `runtime.abort_after_stage`,
//!   `runtime.stale_member_epoch`,
//!   `runtime.crash_before_commit`: see the runtime's module docs.
//! - `runtime.ledger_floor`: measurement only, never in a test of safety:
//!   a commit through the ledger writes no intent and skips the
//!   arbitration (so it is not exactly-once), for the runtime bench's
//!   floor row, which prices Kafka's transactions apart from the ledger.
//!
//! - `dead_letters.hold`: the broker's dead-letter writer leaves an
//!   ARCHIVING run for a later pass (KIP-1191; a kill then finds it
//!   ARCHIVING).
//! - `dead_letters.after_append`: the writer appends a run's dead-letter
//!   records and stops short of making them ARCHIVED (the crash window of
//!   docs/DESIGN.md D24).
//!
//! Pause points ([`pause`], armed with [`arm_pause`]) hold a task at a named
//! place for a while after calling a hook, so that a test outside the
//! process (the copier chaos test) can SIGKILL it exactly there:
//! - `runtime.window_sent`: exactly_once, every output of the transaction
//!   handed to the producer, acknowledgements not yet staged (before
//!   TxnShareAcknowledge); at_least_once, every output delivered, the
//!   source records not yet acknowledged.
//! - `runtime.window_staged`: exactly_once, acknowledgements staged
//!   (TxnShareAcknowledge answered), EndTxn not sent.
//! - `broker.txn_share_ack.before_stage` ([`pause_blocking`]): the broker's
//!   TxnShareAcknowledge handler has checked the producer and registered
//!   the share participants, and has not staged yet (the window in which a
//!   fence can land, docs/DESIGN.md D16).

#[cfg(feature = "failpoints")]
mod imp {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    static ANY: AtomicBool = AtomicBool::new(false);
    static ARMED: Mutex<Option<HashMap<String, Option<u64>>>> = Mutex::new(None);

    pub fn hit(name: &str) -> bool {
        if !ANY.load(Ordering::Relaxed) {
            return false;
        }
        let mut guard = ARMED.lock().unwrap_or_else(|e| e.into_inner());
        let Some(map) = guard.as_mut() else {
            return false;
        };
        match map.get_mut(name) {
            None => false,
            Some(None) => true,
            Some(Some(n)) => {
                *n -= 1;
                if *n == 0 {
                    map.remove(name);
                }
                true
            }
        }
    }

    pub fn arm(name: &str, times: Option<u64>) {
        let mut guard = ARMED.lock().unwrap_or_else(|e| e.into_inner());
        guard
            .get_or_insert_with(HashMap::new)
            .insert(name.to_string(), times);
        ANY.store(true, Ordering::Relaxed);
    }

    pub fn disarm(name: &str) {
        let mut guard = ARMED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(map) = guard.as_mut() {
            map.remove(name);
        }
        let mut pauses = PAUSES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(map) = pauses.as_mut() {
            map.remove(name);
        }
    }

    type Pause = (std::time::Duration, Option<super::PauseHook>);
    static ANY_PAUSE: AtomicBool = AtomicBool::new(false);
    static PAUSES: Mutex<Option<HashMap<String, Pause>>> = Mutex::new(None);

    pub fn arm_pause(name: &str, pause: std::time::Duration, hook: Option<super::PauseHook>) {
        let mut guard = PAUSES.lock().unwrap_or_else(|e| e.into_inner());
        guard
            .get_or_insert_with(HashMap::new)
            .insert(name.to_string(), (pause, hook));
        ANY_PAUSE.store(true, Ordering::Relaxed);
    }

    pub fn pause_of(name: &str) -> Option<Pause> {
        if !ANY_PAUSE.load(Ordering::Relaxed) {
            return None;
        }
        let guard = PAUSES.lock().unwrap_or_else(|e| e.into_inner());
        guard.as_ref()?.get(name).cloned()
    }
}

/// Called by an armed pause point with its name, before the pause.
pub type PauseHook = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

/// Whether the failpoint `name` fires now.
#[inline]
pub fn hit(name: &str) -> bool {
    #[cfg(feature = "failpoints")]
    {
        imp::hit(name)
    }
    #[cfg(not(feature = "failpoints"))]
    {
        let _ = name;
        false
    }
}

/// Arms `name` for `times` hits (`None`: until disarmed).
#[cfg(feature = "failpoints")]
pub fn arm(name: &str, times: Option<u64>) {
    imp::arm(name, times);
}

/// Disarms `name`.
#[cfg(feature = "failpoints")]
pub fn disarm(name: &str) {
    imp::disarm(name);
}

/// Arms the pause point `name`: every [`pause`] there calls `hook` (if any)
/// and then sleeps `pause`, until [`disarm`]ed.
#[cfg(feature = "failpoints")]
pub fn arm_pause(name: &str, pause: std::time::Duration, hook: Option<PauseHook>) {
    imp::arm_pause(name, pause, hook);
}

/// A pause point: when `name` is armed with [`arm_pause`], calls its hook
/// and sleeps; otherwise (and always without the feature) returns at once.
pub async fn pause(name: &str) {
    #[cfg(feature = "failpoints")]
    {
        if let Some((pause, hook)) = imp::pause_of(name) {
            if let Some(hook) = hook {
                hook(name);
            }
            tokio::time::sleep(pause).await;
        }
    }
    #[cfg(not(feature = "failpoints"))]
    {
        let _ = name;
    }
}

/// [`pause`] for code that runs on a blocking thread (no runtime): calls
/// the hook, which may itself block until a test lets it go, then sleeps.
pub fn pause_blocking(name: &str) {
    #[cfg(feature = "failpoints")]
    {
        if let Some((pause, hook)) = imp::pause_of(name) {
            if let Some(hook) = hook {
                hook(name);
            }
            std::thread::sleep(pause);
        }
    }
    #[cfg(not(feature = "failpoints"))]
    {
        let _ = name;
    }
}

#[cfg(all(test, feature = "failpoints"))]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn armed_pause_calls_its_hook_then_sleeps_until_disarmed() {
        let name = "test.pause_point";
        let calls = Arc::new(AtomicU32::new(0));
        let seen = calls.clone();
        super::arm_pause(
            name,
            Duration::from_millis(250),
            Some(Arc::new(move |n: &str| {
                assert_eq!(n, "test.pause_point");
                seen.fetch_add(1, Ordering::SeqCst);
            })),
        );
        let t0 = tokio::time::Instant::now();
        super::pause(name).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(t0.elapsed() >= Duration::from_millis(250));
        super::pause("test.other_point").await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        super::disarm(name);
        let t1 = tokio::time::Instant::now();
        super::pause(name).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(t1.elapsed(), Duration::ZERO);
    }
}
