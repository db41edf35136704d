//! Products with activations rounded to 16 bits, on AVX-512 VNNI (`--activations 16bit`).
//!
//! Each 32-value block of an activation row becomes two signed bytes per value and a
//! power-of-two scale `s`, `x ≈ s (256 hi + lo)`: 15 bits below the block's largest value, an
//! error of at most `s`, under 1/16000 of that value. One VNNI instruction multiplies 64 such
//! bytes with 64 of a tile's quants where f32 does 16 multiply-adds, and a quant needs no
//! conversion to f32 first. That conversion is most of an f32 decode step of one row, whose
//! products here run about five times as fast when their weights are in cache; with eight rows
//! or more the two pieces' multiply-adds and the per-block scaling leave a smaller gain. A
//! row's arithmetic is the same whatever rows are beside it, so its result does not depend on
//! its batch.
//!
//! The quants stay in the tile layout: four byte rows of a plane (a column of 16 lanes each)
//! are permuted so that each lane's four columns are adjacent, the order VNNI sums them in.
//! They stay unsigned (8-bit quants offset by 128); the offset is taken off in integers, so
//! the only rounding besides the activations' is the f32 sum of the blocks.

use super::format::{Format, SUB, Scales};
use super::{
    Sink, Sizes, TILE, TileRef, low_bits, mask, plane_bytes, plane_rows, prefetch_ahead,
    sub_block_scales,
};
use crate::model::kernels::lanes::{Avx512, Lanes};
use crate::model::kernels::parallel::{Disjoint, filled, for_each_range};
use std::arch::x86_64::*;
use std::ops::Range;

/// The largest `|256 hi + lo|` a block's scale allows for its largest value (`hi` within ±127).
const RANGE: f32 = 127.0 * 256.0;

/// Whether this CPU has the instructions the product needs.
pub(super) fn available() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vnni")
        && is_x86_feature_detected!("avx512vbmi")
}

/// Activation rows split into two bytes per value, sub-block by sub-block: a sub-block's rows
/// lie side by side, each as its 32 `hi` bytes then its 32 `lo` bytes, so that a tile finds
/// every row of a group at a constant distance from the first (no address arithmetic per
/// row in its inner loop).
pub(super) struct Rows {
    rows: usize,
    cols: usize,
    bytes: Vec<i8>,
    /// Per sub-block and row, as the bytes.
    blocks: Vec<Block>,
}

/// Bytes of one row's sub-block: `hi`, then `lo`.
const PAIR: usize = 2 * SUB;

/// The fewest blocks a split hands out to the pool's threads.
const SPLIT_IN_PARALLEL: usize = 128;

/// One 32-value block of a row.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Block {
    /// `s`: a power of two, 0 for a block of zeros, NaN for one with a value not finite.
    scale: f32,
    /// `Σ (256 hi + lo)` over the first 16 values, the last 16, and all 32: what an offset
    /// multiplies.
    sums: [i32; 3],
    /// The same sums times `scale`: the sums of the values the product sees (exact: at
    /// most 2^20 times a power of two), what a min multiplies.
    totals: [f32; 3],
    /// The same sums times minus the weights' offset (at most 2^27): what the offset takes
    /// off a product's integer sum, read from memory where the sum starts so that taking it
    /// off costs the tile no instruction of its own.
    offsets: [i32; 3],
}

