//! Two small steps of the CPU forward pass done in one pass each: a projection's heads moved to
//! the attention layout and rotated, with candle's arithmetic to the bit (candle: a copy to
//! transpose, then the rotation), and the feed-forward's `silu(gate) * up` (candle: two ops,
//! and a libm call per value). Fewer passes and allocations per layer where a decode step is
//! short.

use super::config::RopeLayout;
use super::kernels::{Isa, contiguous_f32};
use super::parallel::{Disjoint, for_each_range};
use crate::fast_exp::exp;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Shape, Tensor};

/// `[rows, len, heads, dim]` to `[rows, heads, len, dim]`, rotated by cos and sin
/// (`[len, dim / 2]`) as candle's `rope_i` (interleaved pairs) or `rope` (halves) rotate.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RopeHeads {
    pub layout: RopeLayout,
}

impl CustomOp3 for RopeHeads {
    fn name(&self) -> &'static str {
        "rope-heads"
    }

    fn cpu_fwd(
        &self,
        x_storage: &CpuStorage,
        x_layout: &Layout,
        cos_storage: &CpuStorage,
        cos_layout: &Layout,
        sin_storage: &CpuStorage,
        sin_layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (rows, len, heads, dim) = x_layout.shape().dims4()?;
        let half = dim / 2;
        if dim % 2 != 0 || cos_layout.dims() != [len, half] || sin_layout.dims() != [len, half] {
            candle_core::bail!(
                "rope: heads {:?} do not fit cos {:?}, sin {:?}",
                x_layout.dims(),
                cos_layout.dims(),
                sin_layout.dims()
            );
        }
        let x = contiguous_f32(self.name(), x_storage, x_layout)?;
        let cos = contiguous_f32(self.name(), cos_storage, cos_layout)?;
        let sin = contiguous_f32(self.name(), sin_storage, sin_layout)?;
        // Pair `i` is values `step * i` and `step * i + gap`.
        let (step, gap) = match self.layout {
            RopeLayout::Interleaved => (2, 1),
            RopeLayout::HalfSplit => (1, half),
        };
        let mut out = vec![0f32; x.len()];
        for r in 0..rows {
            for t in 0..len {
                let (cos, sin) = (&cos[t * half..][..half], &sin[t * half..][..half]);
                for h in 0..heads {
                    let from = &x[((r * len + t) * heads + h) * dim..][..dim];
                    let to = &mut out[((r * heads + h) * len + t) * dim..][..dim];
                    for i in 0..half {
                        let (a, b) = (step * i, step * i + gap);
                        to[a] = from[a] * cos[i] - from[b] * sin[i];
                        to[b] = from[a] * sin[i] + from[b] * cos[i];
                    }
                }
            }
        }
        Ok((CpuStorage::F32(out), Shape::from((rows, heads, len, dim))))
    }
}

/// `silu(gate) * up`, elementwise.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SiluTimes;

impl CustomOp2 for SiluTimes {
    fn name(&self) -> &'static str {
        "silu-times"
    }

    fn cpu_fwd(
        &self,
        gate_storage: &CpuStorage,
        gate_layout: &Layout,
        up_storage: &CpuStorage,
        up_layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        if gate_layout.shape() != up_layout.shape() {
            candle_core::bail!(
                "silu-times: gate {:?} and up {:?} differ",
                gate_layout.dims(),
                up_layout.dims()
            );
        }
        let gate = contiguous_f32(self.name(), gate_storage, gate_layout)?;
        let up = contiguous_f32(self.name(), up_storage, up_layout)?;
        let isa = Isa::detect();
        let mut out = vec![0f32; gate.len()];
        let shared = Disjoint::new(&mut out);
        // A prompt's worth (hundreds of thousands of values a layer) is split among the threads.
        for_each_range(gate.len().div_ceil(SILU_BLOCK), 1, |blocks| {
            let span = blocks.start * SILU_BLOCK..(blocks.end * SILU_BLOCK).min(gate.len());
            // SAFETY: these blocks belong to this task alone.
            let out = unsafe { shared.part(span.clone()) };
            silu_times_with(isa, &gate[span.clone()], &up[span], out);
        });
        Ok((CpuStorage::F32(out), gate_layout.shape().clone()))
    }
}

/// Values of `silu(gate) * up` a task takes at once.
const SILU_BLOCK: usize = 4096;

