//! Our product for float weight matrices on the CPU (f32, f16, bf16), batch invariant.
//!
//! candle's f32 matmul picks its blocking from the number of activation rows, so a row's
//! result changes in its last bits with the rows beside it: a sample decoded alone differs
//! from the same sample decoded in a batch. Re-runs must equal fresh runs to the bit while
//! their batches are made up differently, so here every output element is one dot product
//! summed in one fixed order (eight lanes along the row, then a fixed reduction), whatever
//! rows surround it. Register tiles of weight rows × activation rows keep it fast.
//!
//! f16 and bf16 matrices stay 16-bit in memory, half the bytes a decode step reads; the
//! kernel widens each weight exactly as it loads it, so their product is, bit for bit, the
//! f32 product of the widened matrix.

use super::parallel::{Disjoint, for_each_range};
use super::{Isa, f16_to_f32, rows_through};
use candle_core::quantized::GgmlDType;
use candle_core::{CpuStorage, CustomOp1, Layout, Shape};

fn widen_into<E: Element>(values: &[E], out: &mut [f32]) {
    for (out, v) in out.iter_mut().zip(values) {
        *out = v.widen();
    }
}

/// Weight rows per tile: each loaded vector of a tile's rows serves every activation row.
const TILE_ROWS: usize = 4;
/// Activation rows per tile.
const TILE_COLS: usize = 2;
/// Values summed side by side before the final reduction.
const LANES: usize = 8;

/// IEEE half precision, as its bits.
#[derive(Debug, Clone, Copy)]
struct F16(u16);

/// bfloat16 (the upper half of an f32), as its bits.
#[derive(Debug, Clone, Copy)]
struct Bf16(u16);

/// A stored weight value and its exact widening to f32.
trait Element: Copy + Send + Sync {
    fn widen(self) -> f32;

    /// Eight consecutive values, widened.
    ///
    /// # Safety
    /// `p` must be readable for eight values; AVX2 and F16C must be enabled.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256;
}

impl Element for f32 {
    fn widen(self) -> f32 {
        self
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256 {
        // SAFETY: the caller guarantees eight readable f32 and AVX.
        unsafe { std::arch::x86_64::_mm256_loadu_ps(p) }
    }
}

impl Element for F16 {
    fn widen(self) -> f32 {
        f16_to_f32(self.0)
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        // SAFETY: the caller guarantees eight readable halves (16 bytes) and F16C, whose
        // conversion is exact.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
    }
}

impl Element for Bf16 {
    fn widen(self) -> f32 {
        f32::from_bits(u32::from(self.0) << 16)
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        // SAFETY: the caller guarantees eight readable bf16 (16 bytes) and AVX2; the shift
        // into the upper half is [`Bf16::widen`].
        unsafe {
            let bits = _mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast()));
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(bits))
        }
    }
}

/// A matrix's values as stored.
#[derive(Debug, Clone)]
enum Values {
    F32(Vec<f32>),
    F16(Vec<F16>),
    Bf16(Vec<Bf16>),
}

/// A `[rows, cols]` weight matrix, row-major, in f32, f16 or bf16.
#[derive(Debug, Clone)]
pub(crate) struct DenseMatrix {
    rows: usize,
    cols: usize,
    values: Values,
}

impl DenseMatrix {
    /// Takes over a GGUF-typed matrix's little-endian values; `None` for a type that is not
    /// f32, f16 or bf16.
    pub(crate) fn from_ggml(
        dtype: GgmlDType,
        rows: usize,
        cols: usize,
        data: &[u8],
    ) -> candle_core::Result<Option<Self>> {
        if !matches!(dtype, GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16) {
            return Ok(None);
        }
        if data.len() != rows * cols * dtype.type_size() {
            candle_core::bail!(
                "{dtype:?} matrix [{rows}, {cols}] given {} bytes",
                data.len()
            );
        }
        let halves = || {
            data.chunks_exact(2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]))
        };
        let values = match dtype {
            GgmlDType::F16 => Values::F16(halves().map(F16).collect()),
            GgmlDType::BF16 => Values::Bf16(halves().map(Bf16).collect()),
            _ => Values::F32(
                data.chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            ),
        };
        Ok(Some(Self { rows, cols, values }))
    }

    /// Row `r`, widened into `out` (`cols` long): an embedding lookup in a tied matrix.
    pub(crate) fn row(&self, r: usize, out: &mut [f32]) {
        let at = r * self.cols..(r + 1) * self.cols;
        match &self.values {
            Values::F32(v) => out.copy_from_slice(&v[at]),
            Values::F16(v) => widen_into(&v[at], out),
            Values::Bf16(v) => widen_into(&v[at], out),
        }
    }

    /// `f32`, `f16` or `bf16`.
    pub(crate) fn dtype_name(&self) -> &'static str {
        match self.values {
            Values::F32(_) => "f32",
            Values::F16(_) => "f16",
            Values::Bf16(_) => "bf16",
        }
    }

    pub(crate) fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    pub(crate) fn storage_size_in_bytes(&self) -> usize {
        match &self.values {
            Values::F32(v) => size_of_val(v.as_slice()),
            Values::F16(v) => size_of_val(v.as_slice()),
            Values::Bf16(v) => size_of_val(v.as_slice()),
        }
    }

    /// `x W^T` for `x` = `[m, cols]` f32 values (row-major): `[m, rows]`.
    pub(crate) fn matmul(&self, x: &[f32]) -> Vec<f32> {
        self.matmul_with(Isa::detect(), x)
    }

    fn matmul_with(&self, isa: Isa, x: &[f32]) -> Vec<f32> {
        match &self.values {
            Values::F32(w) => product(isa, w, self.rows, self.cols, x),
            Values::F16(w) => product(isa, w, self.rows, self.cols, x),
            Values::Bf16(w) => product(isa, w, self.rows, self.cols, x),
        }
    }
}