impl Rows {
    /// `x`, `[m, cols]` row-major with `cols` a multiple of 32, split block by block, for
    /// weights stored with `offset` (see [`stored`]). A batch's blocks are split on the
    /// pool's threads, a few sub-blocks' columns each (a decode step of eight rows splits
    /// about 2 million values, on one thread a twentieth of the step while the others wait).
    pub(super) fn split(x: &[f32], cols: usize, offset: i32) -> Self {
        let (rows, subs) = (x.len() / cols, cols / SUB);
        let (mut bytes, mut blocks) = (Vec::new(), Vec::new());
        let bytes_out = Disjoint::uninit(&mut bytes, 2 * x.len());
        let blocks_out = Disjoint::uninit(&mut blocks, x.len() / SUB);
        let columns = |range: Range<usize>| {
            for sb in range {
                for r in 0..rows {
                    let at = sb * rows + r;
                    let mut pair = [0i8; PAIR];
                    let (hi, lo) = pair.split_at_mut(SUB);
                    // SAFETY: `available` was checked before a product took this path.
                    let block = unsafe { split_block(&x[r * cols + sb * SUB..][..SUB], hi, lo) };
                    let block = Block {
                        offsets: block.sums.map(|sum| -offset * sum),
                        ..block
                    };
                    // SAFETY: sub-block `sb`'s blocks and bytes are this task's alone.
                    unsafe {
                        bytes_out.write(at * PAIR, &pair);
                        blocks_out.write(at, &[block]);
                    }
                }
            }
        };
        // A single row's few blocks are quicker split than handed out.
        if rows * subs >= SPLIT_IN_PARALLEL {
            for_each_range(subs, columns);
        } else {
            columns(0..subs);
        }
        // SAFETY: every sub-block's bytes and blocks, for every row, were written above.
        unsafe {
            filled(&mut bytes, 2 * x.len());
            filled(&mut blocks, x.len() / SUB);
        }
        Self {
            rows,
            cols,
            bytes,
            blocks,
        }
    }

    /// Row `r`'s `hi` and `lo` bytes at `i` and its block (a test's view of the split).
    #[cfg(test)]
    fn at(&self, r: usize, i: usize) -> (i32, i32, Block) {
        let at = (i / SUB) * self.rows + r;
        let pair = &self.bytes[at * PAIR..][..PAIR];
        let k = i % SUB;
        (
            i32::from(pair[k]),
            i32::from(pair[SUB + k]),
            self.blocks[at],
        )
    }

    /// The value a row's product sees at `i` of row 0: `s (256 hi + lo)`.
    #[cfg(test)]
    pub(super) fn value(&self, i: usize) -> f32 {
        let (hi, lo, block) = self.at(0, i);
        block.scale * (256 * hi + lo) as f32
    }
}

/// # Safety
/// The CPU must have AVX-512F; `x`, `hi` and `lo` are 32 long.
#[target_feature(enable = "avx512f")]
unsafe fn split_block(x: &[f32], hi: &mut [i8], lo: &mut [i8]) -> Block {
    assert!(x.len() == SUB && hi.len() == SUB && lo.len() == SUB);
    // SAFETY: 32 values and bytes, checked above; AVX-512F enabled.
    unsafe {
        let halves = [
            _mm512_loadu_ps(x.as_ptr()),
            _mm512_loadu_ps(x.as_ptr().add(16)),
        ];
        let magnitudes = halves.map(|v| _mm512_abs_ps(v));
        let infinity = _mm512_set1_ps(f32::INFINITY);
        let unfinite = magnitudes
            .map(|m| _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(m, infinity))
            .iter()
            .any(|&mask| mask != 0);
        if unfinite {
            return Block {
                scale: f32::NAN,
                totals: [f32::NAN; 3],
                ..Block::default()
            };
        }
        let max = _mm512_reduce_max_ps(_mm512_max_ps(magnitudes[0], magnitudes[1]));
        if max == 0.0 {
            return Block::default();
        }
        // The smallest power of two that keeps `hi` within ±127 (at least the smallest
        // normal, so that its reciprocal is finite): every scaling below is exact.
        let scale = f32::from_bits(((max / RANGE).to_bits() + 0x007f_ffff) & 0xff80_0000)
            .max(f32::MIN_POSITIVE);
        let inverse = _mm512_set1_ps(1.0 / scale);
        let step = _mm512_set1_ps(256.0);
        // Dividing by a power of two is multiplying by its reciprocal, to the bit.
        let per_step = _mm512_set1_ps(1.0 / 256.0);
        let clamp = |v, low: f32, high: f32| {
            _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(low)), _mm512_set1_ps(high))
        };
        // Ties to even, as f32 rounds.
        let nearest =
            |v| _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
        let mut sums = [0; 3];
        for (half, &x) in halves.iter().enumerate() {
            // Within ±RANGE.
            let y = _mm512_mul_ps(x, inverse);
            let h = clamp(nearest(_mm512_mul_ps(y, per_step)), -127.0, 127.0);
            // The rest is within half a coarse step, ±128; +128 (a tie) rounds to 127.
            let l = clamp(nearest(_mm512_fnmadd_ps(h, step, y)), -128.0, 127.0);
            let (h, l) = (_mm512_cvtps_epi32(h), _mm512_cvtps_epi32(l));
            let at = half * SUB / 2;
            _mm_storeu_si128(hi[at..].as_mut_ptr().cast(), _mm512_cvtepi32_epi8(h));
            _mm_storeu_si128(lo[at..].as_mut_ptr().cast(), _mm512_cvtepi32_epi8(l));
            sums[half] = _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_slli_epi32::<8>(h), l));
        }
        sums[2] = sums[0] + sums[1];
        let totals = sums.map(|sum| scale * sum as f32);
        Block {
            scale,
            sums,
            totals,
            offsets: [0; 3],
        }
    }
}

