//! Strict mode's values (D5, `docs/memory-model.md` sections 2 to 4): per-engine dirty words
//! (not yet written back) and read caches of 64-byte line snapshots. Memory itself (the
//! buffers) is the shared level that CP writes, host accesses and atomics use.
//!
//! Only the deterministic driver runs strict mode, so every call here happens with the model
//! lock held by the one running thread.

use crate::api::DeviceShared;
use crate::command::Width;
use crate::memory::BufferCore;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Bytes per cache line (INFERENCE: a common GPU line; the seeds give no size).
pub(crate) const LINE: u64 = 64;
const LINE_WORDS: usize = (LINE / 4) as usize;

#[derive(Debug, Clone)]
struct Dirty {
    buf: Arc<BufferCore>,
    off: u64,
    value: u32,
    /// The task that wrote it: (copy?, index).
    task: (bool, u32),
    /// The engine's own PFP and ME see it (after a flush or a Q7 boundary).
    cp_visible: bool,
}

#[derive(Debug, Default)]
struct EngineVis {
    dirty: BTreeMap<u64, Dirty>,
    /// Line address -> the words as loaded (None: not mapped).
    cache: FxHashMap<u64, [Option<u32>; LINE_WORDS]>,
    /// The last stale value returned per word: (old, current).
    stale: FxHashMap<u64, (u32, u32)>,
}

/// SplitMix64, seeded from the schedule's seed.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The visibility model of strict mode.
#[derive(Debug)]
pub(crate) struct Visibility {
    engines: FxHashMap<u32, EngineVis>,
    rng: Rng,
    /// The buffer of the last access, with the address-space generation it is valid for.
    last: Option<(u64, Arc<BufferCore>)>,
    /// Lines written back early, stale reads returned (statistics).
    pub(crate) early_writebacks: u64,
    pub(crate) stale_reads: u64,
}

impl Visibility {
    pub(crate) fn new(seed: u64) -> Self {
        Visibility {
            engines: FxHashMap::default(),
            rng: Rng(seed ^ 0x0005_71C7_0000_D5D5),
            last: None,
            early_writebacks: 0,
            stale_reads: 0,
        }
    }

    fn e(&mut self, q: u32) -> &mut EngineVis {
        self.engines.entry(q).or_default()
    }

    /// Whether engine `q` has words not written back.
    pub(crate) fn has_dirty(&self, q: u32) -> bool {
        self.engines.get(&q).is_some_and(|e| !e.dirty.is_empty())
    }

    /// Drops engine `q`'s read cache (an invalidate).
    pub(crate) fn invalidate(&mut self, q: u32) {
        let e = self.e(q);
        e.cache.clear();
    }

    /// Makes engine `q`'s dirty words visible to its own PFP and ME.
    pub(crate) fn mark_cp_visible(&mut self, q: u32) {
        for d in self.e(q).dirty.values_mut() {
            d.cp_visible = true;
        }
    }

    fn write_back_word(e: &mut EngineVis, addr: u64) {
        if let Some(d) = e.dirty.remove(&addr) {
            d.buf.store32(d.off, d.value);
        }
    }

    /// Writes back engine `q`'s words written by dispatches below `disp` and copies below
    /// `copy` (a release).
    pub(crate) fn write_back_tasks(&mut self, q: u32, disp: u32, copy: u32) {
        let e = self.e(q);
        let addrs: Vec<u64> = e
            .dirty
            .iter()
            .filter(|(_, d)| match d.task {
                (true, i) => i < copy,
                (false, i) => i < disp,
            })
            .map(|(a, _)| *a)
            .collect();
        for a in addrs {
            Self::write_back_word(e, a);
        }
    }

    /// Writes back every engine's dirty words (`wait_idle`).
    pub(crate) fn write_back_all(&mut self) {
        for e in self.engines.values_mut() {
            let addrs: Vec<u64> = e.dirty.keys().copied().collect();
            for a in addrs {
                Self::write_back_word(e, a);
            }
        }
    }

    /// Writes back one line of engine `q`'s dirty words, chosen by the schedule (an early
    /// write-back, D5: "never late").
    pub(crate) fn write_back_random_line(&mut self, q: u32) {
        let r = self.rng.next();
        let e = self.e(q);
        let (Some(first), Some(last)) = (e.dirty.keys().next(), e.dirty.keys().next_back()) else {
            return;
        };
        // A random dirty word picks the first line; the run is 1 to 64 lines long (so that a
        // big buffer does not cost one scheduling step per line).
        let span = (last - first) / 4 + 1;
        let probe = first + (r % span) * 4;
        let Some(start) = e.dirty.range(probe..).next().map(|(a, _)| a & !(LINE - 1)) else {
            return;
        };
        let run = 1u64 << ((r >> 32) % 7);
        let end = start.saturating_add(run * LINE);
        let addrs: Vec<u64> = e.dirty.range(start..end).map(|(a, _)| *a).collect();
        for a in addrs {
            Self::write_back_word(e, a);
        }
        self.early_writebacks += 1;
    }

    /// A CP value write by engine `q` lands in memory: its own dirty copy is dropped, so a
    /// later write-back cannot move the word backwards.
    pub(crate) fn cp_write(&mut self, q: u32, address: u64, width: Width) {
        let e = self.e(q);
        for i in 0..width.bytes() / 4 {
            e.dirty.remove(&((address & !3) + i * 4));
        }
    }