/// `x W^T` for a `[n, k]` matrix `w` and `x` = `[m, k]`: `[m, n]`.
fn product<E: Element>(isa: Isa, w: &[E], n: usize, k: usize, x: &[f32]) -> Vec<f32> {
    let m = x.len().checked_div(k).unwrap_or(0);
    let mut out = vec![0f32; m * n];
    if m == 0 || n == 0 {
        return out;
    }
    let row = |r: usize| &w[r * k..][..k];
    let shared = Disjoint::new(&mut out);
    // Each task takes a run of tiles: their output rows are its own.
    for_each_range(n.div_ceil(TILE_ROWS), |tiles| {
        for r in tiles.map(|t| t * TILE_ROWS) {
            let count = (n - r).min(TILE_ROWS);
            let w: [&[E]; TILE_ROWS] = std::array::from_fn(|t| row((r + t).min(r + count - 1)));
            let mut i = 0;
            while i < m {
                let take = (m - i).min(TILE_COLS);
                let xs: [&[f32]; TILE_COLS] =
                    std::array::from_fn(|c| &x[(i + c.min(take - 1)) * k..][..k]);
                let dots = tile(isa, &w, &xs);
                for (c, values) in dots.iter().enumerate().take(take) {
                    // SAFETY: output rows `r..r + count` belong to this task alone.
                    unsafe { shared.write((i + c) * n + r, &values[..count]) };
                }
                i += take;
            }
        }
    });
    out
}

/// Runs a `[.., cols]` f32 tensor through the matrix: `[.., rows]`.
impl CustomOp1 for DenseMatrix {
    fn name(&self) -> &'static str {
        "dense-matmul"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        rows_through(self.name(), (self.rows, self.cols), storage, layout, |x| {
            self.matmul(x)
        })
    }
}

/// Dot products of a tile, `[activation row][weight row]`.
type Tile = [[f32; TILE_ROWS]; TILE_COLS];

/// A tile with the instructions the CPU has: AVX-512 CPUs take the AVX2 path, which a
/// 16-lane tile would not beat on tiles this small.
fn tile<E: Element>(isa: Isa, w: &[&[E]; TILE_ROWS], x: &[&[f32]; TILE_COLS]) -> Tile {
    match isa {
        Isa::Portable => portable_tile(w, x),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::detect` reports AVX2 (with FMA and F16C) or AVX-512F, which implies them.
        Isa::Avx2 | Isa::Avx512 => unsafe { avx2::tile(w, x) },
    }
}

/// The order every kernel sums in: lane `l` accumulates columns `l, l + 8, ...` of the full
/// chunks with a fused multiply-add, the lanes are added pairwise (0+4, 1+5, ...; then 0+2,
/// 1+3; then 0+1), and the remaining columns follow one by one.
fn portable_tile<E: Element>(w: &[&[E]; TILE_ROWS], x: &[&[f32]; TILE_COLS]) -> Tile {
    let k = x[0].len();
    let full = k - k % LANES;
    std::array::from_fn(|c| {
        std::array::from_fn(|r| {
            let mut lanes = [0f32; LANES];
            for at in (0..full).step_by(LANES) {
                for (l, lane) in lanes.iter_mut().enumerate() {
                    *lane = x[c][at + l].mul_add(w[r][at + l].widen(), *lane);
                }
            }
            remainder(reduce(lanes), w[r], x[c], full)
        })
    })
}

fn reduce(lanes: [f32; LANES]) -> f32 {
    let quad: [f32; 4] = std::array::from_fn(|l| lanes[l] + lanes[l + 4]);
    let pair = [quad[0] + quad[2], quad[1] + quad[3]];
    pair[0] + pair[1]
}

/// Adds the columns after the full chunks, one by one.
fn remainder<E: Element>(mut sum: f32, w: &[E], x: &[f32], full: usize) -> f32 {
    for (x, w) in x[full..].iter().zip(&w[full..]) {
        sum = x.mul_add(w.widen(), sum);
    }
    sum
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Element, LANES, TILE_COLS, TILE_ROWS, Tile, reduce, remainder};
    use std::arch::x86_64::*;

    /// [`super::portable_tile`]'s order with eight lanes in one vector.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn tile<E: Element>(w: &[&[E]; TILE_ROWS], x: &[&[f32]; TILE_COLS]) -> Tile {
        let k = x[0].len();
        let full = k - k % LANES;
        let mut acc = [[_mm256_setzero_ps(); TILE_ROWS]; TILE_COLS];
        for at in (0..full).step_by(LANES) {
            // SAFETY: `at + 8 <= full <= k`, the length of every row here; AVX2 and F16C
            // are enabled.
            let wv: [__m256; TILE_ROWS] =
                std::array::from_fn(|r| unsafe { E::load8(w[r].as_ptr().add(at)) });
            for (acc, x) in acc.iter_mut().zip(x) {
                // SAFETY: as above.
                let xv = unsafe { _mm256_loadu_ps(x.as_ptr().add(at)) };
                for (acc, wv) in acc.iter_mut().zip(&wv) {
                    *acc = _mm256_fmadd_ps(xv, *wv, *acc);
                }
            }
        }
        std::array::from_fn(|c| {
            std::array::from_fn(|r| {
                let mut lanes = [0f32; LANES];
                // SAFETY: `lanes` is 8 writable f32; `storeu` has no alignment requirement.
                unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc[c][r]) };
                remainder(reduce(lanes), w[r], x[c], full)
            })
        })
    }
}

#[cfg(test)]
mod tests;