/// The most rows a tile multiplies with two integer chains per row.
const GROUP: usize = 8;

/// A tile times activation rows `rows`, into `out`.
pub(super) type TileTimes = fn(TileRef, &Rows, Range<usize>, &Sink);

/// A format's product: its tile kernel, and the offset its weights are stored with, which
/// the activations' split takes off in advance (see [`Block::offsets`]).
#[derive(Clone, Copy)]
pub(super) struct Kernel {
    pub offset: i32,
    pub times: TileTimes,
}

impl Kernel {
    pub(super) fn of<F: Format>() -> Self {
        Self {
            offset: stored::<F>().1,
            times: tile_times::<F>,
        }
    }
}

/// How a format's weights stand in the tile's unsigned bytes: codes that pick values (MXFP4)
/// become those values raised by their table's least, and the raise; 8-bit quants are signed,
/// offset by 128 they are unsigned; the rest are their codes, with the format's offset.
fn stored<F: Format>() -> ([u8; 64], i32) {
    match values_table::<F>() {
        Some((table, raised)) => (table, raised),
        None if F::BITS == 8 => ([0; 64], 128),
        None => ([0; 64], F::OFFSET),
    }
}

fn tile_times<F: Format>(w: TileRef, x: &Rows, rows: Range<usize>, out: &Sink) {
    let mut i = rows.start;
    if F::SPANS == 1 {
        sweep::<F, 16, 1>(w, x, &mut i, rows.end, out);
        sweep::<F, 8, 1>(w, x, &mut i, rows.end, out);
        sweep::<F, 4, 1>(w, x, &mut i, rows.end, out);
        sweep::<F, 1, 1>(w, x, &mut i, rows.end, out);
    } else {
        sweep::<F, 16, 2>(w, x, &mut i, rows.end, out);
        sweep::<F, 8, 2>(w, x, &mut i, rows.end, out);
        sweep::<F, 4, 2>(w, x, &mut i, rows.end, out);
        sweep::<F, 1, 2>(w, x, &mut i, rows.end, out);
    }
}

/// Activation rows `*i..end` in groups of `G`, while a whole group remains; `S` is the
/// format's spans.
fn sweep<F: Format, const G: usize, const S: usize>(
    w: TileRef,
    x: &Rows,
    i: &mut usize,
    end: usize,
    out: &Sink,
) {
    while *i + G <= end {
        // SAFETY: `available` was checked before these rows were split for the product.
        out.store(*i, &unsafe { tile::<F, G, S>(w, x, *i) });
        *i += G;
    }
}

/// Byte `4 lane + k` of a permuted quad takes byte `16 k + lane`: column `k` of the lane.
const LANE_MAJOR: [u8; 64] = {
    let mut order = [0; 64];
    let mut i = 0;
    while i < 64 {
        order[i] = ((i % 4) * TILE + i / 4) as u8;
        i += 1;
    }
    order
};

