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
/// Output rows per tile: one 32-byte vector holds 4 consecutive quants of each of them,
/// so one multiply-add yields partial dot products for all of them at once.
const TILE_ROWS: usize = 8;
/// Quants of one row per vector lane.
const LANE: usize = QK / TILE_ROWS;
/// Activation rows per tile: one weight vector load serves this many activation rows.
const TILE_COLS: usize = 4;
/// Activation rows swept together over a thread's output rows: their quants
/// (`CHUNK_ROWS * k` bytes) stay in L2 while each weight tile stays in L1.
const CHUNK_ROWS: usize = 64;

/// A `[n, k]` weight matrix: int8 quants and f32 scales, grouped in tiles of `TILE_ROWS`
/// rows stored block by block, so a tile is one sequential stream that the prefetcher
/// follows; the last tile is padded with zero rows. Within a tile's block, vector `g` holds
/// quants `4g..4g + 4` of rows 0..8 side by side (`[tile][block][g][row][4]`).
#[derive(Debug, Clone)]
pub(crate) struct Q8Matrix {
    rows: usize,
    cols: usize,
    quants: Vec<[[i8; QK]; QK / LANE]>,
    scales: Vec<[f32; TILE_ROWS]>,
}

impl Q8Matrix {
    /// Takes over a GGUF q8_0 tensor's bytes (`rows * cols / 32` blocks of 34 bytes).
    pub(crate) fn from_gguf(rows: usize, cols: usize, data: &[u8]) -> candle_core::Result<Self> {
        if !cols.is_multiple_of(QK) || data.len() != rows * cols / QK * GGUF_BLOCK_BYTES {
            candle_core::bail!(
                "q8_0 matrix [{rows}, {cols}] does not match {} bytes of blocks",
                data.len()
            );
        }
        let blocks = data.chunks_exact(GGUF_BLOCK_BYTES).map(|block| {
            let scale = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
            let quants: [i8; QK] = std::array::from_fn(|i| block[2 + i] as i8);
            (quants, scale)
        });
        Ok(Self::from_blocks(rows, cols, blocks))
    }

    /// Lays out blocks given row by row.
    fn from_blocks(
        rows: usize,
        cols: usize,
        blocks: impl Iterator<Item = ([i8; QK], f32)>,
    ) -> Self {
        let per_row = cols / QK;
        let len = rows.div_ceil(TILE_ROWS) * per_row;
        let mut quants = vec![[[0i8; QK]; QK / LANE]; len];
        let mut scales = vec![[0f32; TILE_ROWS]; len];
        for (i, (q, d)) in blocks.enumerate() {
            let (row, block) = (i / per_row, i % per_row);
            let (at, lane) = (row / TILE_ROWS * per_row + block, row % TILE_ROWS);
            for (g, values) in q.chunks_exact(LANE).enumerate() {
                quants[at][g][lane * LANE..(lane + 1) * LANE].copy_from_slice(values);
            }
            scales[at][lane] = d;
        }
        Self {
            rows,
            cols,
            quants,
            scales,
        }
    }

    pub(crate) fn storage_size_in_bytes(&self) -> usize {
        size_of_val(self.quants.as_slice()) + size_of_val(self.scales.as_slice())
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
        let x = Activations::quantize(x, self.cols);
        let per_row = self.cols / QK;
        let tiles = self.quants.len() / per_row;
        let tiles_per_task = tiles.div_ceil(rayon::current_num_threads());
        // Each task computes `[m, its output rows]`; the rows are then placed side by side.
        let parts: Vec<Vec<f32>> = (0..tiles)
            .step_by(tiles_per_task)
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|first| {
                let last = (first + tiles_per_task).min(tiles);
                let width = (last - first) * TILE_ROWS;
                let mut out = vec![0f32; m * width];
                for t in first..last {
                    let blocks = t * per_row..(t + 1) * per_row;
                    let w = (&self.quants[blocks.clone()], &self.scales[blocks]);
                    let at = (t - first) * TILE_ROWS;
                    tile_times(kernel, w, &x, &mut out[at..], width);
                }
                out
            })
            .collect();
        let mut y = Vec::with_capacity(m * self.rows);
        for i in 0..m {
            for part in &parts {
                let width = part.len() / m;
                let row = &part[i * width..(i + 1) * width];
                let room = (i + 1) * self.rows - y.len();
                y.extend_from_slice(&row[..width.min(room)]);
            }
        }
        y
    }
}

/// One weight tile's blocks and scales.
type WeightTile<'a> = (&'a [[[i8; QK]; QK / LANE]], &'a [[f32; TILE_ROWS]]);

