//! Strict mode's values (D5, `docs/memory-model.md` sections 2 to 4): per-engine dirty words
//! (not yet written back) and read caches of 64-byte line snapshots. Memory itself (the
//! buffers) is the shared level that CP writes, host accesses and atomics use.
//!
//! Only the deterministic driver runs strict mode, so every call here happens with the model
//! lock held by the one running thread. Buffers start 256-byte aligned, so a line never spans
//! two buffers.

use crate::command::Width;
use crate::core::DeviceCore;
use crate::footprint::{record, record_mem, Kind, Obj};
use crate::memory::BufferCore;
use crate::rng::Rng;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Bytes per cache line (INFERENCE: a common GPU line; the seeds give no size).
pub(crate) const LINE: u64 = 64;
const LINE_WORDS: usize = (LINE / 4) as usize;

/// A word an engine's task wrote and nobody has written back.
#[derive(Debug, Clone, Copy)]
struct DirtyWord {
    value: u32,
    /// The task that wrote it: (copy?, index).
    task: (bool, u32),
    /// The engine's own PFP and ME see it (after a flush or a Q7 boundary).
    cp_visible: bool,
}

/// The dirty words of one line of one engine.
#[derive(Debug, Clone)]
struct DirtyLine {
    buf: Arc<BufferCore>,
    /// The line's first byte, as an offset in `buf` (lines never span buffers).
    off: u64,
    words: [Option<DirtyWord>; LINE_WORDS],
}

impl DirtyLine {
    fn write_back(&mut self, i: usize) {
        if let Some(d) = self.words[i].take() {
            self.buf.store32(self.off + i as u64 * 4, d.value);
        }
    }

    /// Writes back every dirty word of the line (it is being dropped).
    fn write_back_all(mut self) {
        for i in 0..LINE_WORDS {
            self.write_back(i);
        }
    }

    fn is_empty(&self) -> bool {
        self.words.iter().all(Option::is_none)
    }

    /// 1 + the last dispatch and 1 + the last copy whose words are dirty here (0: none): a
    /// release of dispatches and copies below those covers every word.
    fn pending(&self) -> (u32, u32) {
        self.words
            .iter()
            .flatten()
            .fold((0, 0), |(d, c), w| match w.task {
                (true, t) => (d, c.max(t.saturating_add(1))),
                (false, t) => (d.max(t.saturating_add(1)), c),
            })
    }
}

#[derive(Debug, Default)]
struct EngineVis {
    /// Dirty lines by address, in address order: a reducing exploration lists one early
    /// write-back per dirty line at every scheduling point ([`Visibility::dirty_lines`]),
    /// and a large dispatch's thousands of lines would be sorted at each.
    dirty: BTreeMap<u64, DirtyLine>,
    /// Line address -> the words as loaded (None: not mapped).
    cache: FxHashMap<u64, [Option<u32>; LINE_WORDS]>,
    /// The last stale value returned per word: (old, current).
    stale: FxHashMap<u64, (u32, u32)>,
}

impl EngineVis {
    fn dirty_word(&self, addr: u64) -> Option<&DirtyWord> {
        let l = self.dirty.get(&(addr & !(LINE - 1)))?;
        l.words[((addr % LINE) / 4) as usize].as_ref()
    }

    /// Writes back the dirty words of `n` words from `addr`; returns the lines made clean.
    fn write_back_words(&mut self, addr: u64, n: u64) -> Vec<u64> {
        let mut clean = Vec::new();
        for i in 0..n {
            let a = addr + i * 4;
            let line = a & !(LINE - 1);
            if let Some(l) = self.dirty.get_mut(&line) {
                l.write_back(((a % LINE) / 4) as usize);
                if l.is_empty() {
                    self.dirty.remove(&line);
                    clean.push(line);
                }
            }
        }
        clean
    }
}

/// A change by engine `q` of its dirty words of `line` (a task's or CP write, an atomic):
/// it changes what the engine's tasks read of the line too. A write-back records only the
/// line ([`Obj::View`]).
fn record_line(q: u32, line: u64, kind: Kind) {
    record(Obj::Line(q, line), kind);
    record(Obj::View(q, line), kind);
}

