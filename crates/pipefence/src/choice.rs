//! Scripted choices: the deterministic driver's nondeterminism as a sequence of choice points.
//!
//! Every place a seeded schedule draws from its generator (which enabled action runs next, which
//! groups of a dispatch complete, and in strict mode which dirty line an early write-back takes
//! and whether a cached line is read stale) is a choice point: a number of alternatives and the
//! index taken. A [`Script`] takes those indices from a given prefix of *tries* (one per
//! proposal made to the driver), then makes a fixed canonical choice; it records every try and,
//! per choice point, the alternatives, the index taken and the alternatives found disabled.
//! `docs/exploration.md` describes the choices and the schedule string
//! ([`Script::schedule_string`]).
//!
//! A scheduling choice may pick an engine stage that turns out blocked: that try changes
//! nothing, so the same choice point stays open and the script proposes again (the next index
//! of its prefix, or the canonical choice among the alternatives not found disabled). When
//! every alternative is disabled the choice point ends without one taken.
//!
//! It calls nothing else in the crate.

use std::sync::{Mutex, MutexGuard};

/// One choice point of a scripted run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChoicePoint {
    /// The number of alternatives.
    pub alternatives: u32,
    /// A scheduling choice (which action runs); `false`: a choice within an action (which
    /// groups complete, which line is written back, whether a read is stale).
    pub scheduling: bool,
    /// The alternative that continues the actor that ran last (a scheduling choice only); any
    /// other taken while this one is enabled is a preemption.
    pub continuing: Option<u32>,
    /// The index taken; `None` when every alternative was found disabled.
    pub taken: Option<u32>,
    /// Alternatives tried and found disabled (a blocked engine stage), in the order tried.
    pub disabled: Vec<u32>,
    /// The index in [`Script::tries`] of this point's first try.
    pub first_try: usize,
}

impl ChoicePoint {
    /// Whether taking `alt` here is a preemption: a scheduling choice that switches away from
    /// the actor that ran last while it was still enabled.
    pub fn preempts(&self, alt: u32) -> bool {
        self.scheduling
            && self
                .continuing
                .is_some_and(|c| c != alt && !self.disabled.contains(&c))
    }
}

#[derive(Debug, Default)]
struct ScriptState {
    prefix: Vec<u32>,
    tries: Vec<u32>,
    points: Vec<ChoicePoint>,
    /// The open scheduling point (it stays open while its tries find blocked stages; choices
    /// within the action it runs may follow before it is closed), and the index of its last
    /// try.
    sched: Option<usize>,
    sched_try: usize,
    /// Stop the run when the try at this index finds its alternative disabled.
    abort_at: Option<usize>,
    aborted: bool,
}

/// A source of choices for the deterministic driver that follows a prefix of tries, then
/// chooses canonically, recording every choice point ([`crate::DeviceDesc::script`]).
#[derive(Debug, Default)]
pub struct Script {
    st: Mutex<ScriptState>,
}

impl Script {
    /// A script following `prefix` (the tries of [`Script::tries`] or a decoded schedule
    /// string), then choosing canonically: the alternative continuing the last actor when
    /// there is one, else the first alternative not found disabled.
    pub fn new(prefix: Vec<u32>) -> Self {
        Script {
            st: Mutex::new(ScriptState {
                prefix,
                ..ScriptState::default()
            }),
        }
    }

    /// A script that also asks the driver to stop the run (removing the device, reason
    /// `Requested`) when the try at index `at` finds its alternative disabled: the run is then
    /// the same as one already explored.
    pub fn exploring(prefix: Vec<u32>, at: usize) -> Self {
        let s = Script::new(prefix);
        s.lock().abort_at = Some(at);
        s
    }

    /// Parses a schedule string ([`Script::schedule_string`]) into a script replaying it.
    pub fn from_schedule_string(s: &str) -> Result<Self, String> {
        decode(s).map(Script::new)
    }

    fn lock(&self) -> MutexGuard<'_, ScriptState> {
        match self.st.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Every try so far (the index proposed at each).
    pub fn tries(&self) -> Vec<u32> {
        self.lock().tries.clone()
    }

    /// The last proposal at the open scheduling point.
    pub(crate) fn current(&self) -> Option<u32> {
        let st = self.lock();
        st.sched.and_then(|_| st.tries.get(st.sched_try).copied())
    }