/// `out = silu(gate) * up` = `gate / (1 + e^-gate) * up`, with our e^x (within 2 ulps of
/// libm's), which vectorises where libm's per-element call does not.
fn silu_times_with(isa: Isa, gate: &[f32], up: &[f32], out: &mut [f32]) {
    match isa {
        Isa::Portable => silu_times_into(gate, up, out),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::detect` reports AVX2 (with FMA) or AVX-512F, which implies them.
        Isa::Avx2 | Isa::Avx512 => unsafe { silu_times_avx2(gate, up, out) },
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn silu_times_avx2(gate: &[f32], up: &[f32], out: &mut [f32]) {
    silu_times_into(gate, up, out);
}

#[inline(always)]
fn silu_times_into(gate: &[f32], up: &[f32], out: &mut [f32]) {
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        *o = g / (1.0 + exp(-g)) * u;
    }
}

/// `[rows, len, heads, dim]` heads in the attention layout, rotated: one pass on the CPU,
/// candle's transpose and rotation elsewhere.
pub(crate) fn rope_heads(
    x: &Tensor,
    cos: &Tensor,
    sin: &Tensor,
    layout: RopeLayout,
) -> candle_core::Result<Tensor> {
    if x.device().is_cpu() && x.dtype() == candle_core::DType::F32 {
        return x
            .contiguous()?
            .apply_op3_no_bwd(cos, sin, &RopeHeads { layout });
    }
    let x = x.transpose(1, 2)?.contiguous()?;
    match layout {
        RopeLayout::Interleaved => candle_nn::rotary_emb::rope_i(&x, cos, sin),
        RopeLayout::HalfSplit => candle_nn::rotary_emb::rope(&x, cos, sin),
    }
}

/// `silu(gate) * up`: one pass on the CPU, candle's two ops elsewhere.
pub(crate) fn silu_times(gate: &Tensor, up: &Tensor) -> candle_core::Result<Tensor> {
    if gate.device().is_cpu() && gate.dtype() == candle_core::DType::F32 {
        return gate
            .contiguous()?
            .apply_op2_no_bwd(&up.contiguous()?, &SiluTimes);
    }
    gate.silu()? * up
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn noise(dims: &[usize], seed: u32) -> Tensor {
        let len: usize = dims.iter().product();
        let values: Vec<f32> = (0..len as u32)
            .map(|i| ((i.wrapping_mul(2654435761) ^ seed) % 2001) as f32 / 250.0 - 4.0)
            .collect();
        Tensor::from_vec(values, dims, &Device::Cpu).unwrap()
    }

    fn bits(t: &Tensor) -> Vec<u32> {
        let values = t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        values.into_iter().map(f32::to_bits).collect()
    }

    #[test]
    fn heads_rotated_in_one_pass_equal_candles_transpose_and_rotation_to_the_bit() {
        let (rows, len, heads, dim) = (3, 5, 4, 8);
        let x = noise(&[rows, len, heads, dim], 7);
        let (cos, sin) = (noise(&[len, dim / 2], 1), noise(&[len, dim / 2], 2));
        let moved = x.transpose(1, 2).unwrap().contiguous().unwrap();
        for layout in [RopeLayout::Interleaved, RopeLayout::HalfSplit] {
            let candle = match layout {
                RopeLayout::Interleaved => candle_nn::rotary_emb::rope_i(&moved, &cos, &sin),
                RopeLayout::HalfSplit => candle_nn::rotary_emb::rope(&moved, &cos, &sin),
            }
            .unwrap();
            let ours = rope_heads(&x, &cos, &sin, layout).unwrap();
            assert_eq!(ours.dims(), [rows, heads, len, dim]);
            assert_eq!(bits(&ours), bits(&candle), "{layout:?}");
        }
    }

    #[test]
    fn silu_times_is_candles_silu_then_product_within_a_few_ulps() {
        // Sizes below, at and across a task's block, so that the split is covered too.
        for len in [37, SILU_BLOCK, 3 * SILU_BLOCK + 5] {
            let (gate, up) = (noise(&[len], 3), noise(&[len], 4));
            let candle = (gate.silu().unwrap() * &up).unwrap();
            let ours = silu_times(&gate, &up).unwrap().to_vec1::<f32>().unwrap();
            for (i, (a, b)) in ours
                .iter()
                .zip(candle.to_vec1::<f32>().unwrap())
                .enumerate()
            {
                assert!(
                    (a - b).abs() <= 4.0 * f32::EPSILON * b.abs().max(1e-30),
                    "{i}: {a} vs {b}"
                );
            }
        }
        // Far out in both directions: silu(-100) is about 0, silu(100) is 100.
        let gate = Tensor::new(&[-100f32, 100.0, 0.0], &Device::Cpu).unwrap();
        let up = Tensor::new(&[1f32, 1.0, 1.0], &Device::Cpu).unwrap();
        let ours = silu_times(&gate, &up).unwrap().to_vec1::<f32>().unwrap();
        assert!(
            ours[0].abs() < 1e-30 && ours[1] == 100.0 && ours[2] == 0.0,
            "{ours:?}"
        );
    }

    #[test]
    fn mismatched_shapes_are_refused() {
        let x = noise(&[1, 2, 2, 8], 5);
        let short = noise(&[2, 3], 6);
        let err = rope_heads(&x, &short, &short, RopeLayout::Interleaved).unwrap_err();
        assert!(err.to_string().contains("do not fit"), "{err}");
        let err = silu_times(&noise(&[4], 1), &noise(&[5], 2)).unwrap_err();
        assert!(err.to_string().contains("differ"), "{err}");
    }
}
