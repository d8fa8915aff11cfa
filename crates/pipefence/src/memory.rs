//! Device memory (M1, M2): the GPU virtual address space, heaps, and aligned 32/64-bit access
//! that never tears.
//!
//! Storage is a slice of atomic 64-bit words, never exposed as bytes while the device may touch
//! it (M2). A 64-bit access is one atomic load or store; a 32-bit store is a compare-exchange on
//! its word (so it never clobbers a concurrent store to the other half); bulk stores by kernels
//! that own both halves of a word are whole-word stores. Values are little-endian: the 32-bit
//! word at byte offset `8k` is the low half of word `k`.
//!
//! Storage is zero pages from the OS, whatever the initial value: a buffer with a non-zero
//! `init` is filled with it a chunk at a time, on the first write to the chunk (`LazyInit`), so
//! creating a buffer costs time and memory independent of its size.
//!
//! Who validates: callers check alignment and bounds and turn failures into errors or page
//! faults; the accessors here return `None` for an access outside the buffer, never panic.

use crate::footprint::{self, Kind};
use crate::sync::shim::{AtomicU64, Ordering, RwLock};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering as StdOrdering};
use std::sync::Arc;

/// Where a buffer lives and who may access it (M1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[doc(alias = "D3D12_HEAP_TYPE")]
pub enum Heap {
    /// GPU reads and writes; no CPU access (`D3D12_HEAP_TYPE_DEFAULT`).
    #[default]
    DeviceLocal,
    /// CPU reads and writes; GPU reads only: a GPU write is a page fault (`D3D12_HEAP_TYPE_UPLOAD`).
    Upload,
    /// GPU reads and writes; CPU reads (`D3D12_HEAP_TYPE_READBACK`).
    Readback,
    /// CPU and GPU read and write: unified memory for manual fences.
    Shared,
}

impl Heap {
    /// The scenario name: `device-local`, `upload`, `readback`, `shared`.
    pub fn name(self) -> &'static str {
        match self {
            Heap::DeviceLocal => "device-local",
            Heap::Upload => "upload",
            Heap::Readback => "readback",
            Heap::Shared => "shared",
        }
    }

    /// The heap with this scenario name.
    pub fn from_name(name: &str) -> Option<Heap> {
        [
            Heap::DeviceLocal,
            Heap::Upload,
            Heap::Readback,
            Heap::Shared,
        ]
        .into_iter()
        .find(|h| h.name() == name)
    }

    /// Whether the CPU may read it through the API.
    pub fn cpu_readable(self) -> bool {
        !matches!(self, Heap::DeviceLocal)
    }

    /// Whether the CPU may write it through the API.
    pub fn cpu_writable(self) -> bool {
        matches!(self, Heap::Upload | Heap::Shared)
    }

    /// Whether the GPU may write it (only Upload forbids it).
    pub fn gpu_writable(self) -> bool {
        !matches!(self, Heap::Upload)
    }
}

impl fmt::Display for Heap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// First base address handed out: above 4 GiB, so that truncation to 32 bits faults.
pub(crate) const FIRST_BASE: u64 = 0x1_0000_0000;
/// Buffers start on this alignment (a multiple of the 256 bytes M1 promises).
pub(crate) const BASE_ALIGN: u64 = 0x1_0000;
/// Unmapped bytes at least between two buffers.
pub(crate) const GAP: u64 = 0x1_0000;
/// Largest buffer pipefence allocates (bytes).
pub const MAX_BUFFER_SIZE: u64 = 1 << 36;

