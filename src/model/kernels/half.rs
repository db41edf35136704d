//! IEEE half precision, which GGUF stores block scales and f16 matrices in.

/// IEEE half to single precision, exact.
pub(crate) fn f16_to_f32(bits: u16) -> f32 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exponent = u32::from(bits >> 10) & 0x1f;
    let mantissa = u32::from(bits) & 0x3ff;
    match exponent {
        0 => sign * mantissa as f32 * (-24f32).exp2(),
        0x1f => f32::from_bits(u32::from(bits & 0x8000) << 16 | 0x7f80_0000 | mantissa << 13),
        _ => {
            f32::from_bits(u32::from(bits & 0x8000) << 16 | (exponent + 112) << 23 | mantissa << 13)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::f16_to_f32;

    #[test]
    fn half_precision_scales() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(f16_to_f32(0x8000), 0.0);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert_eq!(f16_to_f32(0xfc00), f32::NEG_INFINITY);
    }
}
