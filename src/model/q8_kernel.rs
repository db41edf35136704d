//! Our Q8_0 matrix product for the CPU.
//!
//! candle's q8_0 path converts every block's f16 scale on every use and, on AVX2 without
//! VNNI, has no multi-row kernel: a batch of `m` rows costs `m` separate passes over the
//! weights. Here the scales are converted to f32 once at load, the activations are quantized
//! to q8_0 as llama.cpp does, and a tile of output rows × activation rows loads each weight
//! block once and reuses it for every activation row of the tile.

use candle_core::{CpuStorage, CustomOp1, Layout, Shape};
use rayon::prelude::*;

/// Values per q8_0 block.
const QK: usize = 32;
/// GGUF's q8_0 block: an f16 scale, then 32 int8 quants.
const GGUF_BLOCK_BYTES: usize = 2 + QK;
/// Output rows per tile: one activation block load serves this many weight rows.
const TILE_ROWS: usize = 4;
/// Activation rows per tile: one weight block load serves this many activation rows.
const TILE_COLS: usize = 2;
/// Activation rows swept together over a thread's output rows: their quants
/// (`CHUNK_ROWS * k` bytes) stay in L2 while each weight tile stays in L1.
const CHUNK_ROWS: usize = 64;

/// Rows of q8_0 blocks: int8 quants, contiguous per row, and one f32 scale per block.
/// Holds both weight matrices (`[n, k]`) and quantized activations (`[m, k]`).
#[derive(Debug, Clone)]
pub(crate) struct Q8Matrix {
    rows: usize,
    cols: usize,
    quants: Vec<[i8; QK]>,
    scales: Vec<f32>,
}

impl Q8Matrix {
    /// Takes over a GGUF q8_0 tensor's bytes (`rows * cols / 32` blocks of 34 bytes).
    pub(crate) fn from_gguf(rows: usize, cols: usize, data: &[u8]) -> candle_core::Result<Self> {
        let blocks = rows * cols / QK;
        if !cols.is_multiple_of(QK) || data.len() != blocks * GGUF_BLOCK_BYTES {
            candle_core::bail!(
                "q8_0 matrix [{rows}, {cols}] does not match {} bytes of blocks",
                data.len()
            );
        }
        let (quants, scales) = data
            .chunks_exact(GGUF_BLOCK_BYTES)
            .map(|block| {
                let scale = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
                let quants: [i8; QK] = std::array::from_fn(|i| block[2 + i] as i8);
                (quants, scale)
            })
            .unzip();
        Ok(Self {
            rows,
            cols,
            quants,
            scales,
        })
    }

    /// Quantizes `[rows, cols]` f32 values as llama.cpp's `quantize_row_q8_0`: per block,
    /// scale = max|x| / 127 and quants = round(x / scale).
    pub(crate) fn quantize(values: &[f32], rows: usize, cols: usize) -> Self {
        assert!(cols.is_multiple_of(QK) && values.len() == rows * cols);
        let (quants, scales) = values
            .chunks_exact(QK)
            .map(|block| {
                let max = block.iter().fold(0f32, |m, v| m.max(v.abs()));
                let scale = max / 127.0;
                let inverse = if scale > 0.0 { 1.0 / scale } else { 0.0 };
                let quants: [i8; QK] = std::array::from_fn(|i| (block[i] * inverse).round() as i8);
                (quants, scale)
            })
            .unzip();
        Self {
            rows,
            cols,
            quants,
            scales,
        }
    }

    pub(crate) fn storage_size_in_bytes(&self) -> usize {
        self.quants.len() * QK + self.scales.len() * size_of::<f32>()
    }

    fn blocks_per_row(&self) -> usize {
        self.cols / QK
    }

    fn row(&self, row: usize) -> (&[[i8; QK]], &[f32]) {
        let b = self.blocks_per_row();
        let range = row * b..(row + 1) * b;
        (&self.quants[range.clone()], &self.scales[range])
    }

    /// `x W^T` for `x` = `[m, k]` f32 values (row-major): `[m, n]`.
    pub(crate) fn matmul(&self, x: &[f32]) -> Vec<f32> {
        self.matmul_with(Kernel::detect(), x)
    }

