//! Our product for f32 weight matrices on the CPU, batch invariant.
//!
//! candle's f32 matmul picks its blocking from the number of activation rows, so a row's
//! result changes in its last bits with the rows beside it: a sample decoded alone differs
//! from the same sample decoded in a batch. Re-runs must equal fresh runs to the bit while
//! their batches are made up differently, so here every output element is one dot product
//! summed in one fixed order (eight lanes along the row, then a fixed reduction), whatever
//! rows surround it. Register tiles of weight rows × activation rows keep it fast.

use candle_core::{CpuStorage, CustomOp1, Layout, Shape};
use rayon::prelude::*;

/// Weight rows per tile: each loaded vector of a tile's rows serves every activation row.
const TILE_ROWS: usize = 4;
/// Activation rows per tile.
const TILE_COLS: usize = 2;
/// Values summed side by side before the final reduction.
const LANES: usize = 8;

/// A `[rows, cols]` f32 weight matrix, row-major.
#[derive(Debug, Clone)]
pub(crate) struct F32Matrix {
    rows: usize,
    cols: usize,
    values: Vec<f32>,
}

impl F32Matrix {
    pub(crate) fn new(rows: usize, cols: usize, values: Vec<f32>) -> candle_core::Result<Self> {
        if values.len() != rows * cols {
            candle_core::bail!("f32 matrix [{rows}, {cols}] given {} values", values.len());
        }
        Ok(Self { rows, cols, values })
    }

    pub(crate) fn storage_size_in_bytes(&self) -> usize {
        size_of_val(self.values.as_slice())
    }

    /// `x W^T` for `x` = `[m, cols]` f32 values (row-major): `[m, rows]`.
    pub(crate) fn matmul(&self, x: &[f32]) -> Vec<f32> {
        self.matmul_with(Kernel::detect(), x)
    }

    fn matmul_with(&self, kernel: Kernel, x: &[f32]) -> Vec<f32> {
        let (n, k) = (self.rows, self.cols);
        let m = x.len() / k;
        let mut out = vec![0f32; m * n];
        if m == 0 || n == 0 {
            return out;
        }
        let tiles = n.div_ceil(TILE_ROWS);
        let per_task = tiles.div_ceil(rayon::current_num_threads());
        // Each task fills `[m, its rows]`, placed into the output afterwards.
        let parts: Vec<(usize, Vec<f32>)> = (0..tiles)
            .step_by(per_task)
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|first| {
                let rows = first * TILE_ROWS..((first + per_task) * TILE_ROWS).min(n);
                let width = rows.len();
                let mut part = vec![0f32; m * width];
                for r in rows.clone().step_by(TILE_ROWS) {
                    let count = (rows.end - r).min(TILE_ROWS);
                    let w: [&[f32]; TILE_ROWS] =
                        std::array::from_fn(|t| self.row((r + t).min(r + count - 1)));
                    let mut i = 0;
                    while i < m {
                        let take = (m - i).min(TILE_COLS);
                        let xs: [&[f32]; TILE_COLS] =
                            std::array::from_fn(|c| &x[(i + c.min(take - 1)) * k..][..k]);
                        let dots = kernel.tile(&w, &xs);
                        for (c, row) in dots.iter().enumerate().take(take) {
                            let at = (i + c) * width + (r - rows.start);
                            part[at..at + count].copy_from_slice(&row[..count]);
                        }
                        i += take;
                    }
                }
                (rows.start, part)
            })
            .collect();
        for (start, part) in parts {
            let width = part.len() / m;
            for i in 0..m {
                out[i * n + start..][..width].copy_from_slice(&part[i * width..][..width]);
            }
        }
        out
    }

    fn row(&self, r: usize) -> &[f32] {
        &self.values[r * self.cols..][..self.cols]
    }
}

/// Runs a `[.., cols]` f32 tensor through the matrix: `[.., rows]`.
impl CustomOp1 for F32Matrix {
    fn name(&self) -> &'static str {
        "f32-matmul"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(values) = storage else {
            candle_core::bail!("f32 matmul takes f32 activations");
        };
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("f32 matmul takes contiguous activations");
        };
        let mut dims = layout.dims().to_vec();
        if dims.last() != Some(&self.cols) {
            candle_core::bail!(
                "f32 matmul: activations {dims:?} for a [{}, {}] matrix",
                self.rows,
                self.cols
            );
        }
        *dims.last_mut().expect("checked above") = self.rows;
        Ok((
            CpuStorage::F32(self.matmul(&values[start..end])),
            Shape::from(dims),
        ))
    }
}

