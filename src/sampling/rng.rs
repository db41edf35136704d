//! Each sample's random stream.
//!
//! ChaCha8 rather than `StdRng`, whose algorithm may change between releases: a seed must
//! reproduce the same text forever. The uniform is built from raw bits here so that it does not
//! depend on `rand`'s float conversion either.

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{Rng, SeedableRng};

/// The seed of sample `index` in a run seeded with `seed`: sample i uses seed + i, so a run of
/// more samples keeps the ones before and any sample can be rerun alone.
pub fn sample_seed(seed: u64, index: u32) -> u64 {
    seed.wrapping_add(u64::from(index))
}

/// One sample's random stream; the sampler takes exactly one uniform from it per step.
#[derive(Debug, Clone)]
pub struct SampleRng(ChaCha8Rng);

impl SampleRng {
    pub fn new(seed: u64) -> Self {
        Self(ChaCha8Rng::seed_from_u64(seed))
    }

    /// A uniform in [0, 1): the top 53 bits of one `u64`, so every value is an exact f64.
    pub fn uniform(&mut self) -> f64 {
        const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
        (self.0.next_u64() >> 11) as f64 * SCALE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_uses_the_top_53_bits_of_one_word() {
        let mut raw = ChaCha8Rng::seed_from_u64(7);
        let mut rng = SampleRng::new(7);
        for _ in 0..100 {
            let word = raw.next_u64();
            let u = rng.uniform();
            assert!((0.0..1.0).contains(&u));
            assert_eq!((u * (1u64 << 53) as f64) as u64, word >> 11);
        }
    }

    #[test]
    fn sample_seed_wraps() {
        assert_eq!(sample_seed(u64::MAX, 2), 1);
        assert_eq!(sample_seed(40, 2), 42);
    }
}
