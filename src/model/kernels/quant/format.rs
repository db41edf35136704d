//! The quantization formats our kernels read, one table row (a [`Format`] impl) each.
//!
//! Every format is read the same way: a GGUF block unpacks, once at load, into 32-value
//! sub-blocks of small integers `q` with a scale and a min per span of `32 / SPANS` values,
//! `w = scale * (q - OFFSET) + min`. The kernels only know that form, so a format is its
//! bit width, offset, spans and unpacking, not a kernel of its own.
//!
//! Scales stay as compact as in the file: the 32-value formats keep their f16 scale (and
//! min) per sub-block; the K-quants keep their f16 `d` (and `dmin`) per 256 values and a
//! small integer multiplier per span, `scale = d * multiplier`, exact in f32.
//!
//! MXFP4 is the one format whose codes are not its values: each 4-bit code picks one of 16
//! integers ([`Format::VALUES`]), and its scale, a power of two beyond f16's range, is kept as
//! bf16 bits (exact for every power of two f32 has).

use super::QuantType;
use crate::model::formats::mxfp4;
use crate::model::kernels::half::f16_to_f32;
use candle_core::quantized::GgmlDType;

/// Values per sub-block, the unit the kernels walk.
pub(crate) const SUB: usize = 32;

/// One sub-block: `q` in `0..2^BITS` (for 8 bits, an `i8` bit pattern); `half` the f16
/// bits of its scale and min (32-value formats) or of its super-block's `d` and `-dmin`
/// (K-quants, which also set `multiplier[scale or min][span]`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Sub {
    pub q: [u8; SUB],
    pub half: [u16; 2],
    pub multiplier: [[i8; 2]; 2],
}

pub(crate) trait Format {
    const DTYPE: QuantType;
    /// Values and bytes of one GGUF block.
    const BLOCK: usize;
    const BLOCK_BYTES: usize;
    /// 2 to 6 (unsigned), or 8 (signed `i8`).
    const BITS: u32;
    /// Subtracted from `q` before scaling, in integers (formats without a min).
    const OFFSET: i32;
    /// Scales (and mins) per sub-block: 1, or 2 for formats that scale every 16 values.
    const SPANS: usize;
    /// Whether the format has mins (otherwise they are zero and never read).
    const MIN: bool;
    /// K-quants: `half` is per super-block of `BLOCK` values, with per-span multipliers.
    const SUPER: bool = false;
    /// How `half` holds a scale.
    const SCALES: Scales = Scales::F16;
    /// The value of each code, where a code is not its own value (then `OFFSET` is 0 and
    /// there is no min): integers, as f32.
    const VALUES: Option<[f32; 16]> = None;
    /// Unpacks one block (`BLOCK_BYTES` bytes) into `BLOCK / SUB` sub-blocks.
    fn unpack(block: &[u8], out: &mut [Sub]);
}

/// The bits a sub-block's `half` holds its scale (and min) in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scales {
    F16,
    /// The top half of an f32, for scales that are powers of two f16 cannot hold.
    Bf16,
}

impl Scales {
    /// The scale `half` holds, exactly.
    pub(crate) fn value(self, half: u16) -> f32 {
        match self {
            Scales::F16 => f16_to_f32(half),
            Scales::Bf16 => f32::from_bits(u32::from(half) << 16),
        }
    }
}

fn half(block: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([block[at], block[at + 1]])
}

/// `-x` in f16 bits (exact: the sign bit).
fn negated(half: u16) -> u16 {
    half ^ 0x8000
}

/// Low nibbles are values 0..16, high nibbles 16..32 (the 32-value formats).
fn nibbles(qs: &[u8], q: &mut [u8; SUB]) {
    for (j, &byte) in qs.iter().enumerate() {
        q[j] = byte & 0xf;
        q[j + 16] = byte >> 4;
    }
}

