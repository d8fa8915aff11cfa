//! Kernels (C6): the built-ins `fill`, `add`, `sum`, `spin`, and user kernels written as Rust
//! closures over a [`KernelContext`].
//!
//! A group is 64 lanes; lane `i = group * 64 + lane` handles u32 element `i`, so a group of
//! `fill` or `add` covers 256 bytes. Kernel extents are checked when the kernel runs: an access
//! outside every live buffer, or a write to Upload memory, is a page fault (M3) reported as a
//! [`KernelFault`], never a panic.
//!
//! One interpreter ([`run_groups`]) runs every kernel over a [`GroupMemory`]: [`PlainMemory`]
//! (the buffers, a whole range of groups per call: the threaded driver and the deterministic
//! driver) or [`StrictMemory`] (the visibility model of strict mode, D5, one group at a time;
//! the deterministic driver). Strict mode is the driver's choice of memory, not a second
//! interpreter. How `spin` spends its time is the driver's too ([`SpinTime`]: real time on the
//! threaded driver, virtual time on the deterministic one), so kernels never read a clock.

use super::{Access, Fault, Site};
use crate::command::{KernelArgs, Width};
use crate::core::DeviceCore;
use crate::hazard::strict::Visibility;
use crate::hazard::{AccessKind, Model};
use crate::memory::BufferCore;
use crate::sync::shim::MutexGuard;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

/// Lanes per group.
pub const LANES: u32 = 64;
/// Bytes of u32 elements one group of `fill`/`add` covers.
pub const GROUP_BYTES: u64 = LANES as u64 * 4;
/// The fixed cost of one group of a built-in other than `spin`, and the default for user
/// kernels, in (virtual) nanoseconds (D4).
pub const DEFAULT_GROUP_COST_NS: u64 = 1_000;

type KernelFn = dyn Fn(&mut KernelContext<'_>) + Send + Sync;

/// A user kernel: a Rust closure run once per group.
///
/// ```
/// use pipefence::UserKernel;
/// let double = UserKernel::new("double", move |ctx| {
///     let _ = ctx.group();
/// });
/// assert_eq!(double.name(), "double");
/// ```
#[derive(Clone)]
pub struct UserKernel {
    name: Arc<str>,
    func: Arc<KernelFn>,
    cost_ns: u64,
}

impl fmt::Debug for UserKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UserKernel")
            .field("name", &self.name)
            .field("cost_ns", &self.cost_ns)
            .finish()
    }
}