    /// Every choice point so far.
    pub fn points(&self) -> Vec<ChoicePoint> {
        self.lock().points.clone()
    }

    /// The tries so far as a schedule string (`v1:` and base64url of their run-length
    /// varints); [`Script::from_schedule_string`] replays it.
    pub fn schedule_string(&self) -> String {
        encode(&self.lock().tries)
    }

    /// The run asked to stop ([`Script::exploring`]).
    pub fn aborted(&self) -> bool {
        self.lock().aborted
    }

    /// Opens a choice point of `n` alternatives; returns the first proposal. A scheduling
    /// point stays open until [`Script::taken`] or [`Script::close`].
    pub(crate) fn begin(&self, n: u32, scheduling: bool, continuing: Option<u32>) -> u32 {
        let mut st = self.lock();
        let first_try = st.tries.len();
        st.points.push(ChoicePoint {
            alternatives: n,
            scheduling,
            continuing,
            taken: None,
            disabled: Vec::new(),
            first_try,
        });
        let idx = st.points.len() - 1;
        let k = propose(&mut st, idx);
        if scheduling {
            st.sched = Some(idx);
            st.sched_try = st.tries.len() - 1;
        } else {
            st.points[idx].taken = Some(k);
        }
        k
    }

    /// The open scheduling point's last proposal was found disabled (a blocked engine stage:
    /// nothing changed). The point stays open for [`Script::again`] unless every alternative
    /// is now disabled.
    pub(crate) fn fail(&self) {
        let mut st = self.lock();
        let Some(idx) = st.sched else {
            return;
        };
        let at = st.sched_try;
        let last = st.tries[at];
        if st.abort_at == Some(at) {
            st.aborted = true;
        }
        let p = &mut st.points[idx];
        if !p.disabled.contains(&last) {
            p.disabled.push(last);
        }
        if p.disabled.len() as u32 >= p.alternatives {
            st.sched = None;
        }
    }

    /// The next proposal at the open scheduling point (after [`Script::fail`]).
    pub(crate) fn again(&self) -> u32 {
        let mut st = self.lock();
        let Some(idx) = st.sched else {
            return 0;
        };
        let k = propose(&mut st, idx);
        st.sched_try = st.tries.len() - 1;
        k
    }

    /// The open scheduling point's last proposal ran: the point is closed with it taken.
    pub(crate) fn taken(&self) {
        let mut st = self.lock();
        if let Some(idx) = st.sched.take() {
            let k = st.tries[st.sched_try];
            st.points[idx].taken = Some(k);
        }
    }

    /// The open scheduling point (if any) ends without an alternative taken (the listing
    /// changed).
    pub(crate) fn close(&self) {
        self.lock().sched = None;
    }

    /// Whether a scheduling point is open (its last try failed).
    pub(crate) fn is_open(&self) -> bool {
        self.lock().sched.is_some()
    }

    /// A choice within an action among `n` alternatives (none recorded when `n <= 1`).
    pub(crate) fn choose(&self, n: u64) -> u64 {
        if n <= 1 {
            return 0;
        }
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        u64::from(self.begin(n, false, None))
    }
}

/// The next proposal at point `idx`: the prefix's next try, else the canonical choice.
fn propose(st: &mut ScriptState, idx: usize) -> u32 {
    let p = &st.points[idx];
    let k = match st.prefix.get(st.tries.len()) {
        Some(&k) if k < p.alternatives => k,
        _ => match p.continuing.filter(|c| !p.disabled.contains(c)) {
            Some(c) => c,
            None => (0..p.alternatives)
                .find(|a| !p.disabled.contains(a))
                .unwrap_or(0),
        },
    };
    st.tries.push(k);
    k
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7F) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// `v1:` + base64url (no padding) of varints: a try `k` is `k + 1`; a run of `n` zero tries
/// is `0, n`.
pub(crate) fn encode(tries: &[u32]) -> String {
    let mut bytes = Vec::new();
    let mut i = 0;
    while i < tries.len() {
        if tries[i] == 0 {
            let run = tries[i..].iter().take_while(|&&t| t == 0).count();
            varint(&mut bytes, 0);
            varint(&mut bytes, run as u64);
            i += run;
        } else {
            varint(&mut bytes, u64::from(tries[i]) + 1);
            i += 1;
        }
    }
    let mut s = String::from("v1:");
    for chunk in bytes.chunks(3) {
        let n = chunk.len();
        let w = chunk
            .iter()
            .enumerate()
            .fold(0u32, |w, (j, &b)| w | (u32::from(b) << (16 - 8 * j)));
        for j in 0..=n {
            s.push(B64[((w >> (18 - 6 * j)) & 63) as usize] as char);
        }
    }
    s
}

