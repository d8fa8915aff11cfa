//! SplitMix64: a small, fast, seedable generator, shared by the deterministic driver's
//! schedules and strict mode's visibility choices (a run must depend on nothing but its seed).
//! It calls nothing else in the crate.

/// SplitMix64. The state is the seed as given; each caller mixes its own constant into it.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator whose state starts at `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `next_u64() % n`, or 0 (drawing nothing) when `n` is 0.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn splitmix64_reference_values() {
        // The published SplitMix64 outputs for seed 0 and 1234567.
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        let mut r = Rng::new(1_234_567);
        assert_eq!(r.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(r.next_u64(), 3_203_168_211_198_807_973);
    }

    #[test]
    fn below_zero_draws_nothing() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        assert_eq!(a.below(0), 0);
        assert_eq!(a.next_u64(), b.next_u64());
        assert_eq!(a.below(10), b.next_u64() % 10);
    }
}