/// The fifth bits of Q5_0/Q5_1: bit `j` of a little-endian u32 belongs to value `j`.
fn fifth_bits(qh: &[u8], q: &mut [u8; SUB]) {
    let bits = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
    for (j, q) in q.iter_mut().enumerate() {
        *q |= (((bits >> j) & 1) as u8) << 4;
    }
}

pub(crate) struct Q4_0;
impl Format for Q4_0 {
    const DTYPE: QuantType = QuantType::Ggml(GgmlDType::Q4_0);
    const BLOCK: usize = 32;
    const BLOCK_BYTES: usize = 18;
    const BITS: u32 = 4;
    const OFFSET: i32 = 8;
    const SPANS: usize = 1;
    const MIN: bool = false;
    fn unpack(block: &[u8], out: &mut [Sub]) {
        out[0].half[0] = half(block, 0);
        nibbles(&block[2..18], &mut out[0].q);
    }
}

pub(crate) struct Q4_1;
impl Format for Q4_1 {
    const DTYPE: QuantType = QuantType::Ggml(GgmlDType::Q4_1);
    const BLOCK: usize = 32;
    const BLOCK_BYTES: usize = 20;
    const BITS: u32 = 4;
    const OFFSET: i32 = 0;
    const SPANS: usize = 1;
    const MIN: bool = true;
    fn unpack(block: &[u8], out: &mut [Sub]) {
        out[0].half = [half(block, 0), half(block, 2)];
        nibbles(&block[4..20], &mut out[0].q);
    }
}

pub(crate) struct Q5_0;
impl Format for Q5_0 {
    const DTYPE: QuantType = QuantType::Ggml(GgmlDType::Q5_0);
    const BLOCK: usize = 32;
    const BLOCK_BYTES: usize = 22;
    const BITS: u32 = 5;
    const OFFSET: i32 = 16;
    const SPANS: usize = 1;
    const MIN: bool = false;
    fn unpack(block: &[u8], out: &mut [Sub]) {
        out[0].half[0] = half(block, 0);
        nibbles(&block[6..22], &mut out[0].q);
        fifth_bits(&block[2..6], &mut out[0].q);
    }
}

pub(crate) struct Q5_1;
impl Format for Q5_1 {
    const DTYPE: QuantType = QuantType::Ggml(GgmlDType::Q5_1);
    const BLOCK: usize = 32;
    const BLOCK_BYTES: usize = 24;
    const BITS: u32 = 5;
    const OFFSET: i32 = 0;
    const SPANS: usize = 1;
    const MIN: bool = true;
    fn unpack(block: &[u8], out: &mut [Sub]) {
        out[0].half = [half(block, 0), half(block, 2)];
        nibbles(&block[8..24], &mut out[0].q);
        fifth_bits(&block[4..8], &mut out[0].q);
    }
}

pub(crate) struct Q8_0;
impl Format for Q8_0 {
    const DTYPE: QuantType = QuantType::Ggml(GgmlDType::Q8_0);
    const BLOCK: usize = 32;
    const BLOCK_BYTES: usize = 34;
    const BITS: u32 = 8;
    const OFFSET: i32 = 0;
    const SPANS: usize = 1;
    const MIN: bool = false;
    fn unpack(block: &[u8], out: &mut [Sub]) {
        out[0].half[0] = half(block, 0);
        out[0].q.copy_from_slice(&block[2..34]);
    }
}

/// The K-quant super-block's 8 six-bit scales and mins, packed into 12 bytes.
fn scale_min_k4(j: usize, packed: &[u8]) -> (u8, u8) {
    let (scale, min) = if j < 4 {
        (packed[j] & 63, packed[j + 4] & 63)
    } else {
        (
            (packed[j + 4] & 0xf) | ((packed[j - 4] >> 6) << 4),
            (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4),
        )
    };
    (scale, min)
}