/// The visibility model of strict mode.
#[derive(Debug)]
pub(crate) struct Visibility {
    engines: FxHashMap<u32, EngineVis>,
    rng: Rng,
    /// Where the choices come from instead of `rng` ([`crate::DeviceDesc::script`]).
    pub(crate) script: Option<Arc<crate::choice::Script>>,
    /// The buffer of the last access, with the address-space generation it is valid for.
    last: Option<(u64, Arc<BufferCore>)>,
    /// Early write-backs done, stale reads returned (statistics).
    pub(crate) early_writebacks: u64,
    pub(crate) stale_reads: u64,
}

impl Visibility {
    pub(crate) fn new(seed: u64) -> Self {
        Visibility {
            engines: FxHashMap::default(),
            rng: Rng::new(seed ^ 0x0005_71C7_0000_D5D5),
            script: None,
            last: None,
            early_writebacks: 0,
            stale_reads: 0,
        }
    }

    fn e(&mut self, q: u32) -> &mut EngineVis {
        self.engines.entry(q).or_default()
    }

    /// An action other than its early write-back made engine `q`'s dirty `line` clean (it
    /// wrote it back, or overwrote its dirty words): a reducing exploration records that as an
    /// action of the line's write-back actor, at the same point. Without it, a write-back that
    /// the action disabled would race with nothing (`explore/dpor.rs`): the reads of the line
    /// before the action could never be explored with the write-back before them.
    fn cleaned(script: &Option<Arc<crate::choice::Script>>, q: u32, line: u64) {
        let Some(s) = script.as_ref().filter(|s| s.is_reducing()) else {
            return;
        };
        s.event(
            crate::choice::ActorKey::Writeback(q, line),
            crate::footprint::Footprint::new(vec![
                (Obj::Line(q, line), Kind::Write),
                (Obj::Mem(line, line + LINE), Kind::Write),
                (Obj::Device, Kind::Read),
            ]),
        );
    }

    /// Whether engine `q` has words not written back.
    pub(crate) fn has_dirty(&self, q: u32) -> bool {
        self.engines.get(&q).is_some_and(|e| !e.dirty.is_empty())
    }

    /// Drops engine `q`'s read cache (an invalidate).
    pub(crate) fn invalidate(&mut self, q: u32) {
        record(Obj::Cache(q), Kind::Write);
        self.e(q).cache.clear();
    }

    /// Makes engine `q`'s dirty words visible to its own PFP and ME.
    pub(crate) fn mark_cp_visible(&mut self, q: u32) {
        record(Obj::Dirty(q), Kind::Write);
        for l in self.e(q).dirty.values_mut() {
            for d in l.words.iter_mut().flatten() {
                d.cp_visible = true;
            }
        }
    }

    /// Writes back engine `q`'s words written by dispatches below `disp` and copies below
    /// `copy` (a release).
    pub(crate) fn write_back_tasks(&mut self, q: u32, disp: u32, copy: u32) {
        record(Obj::Dirty(q), Kind::Write);
        record(Obj::Release(q, disp, copy), Kind::Read);
        let script = self.script.clone();
        let e = self.e(q);
        let mut clean = Vec::new();
        e.dirty.retain(|&line, l| {
            for i in 0..LINE_WORDS {
                let covered = match l.words[i].map(|d| d.task) {
                    Some((true, t)) => t < copy,
                    Some((false, t)) => t < disp,
                    None => false,
                };
                if covered {
                    l.write_back(i);
                }
            }
            if l.is_empty() {
                clean.push(line);
            }
            !l.is_empty()
        });
        for line in clean {
            Self::cleaned(&script, q, line);
        }
    }

    /// Writes back every engine's dirty words (`wait_idle`). A reducing exploration records
    /// each line's write-back in the order they were made: where two engines hold the same
    /// line dirty, the last one's words are what memory keeps, and the search explores the
    /// other orders by writing that one back early (`explore/dpor.rs`,
    /// `shared_line_writebacks`).
    pub(crate) fn write_back_all(&mut self) {
        record(Obj::All, Kind::Write);
        let mut clean = Vec::new();
        for (&q, e) in self.engines.iter_mut() {
            // An engine's lines are distinct: their order changes no memory, and is recorded
            // by address (the map's order).
            for (line, l) in std::mem::take(&mut e.dirty) {
                l.write_back_all();
                clean.push((q, line));
            }
        }
        for (q, line) in clean {
            Self::cleaned(&self.script, q, line);
        }
    }

