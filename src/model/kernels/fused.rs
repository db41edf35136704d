//! Two small steps of the CPU forward pass done in one pass each: a projection's heads moved to
//! the attention layout and rotated, with candle's arithmetic to the bit (candle: a copy to
//! transpose, then the rotation), and the feed-forward's `act(gate) * up` (candle: two ops,
//! and a libm call per value). Fewer passes and allocations per layer where a decode step is
//! short.

use super::parallel::{Disjoint, for_each_range};
use super::{Isa, contiguous_f32};
use crate::fast_exp::exp;
use crate::model::device::cpu_paths;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Shape, Tensor};

/// The feed-forward's gate activation: `act(gate) * up`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Activation {
    /// SwiGLU.
    Silu,
    /// GeGLU with GELU's tanh approximation (`gelu_pytorch_tanh`).
    GeluTanh,
    /// gpt-oss's clamped SwiGLU: `x sigmoid(1.702 x) (y + 1)` with the gate `x` clamped
    /// from above and `y` (up) from both sides at 7.
    SwigluOai,
}

/// gpt-oss's SwiGLU constants (its config.json's `swiglu_limit`; llama.cpp fixes both).
const OAI_ALPHA: f32 = 1.702;
const OAI_LIMIT: f32 = 7.0;

/// How the two halves of each rotated pair are laid out inside a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeLayout {
    /// Adjacent pairs (x0, x1), (x2, x3)…: llama.cpp's "normal" RoPE, which GGUF llama
    /// weights are permuted for by convert_hf_to_gguf.
    Interleaved,
    /// Pairs (x_i, x_{i+d/2}): `rotate_half` in transformers, llama.cpp's "neox" RoPE.
    HalfSplit,
}

/// `[rows, len, heads, dim]` to `[rows, heads, len, dim]`, rotated by cos and sin
/// (`[len, rot / 2]`) as candle's `rope_i` (interleaved pairs) or `rope` (halves) rotate the
/// first `rot` values of each head; the rest pass unchanged (partial RoPE).
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
        let half = cos_layout.dims().get(1).copied().unwrap_or(0);
        if 2 * half > dim || cos_layout.dims() != [len, half] || sin_layout.dims() != [len, half] {
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
                    to[2 * half..].copy_from_slice(&from[2 * half..]);
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

/// `act(gate) * up`, elementwise.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GatedTimes {
    activation: Activation,
}

impl CustomOp2 for GatedTimes {
    fn name(&self) -> &'static str {
        match self.activation {
            Activation::Silu => "silu-times",
            Activation::GeluTanh => "gelu-times",
            Activation::SwigluOai => "swiglu-oai",
        }
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
                "{}: gate {:?} and up {:?} differ",
                self.name(),
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
        for_each_range(gate.len().div_ceil(GATED_BLOCK), |blocks| {
            let span = blocks.start * GATED_BLOCK..(blocks.end * GATED_BLOCK).min(gate.len());
            // SAFETY: these blocks belong to this task alone.
            let out = unsafe { shared.part(span.clone()) };
            gated_with(isa, self.activation, &gate[span.clone()], &up[span], out);
        });
        Ok((CpuStorage::F32(out), gate_layout.shape().clone()))
    }
}

/// Values of `act(gate) * up` a task takes at once.
const GATED_BLOCK: usize = 4096;