/// The tile's 16 output rows times activation rows `first..first + C`. Per sub-block its
/// 32 columns expand into 8 registers of 4 columns a lane; per row and span, the products
/// with `hi` and with `lo` sum in integers, `256 hi_sum + lo_sum` less the offset's share
/// (see [`Block::offsets`]), and the spans' sums, scaled, join the
/// row's f32 sum. Whatever `C` is, each row's integer sums are the same (integers sum in
/// any order to the same value) and its f32 operations are the same.
///
/// # Safety
/// The CPU must have AVX-512F, BW, VNNI and VBMI.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx512vbmi")]
unsafe fn tile<F: Format, const C: usize, const S: usize>(
    w: TileRef,
    x: &Rows,
    first: usize,
) -> [[f32; TILE]; C] {
    let cols = x.cols;
    let planes = plane_bytes(F::BITS);
    let (low, high) = (low_bits(F::BITS), F::BITS - low_bits(F::BITS));
    let (rows, per_byte) = (plane_rows(low), (8 / low) as usize);
    let sizes = Sizes::of::<F>(cols);
    let multipliers = sizes.multipliers / (cols / SUB);
    // Scales of any power of two (MXFP4's) meet the activations' scale first, so that the
    // integer sums (up to 2^25) times the weights' scale overflow only where the product does.
    let wide_scales = matches!(F::SCALES, Scales::Bf16);
    let (values, offset) = stored::<F>();
    // SAFETY (whole body): every pointer is into a slice whose length was checked by the
    // surrounding indexing: 64 bytes of a sub-block's planes, 4 bytes of a row's block.
    unsafe {
        let order = _mm512_loadu_si512(LANE_MAJOR.as_ptr().cast());
        let values = _mm512_loadu_si512(values.as_ptr().cast());
        let mut acc = [Avx512::zero(); C];
        for (sb, q) in w.quants.chunks_exact(planes).enumerate() {
            prefetch_ahead::<F>(w, sb, sizes, multipliers);
            let (scale, min) = sub_block_scales::<Avx512, F>(w, sb, sizes, multipliers);
            // The high plane's quads (one or two), permuted once for all their columns.
            let high_rows = plane_rows(high.max(1));
            let mut high_quads = [_mm512_setzero_si512(); 2];
            if high > 0 {
                for (k, high_quad) in high_quads.iter_mut().enumerate().take(high_rows / 4) {
                    *high_quad = quad(order, &q[(rows + 4 * k) * TILE..]);
                }
            }
            let mut weights = [_mm512_setzero_si512(); SUB / 4];
            for k in 0..rows / 4 {
                let low_quad = quad(order, &q[k * 4 * TILE..]);
                for h in 0..per_byte {
                    let col = 4 * k + h * rows;
                    let mut v = if F::BITS == 8 {
                        _mm512_xor_si512(low_quad, bytes(0x80))
                    } else {
                        let v = _mm512_srl_epi16(low_quad, shift(low * h as u32));
                        _mm512_and_si512(v, bytes(mask(low)))
                    };
                    if high > 0 {
                        let high_quad = high_quads[col % high_rows / 4];
                        let bits =
                            _mm512_srl_epi16(high_quad, shift(high * (col / high_rows) as u32));
                        let bits = _mm512_and_si512(bits, bytes(mask(high)));
                        v = _mm512_or_si512(v, _mm512_sll_epi16(bits, shift(low)));
                    }
                    if F::VALUES.is_some() {
                        v = _mm512_shuffle_epi8(values, v);
                    }
                    weights[col / 4] = v;
                }
            }
            // The group's bytes of this sub-block, cut once: each row's lie at a constant
            // distance from the first.
            let at = sb * x.rows + first;
            let group = &x.bytes[at * PAIR..][..C * PAIR];
            let group = Group::<C> {
                his: std::array::from_fn(|d| sub_block(group, d * PAIR)),
                los: std::array::from_fn(|d| sub_block(group, d * PAIR + SUB)),
                blocks: &x.blocks[at..][..C],
            };
            let blocks = group.blocks;
            // Per row, Σ over spans of scale × the span's integer sum, in units of the
            // block's `s`. A span's sums are scaled before the next span's begin, so that
            // each row keeps only two integer sums live whatever the format's spans.
            let mut scaled = [Avx512::zero(); C];
            let per_span = weights.len() / S;
            for (span, weights) in weights.chunks_exact(per_span).enumerate() {
                let part = if S == 1 { 2 } else { span };
                let sums = integer_sums(weights, span * per_span, &group, part, offset);
                for ((sum, scaled), block) in sums.iter().zip(&mut scaled).zip(blocks) {
                    let sum = _mm512_cvtepi32_ps(*sum);
                    *scaled = if wide_scales {
                        let sum = Avx512::mul(sum, Avx512::splat(block.scale));
                        Avx512::fma(sum, scale[span], *scaled)
                    } else {
                        Avx512::fma(sum, scale[span], *scaled)
                    };
                }
            }
            for (d, (scaled, acc)) in scaled.iter().zip(&mut acc).enumerate() {
                let block = blocks[d];
                *acc = if wide_scales {
                    _mm512_add_ps(*acc, *scaled)
                } else {
                    Avx512::fma(*scaled, Avx512::splat(block.scale), *acc)
                };
                if F::MIN {
                    for (span, &min) in min.iter().enumerate().take(S) {
                        let part = if S == 1 { 2 } else { span };
                        *acc = Avx512::fma(min, Avx512::splat(block.totals[part]), *acc);
                    }
                }
            }
        }
        let mut out = [[0f32; TILE]; C];
        for (out, acc) in out.iter_mut().zip(acc) {
            Avx512::store(acc, out.as_mut_ptr());
        }
        out
    }
}