impl UserKernel {
    /// A kernel named `name` running `f` once per group. The closure must return: one that
    /// never returns blocks the deterministic driver (a documented limitation, D4).
    pub fn new(name: &str, f: impl Fn(&mut KernelContext<'_>) + Send + Sync + 'static) -> Self {
        UserKernel {
            name: name.into(),
            func: Arc::new(f),
            cost_ns: DEFAULT_GROUP_COST_NS,
        }
    }

    /// The same kernel with a declared cost per group (virtual nanoseconds on the
    /// deterministic driver, D4).
    pub fn with_cost_ns(mut self, ns: u64) -> Self {
        self.cost_ns = ns;
        self
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A kernel and its arguments, as passed to [`CommandList::dispatch`](crate::CommandList::dispatch).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Kernel {
    /// `dst[i] = value`.
    Fill {
        /// Destination (4-byte aligned).
        dst: u64,
        /// Value.
        value: u32,
    },
    /// `dst[i] = src[i] + value` (wrapping).
    Add {
        /// Destination (4-byte aligned).
        dst: u64,
        /// Source (4-byte aligned).
        src: u64,
        /// Addend.
        value: u32,
    },
    /// `dst (u64) += sum of src[i]` (atomic).
    Sum {
        /// Destination (8-byte aligned).
        dst: u64,
        /// Source (4-byte aligned).
        src: u64,
    },
    /// Each group busies itself for `ns` nanoseconds.
    Spin {
        /// Nanoseconds per group.
        ns: u64,
    },
    /// A user kernel.
    User(UserKernel),
}

impl Kernel {
    /// `fill`.
    pub fn fill(dst: u64, value: u32) -> Kernel {
        Kernel::Fill { dst, value }
    }

    /// `add`.
    pub fn add(dst: u64, src: u64, value: u32) -> Kernel {
        Kernel::Add { dst, src, value }
    }

    /// `sum`.
    pub fn sum(dst: u64, src: u64) -> Kernel {
        Kernel::Sum { dst, src }
    }

    /// `spin`.
    pub fn spin(ns: u64) -> Kernel {
        Kernel::Spin { ns }
    }

    /// The recorded form; user kernels go into `table`.
    pub(crate) fn to_args(&self, table: &mut Vec<UserKernel>) -> KernelArgs {
        match self {
            Kernel::Fill { dst, value } => KernelArgs::Fill {
                dst: *dst,
                value: *value,
            },
            Kernel::Add { dst, src, value } => KernelArgs::Add {
                dst: *dst,
                src: *src,
                value: *value,
            },
            Kernel::Sum { dst, src } => KernelArgs::Sum {
                dst: *dst,
                src: *src,
            },
            Kernel::Spin { ns } => KernelArgs::Spin { ns: *ns },
            Kernel::User(k) => {
                let index = table
                    .iter()
                    .position(|t| Arc::ptr_eq(&t.func, &k.func) && t.cost_ns == k.cost_ns)
                    .unwrap_or_else(|| {
                        table.push(k.clone());
                        table.len() - 1
                    });
                KernelArgs::User {
                    index: index as u32,
                }
            }
        }
    }

    /// The kernel for a decoded dispatch; `None` for a user-kernel index outside the table.
    pub(crate) fn from_args(args: &KernelArgs, table: &[UserKernel]) -> Option<Kernel> {
        Some(match args {
            KernelArgs::Fill { dst, value } => Kernel::fill(*dst, *value),
            KernelArgs::Add { dst, src, value } => Kernel::add(*dst, *src, *value),
            KernelArgs::Sum { dst, src } => Kernel::sum(*dst, *src),
            KernelArgs::Spin { ns } => Kernel::spin(*ns),
            KernelArgs::User { index } => Kernel::User(table.get(*index as usize)?.clone()),
        })
    }

    /// The name: `fill`, `add`, `sum`, `spin`, or the user kernel's.
    pub fn name(&self) -> &str {
        match self {
            Kernel::Fill { .. } => "fill",
            Kernel::Add { .. } => "add",
            Kernel::Sum { .. } => "sum",
            Kernel::Spin { .. } => "spin",
            Kernel::User(k) => k.name(),
        }
    }

    /// The (virtual) cost of one group in nanoseconds (D4): `spin`'s `ns`, a user kernel's
    /// declared cost, [`DEFAULT_GROUP_COST_NS`] for the other built-ins.
    pub(crate) fn group_cost_ns(&self) -> u64 {
        match self {
            Kernel::Spin { ns } => *ns,
            Kernel::User(k) => k.cost_ns,
            _ => DEFAULT_GROUP_COST_NS,
        }
    }

    /// The byte range groups `groups` write, for built-ins that declare one.
    pub(crate) fn write_range(&self, groups: Range<u32>) -> Option<(u64, u64)> {
        match self {
            Kernel::Fill { dst, .. } | Kernel::Add { dst, .. } => Some((
                dst.saturating_add(u64::from(groups.start) * GROUP_BYTES),
                dst.saturating_add(u64::from(groups.end) * GROUP_BYTES),
            )),
            Kernel::Sum { dst, .. } => Some((*dst, dst.saturating_add(8))),
            Kernel::Spin { .. } | Kernel::User(_) => None,
        }
    }
}

impl Kernel {
    /// Whether groups `groups` of this built-in run in any order, or all at once, to the same
    /// memory without a fault on `device`, and the byte ranges they read and write if so:
    /// `None` for a user kernel (its accesses are known only once it runs), for groups whose
    /// ranges could fault (checked over each whole range), and for an `add` or `sum` whose
    /// writes meet another group's reads (an `add` in place reads and writes each group's own
    /// words only; a `sum`'s atomic adds commute). Used by a reducing exploration to complete
    /// such groups in one step when nothing else can run (`driver/deterministic/scripted.rs`).
    pub(crate) fn commuting_groups(
        &self,
        device: &DeviceCore,
        groups: Range<u32>,
    ) -> Option<GroupSpans> {
        let fits = |(s, e): (u64, u64), access: Access| {
            e > s && resolve_range(device, s, e - s, access).is_ok()
        };
        let spans = GroupSpans {
            read: self.read_range(groups.clone()),
            write: self.write_range(groups),
        };
        let in_place = matches!(self, Kernel::Add { dst, src, .. } if dst == src);
        let apart = match (spans.read, spans.write) {
            (Some((s1, e1)), Some((s2, e2))) => e1 <= s2 || e2 <= s1,
            _ => true,
        };
        (!matches!(self, Kernel::User(_))
            && spans.read.is_none_or(|r| fits(r, Access::Read))
            && spans.write.is_none_or(|w| fits(w, Access::Write))
            && (in_place || apart))
            .then_some(spans)
    }

    /// The byte range groups `groups` read, for built-ins that read one.
    fn read_range(&self, groups: Range<u32>) -> Option<(u64, u64)> {
        match self {
            Kernel::Add { src, .. } | Kernel::Sum { src, .. } => Some((
                src.saturating_add(u64::from(groups.start) * GROUP_BYTES),
                src.saturating_add(u64::from(groups.end) * GROUP_BYTES),
            )),
            Kernel::Fill { .. } | Kernel::Spin { .. } | Kernel::User(_) => None,
        }
    }
}

impl Kernel {
    /// Where a built-in's groups' bytes lie: per range, where group 0's would start (group
    /// `g`'s are [`GROUP_BYTES`] from `base + g * GROUP_BYTES`), and the bytes every group
    /// touches (a `sum`'s destination). Nothing for a user kernel.
    pub(crate) fn group_bases(&self) -> ([Option<u64>; 2], Option<(u64, u64)>) {
        match self {
            Kernel::Fill { dst, .. } => ([Some(*dst), None], None),
            Kernel::Add { dst, src, .. } => ([Some(*src), Some(*dst)], None),
            Kernel::Sum { dst, src } => ([Some(*src), None], Some((*dst, dst.saturating_add(8)))),
            Kernel::Spin { .. } | Kernel::User(_) => ([None, None], None),
        }
    }
}

/// The byte ranges some groups of a built-in read and write ([`Kernel::commuting_groups`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct GroupSpans {
    /// What they read, half open.
    pub(crate) read: Option<(u64, u64)>,
    /// What they write, half open.
    pub(crate) write: Option<(u64, u64)>,
}

/// A page fault raised by a kernel (M3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelFault {
    /// The faulting address.
    pub address: u64,
    /// Read or write.
    pub access: Access,
    /// `unmapped` or `write to upload memory`.
    pub why: &'static str,
}

/// Why a group did not complete: a page fault, or a user kernel that panicked (caught at the
/// group, E3: it never unwinds into the driver or the caller).
#[derive(Debug, Clone)]
pub(crate) enum GroupFailure {
    /// An access outside every live buffer, or a write to Upload memory (M3).
    Fault(KernelFault),
    /// The user kernel panicked in this group, with this message.
    Panic {
        /// The group.
        group: u32,
        /// The panic's message (`Box<dyn Any>` payloads that are not strings: a placeholder).
        message: String,
    },
}

impl From<KernelFault> for GroupFailure {
    fn from(f: KernelFault) -> Self {
        GroupFailure::Fault(f)
    }
}

impl GroupFailure {
    /// The engine fault that removes the device, for the dispatch at `site`.
    pub(crate) fn into_fault(self, site: Site, op: &'static str, kernel: &Kernel) -> Fault {
        match self {
            GroupFailure::Fault(kf) => Fault::PageFault {
                address: kf.address,
                access: kf.access,
                site,
                op,
                why: kf.why,
            },
            GroupFailure::Panic { group, message } => Fault::KernelPanic {
                site,
                op,
                kernel: kernel.name().to_string(),
                group,
                message,
            },
        }
    }
}

/// Runs one group of a user kernel, catching a panic (E3).
fn call_user(k: &UserKernel, ctx: &mut KernelContext<'_>) -> Result<(), GroupFailure> {
    let group = ctx.group;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (k.func)(ctx))).map_err(|p| {
        let message = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic with a non-string payload".to_string());
        GroupFailure::Panic { group, message }
    })
}