    /// Writes back a run of 1 to 64 of engine `q`'s dirty lines from one the schedule picks
    /// (an early write-back, D5: "never late"; a run, so that a big buffer does not cost one
    /// scheduling step per line).
    pub(crate) fn write_back_random_line(&mut self, q: u32) {
        // Scripted: one line, any of them (a run is the same as its lines one after another).
        let script = self.script.clone();
        let r = if script.is_some() {
            0
        } else {
            self.rng.next_u64()
        };
        let e = self.e(q);
        // In address order (the map's).
        let lines: Vec<u64> = e.dirty.keys().copied().collect();
        if lines.is_empty() {
            return;
        }
        let (first, run) = match &script {
            Some(s) => (s.choose(lines.len() as u64) as usize, 1),
            None => ((r % lines.len() as u64) as usize, 1usize << ((r >> 32) % 7)),
        };
        for line in lines.iter().skip(first).take(run) {
            record(Obj::Line(q, *line), Kind::Write);
            if let Some(l) = e.dirty.remove(line) {
                l.write_back_all();
            }
        }
        self.early_writebacks += 1;
    }

    /// Engine `q`'s dirty lines, in address order (a reducing exploration's write-back
    /// alternatives: one per line).
    pub(crate) fn dirty_lines(&self, q: u32) -> Vec<u64> {
        self.engines
            .get(&q)
            .map(|e| e.dirty.keys().copied().collect())
            .unwrap_or_default()
    }

    /// Writes back engine `q`'s dirty line `line` (an early write-back of that line, D5).
    pub(crate) fn write_back_line(&mut self, q: u32, line: u64) {
        record(Obj::Line(q, line), Kind::Write);
        if let Some(l) = self.e(q).dirty.remove(&line) {
            let (d, c) = l.pending();
            record(Obj::Pending(q, d, c), Kind::Read);
            l.write_back_all();
            self.early_writebacks += 1;
        }
    }

    /// A CP value write by engine `q` lands in memory: its own dirty copy is dropped, so a
    /// later write-back cannot move the word backwards.
    pub(crate) fn cp_write(&mut self, q: u32, address: u64, width: Width) {
        let script = self.script.clone();
        let e = self.e(q);
        for i in 0..width.bytes() / 4 {
            let a = (address & !3) + i * 4;
            let line = a & !(LINE - 1);
            record_line(q, line, Kind::Write);
            if let Some(l) = e.dirty.get_mut(&line) {
                l.words[((a % LINE) / 4) as usize] = None;
                if l.is_empty() {
                    e.dirty.remove(&line);
                    Self::cleaned(&script, q, line);
                }
            }
        }
    }

    /// What engine `q`'s PFP or ME reads at `address`: memory plus its own CP-visible dirty
    /// words (never stale).
    pub(crate) fn cp_read(&self, q: u32, address: u64, width: Width, memory: u64) -> u64 {
        for i in 0..width.bytes() / 4 {
            record(
                Obj::Line(q, ((address & !3) + i * 4) & !(LINE - 1)),
                Kind::Read,
            );
        }
        let Some(e) = self.engines.get(&q) else {
            return memory;
        };
        let mut v = memory;
        for i in 0..width.bytes() / 4 {
            if let Some(d) = e.dirty_word((address & !3) + i * 4) {
                if d.cp_visible {
                    let shift = 32 * i;
                    v = (v & !(0xFFFF_FFFFu64 << shift)) | (u64::from(d.value) << shift);
                }
            }
        }
        v
    }

    /// The buffer holding `addr` (one cached resolution, valid for the address space's
    /// generation).
    fn resolve(&mut self, dev: &DeviceCore, addr: u64) -> Option<(Arc<BufferCore>, u64)> {
        let generation = dev.memory.generation();
        if let Some((g, b)) = &self.last {
            if *g == generation && addr >= b.base && b.contains(addr - b.base, 4) {
                return Some((b.clone(), addr - b.base));
            }
        }
        let (b, off) = dev.memory.resolve(addr, 4)?;
        self.last = Some((generation, b.clone()));
        Some((b, off))
    }

