//! Passes over the whole vocabulary: max and sums of exponentials.
//!
//! They run once or twice per step over up to ~150k logits, so they are written for LLVM's
//! auto-vectoriser: fixed-width lanes, selects instead of branches, and an exp of our own
//! (`f32::exp` is a libm call per element). Lanes are summed in f32 over short blocks and the
//! blocks in f64, which keeps the sum within a few f32 ulps of an f64 reference.

use crate::fast_exp::exp;

/// Values handled together: wide enough for AVX-512, short enough to stay in registers.
pub const LANES: usize = 16;
const BLOCK: usize = 1024;

/// Reads a model logit. NaN is treated as masked (-inf) so one bad value cannot poison the sums;
/// +inf becomes the largest finite value, so +inf tokens share the mass instead of producing NaN.
#[inline(always)]
pub fn sanitize(x: f32) -> f32 {
    let x = if x > f32::MAX { f32::MAX } else { x };
    if x.is_nan() { f32::NEG_INFINITY } else { x }
}

/// Whether any sanitised value of a short chunk passes `test`. Branch-free, so a chunk of
/// `LANES` costs a few vector instructions: scans use it to skip the chunks (nearly all of a
/// vocabulary) that hold nothing they look for.
#[inline(always)]
pub fn any(chunk: &[f32], test: impl Fn(f32) -> bool) -> bool {
    chunk
        .iter()
        .fold(false, |found, &x| found | test(sanitize(x)))
}

/// The largest sanitised value; -inf when there is none.
pub fn max(values: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let chunks = values.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (m, &x) in lanes.iter_mut().zip(chunk) {
            let x = sanitize(x);
            *m = if x > *m { x } else { *m };
        }
    }
    let mut best = f32::NEG_INFINITY;
    for x in lanes.into_iter().chain(rest.iter().map(|&x| sanitize(x))) {
        best = if x > best { x } else { best };
    }
    best
}

/// Sums of `exp(s)` with `s = (x - shift) * scale`: `total` over every `s >= floor`, and
/// `above[j]` over every `s >= levels[j]` too — one pass tells how far down the sorted order
/// a given share of the mass lies.
#[derive(Debug, Clone, Copy)]
pub struct ExpSums<const L: usize> {
    pub total: f64,
    pub above: [f64; L],
    /// `Σ exp(s) s` over the same terms as `total`, for the [`entropy`].
    pub moment: f64,
}

/// The scaled logit every pass and every candidate agrees on, so they weigh tokens identically.
#[inline(always)]
pub fn scaled(x: f32, shift: f32, scale: f32) -> f32 {
    (x - shift) * scale
}

/// One pass of exps over the vocabulary; see [`ExpSums`]. This is most of a step's time, so
/// on x86-64 CPUs with AVX2 it runs the same code compiled 8 lanes wide instead of SSE2's 4.
/// Results are bit-identical either way: no fused multiply-adds, same lanes, same order.
pub fn sum_exp<const L: usize>(
    values: &[f32],
    shift: f32,
    scale: f32,
    floor: f32,
    levels: [f32; L],
) -> ExpSums<L> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has just been checked for AVX2, the only feature the function enables.
        return unsafe { sum_exp_avx2(values, shift, scale, floor, levels) };
    }
    sum_exp_portable(values, shift, scale, floor, levels)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sum_exp_avx2<const L: usize>(
    values: &[f32],
    shift: f32,
    scale: f32,
    floor: f32,
    levels: [f32; L],
) -> ExpSums<L> {
    sum_exp_portable(values, shift, scale, floor, levels)
}

#[inline(always)]
fn sum_exp_portable<const L: usize>(
    values: &[f32],
    shift: f32,
    scale: f32,
    floor: f32,
    levels: [f32; L],
) -> ExpSums<L> {
    let mut sums = ExpSums {
        total: 0.0,
        above: [0.0; L],
        moment: 0.0,
    };
    for block in values.chunks(BLOCK) {
        let mut total = [0.0f32; LANES];
        let mut moment = [0.0f32; LANES];
        let mut above = [[0.0f32; LANES]; L];
        let chunks = block.chunks_exact(LANES);
        let rest = chunks.remainder();
        for chunk in chunks {
            for (lane, &x) in chunk.iter().enumerate() {
                let s = scaled(sanitize(x), shift, scale);
                let w = if s >= floor { exp(s) } else { 0.0 };
                total[lane] += w;
                moment[lane] += if w > 0.0 { w * s } else { 0.0 };
                for (level, sum) in levels.iter().zip(above.iter_mut()) {
                    sum[lane] += if s >= *level { w } else { 0.0 };
                }
            }
        }
        for &x in rest {
            let s = scaled(sanitize(x), shift, scale);
            let w = if s >= floor { exp(s) } else { 0.0 };
            total[0] += w;
            moment[0] += if w > 0.0 { w * s } else { 0.0 };
            for (level, sum) in levels.iter().zip(above.iter_mut()) {
                sum[0] += if s >= *level { w } else { 0.0 };
            }
        }
        sums.total += total.iter().map(|&w| f64::from(w)).sum::<f64>();
        sums.moment += moment.iter().map(|&w| f64::from(w)).sum::<f64>();
        for (sum, lanes) in sums.above.iter_mut().zip(&above) {
            *sum += lanes.iter().map(|&w| f64::from(w)).sum::<f64>();
        }
    }
    sums
}