/// What a user kernel sees: its group id and typed access to device memory. Invalid accesses
/// record a page fault (the first one is reported when the group returns), read as 0 and
/// write nothing.
pub struct KernelContext<'a> {
    device: &'a DeviceCore,
    group: u32,
    fault: Option<KernelFault>,
    /// Strict mode: the visibility model, the queue and the task (dispatch index).
    strict: Option<(&'a mut Visibility, u32, u32)>,
    /// Hazard tracking: the accesses of this group (address, words, kind).
    log: Option<Vec<(u64, u8, AccessKind)>>,
}

impl fmt::Debug for KernelContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelContext")
            .field("group", &self.group)
            .field("fault", &self.fault)
            .finish()
    }
}

impl KernelContext<'_> {
    /// The group id (`0..groups`).
    pub fn group(&self) -> u32 {
        self.group
    }

    /// Lanes per group (64).
    pub fn lanes(&self) -> u32 {
        LANES
    }

    fn resolve(
        &mut self,
        address: u64,
        len: u64,
        access: Access,
    ) -> Option<(Arc<BufferCore>, u64)> {
        let fault = |why| KernelFault {
            address,
            access,
            why,
        };
        let r = match self.device.memory.resolve(address, len) {
            None => Err(fault("unmapped")),
            Some((b, _)) if access == Access::Write && !b.heap.gpu_writable() => {
                Err(fault("write to upload memory"))
            }
            Some((b, o)) if o % len == 0 => Ok((b, o)),
            Some(_) => Err(fault("misaligned")),
        };
        match r {
            Ok(x) => Some(x),
            Err(f) => {
                self.fault.get_or_insert(f);
                None
            }
        }
    }

    fn note(&mut self, address: u64, words: u8, kind: AccessKind) {
        if let Some(l) = self.log.as_mut() {
            l.push((address, words, kind));
        }
    }

    fn load(&mut self, address: u64, width: Width) -> u64 {
        let Some((b, o)) = self.resolve(address, width.bytes(), Access::Read) else {
            return 0;
        };
        let words = (width.bytes() / 4) as u8;
        self.note(address, words, AccessKind::Read);
        if let Some((vis, q, _)) = self.strict.as_mut() {
            let mut v = [0u32; 2];
            let n = usize::from(words);
            vis.task_read(self.device, *q, address, &mut v[..n]);
            return u64::from(v[0]) | (u64::from(v[1]) << 32);
        }
        b.load(o, width).unwrap_or(0)
    }

    fn store(&mut self, address: u64, width: Width, value: u64) {
        let Some((b, o)) = self.resolve(address, width.bytes(), Access::Write) else {
            return;
        };
        let words = (width.bytes() / 4) as u8;
        self.note(address, words, AccessKind::Write);
        if let Some((vis, q, t)) = self.strict.as_mut() {
            let v = [value as u32, (value >> 32) as u32];
            vis.task_write(
                self.device,
                *q,
                (false, *t),
                address,
                &v[..usize::from(words)],
            );
            return;
        }
        match width {
            Width::W32 => b.store32(o, value as u32),
            Width::W64 => b.store64(o, value),
        };
    }

    fn add(&mut self, address: u64, width: Width, value: u64) -> u64 {
        let Some((b, o)) = self.resolve(address, width.bytes(), Access::Write) else {
            return 0;
        };
        self.note(address, (width.bytes() / 4) as u8, AccessKind::Atomic);
        if let Some((vis, q, _)) = self.strict.as_mut() {
            return vis.atomic_add(self.device, *q, address, width, value);
        }
        match width {
            Width::W32 => b.fetch_add32(o, value as u32).map_or(0, u64::from),
            Width::W64 => b.fetch_add64(o, value).unwrap_or(0),
        }
    }

    fn cas(&mut self, address: u64, width: Width, current: u64, new: u64) -> Result<u64, u64> {
        // A compare-exchange that does not store is still a read-modify-write access: the
        // hardware atomic is one operation at L2 whatever its outcome.
        let Some((b, o)) = self.resolve(address, width.bytes(), Access::Write) else {
            return Err(0);
        };
        self.note(address, (width.bytes() / 4) as u8, AccessKind::Atomic);
        if let Some((vis, q, _)) = self.strict.as_mut() {
            return vis.atomic_compare_exchange(self.device, *q, address, width, current, new);
        }
        match width {
            Width::W32 => b
                .compare_exchange32(o, current as u32, new as u32)
                .map_or(Err(0), |r| r.map(u64::from).map_err(u64::from)),
            Width::W64 => b.compare_exchange64(o, current, new).unwrap_or(Err(0)),
        }
    }

    /// Reads the u32 at `address` (4-byte aligned).
    pub fn read_u32(&mut self, address: u64) -> u32 {
        self.load(address, Width::W32) as u32
    }

    /// Reads the u64 at `address` (8-byte aligned).
    pub fn read_u64(&mut self, address: u64) -> u64 {
        self.load(address, Width::W64)
    }

    /// Writes the u32 at `address` (4-byte aligned).
    pub fn write_u32(&mut self, address: u64, value: u32) {
        self.store(address, Width::W32, u64::from(value));
    }

    /// Writes the u64 at `address` (8-byte aligned).
    pub fn write_u64(&mut self, address: u64, value: u64) {
        self.store(address, Width::W64, value);
    }

    /// Atomically adds to the u32 at `address`; returns the old value.
    pub fn atomic_add_u32(&mut self, address: u64, value: u32) -> u32 {
        self.add(address, Width::W32, u64::from(value)) as u32
    }

    /// Atomically adds to the u64 at `address`; returns the old value.
    pub fn atomic_add_u64(&mut self, address: u64, value: u64) -> u64 {
        self.add(address, Width::W64, value)
    }

    /// Atomically stores `new` in the u32 at `address` (4-byte aligned) if it holds `current`
    /// (HLSL `InterlockedCompareExchange`; `InterlockedCompareStore` ignores the result).
    /// Returns `Ok(old)` if it stored, `Err(old)` with the value found if not, like
    /// [`AtomicU32::compare_exchange`](std::sync::atomic::AtomicU32::compare_exchange). It is
    /// an atomic read-modify-write (C6, D5) whether or not it stores: it works at L2 (strict
    /// mode: it sees the newest value and writes back this engine's own dirty copy first), and
    /// the hazard analysis treats it as it treats `atomic_add_u32`. An invalid access records
    /// a page fault and returns `Err(0)`, storing nothing.
    #[doc(alias = "InterlockedCompareExchange")]
    #[doc(alias = "InterlockedCompareStore")]
    pub fn compare_exchange_u32(
        &mut self,
        address: u64,
        current: u32,
        new: u32,
    ) -> Result<u32, u32> {
        self.cas(address, Width::W32, u64::from(current), u64::from(new))
            .map(|v| v as u32)
            .map_err(|v| v as u32)
    }

    /// The 64-bit form of [`compare_exchange_u32`](Self::compare_exchange_u32) (`address`
    /// 8-byte aligned).
    #[doc(alias = "InterlockedCompareExchange64")]
    #[doc(alias = "InterlockedCompareStore64")]
    pub fn compare_exchange_u64(
        &mut self,
        address: u64,
        current: u64,
        new: u64,
    ) -> Result<u64, u64> {
        self.cas(address, Width::W64, current, new)
    }
}

