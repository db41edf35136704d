//! An e^x of our own: `f32::exp` is a libm call per element, which keeps loops over many
//! values (a vocabulary's logits, attention scores) from vectorising.

use std::f32::consts::LOG2_E;

/// Below this `exp` returns exactly 0: e^-87 ≈ 1.6e-38 is where f32 turns subnormal, and a
/// masked (-inf) token must weigh nothing.
const EXP_UNDERFLOW: f32 = -87.0;
const EXP_OVERFLOW: f32 = 88.0;

/// e^x, within ~2 ulps for x in [-87, 88]; exactly 0 below -87 and e^88 above 88.
///
/// Cody-Waite reduction x = n·ln2 + r with |r| <= ln2/2, Cephes' minimax polynomial for e^r,
/// and 2^n assembled from exponent bits. No division and no libm call, so it vectorises.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    // ln 2 split so that n·LN2_HI is exact for every |n| <= 127 (its low 9 bits are 0).
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding 1.5·2^23 rounds to the nearest integer without a libm call.
    const ROUND: f32 = 12_582_912.0;
    const P: [f32; 6] = [
        1.987_569_1e-4,
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        0.5,
    ];
    let clamped = x.clamp(EXP_UNDERFLOW, EXP_OVERFLOW);
    let shifted = clamped * LOG2_E + ROUND;
    let n = shifted - ROUND;
    let r = clamped - n * LN2_HI - n * LN2_LO;
    let poly = ((((P[0] * r + P[1]) * r + P[2]) * r + P[3]) * r + P[4]) * r + P[5];
    let exp_r = poly * (r * r) + r + 1.0;
    let exponent = (shifted.to_bits() as i32 - ROUND.to_bits() as i32 + 127) << 23;
    let y = exp_r * f32::from_bits(exponent as u32);
    if x < EXP_UNDERFLOW { 0.0 } else { y }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_a_few_ulps_of_f64() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x <= 88.0 {
            let exact = f64::from(x).exp();
            let relative = ((f64::from(exp(x)) - exact) / exact).abs();
            worst = worst.max(relative);
            x += 0.001_37;
        }
        assert!(worst < 3e-7, "worst relative error {worst}");
    }

    #[test]
    fn exp_edges() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(-87.5), 0.0);
        assert!(exp(-86.9) > 0.0);
        assert!(exp(1000.0).is_finite());
    }
}
