//! MXFP4 blocks (GGML type 39, gpt-oss's expert weights), which candle 0.11 has no type for.
//!
//! A block is 32 values: one E8M0 byte `e` (a bare power of two), then 16 bytes of 4-bit E2M1
//! codes, value `j` in the low nibble of byte `j` and value `j + 16` in its high nibble. GGML
//! keeps the E2M1 values doubled, as the integers of [`VALUES`], and halves the scale to
//! match: `w = VALUES[code] * 2^(e - 128)`. Both factors are exact in f32 and so is their
//! product (two significant bits times a power of two), unless it overflows, as GGML's does.

/// The type's number in a GGUF tensor table.
pub(crate) const GGML_TYPE: u32 = 39;
/// Values and bytes of one block.
pub(crate) const BLOCK: usize = 32;
pub(crate) const BLOCK_BYTES: usize = 17;

/// The doubled E2M1 value of each code: the top bit is the sign (code 8 is a zero, `+0`).
pub(crate) const VALUES: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// `2^(e - 128)`: half the E8M0 scale, to go with the doubled values. The two smallest are
/// subnormal; 255 (E8M0's NaN) is read as GGML reads it, `2^127`.
pub(crate) fn scale(e: u8) -> f32 {
    match e {
        0 | 1 => f32::from_bits(0x0020_0000 << e),
        _ => f32::from_bits(u32::from(e - 1) << 23),
    }
}

/// Whole blocks `data` into `out` (32 values a block), as GGML dequantizes them.
pub(crate) fn dequantize(data: &[u8], out: &mut [f32]) {
    for (block, out) in data
        .chunks_exact(BLOCK_BYTES)
        .zip(out.chunks_exact_mut(BLOCK))
    {
        let d = scale(block[0]);
        for (j, &byte) in block[1..].iter().enumerate() {
            out[j] = f32::from(VALUES[usize::from(byte & 0xf)]) * d;
            out[j + BLOCK / 2] = f32::from(VALUES[usize::from(byte >> 4)]) * d;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_are_powers_of_two_from_two_to_the_minus_128() {
        assert_eq!(scale(0), 2f32.powi(-128));
        assert_eq!(scale(1), 2f32.powi(-127));
        assert_eq!(scale(2), 2f32.powi(-126));
        assert_eq!(scale(128), 1.0);
        assert_eq!(scale(254), 2f32.powi(126));
        assert_eq!(scale(255), 2f32.powi(127));
    }

    #[test]
    fn a_block_puts_low_nibbles_first_and_zero_codes_are_plus_zero() {
        let mut block = [0u8; BLOCK_BYTES];
        block[0] = 129;
        block[1] = 0x8f;
        block[16] = 0x71;
        let mut out = [f32::NAN; BLOCK];
        dequantize(&block, &mut out);
        assert_eq!(out[0], -24.0);
        assert_eq!(out[16].to_bits(), 0, "code 8 is +0");
        assert_eq!(out[15], 2.0);
        assert_eq!(out[31], 24.0);
        assert_eq!(out[1].to_bits(), 0);
    }
}