/// Finds the first u32 element of `[start, start + len)` that faults.
#[cold]
fn first_fault(device: &DeviceCore, start: u64, len: u64, access: Access) -> KernelFault {
    let mut a = start;
    while a < start.saturating_add(len) {
        match device.memory.resolve(a, 4) {
            None => {
                return KernelFault {
                    address: a,
                    access,
                    why: "unmapped",
                }
            }
            Some((b, _)) if access == Access::Write && !b.heap.gpu_writable() => {
                return KernelFault {
                    address: a,
                    access,
                    why: "write to upload memory",
                }
            }
            Some(_) => a += 4,
        }
    }
    KernelFault {
        address: start,
        access,
        why: "unmapped",
    }
}

fn resolve_range(
    device: &DeviceCore,
    start: u64,
    len: u64,
    access: Access,
) -> Result<(Arc<BufferCore>, u64), KernelFault> {
    match device.memory.resolve(start, len) {
        Some((b, o)) if access == Access::Read || b.heap.gpu_writable() => Ok((b, o)),
        _ => Err(first_fault(device, start, len, access)),
    }
}

/// The memory a kernel's groups run over: the operations the built-ins need, at range
/// granularity, plus the per-group contexts of user kernels and the hazard hooks. Two
/// implementations: [`PlainMemory`] (the buffers themselves, whole ranges of groups at once) and
/// [`StrictMemory`] (the visibility model, D5, one group at a time). The interpreter
/// ([`run_groups`]) is generic over it, so the plain path has no dynamic dispatch per word.
pub(crate) trait GroupMemory {
    /// Whether the interpreter hands this memory one group at a time (each group's accesses,
    /// faults and hazard checks before the next group's) rather than a whole range at once.
    const ONE_GROUP_AT_A_TIME: bool;
    /// A byte range that passed [`GroupMemory::check`].
    type Region;
    /// The device.
    fn device(&self) -> &DeviceCore;
    /// Checks `[start, start + len)` for `access`: the region, or the page fault of its first
    /// faulting u32 element (M3).
    fn check(&mut self, start: u64, len: u64, access: Access) -> Result<Self::Region, KernelFault>;
    /// Writes `value` to each u32 of the `len` bytes of `dst`.
    fn fill32(&mut self, dst: &Self::Region, len: u64, value: u32);
    /// Writes each u32 of the `len` bytes of `src` plus `value` (wrapping) to `dst`.
    fn add32(&mut self, src: &Self::Region, dst: &Self::Region, len: u64, value: u32);
    /// The sum (wrapping) of the u32 elements of the `len` bytes of `src`.
    fn sum32(&mut self, src: &Self::Region, len: u64) -> u64;
    /// Atomically adds `value` to the u64 at `dst`.
    fn atomic_add64(&mut self, dst: &Self::Region, value: u64);
    /// Groups `groups` of built-in `kernel` ran without a fault.
    fn builtin_done(&mut self, kernel: &Kernel, groups: Range<u32>);
    /// The context of group `group` of a user kernel.
    fn context(&mut self, group: u32) -> KernelContext<'_>;
    /// A user kernel's group made the accesses `log` (after it returned, fault or not).
    fn user_accesses(&mut self, log: &[(u64, u8, AccessKind)]);
}

