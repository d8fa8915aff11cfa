//! A counting global allocator: mimalloc (the allocator of the `pipefence` command line, so the
//! benchmarks measure what it runs) plus, while a [`measure`] is running, the net change of
//! live heap bytes (bytes requested, as `Layout::size`, not the allocator's rounding).
//!
//! Counting is off outside [`measure`], so the timing benchmarks pay one relaxed load per
//! allocation and nothing else.

use mimalloc::MiMalloc;
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

/// The allocator installed as `#[global_allocator]` in `main.rs`.
#[derive(Debug)]
pub struct Counting;

static ENABLED: AtomicBool = AtomicBool::new(false);
static DELTA: AtomicIsize = AtomicIsize::new(0);

#[inline]
fn count(bytes: isize) {
    if ENABLED.load(Ordering::Relaxed) {
        DELTA.fetch_add(bytes, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards to `MiMalloc` with the caller's arguments unchanged,
// so the `GlobalAlloc` contract holds exactly as it does for it; the counting only touches
// atomics and never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout, which meets `alloc`'s contract.
        let p = unsafe { MiMalloc.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout, which meets `alloc_zeroed`'s contract.
        let p = unsafe { MiMalloc.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by this allocator (hence by `MiMalloc`) with `layout`.
        unsafe { MiMalloc.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` was allocated by `MiMalloc` with `layout`; `new_size` meets `realloc`'s
        // contract as promised by the caller.
        let p = unsafe { MiMalloc.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// Runs `f` and returns its result with the net change of live heap bytes it caused (all
/// threads count; run it while no other thread allocates). Not reentrant.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, isize) {
    DELTA.store(0, Ordering::SeqCst);
    ENABLED.store(true, Ordering::SeqCst);
    let r = f();
    ENABLED.store(false, Ordering::SeqCst);
    (r, DELTA.load(Ordering::SeqCst))
}