/// The tries of a schedule string ([`encode`]).
pub(crate) fn decode(s: &str) -> Result<Vec<u32>, String> {
    let body = s
        .strip_prefix("v1:")
        .ok_or_else(|| format!("schedule string `{s}`: expected it to start with `v1:`"))?;
    let mut bits = 0u32;
    let mut nbits = 0;
    let mut bytes = Vec::new();
    for c in body.bytes() {
        let v = B64
            .iter()
            .position(|&b| b == c)
            .ok_or_else(|| format!("schedule string: `{}` is not base64url", c as char))?;
        bits = (bits << 6) | v as u32;
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            bytes.push((bits >> nbits) as u8);
            bits &= (1 << nbits) - 1;
        }
    }
    let mut vals = Vec::new();
    let (mut v, mut shift) = (0u64, 0);
    for b in bytes {
        if shift > 56 {
            return Err("schedule string: a value is too long".into());
        }
        v |= u64::from(b & 0x7F) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            vals.push(v);
            v = 0;
            shift = 0;
        }
    }
    if shift != 0 {
        return Err("schedule string: truncated".into());
    }
    let mut tries = Vec::new();
    let mut it = vals.into_iter();
    while let Some(v) = it.next() {
        if v == 0 {
            let run = it
                .next()
                .ok_or_else(|| "schedule string: truncated run".to_string())?;
            if run > 1 << 32 {
                return Err("schedule string: a run is too long".into());
            }
            tries.extend(std::iter::repeat_n(0, run as usize));
        } else {
            tries.push(u32::try_from(v - 1).map_err(|_| "schedule string: value too large")?);
        }
    }
    Ok(tries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_strings_round_trip() {
        for tries in [
            vec![],
            vec![0],
            vec![0, 0, 0, 3, 1, 0, 200, 70000, 0, 0],
            (0..1000).map(|i| (i * 7919) % 13).collect::<Vec<u32>>(),
            vec![u32::MAX, 0, u32::MAX],
        ] {
            let s = encode(&tries);
            assert!(s.starts_with("v1:"));
            assert_eq!(decode(&s).unwrap(), tries, "{s}");
        }
        assert!(decode("v2:AA").is_err());
        assert!(decode("v1:!").is_err());
    }

    #[test]
    fn a_script_follows_its_prefix_then_continues_the_last_actor() {
        let s = Script::new(vec![2, 1]);
        assert_eq!(s.begin(3, true, Some(0)), 2);
        s.taken();
        // The prefix's 1, found disabled: then the continuing alternative, 0.
        assert_eq!(s.begin(3, true, Some(0)), 1);
        s.fail();
        assert!(s.is_open());
        assert_eq!(s.again(), 0);
        s.taken();
        assert_eq!(s.choose(4), 0);
        assert_eq!(s.choose(1), 0);
        let p = s.points();
        assert_eq!(p.len(), 3);
        assert_eq!(p[1].taken, Some(0));
        assert_eq!(p[1].disabled, vec![1]);
        assert!(!p[1].preempts(0) && p[1].preempts(2));
        assert_eq!(s.tries(), vec![2, 1, 0, 0]);
    }

    #[test]
    fn choices_within_an_action_leave_its_scheduling_point_open() {
        // An ME step that reads (a strict-mode stale-or-fresh choice) before it completes.
        let s = Script::new(Vec::new());
        assert_eq!(s.begin(2, true, None), 0);
        assert_eq!(s.choose(2), 0);
        assert!(s.is_open());
        s.taken();
        let p = s.points();
        assert_eq!((p[0].taken, p[1].taken), (Some(0), Some(0)));
        assert!(p[0].scheduling && !p[1].scheduling);
    }
}