/// How `spin` spends its time: the driver's policy (the kernel layer does not know whether time
/// is real). The threaded driver busy-waits; the deterministic driver accounts for `spin` in
/// virtual time and does nothing here.
pub(crate) trait SpinTime {
    /// Each of `groups` groups of `spin` busies itself for `ns` nanoseconds on `device`.
    fn spin(&self, device: &DeviceCore, ns: u64, groups: u32);
}

/// Plain memory: kernels read and write the buffers directly. Hazard tracking without strict
/// values (`MemoryModel::Validate`) checks built-ins at launch, and user kernels from the log of
/// each group.
pub(crate) struct PlainMemory<'a> {
    device: &'a DeviceCore,
    /// The task: queue, dispatch index.
    task: (u32, u64),
}

impl<'a> PlainMemory<'a> {
    /// The memory of `device`, for task `task` (queue, dispatch index).
    pub(crate) fn new(device: &'a DeviceCore, task: (u32, u64)) -> Self {
        PlainMemory { device, task }
    }
}

impl GroupMemory for PlainMemory<'_> {
    const ONE_GROUP_AT_A_TIME: bool = false;
    type Region = (Arc<BufferCore>, u64);

    #[inline]
    fn device(&self) -> &DeviceCore {
        self.device
    }

    #[inline]
    fn check(&mut self, start: u64, len: u64, access: Access) -> Result<Self::Region, KernelFault> {
        resolve_range(self.device, start, len, access)
    }

    #[inline]
    fn fill32(&mut self, (b, o): &Self::Region, len: u64, value: u32) {
        b.fill32(*o, len, value);
    }

    #[inline]
    fn add32(&mut self, (sb, so): &Self::Region, (db, dof): &Self::Region, len: u64, value: u32) {
        add_range(sb, *so, db, *dof, len, value);
    }

    #[inline]
    fn sum32(&mut self, (sb, so): &Self::Region, len: u64) -> u64 {
        let so = *so;
        let mut total: u64 = 0;
        // Whole words: one pass over them (and one access for a reducing exploration to
        // note, not one per lane), each word's two halves added.
        if so.is_multiple_of(8) && len.is_multiple_of(8) {
            let (first, words) = ((so / 8) as usize, (len / 8) as usize);
            let read = sb.for_each_word(
                first,
                first + words,
                crate::sync::shim::Ordering::Acquire,
                |w| {
                    total = total
                        .wrapping_add(w & u64::from(u32::MAX))
                        .wrapping_add(w >> 32);
                },
            );
            if read.is_some() {
                return total;
            }
            total = 0;
        }
        let mut o = so;
        while o < so + len {
            total = total.wrapping_add(u64::from(sb.load32(o).unwrap_or(0)));
            o += 4;
        }
        total
    }

    #[inline]
    fn atomic_add64(&mut self, (db, dof): &Self::Region, value: u64) {
        db.add64(*dof, value);
    }

    #[inline]
    fn builtin_done(&mut self, _: &Kernel, _: Range<u32>) {}

    fn context(&mut self, group: u32) -> KernelContext<'_> {
        KernelContext {
            device: self.device,
            group,
            fault: None,
            strict: None,
            log: self.device.model.is_some().then(Vec::new),
        }
    }

    fn user_accesses(&mut self, log: &[(u64, u8, AccessKind)]) {
        if let Some(mut m) = self.device.model() {
            m.user_accesses(self.task.0, self.task.1, log);
        }
    }
}