    /// What engine `q`'s PFP or ME reads at `address`: memory plus its own CP-visible dirty
    /// words (never stale).
    pub(crate) fn cp_read(&self, q: u32, address: u64, width: Width, memory: u64) -> u64 {
        let Some(e) = self.engines.get(&q) else {
            return memory;
        };
        let mut v = memory;
        for i in 0..width.bytes() / 4 {
            if let Some(d) = e.dirty.get(&((address & !3) + i * 4)) {
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
    fn resolve(&mut self, dev: &DeviceShared, addr: u64) -> Option<(Arc<BufferCore>, u64)> {
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

    fn load(&mut self, dev: &DeviceShared, addr: u64) -> Option<u32> {
        let generation = dev.memory.generation();
        if let Some((g, b)) = &self.last {
            if *g == generation && addr >= b.base && b.contains(addr - b.base, 4) {
                return b.load32(addr - b.base);
            }
        }
        let (b, off) = self.resolve(dev, addr)?;
        b.load32(off)
    }

    fn load_line(&mut self, dev: &DeviceShared, line: u64) -> [Option<u32>; LINE_WORDS] {
        let mut words = [None; LINE_WORDS];
        for (i, w) in words.iter_mut().enumerate() {
            *w = self.load(dev, line + i as u64 * 4);
        }
        words
    }

    /// A task of engine `q` reads `n` (1 or 2) words at `address`: its own dirty words first,
    /// then its cached line (a stale copy when the schedule picks it), else memory (loading
    /// the line). The whole access comes from one moment.
    pub(crate) fn task_read(&mut self, dev: &DeviceShared, q: u32, address: u64, n: u64) -> u64 {
        let line = address & !(LINE - 1);
        let idx = ((address - line) / 4) as usize;
        let n = n.clamp(1, 2) as usize;
        let mut mem = [0u32; 2];
        for (i, m) in mem.iter_mut().enumerate().take(n) {
            *m = self.load(dev, address + i as u64 * 4).unwrap_or(0);
        }
        let e = self.e(q);
        let mut out = mem;
        let cached = e.cache.get(&line).map(|l| {
            let mut c = [0u32; 2];
            for (i, x) in c.iter_mut().enumerate().take(n) {
                *x = l.get(idx + i).copied().flatten().unwrap_or(0);
            }
            c
        });
        let differs = cached.is_some_and(|c| c != mem);
        let pick = if differs { self.rng.next() } else { 0 };
        let e = self.e(q);
        match cached {
            Some(c) if differs && pick % 2 == 0 => {
                for i in 0..n {
                    e.stale.insert(address + i as u64 * 4, (c[i], mem[i]));
                }
                out = c;
                self.stale_reads += 1;
            }
            Some(_) if !differs => {}
            _ => {
                let l = self.load_line(dev, line);
                let e = self.e(q);
                e.cache.insert(line, l);
                for i in 0..n as u64 {
                    e.stale.remove(&(address + i * 4));
                }
            }
        }
        let e = self.e(q);
        for (i, o) in out.iter_mut().enumerate() {
            if let Some(d) = e.dirty.get(&(address + i as u64 * 4)) {
                *o = d.value;
            }
        }
        let hi = if n == 2 { u64::from(out[1]) } else { 0 };
        u64::from(out[0]) | (hi << 32)
    }

    /// A task (`task`: copy?, index) of engine `q` writes `n` words at `address` (into the
    /// engine's dirty words; its cached line sees it too).
    pub(crate) fn task_write(
        &mut self,
        dev: &DeviceShared,
        q: u32,
        task: (bool, u32),
        address: u64,
        value: u64,
        n: u64,
    ) {
        for i in 0..n {
            let a = address + i * 4;
            let v = (value >> (32 * i)) as u32;
            let Some((buf, off)) = self.resolve(dev, a) else {
                continue;
            };
            let e = self.e(q);
            let line = a & !(LINE - 1);
            if let Some(l) = e.cache.get_mut(&line) {
                l[((a - line) / 4) as usize] = Some(v);
            }
            e.dirty.insert(
                a,
                Dirty {
                    buf,
                    off,
                    value: v,
                    task,
                    cp_visible: false,
                },
            );
        }
    }

    /// An atomic add by a task of engine `q` at memory, after writing back its own dirty copy
    /// of the word(s). Returns the old value.
    pub(crate) fn atomic_add(
        &mut self,
        dev: &DeviceShared,
        q: u32,
        address: u64,
        width: Width,
        value: u64,
    ) -> u64 {
        let e = self.e(q);
        for i in 0..width.bytes() / 4 {
            Self::write_back_word(e, address + i * 4);
        }
        let Some((b, off)) = dev.memory.resolve(address, width.bytes()) else {
            return 0;
        };
        let old = match width {
            Width::W32 => b.fetch_add32(off, value as u32).map_or(0, u64::from),
            Width::W64 => b.fetch_add64(off, value).unwrap_or(0),
        };
        // The engine's cached copy of the line is updated by its own atomic.
        let line = address & !(LINE - 1);
        if self.e(q).cache.contains_key(&line) {
            let l = self.load_line(dev, line);
            self.e(q).cache.insert(line, l);
        }
        old
    }

    /// `old value A; current B` when engine `q`'s last read of `word` returned a stale value.
    pub(crate) fn last_stale(&self, q: u32, word: u64) -> Option<String> {
        let (old, cur) = self.engines.get(&q)?.stale.get(&word)?;
        Some(format!("old value {old}; current {cur}"))
    }
}
