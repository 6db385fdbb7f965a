//! A guard global allocator that keeps hostile length prefixes from
//! aborting the process.
//!
//! # The hole
//!
//! `kafka-protocol` 0.18 decodes every array by reading its element count
//! off the wire and calling `Vec::with_capacity(count)` *before* decoding a
//! single element. A frame of a dozen bytes can announce 2^31 (or, for a
//! compact array, 2^32 - 2) elements of a struct of ~100 bytes: a request for
//! hundreds of GiB. When the kernel refuses that much committed memory (Linux
//! with `vm.overcommit_memory=0` refuses any single mapping larger than RAM +
//! swap), `malloc` returns null, Rust calls `handle_alloc_error`, and the
//! process **aborts**: no `Result`, no panic, nothing `catch_unwind` can stop.
//! Any unauthenticated peer of the broker (or a hostile broker, for the
//! client) could kill us with one frame. Upstream has open fixes but no
//! release, and we do not fork or vendor the crate.
//!
//! # The guard
//!
//! The decoder never *touches* that capacity: it fails with "not enough
//! bytes" after the few elements the frame really carries, and drops the
//! vector. So the allocation only has to *exist*, never to be backed by
//! memory. [`GuardedAlloc`] serves every request of at least
//! [`DEFAULT_HUGE_THRESHOLD`] (1 GiB) with an anonymous private
//! `mmap(MAP_NORESERVE)`: the kernel grants it without commit accounting, it
//! costs only address space (of which a 64-bit process has 128 TiB), and pages
//! get real memory only when written. Everything smaller goes to mimalloc
//! (the `mimalloc` crate; chosen over glibc's malloc because on the runtime
//! bench glibc's free-list consolidation was at the top of the profile and
//! mimalloc cut the process's CPU per record by about a fifth; see
//! docs/BENCHMARKS.md). Both serve blocks this large with `mmap`, so
//! legitimate huge buffers behave the same, except that running out of
//! memory while *filling* one ends in the OOM killer rather than an abort —
//! which is no worse.
//!
//! Why this and not something else:
//! - Bounding counts ourselves would mean re-implementing (hand-writing) the
//!   crate's decoders for every message: the count sits at a schema-dependent
//!   offset that only the generated decoder knows.
//! - A custom `ByteBuf` sees the count as just another `i32` read; it cannot
//!   tell it from a field.
//! - Making allocation failure a panic (`-Zoom=panic`, alloc error hooks)
//!   needs nightly, and an allocator must never unwind.
//! - The guard covers every allocation site in every dependency at once,
//!   including the crate's compact strings and bytes (`vec![0; n]`) and any
//!   future decoder, at zero cost for ordinary allocations (one comparison).
//!
//! Limits, stated plainly: the guard works on Linux and Android; elsewhere it
//! forwards everything to mimalloc (no protection). It cannot help
//! under `vm.overcommit_memory=2` (strict accounting ignores `MAP_NORESERVE`)
//! or a tight `RLIMIT_AS`. Each decode in progress reserves at most a few TiB
//! of address space (one hostile array per nesting level), released as soon
//! as the decode fails, so only a very large number of threads decoding
//! hostile frames at the same instant could exhaust the address space.
//!
//! # Installing it
//!
//! A global allocator is chosen by the final binary, not by a library. The
//! `sharestream` binary, our tests and our examples install it; an embedder
//! that decodes untrusted frames with this crate should do the same:
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: sharestream_protocol::alloc::GuardedAlloc =
//!     sharestream_protocol::alloc::GuardedAlloc::new();
//! # fn main() {}
//! ```
//!
//! (`sharestream::alloc` re-exports this module for users of the framework.)
//!
//! [`is_installed`] tells whether it is; the protocol layer logs a warning
//! once when it decodes without it.
//!
//! # Transparent huge pages
//!
//! On Linux, [`GuardedAlloc::new`] also turns transparent huge pages off for
//! the process (`prctl(PR_SET_THP_DISABLE)`) at its first allocation, before
//! mimalloc maps its first area. mimalloc asks the kernel for huge pages
//! (`madvise(MADV_HUGEPAGE)`) on the areas it maps, and its heap is sparse:
//! each 2 MiB page is resident in full once one byte of it is touched. A
//! share consumer reading 1 KiB records peaked at 31 MiB with them and 8.5
//! MiB without, at the same throughput; the broker at 46 MiB against 18
//! (docs/BENCHMARKS.md). The setting is the process's and, as the kernel
//! has it, is inherited by the processes it starts.
//! [`GuardedAlloc::with_transparent_huge_pages`] leaves the kernel's setting
//! alone.