/// Dot products of a tile, `[activation row][weight row]`.
type Tile = [[f32; TILE_ROWS]; TILE_COLS];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kernel {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Kernel {
    fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return Kernel::Avx2;
        }
        Kernel::Portable
    }

    fn tile(self, w: &[&[f32]; TILE_ROWS], x: &[&[f32]; TILE_COLS]) -> Tile {
        match self {
            Kernel::Portable => portable_tile(w, x),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `detect` chose this kernel only where the CPU has AVX2 and FMA.
            Kernel::Avx2 => unsafe { avx2::tile(w, x) },
        }
    }
}

/// The order every kernel sums in: lane `l` accumulates columns `l, l + 8, ...` of the full
/// chunks with a fused multiply-add, the lanes are added pairwise (0+4, 1+5, ...; then 0+2,
/// 1+3; then 0+1), and the remaining columns follow one by one.
fn portable_tile(w: &[&[f32]; TILE_ROWS], x: &[&[f32]; TILE_COLS]) -> Tile {
    let k = x[0].len();
    let full = k - k % LANES;
    std::array::from_fn(|c| {
        std::array::from_fn(|r| {
            let mut lanes = [0f32; LANES];
            for at in (0..full).step_by(LANES) {
                for (l, lane) in lanes.iter_mut().enumerate() {
                    *lane = x[c][at + l].mul_add(w[r][at + l], *lane);
                }
            }
            let mut sum = reduce(lanes);
            for at in full..k {
                sum = x[c][at].mul_add(w[r][at], sum);
            }
            sum
        })
    })
}

fn reduce(lanes: [f32; LANES]) -> f32 {
    let quad: [f32; 4] = std::array::from_fn(|l| lanes[l] + lanes[l + 4]);
    let pair = [quad[0] + quad[2], quad[1] + quad[3]];
    pair[0] + pair[1]
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{LANES, TILE_COLS, TILE_ROWS, Tile, reduce};
    use std::arch::x86_64::*;

    /// [`super::portable_tile`]'s order with eight lanes in one vector.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn tile(w: &[&[f32]; TILE_ROWS], x: &[&[f32]; TILE_COLS]) -> Tile {
        let k = x[0].len();
        let full = k - k % LANES;
        let mut acc = [[_mm256_setzero_ps(); TILE_ROWS]; TILE_COLS];
        for at in (0..full).step_by(LANES) {
            // SAFETY: `at + 8 <= full <= k`, the length of every row here.
            let wv: [__m256; TILE_ROWS] =
                std::array::from_fn(|r| unsafe { _mm256_loadu_ps(w[r].as_ptr().add(at)) });
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
                let mut sum = reduce(lanes);
                for at in full..k {
                    sum = x[c][at].mul_add(w[r][at], sum);
                }
                sum
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// Output rows not a multiple of the tile, columns not a multiple of the lanes, activation
    /// rows odd and even.
    const SHAPES: &[(usize, usize, usize)] = &[(1, 8, 1), (5, 13, 3), (9, 64, 8), (67, 100, 17)];

    #[test]
    fn matches_the_f64_product() {
        for (seed, &(n, k, m)) in SHAPES.iter().enumerate() {
            let w = noise(n * k, seed as u64 + 1);
            let x = noise(m * k, seed as u64 + 50);
            let y = F32Matrix::new(n, k, w.clone()).unwrap().matmul(&x);
            for i in 0..m {
                for r in 0..n {
                    let want: f64 = (0..k)
                        .map(|j| f64::from(x[i * k + j]) * f64::from(w[r * k + j]))
                        .sum();
                    let got = f64::from(y[i * n + r]);
                    assert!(
                        (got - want).abs() < 1e-5 * k as f64,
                        "[{i}][{r}] {got} vs {want}"
                    );
                }
            }
        }
    }

    /// A row's result is the same bits alone, in any batch, at any position, on any kernel.
    #[test]
    fn a_rows_result_does_not_depend_on_the_rows_beside_it() {
        for (seed, &(n, k, m)) in SHAPES.iter().enumerate() {
            let matrix = F32Matrix::new(n, k, noise(n * k, seed as u64 + 9)).unwrap();
            let x = noise(m * k, seed as u64 + 90);
            let batch = matrix.matmul(&x);
            let portable = matrix.matmul_with(Kernel::Portable, &x);
            for i in 0..m {
                let alone = matrix.matmul(&x[i * k..(i + 1) * k]);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&alone), bits(&batch[i * n..(i + 1) * n]), "row {i}");
                assert_eq!(bits(&alone), bits(&portable[i * n..(i + 1) * n]), "row {i}");
            }
        }
    }

    #[test]
    fn a_wrong_size_is_an_error() {
        assert!(F32Matrix::new(2, 3, vec![0.0; 5]).is_err());
    }
}