/// `n` values of all-zero bytes, backed lazily: zero pages from the OS (`calloc`), so creating a
/// large buffer costs neither time nor resident memory until it is touched, and a buffer the
/// machine cannot back fails here as OutOfMemory (`None`) instead of being killed later while it
/// is filled. (Measured: 2 GiB written word by word cost 2.1 GB resident and 1-5 s per buffer,
/// again for every `check` schedule.)
///
/// # Safety
///
/// All-zero bytes must be a valid `T`, and `T` must not be zero-sized.
#[cfg(not(loom))]
unsafe fn zeroed_slice<T>(n: usize) -> Option<Box<[T]>> {
    if n == 0 {
        return Some(Box::new([]));
    }
    let layout = std::alloc::Layout::array::<T>(n).ok()?;
    // SAFETY: `layout` has a non-zero size (n > 0 values of a type that is not zero-sized, the
    // caller's promise), as `alloc_zeroed` requires.
    let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` is non-null, aligned for `T` and points to `n` zeroed values that the global
    // allocator allocated with the layout of `[T; n]`, the layout `Box<[_]>` frees with; all-zero
    // bytes are a valid `T` (the caller's promise), and nothing else refers to the allocation.
    Some(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n)) })
}

/// Words per chunk of a buffer with a non-zero `init` (64 KiB): the unit filled on first write.
const CHUNK_WORDS: usize = 1 << CHUNK_SHIFT;
const CHUNK_SHIFT: u32 = 13;

/// Chunk states of [`LazyInit`]: zero (the state of calloc'd memory) is not yet filled.
const UNFILLED: u8 = 0;
const FILLING: u8 = 1;
const FILLED: u8 = 2;

/// The initial value of a buffer with a non-zero `init`, applied lazily: its storage is zero
/// pages like any buffer's, and each chunk of [`CHUNK_WORDS`] words is filled with the pattern
/// once, by the first access that writes it or hands out its raw words. Until then a chunk reads
/// as the pattern without being touched, so creating (and reading) a large buffer costs neither
/// time nor resident memory.
///
/// Why this is not observable: a chunk's words are only written after its state is `FILLED`
/// (the filler publishes its pattern stores with a Release store of `FILLED`; every writer
/// first sees `FILLED` with an Acquire load). A reader that sees `UNFILLED` or `FILLING` thus
/// reads before every write to the chunk (a write that happened before the read would have made
/// the read see `FILLED`), and the pattern is the value every word held then.
///
/// Under loom (whose atomics are not plain memory) buffers are filled eagerly instead and have
/// no `LazyInit`.
#[cfg_attr(loom, allow(dead_code))]
struct LazyInit {
    /// `(init << 32) | init`: both u32 halves of a word.
    pattern: u64,
    /// One state per chunk (`UNFILLED`, `FILLING`, `FILLED`); zero pages too.
    chunks: Box<[AtomicU8]>,
}

#[cfg_attr(loom, allow(dead_code))]
impl LazyInit {
    /// The record of a buffer of `n_words` words with initial u32 `init` (all chunks unfilled);
    /// `None` if the chunk states cannot be allocated.
    #[cfg(not(loom))]
    fn new(n_words: usize, init: u32) -> Option<LazyInit> {
        let n_chunks = n_words.div_ceil(CHUNK_WORDS);
        // SAFETY: all-zero bytes are a valid `AtomicU8` (value 0, `UNFILLED`), which is one
        // byte, not zero-sized.
        let chunks = unsafe { zeroed_slice::<AtomicU8>(n_chunks) }?;
        Some(LazyInit {
            pattern: (u64::from(init) << 32) | u64::from(init),
            chunks,
        })
    }

    /// Whether the chunk holding word `i` was filled (its words hold the buffer's values).
    #[inline]
    fn filled(&self, i: usize) -> bool {
        self.chunks
            .get(i >> CHUNK_SHIFT)
            .is_some_and(|c| c.load(StdOrdering::Acquire) == FILLED)
    }

    /// Fills chunk `chunk` of `words` with the pattern unless it was, waiting for a fill in
    /// progress on another thread; afterwards its words hold the buffer's values.
    #[inline]
    fn fill(&self, words: &[AtomicU64], chunk: usize) {
        if let Some(c) = self.chunks.get(chunk) {
            if c.load(StdOrdering::Acquire) != FILLED {
                self.claim(words, chunk, self.pattern);
            }
        }
    }

    /// Fills the chunks holding words `[first, last)`.
    #[inline]
    fn fill_range(&self, words: &[AtomicU64], first: usize, last: usize) {
        if first < last {
            for chunk in first >> CHUNK_SHIFT..=(last - 1) >> CHUNK_SHIFT {
                self.fill(words, chunk);
            }
        }
    }

    /// Fills chunk `chunk` with `value` (in place of the pattern) if it is unfilled and this
    /// thread claims it: `true`. Otherwise waits until another thread's fill is done: `false`.
    #[cold]
    fn claim(&self, words: &[AtomicU64], chunk: usize, value: u64) -> bool {
        let Some(state) = self.chunks.get(chunk) else {
            return false;
        };
        match state.compare_exchange(
            UNFILLED,
            FILLING,
            StdOrdering::Acquire,
            StdOrdering::Acquire,
        ) {
            Ok(_) => {
                let first = chunk << CHUNK_SHIFT;
                let last = (first + CHUNK_WORDS).min(words.len());
                for w in words.get(first..last).unwrap_or_default() {
                    w.store(value, Ordering::Relaxed);
                }
                state.store(FILLED, StdOrdering::Release);
                true
            }
            Err(_) => {
                // Another thread fills 64 KiB: a few microseconds, unless it is preempted.
                let mut spins = 0u32;
                while state.load(StdOrdering::Acquire) != FILLED {
                    if spins < 64 {
                        spins += 1;
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
                false
            }
        }
    }
}

/// The storage of a buffer of `n_words` words filled with the u32 `init`: zero pages, with the
/// `init` applied lazily when it is not zero; `None` if it cannot be allocated.
#[cfg(not(loom))]
fn storage(n_words: usize, init: u32) -> Option<(Box<[AtomicU64]>, Option<LazyInit>)> {
    // SAFETY: all-zero bytes are a valid `AtomicU64` (value 0, the same representation as
    // `u64`), which is 8 bytes, not zero-sized.
    let words = unsafe { zeroed_slice::<AtomicU64>(n_words) }?;
    let lazy = if init == 0 {
        None
    } else {
        Some(LazyInit::new(n_words, init)?)
    };
    Some((words, lazy))
}

/// Under loom the word type is loom's (not plain memory): fill it the ordinary way, at once.
#[cfg(loom)]
fn storage(n_words: usize, init: u32) -> Option<(Box<[AtomicU64]>, Option<LazyInit>)> {
    let mut words: Vec<AtomicU64> = Vec::new();
    words.try_reserve_exact(n_words).ok()?;
    let pair = (u64::from(init) << 32) | u64::from(init);
    words.extend((0..n_words).map(|_| AtomicU64::new(pair)));
    Some((words.into_boxed_slice(), None))
}

/// The storage of one buffer.
pub(crate) struct BufferCore {
    pub(crate) name: Arc<str>,
    pub(crate) heap: Heap,
    pub(crate) base: u64,
    pub(crate) size: u64,
    /// The words; in the chunks `lazy` has not filled yet, not the buffer's values.
    words: Box<[AtomicU64]>,
    /// The non-zero initial value not yet applied everywhere (`None` for `init` 0).
    lazy: Option<LazyInit>,
}

impl fmt::Debug for BufferCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferCore")
            .field("name", &self.name)
            .field("heap", &self.heap)
            .field("base", &format_args!("{:#x}", self.base))
            .field("size", &self.size)
            .finish()
    }
}

#[inline]
fn half_shift(offset: u64) -> u32 {
    ((offset & 4) * 8) as u32
}

impl BufferCore {
    /// One past the last byte.
    #[inline]
    pub(crate) fn end(&self) -> u64 {
        self.base + self.size
    }

    /// Whether `[offset, offset + len)` lies inside the buffer.
    #[inline]
    pub(crate) fn contains(&self, offset: u64, len: u64) -> bool {
        offset <= self.size && len <= self.size - offset
    }

    /// The value of word `i` (an Acquire load), whether or not its chunk was filled yet.
    #[inline]
    fn load_word(&self, i: usize) -> Option<u64> {
        let w = self.words.get(i)?;
        if let Some(lazy) = &self.lazy {
            if !lazy.filled(i) {
                return Some(lazy.pattern);
            }
        }
        Some(w.load(Ordering::Acquire))
    }

    /// The atomic word holding byte `offset`, its chunk filled first: to write, or to hand out.
    #[inline]
    fn word(&self, offset: u64) -> Option<&AtomicU64> {
        let i = usize::try_from(offset / 8).ok()?;
        let w = self.words.get(i)?;
        if let Some(lazy) = &self.lazy {
            lazy.fill(&self.words, i >> CHUNK_SHIFT);
        }
        Some(w)
    }

    /// Atomic 32-bit load at a 4-byte aligned offset.
    #[inline]
    pub(crate) fn load32(&self, offset: u64) -> Option<u32> {
        if !offset.is_multiple_of(4) || !self.contains(offset, 4) {
            return None;
        }
        self.note(offset, 4, Kind::Read);
        let w = self.load_word(usize::try_from(offset / 8).ok()?)?;
        Some((w >> half_shift(offset)) as u32)
    }

    /// Atomic 64-bit load at an 8-byte aligned offset.
    #[inline]
    pub(crate) fn load64(&self, offset: u64) -> Option<u64> {
        if !offset.is_multiple_of(8) || !self.contains(offset, 8) {
            return None;
        }
        self.note(offset, 8, Kind::Read);
        self.load_word(usize::try_from(offset / 8).ok()?)
    }

    /// Atomic 32-bit store at a 4-byte aligned offset (a compare-exchange on its word).
    #[inline]
    pub(crate) fn store32(&self, offset: u64, value: u32) -> Option<()> {
        if !offset.is_multiple_of(4) || !self.contains(offset, 4) {
            return None;
        }
        self.note(offset, 4, Kind::Write);
        let shift = half_shift(offset);
        let mask = u64::from(u32::MAX) << shift;
        let v = u64::from(value) << shift;
        let _ = self
            .word(offset)?
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                Some((w & !mask) | v)
            });
        Some(())
    }

    /// Atomic 64-bit store at an 8-byte aligned offset.
    #[inline]
    pub(crate) fn store64(&self, offset: u64, value: u64) -> Option<()> {
        if !offset.is_multiple_of(8) || !self.contains(offset, 8) {
            return None;
        }
        self.note(offset, 8, Kind::Write);
        self.word(offset)?.store(value, Ordering::Release);
        Some(())
    }

    /// Atomic 32-bit wrapping add; returns the old value.
    #[inline]
    pub(crate) fn fetch_add32(&self, offset: u64, value: u32) -> Option<u32> {
        if !offset.is_multiple_of(4) || !self.contains(offset, 4) {
            return None;
        }
        self.note(offset, 4, Kind::Write);
        let shift = half_shift(offset);
        let old = self
            .word(offset)?
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                let cur = (w >> shift) as u32;
                let new = cur.wrapping_add(value);
                Some((w & !(u64::from(u32::MAX) << shift)) | (u64::from(new) << shift))
            });
        Some(match old {
            Ok(w) | Err(w) => (w >> shift) as u32,
        })
    }

    /// Atomic 64-bit wrapping add; returns the old value.
    #[inline]
    pub(crate) fn fetch_add64(&self, offset: u64, value: u64) -> Option<u64> {
        if !offset.is_multiple_of(8) || !self.contains(offset, 8) {
            return None;
        }
        self.note(offset, 8, Kind::Write);
        Some(self.word(offset)?.fetch_add(value, Ordering::AcqRel))
    }

    /// [`fetch_add64`](Self::fetch_add64) for a caller that does not use the old value: an
    /// update that commutes with other such adds (`footprint.rs`).
    #[inline]
    pub(crate) fn add64(&self, offset: u64, value: u64) -> Option<()> {
        if !offset.is_multiple_of(8) || !self.contains(offset, 8) {
            return None;
        }
        self.note(offset, 8, Kind::Update);
        self.word(offset)?.fetch_add(value, Ordering::AcqRel);
        Some(())
    }

    /// Records an access for a reducing exploration (`footprint.rs`).
    #[inline]
    fn note(&self, offset: u64, len: u64, kind: Kind) {
        footprint::record_mem(self.base.wrapping_add(offset), len, kind);
    }

    /// Atomic 32-bit compare-exchange: stores `new` if the u32 holds `current`. `Ok(old)` if
    /// it stored, `Err(old)` if not (the other half of the word is never touched).
    #[inline]
    pub(crate) fn compare_exchange32(
        &self,
        offset: u64,
        current: u32,
        new: u32,
    ) -> Option<Result<u32, u32>> {
        if !offset.is_multiple_of(4) || !self.contains(offset, 4) {
            return None;
        }
        self.note(offset, 4, Kind::Write);
        let shift = half_shift(offset);
        let r = self
            .word(offset)?
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                ((w >> shift) as u32 == current)
                    .then(|| (w & !(u64::from(u32::MAX) << shift)) | (u64::from(new) << shift))
            });
        Some(match r {
            Ok(w) => Ok((w >> shift) as u32),
            Err(w) => Err((w >> shift) as u32),
        })
    }

    /// Atomic 64-bit compare-exchange: stores `new` if the u64 holds `current`.
    #[inline]
    pub(crate) fn compare_exchange64(
        &self,
        offset: u64,
        current: u64,
        new: u64,
    ) -> Option<Result<u64, u64>> {
        if !offset.is_multiple_of(8) || !self.contains(offset, 8) {
            return None;
        }
        self.note(offset, 8, Kind::Write);
        Some(
            self.word(offset)?
                .compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire),
        )
    }

    /// The atomic word holding byte `offset` (for views and bulk kernels), filled with the
    /// buffer's values.
    #[inline]
    pub(crate) fn word_at(&self, offset: u64) -> Option<&AtomicU64> {
        if offset >= self.size {
            return None;
        }
        self.note(offset & !7, 8, Kind::Write);
        self.word(offset)
    }

    /// Stores `value` into every u32 element of `[offset, offset + len)` (both 4-aligned),
    /// whole words where the range covers both halves.
    pub(crate) fn fill32(&self, offset: u64, len: u64, value: u32) -> Option<()> {
        if !offset.is_multiple_of(4) || !len.is_multiple_of(4) || !self.contains(offset, len) {
            return None;
        }
        self.note(offset, len, Kind::Write);
        let end = offset + len;
        let mut o = offset;
        if o % 8 == 4 && o < end {
            self.store32(o, value)?;
            o += 4;
        }
        let pair = (u64::from(value) << 32) | u64::from(value);
        let full_end = end & !7;
        if full_end > o {
            let first = usize::try_from(o / 8).ok()?;
            let last = usize::try_from(full_end / 8).ok()?;
            self.fill_words(first, last, pair)?;
            o = full_end;
        }
        if o < end {
            self.store32(o, value)?;
        }
        Some(())
    }

    /// Stores `pair` into the words `[first, last)`. A whole chunk not filled yet is filled
    /// with `pair` in place of the initial value (each word written once).
    fn fill_words(&self, first: usize, last: usize, pair: u64) -> Option<()> {
        let ws = self.words.get(first..last)?;
        let Some(lazy) = &self.lazy else {
            for w in ws {
                w.store(pair, Ordering::Relaxed);
            }
            return Some(());
        };
        let mut i = first;
        while i < last {
            let chunk = i >> CHUNK_SHIFT;
            let chunk_first = chunk << CHUNK_SHIFT;
            let chunk_last = (chunk_first + CHUNK_WORDS).min(self.words.len());
            let run_last = chunk_last.min(last);
            let whole = i == chunk_first && run_last == chunk_last;
            let claimed = !lazy.filled(i) && whole && lazy.claim(&self.words, chunk, pair);
            if !claimed {
                lazy.fill(&self.words, chunk);
                for w in self.words.get(i..run_last).unwrap_or_default() {
                    w.store(pair, Ordering::Relaxed);
                }
            }
            i = run_last;
        }
        Some(())
    }

    /// Calls `f` with the value of each word of `[first, last)` (word indices) in order, each
    /// loaded with `order`; `None` (and no call) if the range is not inside the buffer. Chunks
    /// not filled yet read as the initial value and stay unfilled.
    #[inline]
    pub(crate) fn for_each_word(
        &self,
        first: usize,
        last: usize,
        order: Ordering,
        mut f: impl FnMut(u64),
    ) -> Option<()> {
        let ws = self.words.get(first..last)?;
        self.note(first as u64 * 8, (last - first) as u64 * 8, Kind::Read);
        let Some(lazy) = &self.lazy else {
            for w in ws {
                f(w.load(order));
            }
            return Some(());
        };
        let mut i = first;
        while i < last {
            let run_last = ((i >> CHUNK_SHIFT) + 1)
                .saturating_mul(CHUNK_WORDS)
                .min(last);
            if lazy.filled(i) {
                for w in self.words.get(i..run_last).unwrap_or_default() {
                    f(w.load(order));
                }
            } else {
                for _ in i..run_last {
                    f(lazy.pattern);
                }
            }
            i = run_last;
        }
        Some(())
    }

    /// Appends the u32 words `[first, first + n)` (u32 indices) to `out`; stops at the end of
    /// the buffer.
    pub(crate) fn read_words32(&self, first: usize, n: usize, out: &mut Vec<u32>) {
        let last = first.saturating_add(n).min((self.size / 4) as usize);
        if first >= last {
            return;
        }
        self.note(first as u64 * 4, (last - first) as u64 * 4, Kind::Read);
        // Sized once, then filled in place (no per-word capacity check).
        let start = out.len();
        out.resize(start + (last - first), 0);
        let dst = &mut out[start..];
        let mut i = first;
        if i % 2 == 1 {
            if let (Some(w), Some(d)) = (self.load_word(i / 2), dst.first_mut()) {
                *d = (w >> 32) as u32;
            }
            i += 1;
        }
        // Whole words: both halves at once.
        let pairs_end = last & !1;
        if pairs_end > i {
            let pairs = dst[i - first..].chunks_exact_mut(2);
            match (&self.lazy, self.words.get(i / 2..pairs_end / 2)) {
                (None, Some(ws)) => {
                    for (p, w) in pairs.zip(ws) {
                        let w = w.load(Ordering::Acquire);
                        p[0] = w as u32;
                        p[1] = (w >> 32) as u32;
                    }
                }
                _ => {
                    let mut pairs = pairs;
                    let _ = self.for_each_word(i / 2, pairs_end / 2, Ordering::Acquire, |w| {
                        if let Some(p) = pairs.next() {
                            p[0] = w as u32;
                            p[1] = (w >> 32) as u32;
                        }
                    });
                }
            }
            i = pairs_end;
        }
        if i < last {
            if let (Some(w), Some(d)) = (self.load_word(i / 2), dst.get_mut(i - first)) {
                *d = w as u32;
            }
        }
    }

    /// The words `[first, last)` (word indices), filled with the buffer's values, for kernels
    /// that write them.
    #[inline]
    pub(crate) fn words(&self, first: usize, last: usize) -> Option<&[AtomicU64]> {
        let ws = self.words.get(first..last)?;
        self.note(first as u64 * 8, (last - first) as u64 * 8, Kind::Write);
        if let Some(lazy) = &self.lazy {
            lazy.fill_range(&self.words, first, last);
        }
        Some(ws)
    }
}

/// The device's address space: every live buffer by base address.
#[derive(Debug)]
pub(crate) struct AddressSpace {
    inner: RwLock<Space>,
    generation: AtomicU64,
}

#[derive(Debug)]
struct Space {
    next_base: u64,
    next_id: u32,
    by_base: BTreeMap<u64, Arc<BufferCore>>,
}

/// Why an allocation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AllocError {
    TooLarge,
    OutOfMemory,
}

impl AddressSpace {
    pub(crate) fn new() -> Self {
        AddressSpace {
            generation: AtomicU64::new(0),
            inner: RwLock::new(Space {
                next_base: FIRST_BASE,
                next_id: 0,
                by_base: BTreeMap::new(),
            }),
        }
    }

    fn read<R>(&self, f: impl FnOnce(&Space) -> R) -> R {
        match self.inner.read() {
            Ok(g) => f(&g),
            Err(p) => f(&p.into_inner()),
        }
    }

    fn write<R>(&self, f: impl FnOnce(&mut Space) -> R) -> R {
        match self.inner.write() {
            Ok(mut g) => f(&mut g),
            Err(p) => f(&mut p.into_inner()),
        }
    }

    /// Maps a new buffer of `size` bytes (a multiple of 4, checked by the caller) filled with the
    /// u32 `init` (lazily: see [`LazyInit`]).
    pub(crate) fn allocate(
        &self,
        name: Option<&str>,
        heap: Heap,
        size: u64,
        init: u32,
    ) -> Result<Arc<BufferCore>, AllocError> {
        if size > MAX_BUFFER_SIZE {
            return Err(AllocError::TooLarge);
        }
        let n_words = usize::try_from(size.div_ceil(8)).map_err(|_| AllocError::TooLarge)?;
        let (words, lazy) = storage(n_words, init).ok_or(AllocError::OutOfMemory)?;
        self.write(|s| {
            let base = s.next_base.div_ceil(BASE_ALIGN) * BASE_ALIGN;
            let next = base
                .checked_add(size)
                .and_then(|e| e.checked_add(GAP))
                .ok_or(AllocError::OutOfMemory)?;
            let id = s.next_id;
            s.next_id = s.next_id.wrapping_add(1);
            s.next_base = next;
            let name: Arc<str> = match name {
                Some(n) if !n.is_empty() => n.into(),
                _ => format!("buffer#{id}").into(),
            };
            let core = Arc::new(BufferCore {
                name,
                heap,
                base,
                size,
                words,
                lazy,
            });
            s.by_base.insert(base, core.clone());
            Ok(core)
        })
    }

    /// Unmaps the buffer at `base` (its storage lives on while accesses in flight hold it) and
    /// returns it.
    pub(crate) fn unmap(&self, base: u64) -> Option<Arc<BufferCore>> {
        let b = self.write(|s| s.by_base.remove(&base));
        self.generation.fetch_add(1, Ordering::AcqRel);
        b
    }

    /// Bumped by every unmap: a buffer found while the generation was `g` is still mapped while
    /// it is `g`.
    #[inline]
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The live buffer containing `[address, address + len)`, and the offset in it.
    #[inline]
    pub(crate) fn resolve(&self, address: u64, len: u64) -> Option<(Arc<BufferCore>, u64)> {
        self.read(|s| {
            let (_, b) = s.by_base.range(..=address).next_back()?;
            let off = address - b.base;
            if b.contains(off, len) {
                Some((b.clone(), off))
            } else {
                None
            }
        })
    }

    /// The live buffer nearest to `address` (containing it, or the closest below or above).
    pub(crate) fn nearest(&self, address: u64) -> Option<Arc<BufferCore>> {
        self.read(|s| {
            let below = s.by_base.range(..=address).next_back().map(|(_, b)| b);
            let above = s
                .by_base
                .range(address.saturating_add(1)..)
                .next()
                .map(|(_, b)| b);
            match (below, above) {
                (Some(b), Some(a)) => {
                    let db = address.saturating_sub(b.end().saturating_sub(1));
                    let da = a.base - address;
                    Some(if db <= da { b.clone() } else { a.clone() })
                }
                (Some(b), None) => Some(b.clone()),
                (None, Some(a)) => Some(a.clone()),
                (None, None) => None,
            }
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn chunks_filled(b: &BufferCore) -> Vec<bool> {
        let lazy = b.lazy.as_ref().expect("an init buffer");
        (0..lazy.chunks.len())
            .map(|c| lazy.filled(c << CHUNK_SHIFT))
            .collect()
    }

    /// Three whole chunks and a last one of one word and a half.
    fn init_buffer(init: u32) -> Arc<BufferCore> {
        let size = (3 * CHUNK_WORDS * 8 + 12) as u64;
        AddressSpace::new()
            .allocate(None, Heap::Shared, size, init)
            .unwrap()
    }

    #[test]
    fn reads_leave_chunks_unfilled_and_see_the_init() {
        let b = init_buffer(3);
        let n = (b.size / 4) as usize;
        let mut out = Vec::new();
        b.read_words32(0, n + 5, &mut out);
        assert_eq!(out, vec![3; n]);
        out.clear();
        b.read_words32(2 * CHUNK_WORDS - 3, 7, &mut out);
        assert_eq!(out, vec![3; 7]);
        assert_eq!(b.load32(b.size - 4), Some(3));
        assert_eq!(b.load64(b.size - 12), Some(0x3_0000_0003));
        assert_eq!(chunks_filled(&b), [false; 4]);
        let mut sum = 0;
        b.for_each_word(0, 3 * CHUNK_WORDS + 2, Ordering::Relaxed, |w| sum += w)
            .unwrap();
        assert_eq!(sum, (3 * CHUNK_WORDS as u64 + 2) * 0x3_0000_0003);
        assert!(b
            .for_each_word(0, 3 * CHUNK_WORDS + 3, Ordering::Relaxed, |_| {})
            .is_none());
        assert!(AddressSpace::new()
            .allocate(None, Heap::Shared, 64, 0)
            .unwrap()
            .lazy
            .is_none());
    }

    #[test]
    fn writes_fill_their_chunks_and_fills_claim_whole_ones() {
        let b = init_buffer(3);
        // From the high half of word 0 to the low half of a word in chunk 2: chunk 1 whole.
        let end = (2 * CHUNK_WORDS * 8 + 16 + 4) as u64;
        b.fill32(4, end - 4, 9).unwrap();
        assert_eq!(chunks_filled(&b), [true, true, true, false]);
        let mut out = Vec::new();
        b.read_words32(0, (b.size / 4) as usize, &mut out);
        let last = (end / 4) as usize;
        assert_eq!(out[0], 3);
        assert!(out[1..last].iter().all(|&v| v == 9));
        assert!(out[last..].iter().all(|&v| v == 3));
        // A 32-bit store to the last, partial chunk fills it (both halves of its last word).
        b.store32(b.size - 4, 5).unwrap();
        assert_eq!(chunks_filled(&b), [true; 4]);
        assert_eq!(b.load32(b.size - 4), Some(5));
        let mut last_word = 0;
        b.for_each_word(
            3 * CHUNK_WORDS + 1,
            3 * CHUNK_WORDS + 2,
            Ordering::Relaxed,
            |w| last_word = w,
        )
        .unwrap();
        assert_eq!(last_word, 0x3_0000_0005);
        assert_eq!(b.load64(b.size - 12), Some(0x3_0000_0003));
        // Raw words for a kernel: filled first.
        let b = init_buffer(3);
        let ws = b.words(CHUNK_WORDS - 1, CHUNK_WORDS + 1).unwrap();
        assert_eq!(chunks_filled(&b), [true, true, false, false]);
        assert!(ws
            .iter()
            .all(|w| w.load(Ordering::Relaxed) == 0x3_0000_0003));
        assert_eq!(
            b.fetch_add64(3 * CHUNK_WORDS as u64 * 8, 1),
            Some(0x3_0000_0003)
        );
        assert_eq!(b.fetch_add32(3 * CHUNK_WORDS as u64 * 8 + 4, 1), Some(3));
        assert_eq!(b.load64(3 * CHUNK_WORDS as u64 * 8), Some(0x4_0000_0004));
        assert!(b.word_at(2 * CHUNK_WORDS as u64 * 8).is_some());
        assert_eq!(chunks_filled(&b), [true; 4]);
    }
}