use std::alloc::{GlobalAlloc, Layout};

/// The allocator of every block below the huge threshold.
static INNER: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Requests of at least this many bytes (1 GiB) are served by
/// `mmap(MAP_NORESERVE)`.
pub const DEFAULT_HUGE_THRESHOLD: usize = 1 << 30;

/// The smallest threshold [`GuardedAlloc::with_threshold`] accepts (64 KiB);
/// smaller requests always go to mimalloc.
pub const MIN_HUGE_THRESHOLD: usize = 64 << 10;

/// Huge blocks are page-aligned; larger alignments go to mimalloc.
const MAX_HUGE_ALIGN: usize = 4096;

static INSTALLED: AtomicBool = AtomicBool::new(false);
static HUGE_RESERVATIONS: AtomicU64 = AtomicU64::new(0);
static HUGE_FAILURES: AtomicU64 = AtomicU64::new(0);
static LIVE_HUGE_BYTES: AtomicU64 = AtomicU64::new(0);
static LARGEST_HUGE_BYTES: AtomicU64 = AtomicU64::new(0);

/// A global allocator that never lets a huge, untouched allocation abort the
/// process; see the [module documentation](self).
#[derive(Debug)]
pub struct GuardedAlloc {
    threshold: usize,
    huge_pages_off: bool,
}

impl Default for GuardedAlloc {
    fn default() -> Self {
        Self::new()
    }
}

/// Counters of the huge-allocation path, shared by every [`GuardedAlloc`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GuardStats {
    /// Huge blocks reserved with `mmap` so far (grown ones count again).
    pub huge_reservations: u64,
    /// Huge reservations the kernel refused (the caller then aborts).
    pub huge_failures: u64,
    /// Bytes of address space held by live huge blocks.
    pub live_huge_bytes: u64,
    /// The largest huge block reserved so far, in bytes.
    pub largest_huge_bytes: u64,
}

/// The counters of the huge-allocation path.
pub fn stats() -> GuardStats {
    GuardStats {
        huge_reservations: HUGE_RESERVATIONS.load(Ordering::Relaxed),
        huge_failures: HUGE_FAILURES.load(Ordering::Relaxed),
        live_huge_bytes: LIVE_HUGE_BYTES.load(Ordering::Relaxed),
        largest_huge_bytes: LARGEST_HUGE_BYTES.load(Ordering::Relaxed),
    }
}

/// `true` once a [`GuardedAlloc`] has served an allocation, i.e. it is the
/// process's global allocator.
pub fn is_installed() -> bool {
    INSTALLED.load(Ordering::Relaxed)
}

/// `true` if huge requests are actually guarded on this target.
pub const fn guard_supported() -> bool {
    cfg!(any(target_os = "linux", target_os = "android"))
}

/// Logs a warning, once per process, when the protocol layer decodes
/// untrusted bytes without the guard.
pub(crate) fn warn_if_unguarded() {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !is_installed() && !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "sharestream::alloc::GuardedAlloc is not the global allocator: a hostile array \
             count in a Kafka frame can abort this process (see the sharestream::alloc docs)"
        );
    }
}

impl GuardedAlloc {
    /// The guard with the default threshold of 1 GiB; it turns transparent
    /// huge pages off for the process at its first allocation (see the
    /// [module documentation](self#transparent-huge-pages)).
    pub const fn new() -> Self {
        Self {
            threshold: DEFAULT_HUGE_THRESHOLD,
            huge_pages_off: true,
        }
    }

    /// The guard serving requests of at least `bytes` (raised to
    /// [`MIN_HUGE_THRESHOLD`]) with `mmap(MAP_NORESERVE)`.
    pub const fn with_threshold(bytes: usize) -> Self {
        Self {
            threshold: if bytes < MIN_HUGE_THRESHOLD {
                MIN_HUGE_THRESHOLD
            } else {
                bytes
            },
            huge_pages_off: true,
        }
    }

    /// The same guard, leaving the process's transparent-huge-page setting
    /// as the kernel (or the program, before its first allocation) has it.
    pub const fn with_transparent_huge_pages(self) -> Self {
        Self {
            huge_pages_off: false,
            ..self
        }
    }

    /// Whether this guard turns transparent huge pages off at the process's
    /// first allocation.
    pub const fn turns_huge_pages_off(&self) -> bool {
        self.huge_pages_off
    }

