//! Device memory (M1, M2): the GPU virtual address space, heaps, and aligned 32/64-bit access
//! that never tears.
//!
//! Storage is a slice of atomic 64-bit words, never exposed as bytes while the device may touch
//! it (M2). A 64-bit access is one atomic load or store; a 32-bit store is a compare-exchange on
//! its word (so it never clobbers a concurrent store to the other half); bulk stores by kernels
//! that own both halves of a word are whole-word stores. Values are little-endian: the 32-bit
//! word at byte offset `8k` is the low half of word `k`.
//!
//! Who validates: callers check alignment and bounds and turn failures into errors or page
//! faults; the accessors here return `None` for an access outside the buffer, never panic.

use crate::sync::shim::{AtomicU64, Ordering, RwLock};
use std::collections::BTreeMap;
use std::fmt;
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

/// `n` words of zero, backed lazily: zero pages from the OS (`calloc`), so creating a large
/// zero-initialized buffer costs neither time nor resident memory until it is touched, and a
/// buffer the machine cannot back fails here as OutOfMemory (`None`) instead of being killed
/// later while it is filled. (Measured: 2 GiB written word by word cost 2.1 GB resident and
/// 1-5 s per buffer, again for every `check` schedule.)
#[cfg(not(loom))]
fn zeroed_words(n: usize) -> Option<Box<[AtomicU64]>> {
    if n == 0 {
        return Some(Box::new([]));
    }
    let layout = std::alloc::Layout::array::<AtomicU64>(n).ok()?;
    // SAFETY: `layout` has a non-zero size (n > 0 words of 8 bytes), as `alloc_zeroed` requires.
    let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<AtomicU64>();
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` is non-null, aligned for `AtomicU64` and points to `n` zeroed words that the
    // global allocator allocated with the layout of `[AtomicU64; n]`, the layout `Box<[_]>`
    // frees with; all-zero bytes are a valid `AtomicU64` (value 0, the same representation as
    // `u64`), and nothing else refers to the allocation.
    Some(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n)) })
}

/// Under loom the word type is loom's (not plain memory): zero it the ordinary way.
#[cfg(loom)]
fn zeroed_words(n: usize) -> Option<Box<[AtomicU64]>> {
    let mut words: Vec<AtomicU64> = Vec::new();
    words.try_reserve_exact(n).ok()?;
    words.extend((0..n).map(|_| AtomicU64::new(0)));
    Some(words.into_boxed_slice())
}

/// The storage of one buffer.
pub(crate) struct BufferCore {
    pub(crate) name: Arc<str>,
    pub(crate) heap: Heap,
    pub(crate) base: u64,
    pub(crate) size: u64,
    words: Box<[AtomicU64]>,
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

    #[inline]
    fn word(&self, offset: u64) -> Option<&AtomicU64> {
        self.words.get(usize::try_from(offset / 8).ok()?)
    }

    /// Atomic 32-bit load at a 4-byte aligned offset.
    #[inline]
    pub(crate) fn load32(&self, offset: u64) -> Option<u32> {
        if !offset.is_multiple_of(4) || !self.contains(offset, 4) {
            return None;
        }
        let w = self.word(offset)?.load(Ordering::Acquire);
        Some((w >> half_shift(offset)) as u32)
    }

    /// Atomic 64-bit load at an 8-byte aligned offset.
    #[inline]
    pub(crate) fn load64(&self, offset: u64) -> Option<u64> {
        if !offset.is_multiple_of(8) || !self.contains(offset, 8) {
            return None;
        }
        Some(self.word(offset)?.load(Ordering::Acquire))
    }

    /// Atomic 32-bit store at a 4-byte aligned offset (a compare-exchange on its word).
    #[inline]
    pub(crate) fn store32(&self, offset: u64, value: u32) -> Option<()> {
        if !offset.is_multiple_of(4) || !self.contains(offset, 4) {
            return None;
        }
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
        self.word(offset)?.store(value, Ordering::Release);
        Some(())
    }

    /// Atomic 32-bit wrapping add; returns the old value.
    #[inline]
    pub(crate) fn fetch_add32(&self, offset: u64, value: u32) -> Option<u32> {
        if !offset.is_multiple_of(4) || !self.contains(offset, 4) {
            return None;
        }
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
        Some(self.word(offset)?.fetch_add(value, Ordering::AcqRel))
    }

    /// The atomic word holding byte `offset` (for views and bulk kernels).
    #[inline]
    pub(crate) fn word_at(&self, offset: u64) -> Option<&AtomicU64> {
        if offset >= self.size {
            return None;
        }
        self.word(offset)
    }

    /// Stores `value` into every u32 element of `[offset, offset + len)` (both 4-aligned),
    /// whole words where the range covers both halves.
    pub(crate) fn fill32(&self, offset: u64, len: u64, value: u32) -> Option<()> {
        if !offset.is_multiple_of(4) || !len.is_multiple_of(4) || !self.contains(offset, len) {
            return None;
        }
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
            for w in self.words.get(first..last)? {
                w.store(pair, Ordering::Relaxed);
            }
            o = full_end;
        }
        if o < end {
            self.store32(o, value)?;
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
        out.reserve(last - first);
        let mut i = first;
        if i % 2 == 1 {
            if let Some(w) = self.words.get(i / 2) {
                out.push((w.load(Ordering::Acquire) >> 32) as u32);
            }
            i += 1;
        }
        // Whole words: both halves at once.
        let pairs_end = last & !1;
        if pairs_end > i {
            if let Some(ws) = self.words.get(i / 2..pairs_end / 2) {
                for w in ws {
                    let w = w.load(Ordering::Acquire);
                    out.push(w as u32);
                    out.push((w >> 32) as u32);
                }
            }
            i = pairs_end;
        }
        if i < last {
            if let Some(w) = self.words.get(i / 2) {
                out.push(w.load(Ordering::Acquire) as u32);
            }
        }
    }

    /// The words `[first, last)` (word indices), for kernels.
    #[inline]
    pub(crate) fn words(&self, first: usize, last: usize) -> Option<&[AtomicU64]> {
        self.words.get(first..last)
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

    /// Maps a new zeroed buffer of `size` bytes (a multiple of 4, checked by the caller) filled
    /// with the u32 `init`.
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
        let words = if init == 0 {
            zeroed_words(n_words).ok_or(AllocError::OutOfMemory)?
        } else {
            let mut words: Vec<AtomicU64> = Vec::new();
            words
                .try_reserve_exact(n_words)
                .map_err(|_| AllocError::OutOfMemory)?;
            let pair = (u64::from(init) << 32) | u64::from(init);
            words.extend((0..n_words).map(|_| AtomicU64::new(pair)));
            words.into_boxed_slice()
        };
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
            });
            s.by_base.insert(base, core.clone());
            Ok(core)
        })
    }

    /// Unmaps the buffer at `base` (its storage lives on while accesses in flight hold it).
    pub(crate) fn unmap(&self, base: u64) {
        self.write(|s| s.by_base.remove(&base));
        self.generation.fetch_add(1, Ordering::AcqRel);
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
