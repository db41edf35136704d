//! llama.cpp's adaptive-p (its PR 17927): the last stage of its chain, in place of the final
//! draw. It keeps a moving average of the chosen tokens' probabilities as they reached it, and
//! reshapes each step's distribution around a target moved by how far that average missed
//! the configured one: tokens near the aim gain, the rest fall off smoothly.

use super::super::history::SampleState;
use super::pool::Pool;

/// The reshaped logit of a token right at the aim; the others fall below it.
const PEAK_LOGIT: f32 = 5.0;
/// How steeply the logits fall with the distance from the aim.
const SHARPNESS: f32 = 10.0;
/// 1 / the distance (in probability) over which the fall turns from quadratic to linear.
const INV_WIDTH: f32 = 1.0 / 0.3;

/// What adaptive-p remembers of one sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(in crate::sampling) struct Memory {
    /// Σ decay^i · p_i over the chosen tokens, the latest first (i = 0).
    weighted_sum: f32,
    /// Σ decay^i: what the sum averages over (at least 1).
    total_weight: f32,
}

impl Memory {
    /// As llama.cpp starts it: as if a long history of tokens had been right at the target.
    pub(in crate::sampling) fn start(target: f32, decay: f32) -> Self {
        Self {
            weighted_sum: target / (1.0 - decay),
            total_weight: 1.0 / (1.0 - decay),
        }
    }

    /// This step's aim: the target overshot by as much as the average missed it, within [0, 1].
    fn aim(&self, target: f32) -> f32 {
        (2.0 * target.clamp(0.0, 1.0) - self.weighted_sum / self.total_weight).clamp(0.0, 1.0)
    }

    /// Takes in a chosen token whose probability was `p` when adaptive-p received it.
    fn learn(&mut self, p: f32, decay: f32) {
        self.weighted_sum = p + decay * self.weighted_sum;
        self.total_weight = 1.0 + decay * self.total_weight;
    }
}

/// Reshapes the candidates around this step's aim; their probabilities as they arrived stay in
/// the pool for [`learn`]. Removed tokens (-inf) stay removed.
pub(super) fn reshape(pool: &mut Pool, target: f32, memory: Memory) {
    pool.softmax(false);
    pool.adaptive_input = pool.cands.iter().map(|c| (c.id, c.p)).collect();
    let aim = memory.aim(target);
    for c in &mut pool.cands {
        if c.logit != f32::NEG_INFINITY {
            let distance = ((c.p - aim) * INV_WIDTH).abs();
            c.logit = PEAK_LOGIT - SHARPNESS * distance * distance / (1.0 + distance);
        }
    }
    pool.sorted = false;
}

/// The sample's memory, where adaptive-p ran, takes in the token chosen at this step: once per
/// token, as llama.cpp's accept does however many draws a grammar asked for, with its
/// probability as adaptive-p received it (0 for a forced token an earlier stage removed).
pub(in crate::sampling) fn learn(state: &mut SampleState, pool: &Pool, decay: f32, id: u32) {
    if let Some(memory) = &mut state.adaptive {
        let p = pool
            .adaptive_input
            .iter()
            .find(|&&(candidate, _)| candidate == id)
            .map_or(0.0, |&(_, p)| p);
        memory.learn(p, decay);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With decay 0.5 and target 0.3 the average starts at 0.3, so the first aim is the target;
    /// a token at 0.9 lifts the average to (0.9 + 0.5·0.6) / (1 + 0.5·2) = 0.6, and the next
    /// aim falls to 2·0.3 − 0.6 = 0.
    #[test]
    fn the_aim_overshoots_by_what_the_average_missed() {
        let mut memory = Memory::start(0.3, 0.5);
        assert!((memory.aim(0.3) - 0.3).abs() < 1e-6);
        memory.learn(0.9, 0.5);
        assert!((memory.weighted_sum / memory.total_weight - 0.6).abs() < 1e-6);
        assert_eq!(memory.aim(0.3), 0.0);
        memory.learn(0.0, 0.5);
        // (0 + 0.5·1.2) / (1 + 0.5·2) = 0.3: back on target.
        assert!((memory.aim(0.3) - 0.3).abs() < 1e-6);
    }

    /// The token nearest the aim gets the peak logit; one at distance 0.3 gets 5 − 10·1/2 = 0;
    /// a removed one stays removed, and what arrived is kept for learning.
    #[test]
    fn reshaping_peaks_at_the_aim() {
        let mut pool = Pool::default();
        let logits = [0.5f32.ln(), 0.2f32.ln(), 0.3f32.ln(), f32::NEG_INFINITY];
        pool.reset(&logits);
        reshape(&mut pool, 0.2, Memory::start(0.2, 0.9));
        let logit = |id: u32| pool.cands.iter().find(|c| c.id == id).unwrap().logit;
        assert!((logit(1) - PEAK_LOGIT).abs() < 1e-4, "p 0.2 is at the aim");
        assert!(logit(0).abs() < 1e-4, "p 0.5 is 0.3 away");
        assert_eq!(logit(3), f32::NEG_INFINITY);
        let mut state = SampleState::new(0, 0, &[], 4);
        state.adaptive = Some(Memory::start(0.2, 0.9));
        learn(&mut state, &pool, 0.9, 2);
        let memory = state.adaptive.unwrap();
        assert!((memory.weighted_sum - (0.3 + 0.9 * 2.0)).abs() < 1e-5);
        assert!((memory.total_weight - (1.0 + 0.9 * 10.0)).abs() < 1e-4);
    }
}