    /// The threshold in bytes.
    pub const fn threshold(&self) -> usize {
        self.threshold
    }

    /// Whether a block of this layout lives in its own mapping. The decision
    /// depends on the layout only, so `dealloc` (which receives the same
    /// layout as `alloc`) always takes the same path.
    #[inline]
    fn is_huge(&self, size: usize, align: usize) -> bool {
        guard_supported() && size >= self.threshold && align <= MAX_HUGE_ALIGN
    }
}

#[inline]
fn mark_installed(huge_pages_off: bool) {
    if !INSTALLED.load(Ordering::Relaxed) {
        first_allocation(huge_pages_off);
    }
}

/// What `prctl(PR_SET_THP_DISABLE)` returned at the first allocation, or
/// `i32::MIN` if it was not called.
static HUGE_PAGES_OFF_RC: std::sync::atomic::AtomicI32 =
    std::sync::atomic::AtomicI32::new(i32::MIN);

/// The process's first allocation (or one of the first, when threads race:
/// the prctl is idempotent).
#[cold]
fn first_allocation(huge_pages_off: bool) {
    if INSTALLED.swap(true, Ordering::Relaxed) || !huge_pages_off {
        return;
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // SAFETY: PR_SET_THP_DISABLE takes integer arguments only and sets a
        // flag of this process; it allocates and touches no memory of ours.
        let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        HUGE_PAGES_OFF_RC.store(rc, Ordering::Relaxed);
    }
}

/// `Some(true)` if the guard turned transparent huge pages off at the
/// process's first allocation, `Some(false)` if the kernel refused, `None`
/// if it did not try (not Linux, not the global allocator, or
/// [`GuardedAlloc::with_transparent_huge_pages`]).
pub fn turned_huge_pages_off() -> Option<bool> {
    match HUGE_PAGES_OFF_RC.load(Ordering::Relaxed) {
        i32::MIN => None,
        rc => Some(rc == 0),
    }
}

/// What a `/proc/PID/status` text says of that process's transparent huge
/// pages (`THP_enabled`, Linux 5.0 and later): `Some(true)` if allowed,
/// `Some(false)` if turned off (as the guard does), `None` without the line.
pub fn huge_pages_enabled_in_status(status: &str) -> Option<bool> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:"))
        .map(|v| v.trim() == "1")
}