    /// Engine `q`'s view of `line` below its read cache: its own dirty words over memory.
    /// What a miss loads into the read cache, so that an engine never reads its own writes
    /// stale (`docs/memory-model.md` section 2), and the same whether a dirty word was written
    /// back before the read or after it: a task's read and its engine's write-back of the line
    /// leave the same state in either order. Every word of the line is read from memory, dirty
    /// or not, so that the read's footprint does not depend on what is dirty: a write-back
    /// before it (which makes the read depend on memory) must wake it where it sleeps, and a
    /// host's write of the word after that must race with it (`explore/dpor.rs`).
    fn view_line(&mut self, dev: &DeviceCore, q: u32, line: u64) -> [Option<u32>; LINE_WORDS] {
        let mut words = [None; LINE_WORDS];
        if let Some((b, off)) = self.resolve(dev, line) {
            for (i, w) in words.iter_mut().enumerate() {
                *w = b.load32(off + i as u64 * 4);
            }
        }
        if let Some(l) = self.engines.get(&q).and_then(|e| e.dirty.get(&line)) {
            for (w, d) in words.iter_mut().zip(l.words.iter()) {
                if let Some(d) = d {
                    *w = Some(d.value);
                }
            }
        }
        words
    }

    /// A task of engine `q` reads `out.len()` words from `address`: its own dirty words first,
    /// then its cached lines (each line a snapshot of one moment: stale as a whole when the
    /// schedule picks it and memory changed since), else memory (loading the line, with the
    /// engine's own dirty words in it).
    pub(crate) fn task_read(&mut self, dev: &DeviceCore, q: u32, address: u64, out: &mut [u32]) {
        let mut i = 0;
        while i < out.len() {
            let a = address + i as u64 * 4;
            let line = a & !(LINE - 1);
            let first = ((a - line) / 4) as usize;
            let n = (LINE_WORDS - first).min(out.len() - i);
            // The engine's view of the line, not the line's dirty state: a write-back of the
            // line does not change what this read returns or loads.
            record(Obj::View(q, line), Kind::Read);
            record(Obj::Loaded(q, line), Kind::Read);
            let mem = self.view_line(dev, q, line);
            let e = self.e(q);
            let cached = e.cache.get(&line).copied();
            let differs = cached.is_some_and(|c| c[first..first + n] != mem[first..first + n]);
            let stale = differs
                && match &self.script {
                    Some(s) => s.choose(2) == 1,
                    None => self.rng.next_u64().is_multiple_of(2),
                };
            let e = self.e(q);
            let src = match cached {
                Some(c) if stale => {
                    for k in first..first + n {
                        let (old, cur) = (c[k].unwrap_or(0), mem[k].unwrap_or(0));
                        e.stale.insert(line + k as u64 * 4, (old, cur));
                    }
                    c
                }
                _ => {
                    if cached != Some(mem) {
                        e.cache.insert(line, mem);
                    }
                    if !e.stale.is_empty() {
                        for k in first..first + n {
                            e.stale.remove(&(line + k as u64 * 4));
                        }
                    }
                    mem
                }
            };
            let dirty = e.dirty.get(&line);
            for k in 0..n {
                let w = first + k;
                out[i + k] = match dirty.and_then(|l| l.words[w]) {
                    Some(d) => d.value,
                    None => src[w].unwrap_or(0),
                };
            }
            if stale {
                self.stale_reads += 1;
            }
            i += n;
        }
    }

    /// A task (`task`: copy?, index) of engine `q` writes `values` from `address` into the
    /// engine's dirty words; its cached lines see them too.
    pub(crate) fn task_write(
        &mut self,
        dev: &DeviceCore,
        q: u32,
        task: (bool, u32),
        address: u64,
        values: &[u32],
    ) {
        let mut i = 0;
        while i < values.len() {
            let a = address + i as u64 * 4;
            let line = a & !(LINE - 1);
            let first = ((a - line) / 4) as usize;
            let n = (LINE_WORDS - first).min(values.len() - i);
            record_line(q, line, Kind::Write);
            record_mem(a, n as u64 * 4, Kind::Write);
            let resolved = match self.e(q).dirty.contains_key(&line) {
                true => None,
                false => match self.resolve(dev, a) {
                    Some((buf, off)) => Some((buf, off - (a - line))),
                    None => {
                        i += n;
                        continue;
                    }
                },
            };
            let e = self.e(q);
            let l = match resolved {
                Some((buf, off)) => e.dirty.entry(line).or_insert(DirtyLine {
                    buf,
                    off,
                    words: [None; LINE_WORDS],
                }),
                None => match e.dirty.get_mut(&line) {
                    Some(l) => l,
                    None => unreachable!("checked above"),
                },
            };
            for k in 0..n {
                l.words[first + k] = Some(DirtyWord {
                    value: values[i + k],
                    task,
                    cp_visible: false,
                });
            }
            if let Some(c) = e.cache.get_mut(&line) {
                for k in 0..n {
                    c[first + k] = Some(values[i + k]);
                }
            }
            i += n;
        }
    }