    fn matmul_with(&self, kernel: Kernel, x: &[f32]) -> Vec<f32> {
        let m = x.len() / self.cols;
        if m == 0 {
            return Vec::new();
        }
        let x = Self::quantize(x, m, self.cols);
        // Computed as `[n, m]` so that each task owns a contiguous run of output rows.
        let mut transposed = vec![0f32; self.rows * m];
        let tasks = rayon::current_num_threads();
        let rows_per_task = self.rows.div_ceil(tasks).next_multiple_of(TILE_ROWS);
        transposed
            .par_chunks_mut(rows_per_task * m)
            .enumerate()
            .for_each(|(task, out)| {
                let first = task * rows_per_task;
                self.rows_times(kernel, first..first + out.len() / m, &x, out);
            });
        if m == 1 {
            return transposed;
        }
        let mut y = vec![0f32; m * self.rows];
        for (r, column) in transposed.chunks_exact(m).enumerate() {
            for (i, &v) in column.iter().enumerate() {
                y[i * self.rows + r] = v;
            }
        }
        y
    }

    /// Dot products of weight rows `rows` with every row of `x`, into `out[r][i]`.
    fn rows_times(
        &self,
        kernel: Kernel,
        rows: std::ops::Range<usize>,
        x: &Q8Matrix,
        out: &mut [f32],
    ) {
        let m = x.rows;
        for chunk in (0..m).step_by(CHUNK_ROWS) {
            let chunk = chunk..(chunk + CHUNK_ROWS).min(m);
            let full = chunk.end - chunk.len() % TILE_COLS;
            for r in rows.clone().step_by(TILE_ROWS) {
                let tile_rows = TILE_ROWS.min(rows.end - r);
                let out = &mut out[(r - rows.start) * m..(r - rows.start + tile_rows) * m];
                for i in (chunk.start..full).step_by(TILE_COLS) {
                    let tile = kernel.tile::<TILE_COLS>(self, r, tile_rows, x, i);
                    store(out, m, i, &tile);
                }
                for i in full..chunk.end {
                    store(out, m, i, &kernel.tile::<1>(self, r, tile_rows, x, i));
                }
            }
        }
    }
}

/// Writes a tile's leading `out.len() / m` rows at activation column `i` of `out[r][i]`.
fn store<const C: usize>(out: &mut [f32], m: usize, i: usize, tile: &Tile<C>) {
    for (row, values) in out.chunks_exact_mut(m).zip(tile) {
        row[i..i + C].copy_from_slice(values);
    }
}

/// Runs a `[.., k]` f32 tensor through the matrix: `[.., n]`.
impl CustomOp1 for Q8Matrix {
    fn name(&self) -> &'static str {
        "q8_0-matmul"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(values) = storage else {
            candle_core::bail!("q8_0 matmul takes f32 activations");
        };
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("q8_0 matmul takes contiguous activations");
        };
        let mut dims = layout.dims().to_vec();
        if dims.last() != Some(&self.cols) {
            candle_core::bail!(
                "q8_0 matmul: activations {dims:?} for a [{}, {}] matrix",
                self.rows,
                self.cols
            );
        }
        *dims.last_mut().expect("checked above") = self.rows;
        let y = self.matmul(&values[start..end]);
        Ok((CpuStorage::F32(y), Shape::from(dims)))
    }
}

/// The dot-product implementation, chosen once per product from the running CPU.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kernel {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

/// Results of one tile, `[output row][activation row]`.
type Tile<const C: usize> = [[f32; C]; TILE_ROWS];