/// The entropy in nats of a distribution [`sum_exp`] weighed, from its `total` and `moment`:
/// `ln Z - Σ exp(s) s / Z`; 0 when nothing weighs.
pub fn entropy(total: f64, moment: f64) -> f64 {
    if total > 0.0 {
        (total.ln() - moment / total).max(0.0)
    } else {
        0.0
    }
}

/// `ln Σ exp(x)` over the sanitised values (the normaliser of log_softmax) and the entropy of
/// their softmax, from one pass after the maximum's: (-inf, 0) when every value is masked.
pub fn log_sum_exp_and_entropy(values: &[f32]) -> (f32, f64) {
    let shift = max(values);
    if shift == f32::NEG_INFINITY {
        return (shift, 0.0);
    }
    let sums = sum_exp(values, shift, 1.0, f32::NEG_INFINITY, []);
    (
        (f64::from(shift) + sums.total.ln()) as f32,
        entropy(sums.total, sums.moment),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_masks_nan_and_caps_infinity() {
        assert_eq!(sanitize(f32::NAN), f32::NEG_INFINITY);
        assert_eq!(sanitize(f32::INFINITY), f32::MAX);
        assert_eq!(sanitize(f32::NEG_INFINITY), f32::NEG_INFINITY);
        assert_eq!(sanitize(-2.5), -2.5);
    }

    /// Logits spread like a language model's: most near 0, a few far above.
    fn vocabulary(len: usize) -> Vec<f32> {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        (0..len)
            .map(|i| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let unit = (state >> 40) as f32 / (1u64 << 24) as f32;
                let spike = if i % 5000 == 0 { 12.0 } else { 0.0 };
                (unit - 0.5) * 8.0 + spike
            })
            .collect()
    }

    #[test]
    fn log_sum_exp_matches_f64_on_a_large_vocabulary() {
        for len in [1, 15, 17, 1023, 32_000, 151_936] {
            let values = vocabulary(len);
            let shift = values
                .iter()
                .fold(f64::NEG_INFINITY, |m, &x| m.max(f64::from(x)));
            let exact = shift
                + values
                    .iter()
                    .map(|&x| (f64::from(x) - shift).exp())
                    .sum::<f64>()
                    .ln();
            let got = f64::from(log_sum_exp_and_entropy(&values).0);
            assert!((got - exact).abs() < 1e-5, "len {len}: {got} vs {exact}");
        }
    }

    #[test]
    fn entropy_matches_f64_on_a_large_vocabulary_and_respects_the_floor() {
        for len in [1, 17, 32_000, 151_936] {
            let values = vocabulary(len);
            let shift = log_sum_exp_and_entropy(&values).0;
            let exact: f64 = values
                .iter()
                .map(|&x| f64::from(x - shift))
                .map(|lp| -lp.exp() * lp)
                .sum();
            let got = {
                let sums = sum_exp(&values, shift, 1.0, f32::NEG_INFINITY, []);
                entropy(sums.total, sums.moment)
            };
            assert!((got - exact).abs() < 1e-4, "len {len}: {got} vs {exact}");
            // Normalised by the maximum instead, as the normaliser's own pass is: the same figure.
            let at_max = log_sum_exp_and_entropy(&values).1;
            assert!(
                (at_max - exact).abs() < 1e-4,
                "len {len}: {at_max} vs {exact}"
            );
        }
        // Two equal tokens kept of three, at temperature 0.5: ln 2.
        let got = {
            let sums = sum_exp(&[1.0, 1.0, -3.0, f32::NAN], 1.0, 2.0, -1.0, []);
            entropy(sums.total, sums.moment)
        };
        assert!((got - 2f64.ln()).abs() < 1e-6, "{got}");
        // Masked tokens weigh nothing (0 x -inf must not make the moment NaN).
        let masked = [0.0, 0.0, f32::NEG_INFINITY];
        let (log_norm, h) = log_sum_exp_and_entropy(&masked);
        assert!((h - 2f64.ln()).abs() < 1e-6, "{h}");
        let kept = sum_exp(&masked, log_norm, 1.0, f32::NEG_INFINITY, []);
        assert!((entropy(kept.total, kept.moment) - 2f64.ln()).abs() < 1e-6);
        assert_eq!(
            log_sum_exp_and_entropy(&[f32::NEG_INFINITY; 4]),
            (f32::NEG_INFINITY, 0.0)
        );
    }

    #[test]
    fn sums_respect_floor_and_levels() {
        let values = [0.0, -1.0, -2.0, f32::NAN, f32::NEG_INFINITY];
        let sums = sum_exp(&values, 0.0, 1.0, -1.5, [-0.5, -1.0]);
        let e1 = (-1.0f64).exp();
        assert!((sums.total - (1.0 + e1)).abs() < 1e-6);
        assert!((sums.above[0] - 1.0).abs() < 1e-6);
        assert!((sums.above[1] - (1.0 + e1)).abs() < 1e-6);
    }

    #[test]
    fn max_ignores_nan_and_reads_infinity_as_max() {
        assert_eq!(max(&[f32::NAN, -3.0, 2.0]), 2.0);
        assert_eq!(max(&[f32::NAN; 40]), f32::NEG_INFINITY);
        assert_eq!(max(&[]), f32::NEG_INFINITY);
        let mut many = vec![0.0; 100];
        many[77] = f32::INFINITY;
        assert_eq!(max(&many), f32::MAX);
        assert_eq!(
            log_sum_exp_and_entropy(&[f32::NEG_INFINITY; 3]).0,
            f32::NEG_INFINITY
        );
    }
}