    /// An atomic add by a task of engine `q` at memory, after writing back its own dirty copy
    /// of the word(s). Returns the old value.
    pub(crate) fn atomic_add(
        &mut self,
        dev: &DeviceCore,
        q: u32,
        address: u64,
        width: Width,
        value: u64,
    ) -> u64 {
        self.atomic_rmw(dev, q, address, width, Kind::Write, |b, off| match width {
            Width::W32 => b.fetch_add32(off, value as u32).map_or(0, u64::from),
            Width::W64 => b.fetch_add64(off, value).unwrap_or(0),
        })
        .unwrap_or(0)
    }

    /// [`atomic_add`](Self::atomic_add) of 64 bits whose old value nobody reads (a built-in
    /// kernel's): such adds commute with each other (`footprint.rs`).
    pub(crate) fn atomic_add64_unused(
        &mut self,
        dev: &DeviceCore,
        q: u32,
        address: u64,
        value: u64,
    ) {
        let _ = self.atomic_rmw(dev, q, address, Width::W64, Kind::Update, |b, off| {
            b.add64(off, value)
        });
    }

    /// An atomic compare-exchange by a task of engine `q` at memory, like
    /// [`atomic_add`](Self::atomic_add): `Ok(old)` if it stored `new`, `Err(old)` if not.
    pub(crate) fn atomic_compare_exchange(
        &mut self,
        dev: &DeviceCore,
        q: u32,
        address: u64,
        width: Width,
        current: u64,
        new: u64,
    ) -> Result<u64, u64> {
        self.atomic_rmw(dev, q, address, width, Kind::Write, |b, off| match width {
            Width::W32 => b
                .compare_exchange32(off, current as u32, new as u32)
                .map_or(Err(0), |r| r.map(u64::from).map_err(u64::from)),
            Width::W64 => b.compare_exchange64(off, current, new).unwrap_or(Err(0)),
        })
        .unwrap_or(Err(0))
    }

    /// An atomic read-modify-write `op` by a task of engine `q` at memory (L2), after writing
    /// back the engine's own dirty copy of the word(s); the engine's cached copy of the line
    /// then follows it. `None` for an unmapped address.
    fn atomic_rmw<R>(
        &mut self,
        dev: &DeviceCore,
        q: u32,
        address: u64,
        width: Width,
        kind: Kind,
        op: impl FnOnce(&BufferCore, u64) -> R,
    ) -> Option<R> {
        record_line(q, address & !(LINE - 1), kind);
        for line in self.e(q).write_back_words(address, width.bytes() / 4) {
            Self::cleaned(&self.script, q, line);
        }
        let (b, off) = dev.memory.resolve(address, width.bytes())?;
        let r = op(&b, off);
        // The engine's cached copy of the line follows its own atomic.
        let line = address & !(LINE - 1);
        if self.e(q).cache.contains_key(&line) {
            let l = self.view_line(dev, q, line);
            self.e(q).cache.insert(line, l);
        }
        Some(r)
    }

    /// (old value, current value, address) when engine `q`'s last read of a word of
    /// `[lo, hi)` returned a stale value (the first such word).
    pub(crate) fn last_stale(&self, q: u32, (lo, hi): (u64, u64)) -> Option<(u32, u32, u64)> {
        let e = self.engines.get(&q)?;
        if e.stale.is_empty() {
            return None;
        }
        let mut a = lo & !3;
        while a < hi {
            if let Some((old, cur)) = e.stale.get(&a) {
                return Some((*old, *cur, a));
            }
            a += 4;
        }
        None
    }
}