/// `out = act(gate) * up` with our e^x (within 2 ulps of libm's), which vectorises where
/// libm's per-element call does not.
fn gated_with(isa: Isa, activation: Activation, gate: &[f32], up: &[f32], out: &mut [f32]) {
    match isa {
        Isa::Portable => gated_into(activation, gate, up, out),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::detect` reports AVX2 (with FMA) or AVX-512F, which implies them.
        Isa::Avx2 | Isa::Avx512 => unsafe { gated_avx2(activation, gate, up, out) },
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn gated_avx2(activation: Activation, gate: &[f32], up: &[f32], out: &mut [f32]) {
    gated_into(activation, gate, up, out);
}

/// silu(x) is `x / (1 + e^-x)`; gelu_tanh(x) is `0.5 x (1 + tanh(y))` = `x / (1 + e^(-2y))`
/// with `y = sqrt(2 / pi) (x + 0.044715 x^3)`: the same form. Far below zero the exponential
/// saturates at e^88 and the quotient is a tiny negative number, as both functions are there.
#[inline(always)]
fn gated_into(activation: Activation, gate: &[f32], up: &[f32], out: &mut [f32]) {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    match activation {
        Activation::Silu => {
            for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
                *o = g / (1.0 + exp(-g)) * u;
            }
        }
        Activation::GeluTanh => {
            for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
                let y = SQRT_2_OVER_PI * g * 0.044715f32.mul_add(g * g, 1.0);
                *o = g / (1.0 + exp(-2.0 * y)) * u;
            }
        }
        Activation::SwigluOai => {
            for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
                let (x, y) = (g.min(OAI_LIMIT), u.clamp(-OAI_LIMIT, OAI_LIMIT));
                *o = x / (1.0 + exp(-OAI_ALPHA * x)) * (y + 1.0);
            }
        }
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
    if cpu_paths(x.device()) && x.dtype() == candle_core::DType::F32 {
        return x
            .contiguous()?
            .apply_op3_no_bwd(cos, sin, &RopeHeads { layout });
    }
    let x = x.transpose(1, 2)?.contiguous()?;
    let (dim, rot) = (x.dim(3)?, 2 * cos.dim(1)?);
    let rotated = x.narrow(3, 0, rot)?.contiguous()?;
    let rotated = match layout {
        RopeLayout::Interleaved => candle_nn::rotary_emb::rope_i(&rotated, cos, sin)?,
        RopeLayout::HalfSplit => candle_nn::rotary_emb::rope(&rotated, cos, sin)?,
    };
    match rot < dim {
        true => Tensor::cat(&[&rotated, &x.narrow(3, rot, dim - rot)?], 3),
        false => Ok(rotated),
    }
}

/// `act(gate) * up`: one pass on the CPU, candle's two ops elsewhere.
pub(crate) fn gated(
    activation: Activation,
    gate: &Tensor,
    up: &Tensor,
) -> candle_core::Result<Tensor> {
    if cpu_paths(gate.device()) && gate.dtype() == candle_core::DType::F32 {
        return gate
            .contiguous()?
            .apply_op2_no_bwd(&up.contiguous()?, &GatedTimes { activation });
    }
    match activation {
        Activation::Silu => gate.silu()? * up,
        Activation::GeluTanh => gate.gelu()? * up,
        Activation::SwigluOai => {
            let x = gate.minimum(OAI_LIMIT)?;
            let y = (up.clamp(-OAI_LIMIT, OAI_LIMIT)? + 1.0)?;
            (candle_nn::ops::sigmoid(&(&x * f64::from(OAI_ALPHA))?)? * x)? * y
        }
    }
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
    fn partial_rope_rotates_the_first_values_of_each_head_and_passes_the_rest() {
        let (rows, len, heads, dim, rot) = (2, 3, 2, 12, 8);
        let x = noise(&[rows, len, heads, dim], 5);
        let (cos, sin) = (noise(&[len, rot / 2], 3), noise(&[len, rot / 2], 4));
        let moved = x.transpose(1, 2).unwrap().contiguous().unwrap();
        let head = moved.narrow(3, 0, rot).unwrap().contiguous().unwrap();
        let tail = moved.narrow(3, rot, dim - rot).unwrap();
        for layout in [RopeLayout::Interleaved, RopeLayout::HalfSplit] {
            let rotated = match layout {
                RopeLayout::Interleaved => candle_nn::rotary_emb::rope_i(&head, &cos, &sin),
                RopeLayout::HalfSplit => candle_nn::rotary_emb::rope(&head, &cos, &sin),
            }
            .unwrap();
            let expected = Tensor::cat(&[&rotated, &tail], 3).unwrap();
            let ours = rope_heads(&x, &cos, &sin, layout).unwrap();
            assert_eq!(bits(&ours), bits(&expected), "{layout:?}");
        }
    }

    fn silu_times(gate: &Tensor, up: &Tensor) -> candle_core::Result<Tensor> {
        gated(Activation::Silu, gate, up)
    }

    #[test]
    fn silu_times_is_candles_silu_then_product_within_a_few_ulps() {
        // Sizes below, at and across a task's block, so that the split is covered too.
        for len in [37, GATED_BLOCK, 3 * GATED_BLOCK + 5] {
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

    /// Against GELU's tanh form computed in f64, from far below zero to far above.
    #[test]
    fn gelu_times_is_the_tanh_gelu_then_product() {
        let gate: Vec<f32> = (-4000..=4000).map(|i| i as f32 / 200.0).collect();
        let up: Vec<f32> = (0..gate.len())
            .map(|i| 1.0 + (i % 7) as f32 / 8.0)
            .collect();
        let ours = gated(
            Activation::GeluTanh,
            &Tensor::new(gate.as_slice(), &Device::Cpu).unwrap(),
            &Tensor::new(up.as_slice(), &Device::Cpu).unwrap(),
        )
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
        for ((&g, &u), &o) in gate.iter().zip(&up).zip(&ours) {
            let x = f64::from(g);
            let y = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            let want = 0.5 * x * (1.0 + y.tanh()) * f64::from(u);
            let err = (f64::from(o) - want).abs();
            assert!(
                err <= 1e-6 * want.abs().max(1e-3),
                "gelu({g}) * {u}: {o} vs {want}"
            );
        }
        assert!(
            ours[0].abs() < 1e-30,
            "gelu(-20) is about 0, not NaN: {}",
            ours[0]
        );
    }

    /// Against the clamped SwiGLU in f64, across both clamps; the CPU pass and the candle ops
    /// other devices take agree with it.
    #[test]
    fn swiglu_oai_clamps_the_gate_above_and_up_on_both_sides() {
        let gate: Vec<f32> = (-600..=600).map(|i| i as f32 / 40.0).collect();
        let up: Vec<f32> = gate.iter().rev().map(|g| g * 0.9).collect();
        let (g, u) = (
            Tensor::new(gate.as_slice(), &Device::Cpu).unwrap(),
            Tensor::new(up.as_slice(), &Device::Cpu).unwrap(),
        );
        let ours = gated(Activation::SwigluOai, &g, &u).unwrap();
        // The same formula in candle's ops, as a GPU runs it (f64 skips the CPU pass).
        let (g64, u64) = (
            g.to_dtype(candle_core::DType::F64).unwrap(),
            u.to_dtype(candle_core::DType::F64).unwrap(),
        );
        let ops = gated(Activation::SwigluOai, &g64, &u64)
            .unwrap()
            .to_vec1::<f64>()
            .unwrap();
        for (((&g, &u), o), op) in gate
            .iter()
            .zip(&up)
            .zip(ours.to_vec1::<f32>().unwrap())
            .zip(ops)
        {
            let x = f64::from(g).min(7.0);
            let y = f64::from(u).clamp(-7.0, 7.0);
            let want = x / (1.0 + (-1.702 * x).exp()) * (y + 1.0);
            let tolerance = 1e-6 * want.abs().max(1e-3);
            assert!(
                (f64::from(o) - want).abs() <= tolerance,
                "({g}, {u}): {o} vs {want}"
            );
            assert!(
                (op - want).abs() <= tolerance,
                "ops ({g}, {u}): {op} vs {want}"
            );
        }
    }

    #[test]
    fn mismatched_shapes_are_refused() {
        let x = noise(&[1, 2, 2, 8], 5);
        // More pairs than a head has, and cos for another number of positions.
        for shape in [[2, 5], [3, 4]] {
            let cos = noise(&shape, 6);
            let err = rope_heads(&x, &cos, &cos, RopeLayout::Interleaved).unwrap_err();
            assert!(err.to_string().contains("do not fit"), "{err}");
        }
        let err = silu_times(&noise(&[4], 1), &noise(&[5], 2)).unwrap_err();
        assert!(err.to_string().contains("differ"), "{err}");
    }
}