/// Strict memory (D5): reads and writes go through the visibility model, one group at a time,
/// and each group's accesses are checked for hazards when it ends. Holds the hazard model's
/// lock.
pub(crate) struct StrictMemory<'a> {
    device: &'a DeviceCore,
    model: MutexGuard<'a, Model>,
    queue: u32,
    index: u64,
}

impl<'a> StrictMemory<'a> {
    /// The strict memory of `device` for task `index` of queue `queue`; `None` unless the
    /// device is in strict mode.
    pub(crate) fn new(device: &'a DeviceCore, queue: u32, index: u64) -> Option<Self> {
        if !device.strict() {
            return None;
        }
        Some(StrictMemory {
            device,
            model: device.model()?,
            queue,
            index,
        })
    }

    fn task(&self) -> (bool, u32) {
        (false, self.index as u32)
    }
}

impl GroupMemory for StrictMemory<'_> {
    const ONE_GROUP_AT_A_TIME: bool = true;
    /// The start address.
    type Region = u64;

    fn device(&self) -> &DeviceCore {
        self.device
    }

    fn check(&mut self, start: u64, len: u64, access: Access) -> Result<u64, KernelFault> {
        resolve_range(self.device, start, len, access).map(|_| start)
    }

    fn fill32(&mut self, dst: &u64, len: u64, value: u32) {
        let (device, queue, task) = (self.device, self.queue, self.task());
        if let Some(vis) = self.model.vis.as_mut() {
            let v = [value; LANES as usize];
            for_chunks(*dst, len, |a, n| {
                vis.task_write(device, queue, task, a, &v[..n])
            });
        }
    }

    fn add32(&mut self, src: &u64, dst: &u64, len: u64, value: u32) {
        let (device, queue, task) = (self.device, self.queue, self.task());
        if let Some(vis) = self.model.vis.as_mut() {
            let d = *dst;
            for_chunks(*src, len, |a, n| {
                let mut v = [0u32; LANES as usize];
                vis.task_read(device, queue, a, &mut v[..n]);
                for x in v[..n].iter_mut() {
                    *x = x.wrapping_add(value);
                }
                vis.task_write(device, queue, task, d.wrapping_add(a - *src), &v[..n]);
            });
        }
    }

    fn sum32(&mut self, src: &u64, len: u64) -> u64 {
        let (device, queue) = (self.device, self.queue);
        let mut total = 0u64;
        if let Some(vis) = self.model.vis.as_mut() {
            for_chunks(*src, len, |a, n| {
                let mut v = [0u32; LANES as usize];
                vis.task_read(device, queue, a, &mut v[..n]);
                total = v[..n]
                    .iter()
                    .fold(total, |t, x| t.wrapping_add(u64::from(*x)));
            });
        }
        total
    }

    fn atomic_add64(&mut self, dst: &u64, value: u64) {
        let (device, queue) = (self.device, self.queue);
        if let Some(vis) = self.model.vis.as_mut() {
            vis.atomic_add64_unused(device, queue, *dst, value);
        }
    }

    fn builtin_done(&mut self, kernel: &Kernel, groups: Range<u32>) {
        // Built-ins are checked per group, after their values were read (so a stale-cache
        // report can say what this schedule returned).
        for group in groups {
            self.model
                .group_accesses(self.queue, self.index, kernel, group);
        }
    }

    fn context(&mut self, group: u32) -> KernelContext<'_> {
        let (queue, task) = (self.queue, self.index as u32);
        KernelContext {
            device: self.device,
            group,
            fault: None,
            strict: self.model.vis.as_mut().map(|v| (v, queue, task)),
            log: Some(Vec::new()),
        }
    }

    fn user_accesses(&mut self, log: &[(u64, u8, AccessKind)]) {
        self.model.user_accesses(self.queue, self.index, log);
    }
}