/// One weight tile times every row of `x`, into `out[i * stride + row in tile]`.
fn tile_times(kernel: Kernel, w: WeightTile, x: &Activations, out: &mut [f32], stride: usize) {
    let m = x.rows();
    for chunk in (0..m).step_by(CHUNK_ROWS) {
        let chunk = chunk..(chunk + CHUNK_ROWS).min(m);
        let full = chunk.end - chunk.len() % TILE_COLS;
        for i in (chunk.start..full).step_by(TILE_COLS) {
            store(out, stride, i, &kernel.tile::<TILE_COLS>(w, x, i));
        }
        for i in full..chunk.end {
            store(out, stride, i, &kernel.tile::<1>(w, x, i));
        }
    }
}

fn store<const C: usize>(out: &mut [f32], stride: usize, i: usize, tile: &Tile<C>) {
    for (j, values) in tile.iter().enumerate() {
        out[(i + j) * stride..][..TILE_ROWS].copy_from_slice(values);
    }
}

/// Activation rows quantized to q8_0 as llama.cpp's `quantize_row_q8_0`: per block,
/// scale = max|x| / 127 and quants = round(x / scale).
struct Activations {
    cols: usize,
    quants: Vec<[i8; QK]>,
    scales: Vec<f32>,
}

impl Activations {
    fn quantize(values: &[f32], cols: usize) -> Self {
        assert!(cols.is_multiple_of(QK) && values.len().is_multiple_of(cols));
        let (quants, scales) = values.chunks_exact(QK).map(quantize_block).unzip();
        Self {
            cols,
            quants,
            scales,
        }
    }

    fn rows(&self) -> usize {
        self.scales.len() * QK / self.cols
    }

    fn row(&self, i: usize) -> Row<'_> {
        let per_row = self.cols / QK;
        let range = i * per_row..(i + 1) * per_row;
        (&self.quants[range.clone()], &self.scales[range])
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

/// Results of one tile, `[activation row][output row]`.
type Tile<const C: usize> = [[f32; TILE_ROWS]; C];

impl Kernel {
    fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return Kernel::Avx2;
        }
        Kernel::Scalar
    }

    /// A weight tile times activation rows `i..i + C`.
    fn tile<const C: usize>(self, w: WeightTile, x: &Activations, i: usize) -> Tile<C> {
        let x: [Row; C] = std::array::from_fn(|d| x.row(i + d));
        match self {
            Kernel::Scalar => scalar_tile(w, &x),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `detect` chose this kernel only where the CPU has AVX2 and FMA.
            Kernel::Avx2 => unsafe { avx2::tile(w, &x) },
        }
    }
}

type Row<'a> = (&'a [[i8; QK]], &'a [f32]);

fn scalar_tile<const C: usize>((wq, ws): WeightTile, x: &[Row; C]) -> Tile<C> {
    let mut out = [[0f32; TILE_ROWS]; C];
    for (b, (wq, ws)) in wq.iter().zip(ws).enumerate() {
        for (out, (xq, xs)) in out.iter_mut().zip(x) {
            for (r, (out, dw)) in out.iter_mut().zip(ws).enumerate() {
                let dot: i32 = (0..QK)
                    .map(|q| i32::from(wq[q / LANE][r * LANE + q % LANE]) * i32::from(xq[b][q]))
                    .sum();
                *out += dot as f32 * (dw * xs[b]);
            }
        }
    }
    out
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{LANE, QK, Row, TILE_ROWS, Tile, WeightTile};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2")]
    fn load(quants: &[i8; QK]) -> __m256i {
        // SAFETY: `quants` is 32 readable bytes; `loadu` has no alignment requirement.
        unsafe { _mm256_loadu_si256(quants.as_ptr().cast()) }
    }

    #[target_feature(enable = "avx2")]
    fn load_scales(scales: &[f32; TILE_ROWS]) -> __m256 {
        // SAFETY: `scales` is 8 readable f32; `loadu` has no alignment requirement.
        unsafe { _mm256_loadu_ps(scales.as_ptr()) }
    }

    /// int8·int8 as llama.cpp's AVX2 q8_0 dot: `maddubs` multiplies unsigned by signed
    /// bytes, so the weight's sign moves onto the activation (|w| · sign(w)·x); pairs add to
    /// i16 (at most 2·128·127, no overflow) and `madd` by ones widens to i32. Against a
    /// vector of 4 quants × 8 rows the activation's 4 quants are broadcast, so each i32
    /// lane is one row's partial dot and the 8 groups of a block sum lane-wise.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn tile<const C: usize>((wq, ws): WeightTile, x: &[Row; C]) -> Tile<C> {
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_ps(); C];
        for (b, (wq, ws)) in wq.iter().zip(ws).enumerate() {
            let mut dots = [_mm256_setzero_si256(); C];
            for (g, w) in wq.iter().enumerate() {
                let w = load(w);
                let w_abs = _mm256_sign_epi8(w, w);
                for (dots, (xq, _)) in dots.iter_mut().zip(x) {
                    let group: [i8; LANE] = std::array::from_fn(|i| xq[b][g * LANE + i]);
                    let xv = _mm256_set1_epi32(i32::from_le_bytes(group.map(|v| v as u8)));
                    let pairs = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(xv, w));
                    *dots = _mm256_add_epi32(*dots, _mm256_madd_epi16(pairs, ones));
                }
            }
            let ws = load_scales(ws);
            for (acc, (dots, (_, xs))) in acc.iter_mut().zip(dots.iter().zip(x)) {
                let scale = _mm256_mul_ps(ws, _mm256_set1_ps(xs[b]));
                *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(*dots), scale, *acc);
            }
        }
        let mut out = [[0f32; TILE_ROWS]; C];
        for (out, acc) in out.iter_mut().zip(acc) {
            // SAFETY: `out` is 8 writable f32; `storeu` has no alignment requirement.
            unsafe { _mm256_storeu_ps(out.as_mut_ptr(), acc) };
        }
        out
    }
}

