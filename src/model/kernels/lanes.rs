//! Sixteen f32 lanes in three instruction sets: a kernel body is written once against
//! [`Lanes`] and compiled for each (a tile's 16 output rows, 16 columns of a recurrent
//! state).

/// The operations the kernels need. Pointers must be readable (or, for `store`,
/// writable) for 16 elements; callers guarantee it.
pub(crate) trait Lanes {
    type I: Copy;
    type F: Copy;
    /// 16 bytes, zero-extended.
    unsafe fn load_u8(p: *const u8) -> Self::I;
    /// 16 bytes, sign-extended.
    unsafe fn load_i8(p: *const u8) -> Self::I;
    unsafe fn and(a: Self::I, mask: i32) -> Self::I;
    unsafe fn shr(a: Self::I, n: u32) -> Self::I;
    unsafe fn shl(a: Self::I, n: u32) -> Self::I;
    unsafe fn or(a: Self::I, b: Self::I) -> Self::I;
    unsafe fn float(a: Self::I) -> Self::F;
    /// 16 f16 values, widened exactly.
    unsafe fn load_f16(p: *const u16) -> Self::F;
    /// 16 bf16 values (the top halves of f32), widened exactly.
    unsafe fn load_bf16(p: *const u16) -> Self::F;
    /// `table[i]` for each lane's `i`, which must be in `0..16`.
    unsafe fn lookup(i: Self::I, table: &[f32; 16]) -> Self::F;
    unsafe fn load(p: *const f32) -> Self::F;
    unsafe fn splat(v: f32) -> Self::F;
    unsafe fn zero() -> Self::F;
    unsafe fn add(a: Self::F, b: Self::F) -> Self::F;
    unsafe fn mul(a: Self::F, b: Self::F) -> Self::F;
    /// `a * b + c`, fused where the CPU can.
    unsafe fn fma(a: Self::F, b: Self::F, c: Self::F) -> Self::F;
    unsafe fn store(a: Self::F, p: *mut f32);
}

/// Plain arrays: the portable fallback (the compiler vectorizes what it can).
pub(crate) struct Portable;