impl Kernel {
    fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return Kernel::Avx2;
        }
        Kernel::Scalar
    }

    /// Weight rows `r..r + rows` times activation rows `i..i + C`; a short last tile of
    /// weight rows repeats its last row rather than taking a slower path.
    fn tile<const C: usize>(
        self,
        w: &Q8Matrix,
        r: usize,
        rows: usize,
        x: &Q8Matrix,
        i: usize,
    ) -> Tile<C> {
        let wr: [_; TILE_ROWS] = std::array::from_fn(|d| w.row(r + d.min(rows - 1)));
        let xr: [_; C] = std::array::from_fn(|d| x.row(i + d));
        match self {
            Kernel::Scalar => scalar_tile(&wr, &xr),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `detect` chose this kernel only where the CPU has AVX2 and FMA.
            Kernel::Avx2 => unsafe { avx2::tile(&wr, &xr) },
        }
    }
}

type Row<'a> = (&'a [[i8; QK]], &'a [f32]);

fn scalar_tile<const C: usize>(w: &[Row; TILE_ROWS], x: &[Row; C]) -> Tile<C> {
    let mut out = [[0f32; C]; TILE_ROWS];
    for (o, (wq, ws)) in out.iter_mut().zip(w) {
        for (o, (xq, xs)) in o.iter_mut().zip(x) {
            for b in 0..wq.len() {
                let dot: i32 = wq[b]
                    .iter()
                    .zip(&xq[b])
                    .map(|(&a, &b)| i32::from(a) * i32::from(b))
                    .sum();
                *o += dot as f32 * (ws[b] * xs[b]);
            }
        }
    }
    out
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{QK, Row, TILE_ROWS, Tile};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2")]
    fn load(block: &[i8; QK]) -> __m256i {
        // SAFETY: `block` is 32 readable bytes; `loadu` has no alignment requirement.
        unsafe { _mm256_loadu_si256(block.as_ptr().cast()) }
    }

    /// int8·int8 per block as llama.cpp's AVX2 q8_0 dot: `maddubs` multiplies unsigned by
    /// signed bytes, so the weight's sign moves onto the activation (|w| · sign(w)·x), pairs
    /// add to i16 (at most 2·127·127, no overflow), `madd` by ones widens to i32.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn tile<const C: usize>(w: &[Row; TILE_ROWS], x: &[Row; C]) -> Tile<C> {
        let blocks = w[0].0.len();
        let ones = _mm256_set1_epi16(1);
        let mut acc = [[_mm256_setzero_ps(); C]; TILE_ROWS];
        let mut xv = [_mm256_setzero_si256(); C];
        for b in 0..blocks {
            for j in 0..C {
                xv[j] = load(&x[j].0[b]);
            }
            for r in 0..TILE_ROWS {
                let wv = load(&w[r].0[b]);
                let wabs = _mm256_sign_epi8(wv, wv);
                let dw = w[r].1[b];
                for j in 0..C {
                    let signed = _mm256_sign_epi8(xv[j], wv);
                    let pairs = _mm256_maddubs_epi16(wabs, signed);
                    let dots = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
                    let scale = _mm256_set1_ps(dw * x[j].1[b]);
                    acc[r][j] = _mm256_fmadd_ps(dots, scale, acc[r][j]);
                }
            }
        }
        let mut out = [[0f32; C]; TILE_ROWS];
        for r in 0..TILE_ROWS {
            for j in 0..C {
                out[r][j] = hsum(acc[r][j]);
            }
        }
        out
    }

    #[target_feature(enable = "avx2,fma")]
    fn hsum(v: __m256) -> f32 {
        let v = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let v = _mm_add_ps(v, _mm_movehl_ps(v, v));
        let v = _mm_add_ss(v, _mm_movehdup_ps(v));
        _mm_cvtss_f32(v)
    }
}