/// Written with integer max and a float-add rounding so that it vectorizes without SSE4.1.
fn quantize_block(block: &[f32]) -> ([i8; QK], f32) {
    // Non-negative floats order as their bit patterns.
    let max_bits = block.iter().map(|v| v.abs().to_bits()).fold(0, u32::max);
    let scale = f32::from_bits(max_bits) / 127.0;
    let inverse = if scale > 0.0 { 1.0 / scale } else { 0.0 };
    // Adding 1.5·2^23 rounds |v| <= 127 to an integer, ties to even, in the low mantissa bits.
    const ROUNDER: f32 = 12_582_912.0;
    let quants = std::array::from_fn(|i| {
        let shifted = (block[i] * inverse + ROUNDER).to_bits() as i32;
        (shifted - ROUNDER.to_bits() as i32) as i8
    });
    (quants, scale)
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

    fn weights(values: &[f32], rows: usize, cols: usize) -> Q8Matrix {
        let x = Activations::quantize(values, cols);
        Q8Matrix::from_blocks(rows, cols, x.quants.into_iter().zip(x.scales))
    }

    fn dequantize<'a>(blocks: impl Iterator<Item = (&'a [i8; QK], f32)>) -> Vec<f32> {
        blocks
            .flat_map(|(block, d)| block.iter().map(move |&v| f32::from(v) * d))
            .collect()
    }

    /// `[n, k]` values, without the padding rows.
    fn weight_values(w: &Q8Matrix) -> Vec<f32> {
        let per_row = w.cols / QK;
        let block = |r: usize, b: usize| {
            let (at, lane) = (r / TILE_ROWS * per_row + b, r % TILE_ROWS);
            let quants = std::array::from_fn(|q| w.quants[at][q / LANE][lane * LANE + q % LANE]);
            (quants, w.scales[at][lane])
        };
        let blocks: Vec<_> = (0..w.rows)
            .flat_map(|r| (0..per_row).map(move |b| block(r, b)))
            .collect();
        dequantize(blocks.iter().map(|(q, d)| (q, *d)))
    }

    fn activation_values(x: &Activations) -> Vec<f32> {
        dequantize(x.quants.iter().zip(x.scales.iter().copied()))
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
            let w = weights(&noise(n * k, seed as u64 + 1), n, k);
            let w_values = weight_values(&w);
            let x = noise(m * k, seed as u64 + 100);
            let y = w.matmul(&x);
            assert_eq!(y.len(), m * n);
            // Exact given the quantized activations, up to f32 rounding.
            let x_quantized = activation_values(&Activations::quantize(&x, k));
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
            let w = weights(&noise(n * k, seed as u64 + 7), n, k);
            let x = noise(m * k, seed as u64 + 70);
            let fast = w.matmul_with(Kernel::detect(), &x);
            let scalar = w.matmul_with(Kernel::Scalar, &x);
            for (i, (xi, (fast, scalar))) in x
                .chunks_exact(k)
                .zip(fast.chunks_exact(n).zip(scalar.chunks_exact(n)))
                .enumerate()
            {
                let scale = norm(xi) * norm(&weight_values(&w)) / (n as f64).sqrt();
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
        assert_eq!(weight_values(&ours), candles.to_vec1::<f32>().unwrap());
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
