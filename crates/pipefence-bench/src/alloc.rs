//! A counting global allocator: [`System`] plus, while a [`measure`] is running, the net
//! change of live heap bytes (bytes requested, as `Layout::size`, not the allocator's rounding).
//!
//! Counting is off outside [`measure`], so the timing benchmarks pay one relaxed load per
//! allocation and nothing else.

use std::alloc::{GlobalAlloc, Layout, System};
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

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract holds exactly as it does for `System`; the counting only touches
// atomics and never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout, which meets `alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout, which meets `alloc_zeroed`'s contract.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by this allocator (hence by `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` was allocated by `System` with `layout`; `new_size` meets `realloc`'s
        // contract as promised by the caller.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
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
