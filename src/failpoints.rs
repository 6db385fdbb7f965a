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
    }
}

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