/// Q4_K and Q5_K: `d`, `dmin`, 12 bytes of scales, then (Q5_K) 32 bytes of fifth bits and
/// 128 bytes of nibbles; sub-block `j` takes the low (even `j`) or high (odd `j`) nibbles of
/// bytes `32 (j / 2)..`, and bit `j` of each fifth-bit byte.
fn unpack_k(block: &[u8], fifth: bool, out: &mut [Sub]) {
    let halves = [half(block, 0), negated(half(block, 2))];
    let scales = &block[4..16];
    let qs = if fifth {
        &block[48..176]
    } else {
        &block[16..144]
    };
    for (j, sub) in out.iter_mut().enumerate() {
        let (scale, min) = scale_min_k4(j, scales);
        // Six bits: they fit an i8.
        sub.half = halves;
        sub.multiplier = [[scale as i8; 2], [min as i8; 2]];
        let bytes = &qs[32 * (j / 2)..32 * (j / 2) + 32];
        for (l, q) in sub.q.iter_mut().enumerate() {
            *q = (bytes[l] >> (4 * (j % 2))) & 0xf;
            if fifth {
                *q |= ((block[16 + l] >> j) & 1) << 4;
            }
        }
    }
}

pub(crate) struct Q4K;
impl Format for Q4K {
    const DTYPE: QuantType = QuantType::Ggml(GgmlDType::Q4K);
    const BLOCK: usize = 256;
    const BLOCK_BYTES: usize = 144;
    const BITS: u32 = 4;
    const OFFSET: i32 = 0;
    const SPANS: usize = 1;
    const MIN: bool = true;
    const SUPER: bool = true;
    fn unpack(block: &[u8], out: &mut [Sub]) {
        unpack_k(block, false, out);
    }
}

pub(crate) struct Q5K;
impl Format for Q5K {
    const DTYPE: QuantType = QuantType::Ggml(GgmlDType::Q5K);
    const BLOCK: usize = 256;
    const BLOCK_BYTES: usize = 176;
    const BITS: u32 = 5;
    const OFFSET: i32 = 0;
    const SPANS: usize = 1;
    const MIN: bool = true;
    const SUPER: bool = true;
    fn unpack(block: &[u8], out: &mut [Sub]) {
        unpack_k(block, true, out);
    }
}

/// Q6_K: 128 bytes of low nibbles, 64 of two-bit highs, 16 signed scales, `d`. In each half
/// `h` of 128 values, sub-block `4h + t` takes nibble `t / 2` of bytes `64h + 32 (t % 2)..`
/// and bits `2t..2t + 2` of the high bytes `32h..`; a scale covers 16 values.
pub(crate) struct Q6K;
impl Format for Q6K {
    const DTYPE: QuantType = QuantType::Ggml(GgmlDType::Q6K);
    const BLOCK: usize = 256;
    const BLOCK_BYTES: usize = 210;
    const BITS: u32 = 6;
    const OFFSET: i32 = 32;
    const SPANS: usize = 2;
    const MIN: bool = false;
    const SUPER: bool = true;
    fn unpack(block: &[u8], out: &mut [Sub]) {
        let (ql, qh, scales) = (&block[..128], &block[128..192], &block[192..208]);
        let d = half(block, 208);
        for (j, sub) in out.iter_mut().enumerate() {
            let (h, t) = (j / 4, j % 4);
            for (l, q) in sub.q.iter_mut().enumerate() {
                let low = (ql[64 * h + 32 * (t % 2) + l] >> (4 * (t / 2))) & 0xf;
                let high = (qh[32 * h + l] >> (2 * t)) & 3;
                *q = low | high << 4;
            }
            sub.half[0] = d;
            sub.multiplier[0] = [scales[2 * j] as i8, scales[2 * j + 1] as i8];
        }
    }
}

/// The 2-bit layout of Q2_K and Q3_K: in each half `h` of 128 values, sub-block `4h + t`
/// takes bits `2t..2t + 2` of the 32 bytes `qs[32h..]`.
fn crumbs(qs: &[u8], j: usize, q: &mut [u8; SUB]) {
    let (h, t) = (j / 4, j % 4);
    for (l, q) in q.iter_mut().enumerate() {
        *q = (qs[32 * h + l] >> (2 * t)) & 3;
    }
}

