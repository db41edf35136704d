//! Our CPU kernels: the quantized products ([`quant`]), the batch-invariant float product
//! ([`dense`]), attention over the cached keys and values, the small fused steps of a layer,
//! the parallel loops and prefetching they share, and the memory bandwidth they run against.

pub(crate) mod attention;
pub mod bandwidth;
pub(crate) mod dense;
pub(crate) mod fused;
mod half;
pub(crate) mod lanes;
pub(crate) mod parallel;
mod prefetch;
mod quant;

use candle_core::{CpuStorage, Layout, Shape};
pub(crate) use half::f16_to_f32;
pub use quant::{Activations, ActivationsError};
pub(crate) use quant::{Arithmetic, QuantMatrix, QuantType};

/// The instruction set a product runs with, chosen from the running CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isa {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Isa {
    pub(crate) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f") {
                return Isa::Avx512;
            }
            if is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("f16c")
            {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => "avx2",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => "avx512",
        }
    }
}

/// A `[.., cols]` f32 tensor through a `[rows, cols]` matrix product `matmul` (of row-major
/// `[m, cols]` values, giving `[m, rows]`): `[.., rows]`. The CPU forward of our products.
pub(crate) fn rows_through(
    name: &str,
    (rows, cols): (usize, usize),
    storage: &CpuStorage,
    layout: &Layout,
    matmul: impl Fn(&[f32]) -> Vec<f32>,
) -> candle_core::Result<(CpuStorage, Shape)> {
    let values = contiguous_f32(name, storage, layout)?;
    let mut dims = layout.dims().to_vec();
    if dims.last() != Some(&cols) {
        candle_core::bail!("{name}: activations {dims:?} for a [{rows}, {cols}] matrix");
    }
    *dims.last_mut().expect("checked above") = rows;
    Ok((CpuStorage::F32(matmul(values)), Shape::from(dims)))
}

/// A contiguous f32 tensor's values, the input our CPU ops take.
pub(crate) fn contiguous_f32<'a>(
    name: &str,
    storage: &'a CpuStorage,
    layout: &Layout,
) -> candle_core::Result<&'a [f32]> {
    let CpuStorage::F32(values) = storage else {
        candle_core::bail!("{name} takes f32 tensors");
    };
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(&values[start..end]),
        None => candle_core::bail!("{name} takes contiguous tensors"),
    }
}