impl Lanes for Portable {
    type I = [i32; 16];
    type F = [f32; 16];
    unsafe fn load_u8(p: *const u8) -> Self::I {
        // SAFETY: the caller guarantees 16 readable bytes.
        std::array::from_fn(|i| i32::from(unsafe { *p.add(i) }))
    }
    unsafe fn load_i8(p: *const u8) -> Self::I {
        // SAFETY: the caller guarantees 16 readable bytes.
        std::array::from_fn(|i| i32::from(unsafe { *p.add(i) } as i8))
    }
    unsafe fn and(a: Self::I, mask: i32) -> Self::I {
        a.map(|v| v & mask)
    }
    unsafe fn shr(a: Self::I, n: u32) -> Self::I {
        a.map(|v| v >> n)
    }
    unsafe fn shl(a: Self::I, n: u32) -> Self::I {
        a.map(|v| v << n)
    }
    unsafe fn or(a: Self::I, b: Self::I) -> Self::I {
        std::array::from_fn(|i| a[i] | b[i])
    }
    unsafe fn float(a: Self::I) -> Self::F {
        a.map(|v| v as f32)
    }
    unsafe fn load_f16(p: *const u16) -> Self::F {
        // SAFETY: the caller guarantees 16 readable u16.
        std::array::from_fn(|i| super::half::f16_to_f32(unsafe { *p.add(i) }))
    }
    unsafe fn load_bf16(p: *const u16) -> Self::F {
        // SAFETY: the caller guarantees 16 readable u16.
        std::array::from_fn(|i| f32::from_bits(u32::from(unsafe { *p.add(i) }) << 16))
    }
    unsafe fn lookup(i: Self::I, table: &[f32; 16]) -> Self::F {
        i.map(|i| table[i as usize])
    }
    unsafe fn load(p: *const f32) -> Self::F {
        // SAFETY: the caller guarantees 16 readable f32.
        std::array::from_fn(|i| unsafe { *p.add(i) })
    }
    unsafe fn splat(v: f32) -> Self::F {
        [v; 16]
    }
    unsafe fn zero() -> Self::F {
        [0.0; 16]
    }
    unsafe fn add(a: Self::F, b: Self::F) -> Self::F {
        std::array::from_fn(|i| a[i] + b[i])
    }
    unsafe fn mul(a: Self::F, b: Self::F) -> Self::F {
        std::array::from_fn(|i| a[i] * b[i])
    }
    unsafe fn fma(a: Self::F, b: Self::F, c: Self::F) -> Self::F {
        std::array::from_fn(|i| a[i] * b[i] + c[i])
    }
    unsafe fn store(a: Self::F, p: *mut f32) {
        for (i, v) in a.into_iter().enumerate() {
            // SAFETY: the caller guarantees 16 writable f32.
            unsafe { *p.add(i) = v };
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{Avx2, Avx512};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Lanes;
    use std::arch::x86_64::*;

    /// Two 8-lane halves. Only called from functions compiled with `avx2,fma,f16c`.
    pub(crate) struct Avx2;

    impl Lanes for Avx2 {
        type I = [__m256i; 2];
        type F = [__m256; 2];
        #[inline(always)]
        unsafe fn load_u8(p: *const u8) -> Self::I {
            // SAFETY: 16 readable bytes, AVX2 enabled by the caller.
            unsafe {
                let v = _mm_loadu_si128(p.cast());
                [
                    _mm256_cvtepu8_epi32(v),
                    _mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)),
                ]
            }
        }
        #[inline(always)]
        unsafe fn load_i8(p: *const u8) -> Self::I {
            // SAFETY: as `load_u8`.
            unsafe {
                let v = _mm_loadu_si128(p.cast());
                [
                    _mm256_cvtepi8_epi32(v),
                    _mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)),
                ]
            }
        }
        #[inline(always)]
        unsafe fn and(a: Self::I, mask: i32) -> Self::I {
            // SAFETY: AVX2 enabled by the caller.
            unsafe { a.map(|v| _mm256_and_si256(v, _mm256_set1_epi32(mask))) }
        }
        #[inline(always)]
        unsafe fn shr(a: Self::I, n: u32) -> Self::I {
            // SAFETY: AVX2 enabled by the caller.
            unsafe { a.map(|v| _mm256_srl_epi32(v, _mm_cvtsi32_si128(n as i32))) }
        }
        #[inline(always)]
        unsafe fn shl(a: Self::I, n: u32) -> Self::I {
            // SAFETY: AVX2 enabled by the caller.
            unsafe { a.map(|v| _mm256_sll_epi32(v, _mm_cvtsi32_si128(n as i32))) }
        }
        #[inline(always)]
        unsafe fn or(a: Self::I, b: Self::I) -> Self::I {
            // SAFETY: AVX2 enabled by the caller.
            unsafe { [_mm256_or_si256(a[0], b[0]), _mm256_or_si256(a[1], b[1])] }
        }
        #[inline(always)]
        unsafe fn float(a: Self::I) -> Self::F {
            // SAFETY: AVX2 enabled by the caller.
            unsafe { a.map(|v| _mm256_cvtepi32_ps(v)) }
        }
        #[inline(always)]
        unsafe fn load_f16(p: *const u16) -> Self::F {
            // SAFETY: 16 readable u16, F16C enabled by the caller.
            unsafe {
                [
                    _mm256_cvtph_ps(_mm_loadu_si128(p.cast())),
                    _mm256_cvtph_ps(_mm_loadu_si128(p.add(8).cast())),
                ]
            }
        }
        #[inline(always)]
        unsafe fn load_bf16(p: *const u16) -> Self::F {
            // SAFETY: 16 readable u16, AVX2 enabled by the caller.
            unsafe {
                let v = _mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast()));
                let w = _mm256_cvtepu16_epi32(_mm_loadu_si128(p.add(8).cast()));
                [
                    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(v)),
                    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(w)),
                ]
            }
        }
        /// Each half of the table by the index's low three bits, the pick by its fourth.
        #[inline(always)]
        unsafe fn lookup(i: Self::I, table: &[f32; 16]) -> Self::F {
            // SAFETY: 16 readable f32, AVX2 enabled by the caller.
            unsafe {
                let low = _mm256_loadu_ps(table.as_ptr());
                let high = _mm256_loadu_ps(table.as_ptr().add(8));
                i.map(|i| {
                    let pick = _mm256_castsi256_ps(_mm256_slli_epi32::<28>(i));
                    _mm256_blendv_ps(
                        _mm256_permutevar8x32_ps(low, i),
                        _mm256_permutevar8x32_ps(high, i),
                        pick,
                    )
                })
            }
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self::F {
            // SAFETY: 16 readable f32; `loadu` needs no alignment.
            unsafe { [_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8))] }
        }
        #[inline(always)]
        unsafe fn splat(v: f32) -> Self::F {
            // SAFETY: AVX2 enabled by the caller.
            unsafe { [_mm256_set1_ps(v); 2] }
        }
        #[inline(always)]
        unsafe fn add(a: Self::F, b: Self::F) -> Self::F {
            // SAFETY: AVX2 enabled by the caller.
            unsafe { [_mm256_add_ps(a[0], b[0]), _mm256_add_ps(a[1], b[1])] }
        }
        #[inline(always)]
        unsafe fn zero() -> Self::F {
            // SAFETY: AVX2 enabled by the caller.
            unsafe { [_mm256_setzero_ps(); 2] }
        }
        #[inline(always)]
        unsafe fn mul(a: Self::F, b: Self::F) -> Self::F {
            // SAFETY: AVX2 enabled by the caller.
            unsafe { [_mm256_mul_ps(a[0], b[0]), _mm256_mul_ps(a[1], b[1])] }
        }
        #[inline(always)]
        unsafe fn fma(a: Self::F, b: Self::F, c: Self::F) -> Self::F {
            // SAFETY: FMA enabled by the caller.
            unsafe {
                [
                    _mm256_fmadd_ps(a[0], b[0], c[0]),
                    _mm256_fmadd_ps(a[1], b[1], c[1]),
                ]
            }
        }
        #[inline(always)]
        unsafe fn store(a: Self::F, p: *mut f32) {
            // SAFETY: 16 writable f32; `storeu` needs no alignment.
            unsafe {
                _mm256_storeu_ps(p, a[0]);
                _mm256_storeu_ps(p.add(8), a[1]);
            }
        }
    }

    /// One 16-lane register. Only called from functions compiled with `avx512f`.
    pub(crate) struct Avx512;

    impl Lanes for Avx512 {
        type I = __m512i;
        type F = __m512;
        #[inline(always)]
        unsafe fn load_u8(p: *const u8) -> Self::I {
            // SAFETY: 16 readable bytes, AVX-512F enabled by the caller.
            unsafe { _mm512_cvtepu8_epi32(_mm_loadu_si128(p.cast())) }
        }
        #[inline(always)]
        unsafe fn load_i8(p: *const u8) -> Self::I {
            // SAFETY: as `load_u8`.
            unsafe { _mm512_cvtepi8_epi32(_mm_loadu_si128(p.cast())) }
        }
        #[inline(always)]
        unsafe fn and(a: Self::I, mask: i32) -> Self::I {
            // SAFETY: AVX-512F enabled by the caller.
            unsafe { _mm512_and_si512(a, _mm512_set1_epi32(mask)) }
        }
        #[inline(always)]
        unsafe fn shr(a: Self::I, n: u32) -> Self::I {
            // SAFETY: AVX-512F enabled by the caller.
            unsafe { _mm512_srl_epi32(a, _mm_cvtsi32_si128(n as i32)) }
        }
        #[inline(always)]
        unsafe fn shl(a: Self::I, n: u32) -> Self::I {
            // SAFETY: AVX-512F enabled by the caller.
            unsafe { _mm512_sll_epi32(a, _mm_cvtsi32_si128(n as i32)) }
        }
        #[inline(always)]
        unsafe fn or(a: Self::I, b: Self::I) -> Self::I {
            // SAFETY: AVX-512F enabled by the caller.
            unsafe { _mm512_or_si512(a, b) }
        }
        #[inline(always)]
        unsafe fn float(a: Self::I) -> Self::F {
            // SAFETY: AVX-512F enabled by the caller.
            unsafe { _mm512_cvtepi32_ps(a) }
        }
        #[inline(always)]
        unsafe fn load_f16(p: *const u16) -> Self::F {
            // SAFETY: 16 readable u16, AVX-512F enabled by the caller.
            unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p.cast())) }
        }
        #[inline(always)]
        unsafe fn load_bf16(p: *const u16) -> Self::F {
            // SAFETY: 16 readable u16, AVX-512F enabled by the caller.
            unsafe {
                let v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(p.cast()));
                _mm512_castsi512_ps(_mm512_slli_epi32::<16>(v))
            }
        }
        #[inline(always)]
        unsafe fn lookup(i: Self::I, table: &[f32; 16]) -> Self::F {
            // SAFETY: 16 readable f32, AVX-512F enabled by the caller.
            unsafe { _mm512_permutexvar_ps(i, _mm512_loadu_ps(table.as_ptr())) }
        }
        #[inline(always)]
        unsafe fn splat(v: f32) -> Self::F {
            // SAFETY: AVX-512F enabled by the caller.
            unsafe { _mm512_set1_ps(v) }
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self::F {
            // SAFETY: 16 readable f32; `loadu` needs no alignment.
            unsafe { _mm512_loadu_ps(p) }
        }
        #[inline(always)]
        unsafe fn zero() -> Self::F {
            // SAFETY: AVX-512F enabled by the caller.
            unsafe { _mm512_setzero_ps() }
        }
        #[inline(always)]
        unsafe fn add(a: Self::F, b: Self::F) -> Self::F {
            // SAFETY: AVX-512F enabled by the caller.
            unsafe { _mm512_add_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn mul(a: Self::F, b: Self::F) -> Self::F {
            // SAFETY: AVX-512F enabled by the caller.
            unsafe { _mm512_mul_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn fma(a: Self::F, b: Self::F, c: Self::F) -> Self::F {
            // SAFETY: AVX-512F enabled by the caller.
            unsafe { _mm512_fmadd_ps(a, b, c) }
        }
        #[inline(always)]
        unsafe fn store(a: Self::F, p: *mut f32) {
            // SAFETY: 16 writable f32; `storeu` needs no alignment.
            unsafe { _mm512_storeu_ps(p, a) }
        }
    }
}