/// Q2_K: 16 bytes of scales (a 4-bit scale and a 4-bit min per 16 values), 64 of 2-bit
/// quants, `d`, `dmin`: `w = d scale q - dmin min`.
pub(crate) struct Q2K;
impl Format for Q2K {
    const DTYPE: QuantType = QuantType::Ggml(GgmlDType::Q2K);
    const BLOCK: usize = 256;
    const BLOCK_BYTES: usize = 84;
    const BITS: u32 = 2;
    const OFFSET: i32 = 0;
    const SPANS: usize = 2;
    const MIN: bool = true;
    const SUPER: bool = true;
    fn unpack(block: &[u8], out: &mut [Sub]) {
        let (scales, qs) = (&block[..16], &block[16..80]);
        let halves = [half(block, 80), negated(half(block, 82))];
        for (j, sub) in out.iter_mut().enumerate() {
            crumbs(qs, j, &mut sub.q);
            let (a, b) = (scales[2 * j], scales[2 * j + 1]);
            sub.half = halves;
            sub.multiplier = [
                [(a & 0xf) as i8, (b & 0xf) as i8],
                [(a >> 4) as i8, (b >> 4) as i8],
            ];
        }
    }
}

/// Q3_K: 32 bytes of high bits (bit `j` of byte `l` belongs to value `l` of sub-block
/// `j`), 64 of 2-bit quants laid out as Q2_K's, 12 bytes of 6-bit scales (biased by 32,
/// one per 16 values), `d`: `w = d (scale - 32) (q - 4)`, where a set high bit adds 4.
pub(crate) struct Q3K;
impl Format for Q3K {
    const DTYPE: QuantType = QuantType::Ggml(GgmlDType::Q3K);
    const BLOCK: usize = 256;
    const BLOCK_BYTES: usize = 110;
    const BITS: u32 = 3;
    const OFFSET: i32 = 4;
    const SPANS: usize = 2;
    const MIN: bool = false;
    const SUPER: bool = true;
    fn unpack(block: &[u8], out: &mut [Sub]) {
        let (hmask, qs, packed) = (&block[..32], &block[32..96], &block[96..108]);
        // Scale `i`: its low four bits from byte `i % 8` (low or high nibble by `i / 8`),
        // its top two from byte `8 + i % 4`, bits `2 (i / 4)..`.
        let scale = |i: usize| {
            let low = (packed[i % 8] >> (4 * (i / 8))) & 0xf;
            let top = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
            (low | top << 4) as i8 - 32
        };
        let d = half(block, 108);
        for (j, sub) in out.iter_mut().enumerate() {
            crumbs(qs, j, &mut sub.q);
            for (l, q) in sub.q.iter_mut().enumerate() {
                *q |= ((hmask[l] >> j) & 1) << 2;
            }
            sub.half[0] = d;
            sub.multiplier[0] = [scale(2 * j), scale(2 * j + 1)];
        }
    }
}

/// MXFP4: an E8M0 scale byte, then 16 bytes of codes laid out as Q4_0's nibbles.
pub(crate) struct Mxfp4;
impl Format for Mxfp4 {
    const DTYPE: QuantType = QuantType::Mxfp4;
    const BLOCK: usize = mxfp4::BLOCK;
    const BLOCK_BYTES: usize = mxfp4::BLOCK_BYTES;
    const BITS: u32 = 4;
    const OFFSET: i32 = 0;
    const SPANS: usize = 1;
    const MIN: bool = false;
    const SCALES: Scales = Scales::Bf16;
    const VALUES: Option<[f32; 16]> = Some({
        let mut values = [0.0; 16];
        let mut i = 0;
        while i < 16 {
            values[i] = mxfp4::VALUES[i] as f32;
            i += 1;
        }
        values
    });
    fn unpack(block: &[u8], out: &mut [Sub]) {
        // A power of two: its low 16 bits are zero.
        out[0].half[0] = (mxfp4::scale(block[0]).to_bits() >> 16) as u16;
        nibbles(&block[1..17], &mut out[0].q);
    }
}