/// Calls `f(address, words)` for the consecutive pieces of at most one group's worth of u32
/// elements (`LANES`) that make up the `len` bytes at `start` (strict memory sees one group at
/// a time, so that is one piece).
fn for_chunks(start: u64, len: u64, mut f: impl FnMut(u64, usize)) {
    let mut done = 0;
    while done < len {
        let n = (len - done).min(GROUP_BYTES);
        f(start + done, (n / 4) as usize);
        done += n;
    }
}

/// Runs groups `range` of `kernel` over `mem`, with `spin`'s time spent by `time`: the one
/// kernel interpreter. A memory that takes one group at a time ([`StrictMemory`]) runs each
/// group to its end (faults and hazard checks included) before the next.
pub(crate) fn run_groups<M: GroupMemory, T: SpinTime>(
    kernel: &Kernel,
    mem: &mut M,
    time: &T,
    range: Range<u32>,
) -> Result<(), GroupFailure> {
    if !M::ONE_GROUP_AT_A_TIME {
        return run_range(kernel, mem, time, range);
    }
    for g in range {
        run_range(kernel, mem, time, g..g + 1)?;
    }
    Ok(())
}

fn run_range<M: GroupMemory, T: SpinTime>(
    kernel: &Kernel,
    mem: &mut M,
    time: &T,
    range: Range<u32>,
) -> Result<(), GroupFailure> {
    if range.is_empty() {
        return Ok(());
    }
    let n = u64::from(range.end - range.start);
    let first = u64::from(range.start);
    match kernel {
        Kernel::Fill { dst, value } => {
            let len = n * GROUP_BYTES;
            let d = mem.check(dst.wrapping_add(first * GROUP_BYTES), len, Access::Write)?;
            mem.fill32(&d, len, *value);
        }
        Kernel::Add { dst, src, value } => {
            let len = n * GROUP_BYTES;
            let s = mem.check(src.wrapping_add(first * GROUP_BYTES), len, Access::Read)?;
            let d = mem.check(dst.wrapping_add(first * GROUP_BYTES), len, Access::Write)?;
            mem.add32(&s, &d, len, *value);
        }
        Kernel::Sum { dst, src } => {
            let len = n * GROUP_BYTES;
            let s = mem.check(src.wrapping_add(first * GROUP_BYTES), len, Access::Read)?;
            let d = mem.check(*dst, 8, Access::Write)?;
            let total = mem.sum32(&s, len);
            mem.atomic_add64(&d, total);
        }
        Kernel::Spin { ns } => time.spin(mem.device(), *ns, range.end - range.start),
        Kernel::User(k) => {
            for g in range {
                let mut ctx = mem.context(g);
                let ran = call_user(k, &mut ctx);
                let (log, fault) = (ctx.log.take(), ctx.fault.take());
                drop(ctx);
                if let Some(log) = log {
                    mem.user_accesses(&log);
                }
                ran?;
                if let Some(f) = fault {
                    return Err(f.into());
                }
            }
            return Ok(());
        }
    }
    mem.builtin_done(kernel, range);
    Ok(())
}

fn add_range(sb: &BufferCore, so: u64, db: &BufferCore, dof: u64, len: u64, value: u32) {
    use crate::sync::shim::Ordering;
    if so.is_multiple_of(8) && dof.is_multiple_of(8) && len.is_multiple_of(8) {
        let (s0, d0, words) = ((so / 8) as usize, (dof / 8) as usize, (len / 8) as usize);
        // The destination first: where the ranges share a chunk not filled yet, it is filled
        // before the source reads it.
        if let Some(dst) = db.words(d0, d0 + words) {
            let mut dst = dst.iter();
            let read = sb.for_each_word(s0, s0 + words, Ordering::Relaxed, |w| {
                let lo = (w as u32).wrapping_add(value);
                let hi = ((w >> 32) as u32).wrapping_add(value);
                if let Some(d) = dst.next() {
                    d.store((u64::from(hi) << 32) | u64::from(lo), Ordering::Relaxed);
                }
            });
            if read.is_some() {
                return;
            }
        }
    }
    let mut i = 0;
    while i < len {
        let v = sb.load32(so + i).unwrap_or(0).wrapping_add(value);
        db.store32(dof + i, v);
        i += 4;
    }
}