fn note_reserved(size: usize) {
    HUGE_RESERVATIONS.fetch_add(1, Ordering::Relaxed);
    LIVE_HUGE_BYTES.fetch_add(size as u64, Ordering::Relaxed);
    LARGEST_HUGE_BYTES.fetch_max(size as u64, Ordering::Relaxed);
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod huge {
    use super::{HUGE_FAILURES, LIVE_HUGE_BYTES, note_reserved};
    use std::sync::atomic::Ordering;

    /// A fresh, zero-filled, uncommitted mapping, or null.
    pub(super) unsafe fn map(size: usize) -> *mut u8 {
        // SAFETY: an anonymous private mapping at an address of the kernel's
        // choosing aliases nothing.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            HUGE_FAILURES.fetch_add(1, Ordering::Relaxed);
            return std::ptr::null_mut();
        }
        note_reserved(size);
        p.cast()
    }

    /// Releases a mapping made by [`map`] or [`remap`].
    pub(super) unsafe fn unmap(ptr: *mut u8, size: usize) {
        // SAFETY: the caller passes a live mapping of exactly `size` bytes.
        unsafe { libc::munmap(ptr.cast(), size) };
        LIVE_HUGE_BYTES.fetch_sub(size as u64, Ordering::Relaxed);
    }

    /// Grows or shrinks a mapping, moving it if needed; null (and the old
    /// mapping intact) on failure.
    #[cfg(target_os = "linux")]
    pub(super) unsafe fn remap(ptr: *mut u8, old: usize, new: usize) -> *mut u8 {
        // SAFETY: the caller passes a live mapping of exactly `old` bytes.
        let p = unsafe { libc::mremap(ptr.cast(), old, new, libc::MREMAP_MAYMOVE) };
        if p == libc::MAP_FAILED {
            HUGE_FAILURES.fetch_add(1, Ordering::Relaxed);
            return std::ptr::null_mut();
        }
        LIVE_HUGE_BYTES.fetch_sub(old as u64, Ordering::Relaxed);
        note_reserved(new);
        p.cast()
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod huge {
    // `is_huge` is always false here; these are never called.
    pub(super) unsafe fn map(_size: usize) -> *mut u8 {
        std::ptr::null_mut()
    }
    pub(super) unsafe fn unmap(_ptr: *mut u8, _size: usize) {}
}

// SAFETY: small blocks are mimalloc's; huge blocks are page-aligned
// mappings of exactly the requested size (satisfying any alignment up to one
// page), released with that same size. `is_huge` depends on the layout only,
// so every block is released by the path that made it.
unsafe impl GlobalAlloc for GuardedAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        mark_installed(self.huge_pages_off);
        if self.is_huge(layout.size(), layout.align()) {
            // SAFETY: see `huge::map`.
            unsafe { huge::map(layout.size()) }
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { INNER.alloc(layout) }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        mark_installed(self.huge_pages_off);
        if self.is_huge(layout.size(), layout.align()) {
            // SAFETY: fresh anonymous mappings read as zeros.
            unsafe { huge::map(layout.size()) }
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { INNER.alloc_zeroed(layout) }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if self.is_huge(layout.size(), layout.align()) {
            // SAFETY: made by `huge::map`/`remap` with this size.
            unsafe { huge::unmap(ptr, layout.size()) }
        } else {
            // SAFETY: made by mimalloc with this layout.
            unsafe { INNER.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old_huge = self.is_huge(layout.size(), layout.align());
        let new_huge = self.is_huge(new_size, layout.align());
        if !old_huge && !new_huge {
            // SAFETY: forwarded with the caller's guarantees.
            return unsafe { INNER.realloc(ptr, layout, new_size) };
        }
        #[cfg(target_os = "linux")]
        if old_huge && new_huge {
            // SAFETY: `ptr` is a live mapping of `layout.size()` bytes.
            return unsafe { huge::remap(ptr, layout.size(), new_size) };
        }
        // SAFETY: the caller guarantees `new_size` with `layout.align()` is a
        // valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: a fresh block through our own paths; on success the first
        // `min` bytes are copied and the old block released by its own path.
        unsafe {
            let new_ptr = self.alloc(new_layout);
            if !new_ptr.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new_ptr, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new_ptr
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_is_clamped() {
        assert_eq!(GuardedAlloc::new().threshold(), DEFAULT_HUGE_THRESHOLD);
        assert_eq!(
            GuardedAlloc::with_threshold(1).threshold(),
            MIN_HUGE_THRESHOLD
        );
        assert_eq!(GuardedAlloc::with_threshold(1 << 20).threshold(), 1 << 20);
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn huge_blocks_round_trip_through_every_path() {
        // A private instance with a low threshold, called directly: the
        // process's global allocator is not involved.
        let a = GuardedAlloc::with_threshold(1 << 20);
        unsafe {
            let small = Layout::from_size_align(4096, 8).unwrap();
            let p = a.alloc(small);
            assert!(!p.is_null());
            p.write_bytes(7, 4096);
            // small -> huge
            let before = stats().huge_reservations;
            let p = a.realloc(p, small, 2 << 20);
            assert!(!p.is_null());
            assert!(stats().huge_reservations > before);
            assert_eq!(*p.add(4095), 7);
            let huge = Layout::from_size_align(2 << 20, 8).unwrap();
            // huge -> bigger huge (mremap)
            p.add((2 << 20) - 1).write(9);
            let p = a.realloc(p, huge, 8 << 20);
            assert!(!p.is_null());
            assert_eq!(*p.add(4095), 7);
            assert_eq!(*p.add((2 << 20) - 1), 9);
            // huge -> small
            let bigger = Layout::from_size_align(8 << 20, 8).unwrap();
            let p = a.realloc(p, bigger, 100);
            assert!(!p.is_null());
            assert_eq!(*p.add(99), 7);
            a.dealloc(p, Layout::from_size_align(100, 8).unwrap());
            // zeroed huge
            let z = a.alloc_zeroed(huge);
            assert!(!z.is_null());
            assert_eq!(*z.add(12345), 0);
            a.dealloc(z, huge);
        }
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn an_impossible_reservation_is_granted_without_memory() {
        // 4 TiB: far beyond RAM + swap, so `malloc` would refuse it.
        let a = GuardedAlloc::new();
        let layout = Layout::from_size_align(4 << 40, 8).unwrap();
        unsafe {
            let p = a.alloc(layout);
            assert!(!p.is_null(), "{:?}", stats());
            p.write(1);
            a.dealloc(p, layout);
        }
        assert!(stats().largest_huge_bytes >= 4 << 40);
    }
}