/// A group of rows' bytes of one sub-block, and their blocks.
struct Group<'a, const C: usize> {
    his: [&'a [i8; SUB]; C],
    los: [&'a [i8; SUB]; C],
    blocks: &'a [Block],
}

/// Per row, `256 hi_sum + lo_sum` over `weights` (columns `4 first..` of the sub-block), less
/// the offset's share (its sum `part`).
///
/// A group of at most [`GROUP`] rows sums in two independent chains a row, the `lo` one
/// starting from the offset's share: the shortest wait, for a group too small to hide a longer
/// one. A larger group sums in one chain a row: the `hi` products, times 256 with the offset's
/// share added, then the `lo` products on top; its rows' chains hide the longer wait, and each
/// row needs one instruction fewer and one register. The integers are the same.
///
/// # Safety
/// The caller enables AVX-512F, BW and VNNI.
#[inline(always)]
unsafe fn integer_sums<const C: usize>(
    weights: &[__m512i],
    first: usize,
    group: &Group<C>,
    part: usize,
    offset: i32,
) -> [__m512i; C] {
    // SAFETY: the caller enables the features; `four` reads within each row's bytes. Plain
    // loops, not closures: a closure would not have the caller's features.
    unsafe {
        let mut out = [_mm512_setzero_si512(); C];
        if C > GROUP {
            for (k, &w) in weights.iter().enumerate() {
                for (sum, hi) in out.iter_mut().zip(group.his) {
                    *sum = _mm512_dpbusd_epi32(*sum, w, four(hi, first + k));
                }
            }
            for (sum, block) in out.iter_mut().zip(group.blocks) {
                *sum = _mm512_slli_epi32::<8>(*sum);
                if offset != 0 {
                    *sum = _mm512_add_epi32(*sum, _mm512_set1_epi32(block.offsets[part]));
                }
            }
            for (k, &w) in weights.iter().enumerate() {
                for (sum, lo) in out.iter_mut().zip(group.los) {
                    *sum = _mm512_dpbusd_epi32(*sum, w, four(lo, first + k));
                }
            }
            return out;
        }
        let mut sums = [[_mm512_setzero_si512(); 2]; C];
        if offset != 0 {
            for (sum, block) in sums.iter_mut().zip(group.blocks) {
                sum[1] = _mm512_set1_epi32(block.offsets[part]);
            }
        }
        for (k, &w) in weights.iter().enumerate() {
            for ((sum, hi), lo) in sums.iter_mut().zip(group.his).zip(group.los) {
                sum[0] = _mm512_dpbusd_epi32(sum[0], w, four(hi, first + k));
                sum[1] = _mm512_dpbusd_epi32(sum[1], w, four(lo, first + k));
            }
        }
        for (out, [hi, lo]) in out.iter_mut().zip(sums) {
            *out = _mm512_add_epi32(_mm512_slli_epi32::<8>(hi), lo);
        }
        out
    }
}

/// A format's values (see [`Format::VALUES`]) raised by their least to be unsigned bytes, in
/// each 16-byte lane of a register as `vpshufb` looks them up, and the raise.
fn values_table<F: Format>() -> Option<([u8; 64], i32)> {
    let values = F::VALUES?;
    let least = values.iter().fold(0f32, |m, &v| m.min(v)) as i32;
    let table = std::array::from_fn(|i| (values[i % 16] as i32 - least) as u8);
    Some((table, -least))
}

/// 64 bytes of planes from `p`, lane-major (see [`LANE_MAJOR`]).
///
/// # Safety
/// The caller enables AVX-512F and VBMI.
#[inline(always)]
unsafe fn quad(order: __m512i, p: &[u8]) -> __m512i {
    // SAFETY: 64 readable bytes (the slice is cut to them); the caller enables the features.
    unsafe { _mm512_permutexvar_epi8(order, _mm512_loadu_si512(p[..64].as_ptr().cast())) }
}

/// The 32 bytes at `at..`.
#[inline(always)]
fn sub_block(v: &[i8], at: usize) -> &[i8; SUB] {
    v[at..at + SUB].try_into().expect("a whole sub-block")
}

/// Columns `4 g..4 g + 4` of a sub-block's bytes, in every 32-bit lane.
///
/// # Safety
/// The caller enables AVX-512F; `g < 8`.
#[inline(always)]
unsafe fn four(v: &[i8; SUB], g: usize) -> __m512i {
    debug_assert!(g < SUB / 4);
    // SAFETY: bytes `4 g..4 g + 4` of 32, for `g < 8`; the caller enables AVX-512F.
    unsafe { _mm512_set1_epi32(v.as_ptr().add(4 * g).cast::<i32>().read_unaligned()) }
}

/// A shift count for the `_mm512_s*l_epi16` shifts.
///
/// # Safety
/// The caller enables SSE2.
#[inline(always)]
unsafe fn shift(n: u32) -> __m128i {
    // SAFETY: the caller enables SSE2 (every x86_64 has it).
    unsafe { _mm_cvtsi32_si128(n as i32) }
}

/// `m` in every byte.
///
/// # Safety
/// The caller enables AVX-512F.
#[inline(always)]
unsafe fn bytes(m: i32) -> __m512i {
    // SAFETY: the caller enables AVX-512F.
    unsafe { _mm512_set1_epi8(m as i8) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_splits_within_its_scale_and_sums_what_it_splits() {
        let x: Vec<f32> = (0..SUB).map(|i| (i as f32 - 13.3).powi(3) / 7.0).collect();
        let rows = Rows::split(&x, SUB, 0);
        let block = rows.blocks[0];
        let max = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(block.scale >= max / RANGE && block.scale < 2.0 * max / RANGE);
        assert_eq!(block.scale.to_bits() & 0x007f_ffff, 0, "a power of two");
        for (i, &v) in x.iter().enumerate() {
            assert!((rows.value(i) - v).abs() <= block.scale / 2.0, "{i}: {v}");
        }
        let sum = |r: Range<usize>| {
            r.map(|i| {
                let (hi, lo, _) = rows.at(0, i);
                256 * hi + lo
            })
            .sum::<i32>()
        };
        assert_eq!(block.sums, [sum(0..16), sum(16..32), sum(0..32)]);
    }

    #[test]
    fn zeros_tiny_and_unfinite_blocks() {
        let zeros = Rows::split(&[0.0; SUB], SUB, 0);
        assert_eq!(zeros.blocks[0], Block::default());
        let tiny: Vec<f32> = (0..SUB).map(|i| f32::from_bits(i as u32 * 3)).collect();
        let rows = Rows::split(&tiny, SUB, 0);
        assert!(rows.blocks[0].scale.is_normal());
        for (i, &v) in tiny.iter().enumerate() {
            assert!((rows.value(i) - v).abs() <= rows.blocks[0].scale);
        }
        for bad in [f32::NAN, f32::INFINITY] {
            let mut x = [1.0; SUB];
            x[5] = bad;
            assert!(Rows::split(&x, SUB, 0).blocks[0].scale.is_nan());
        }
        let huge = Rows::split(&[1e38; SUB], SUB, 0);
        assert!((huge.value(0) - 1e38).abs() <= huge.blocks[0].scale / 2.0);
    }
}