/// IEEE half to single precision, exact (GGUF stores q8_0 scales as f16).
fn f16_to_f32(bits: u16) -> f32 {
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
    use super::*;
    use candle_core::quantized::{GgmlDType, QTensor};
    use candle_core::{Device, Tensor};

    fn noise(len: usize, seed: u64) -> Vec<f32> {
        let mut state = seed | 1;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    fn dequantized(q: &Q8Matrix) -> Vec<f32> {
        q.quants
            .iter()
            .zip(&q.scales)
            .flat_map(|(block, &d)| block.iter().map(move |&v| f32::from(v) * d))
            .collect()
    }

    fn dot(a: &[f32], b: &[f32]) -> f64 {
        a.iter()
            .zip(b)
            .map(|(&a, &b)| f64::from(a) * f64::from(b))
            .sum()
    }

    fn norm(a: &[f32]) -> f64 {
        dot(a, a).sqrt()
    }

    /// Checks `x W^T` (`[m, n]`) against f64 products of `w` with `x`, row by row, allowing
    /// `bound(|w_r|, |x_i|)`.
    fn check(y: &[f32], w: &[f32], x: &[f32], k: usize, bound: impl Fn(f64, f64) -> f64) {
        let n = w.len() / k;
        for (i, xi) in x.chunks_exact(k).enumerate() {
            for (r, wr) in w.chunks_exact(k).enumerate() {
                let (got, want) = (f64::from(y[i * n + r]), dot(wr, xi));
                let allowed = bound(norm(wr), norm(xi));
                assert!(
                    (got - want).abs() <= allowed,
                    "y[{i}][{r}] = {got}, want {want} ± {allowed}"
                );
            }
        }
    }

    /// Output rows not a multiple of the tile, activation rows across tile and chunk edges.
    const SHAPES: &[(usize, usize, usize)] = &[
        (1, 32, 1),
        (5, 96, 3),
        (13, 64, 8),
        (67, 256, 17),
        (30, 160, 512),
    ];

    #[test]
    fn matches_the_f32_product_within_the_activation_quantization_error() {
        for (seed, &(n, k, m)) in SHAPES.iter().enumerate() {
            let w = Q8Matrix::quantize(&noise(n * k, seed as u64 + 1), n, k);
            let w_values = dequantized(&w);
            let x = noise(m * k, seed as u64 + 100);
            let y = w.matmul(&x);
            assert_eq!(y.len(), m * n);
            // Exact given the quantized activations, up to f32 rounding.
            let x_quantized = dequantized(&Q8Matrix::quantize(&x, m, k));
            check(&y, &w_values, &x_quantized, k, |w, x| 1e-5 * w * x);
            // Each activation moves by at most half a step, max|block| / 254, so the error
            // vector e has |e|^2 <= sum over blocks of 32 (max|block| / 254)^2 <= 32 |x|^2 / 254^2
            // and |w·e| <= |w| |x| sqrt(32) / 254 (about 2.2% of |w| |x|).
            check(&y, &w_values, &x, k, |w, x| {
                w * x * (32f64.sqrt() / 254.0 + 1e-5)
            });
        }
    }

    #[test]
    fn the_scalar_kernel_agrees_with_the_detected_one() {
        for (seed, &(n, k, m)) in SHAPES.iter().enumerate() {
            let w = Q8Matrix::quantize(&noise(n * k, seed as u64 + 7), n, k);
            let x = noise(m * k, seed as u64 + 70);
            let fast = w.matmul_with(Kernel::detect(), &x);
            let scalar = w.matmul_with(Kernel::Scalar, &x);
            for (i, (xi, (fast, scalar))) in x
                .chunks_exact(k)
                .zip(fast.chunks_exact(n).zip(scalar.chunks_exact(n)))
                .enumerate()
            {
                let scale = norm(xi) * norm(&dequantized(&w)) / (n as f64).sqrt();
                for (r, (a, b)) in fast.iter().zip(scalar).enumerate() {
                    let diff = f64::from((a - b).abs());
                    assert!(diff <= 1e-5 * scale, "row {i} col {r}: {a} vs {b}");
                }
            }
        }
    }

    #[test]
    fn takes_over_ggufs_blocks() {
        let values = noise(7 * 64, 3);
        let tensor = Tensor::from_vec(values, (7, 64), &Device::Cpu).unwrap();
        let q = QTensor::quantize(&tensor, GgmlDType::Q8_0).unwrap();
        let ours = Q8Matrix::from_gguf(7, 64, &q.data().unwrap()).unwrap();
        let candles = q.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap();
        assert_eq!(dequantized(&ours), candles.to_vec1::<f32>().unwrap());
        assert!(Q8Matrix::from_gguf(7, 32, &q.data().unwrap()).is_err());
    }

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
