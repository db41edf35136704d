//! A mixture of experts in place of the feed-forward: the router's softmax picks each token's
//! `used` most likely experts, their weights are renormalised to sum to one (llama.cpp's
//! `build_moe_ffn` with softmax gating and `norm_w`; Qwen3 MoE's `norm_topk_prob`, Mixtral),
//! or the `used` largest logits are taken and weighed by a softmax over them alone (gpt-oss),
//! and each chosen expert runs once over all the tokens routed to it.
//!
//! A token's output is the sum of its experts' weighted outputs in the order of their rank,
//! whatever other tokens are in the batch: our products compute each row on its own, so a row
//! decoded beside others equals the row decoded alone.

use super::registry::Gating;
use super::weights::{Beside, Ffn, Moe, SharedExpert};
use crate::model::device::cpu_paths;
use crate::model::kernels::fused::Activation;
use crate::model::kernels::fused::gated;
use crate::model::kernels::parallel::{Disjoint, for_each_range};
use candle_core::{DType, Result, Tensor};
use std::sync::Mutex;

impl Moe {
    /// `x` `[.., hidden]` through the experts each token is routed to. On the CPU the chosen
    /// experts are shared among the threads, each expert's three products whole on one thread:
    /// a decode step's experts are small, and one parallel section for all of them costs far
    /// less than three for each.
    pub(crate) fn forward(&self, x: &Tensor, activation: Activation) -> Result<Tensor> {
        self.forward_routed(x, x, activation)
    }

    /// [`Moe::forward`] with the router reading `routed` instead of `x`.
    fn forward_routed(
        &self,
        x: &Tensor,
        routed: &Tensor,
        activation: Activation,
    ) -> Result<Tensor> {
        let dims = x.dims().to_vec();
        let hidden = *dims.last().expect("a feed-forward input has a hidden axis");
        let flat = x.reshape(((), hidden))?.contiguous()?;
        let logits = self
            .router
            .forward(&routed.reshape(((), hidden))?.contiguous()?)?
            .to_dtype(DType::F32)?
            .to_vec2::<f32>()?;
        let routes: Vec<Vec<(usize, f32)>> = logits
            .iter()
            .map(|l| route(l, self.used, self.gating))
            .collect();
        // (token, rank) of every token each chosen expert serves.
        let mut served: Vec<Vec<(usize, usize)>> = vec![Vec::new(); self.gate.len()];
        for (token, chosen) in routes.iter().enumerate() {
            for (rank, &(expert, _)) in chosen.iter().enumerate() {
                served[expert].push((token, rank));
            }
        }
        let active: Vec<usize> = (0..served.len())
            .filter(|&e| !served[e].is_empty())
            .collect();
        let values = flat.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
        // One expert's output rows for the tokens it serves, in their order.
        let run = |expert: usize| -> Result<Vec<f32>> {
            let tokens = &served[expert];
            let mut rows = Vec::with_capacity(tokens.len() * hidden);
            for &(token, _) in tokens {
                rows.extend_from_slice(&values[token * hidden..][..hidden]);
            }
            let rows = Tensor::from_vec(rows, (tokens.len(), hidden), x.device())?;
            let (gate, up) = (
                self.gate[expert].forward(&rows)?,
                self.up[expert].forward(&rows)?,
            );
            let out = self.down[expert].forward(&gated(activation, &gate, &up)?)?;
            out.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()
        };
        // Each (token, rank)'s weighted expert output, summed per token in rank order below.
        let mut slots = vec![0f32; routes.len() * self.used * hidden];
        let failure = Mutex::new(None);
        {
            let shared = Disjoint::new(&mut slots);
            let write = |expert: usize| match run(expert) {
                Ok(out) => {
                    for (&(token, rank), values) in
                        served[expert].iter().zip(out.chunks_exact(hidden))
                    {
                        let scale = self.scales.as_ref().map_or(1.0, |s| s[expert]);
                        let weight = routes[token][rank].1 * scale;
                        let weighted: Vec<f32> = values.iter().map(|v| v * weight).collect();
                        // SAFETY: slot (token, rank) names one expert, this one alone.
                        unsafe { shared.write((token * self.used + rank) * hidden, &weighted) };
                    }
                }
                Err(e) => *failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e),
            };
            if cpu_paths(x.device()) {
                for_each_range(active.len(), |range| {
                    active[range].iter().for_each(|&e| write(e))
                });
            } else {
                active.iter().for_each(|&e| write(e));
            }
        }
        if let Some(e) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        let mut sums = vec![0f32; routes.len() * hidden];
        for (sum, ranks) in sums
            .chunks_exact_mut(hidden)
            .zip(slots.chunks_exact(self.used * hidden))
        {
            for rank in ranks.chunks_exact(hidden) {
                for (s, v) in sum.iter_mut().zip(rank) {
                    *s += v;
                }
            }
        }
        let routed = Tensor::from_vec(sums, dims, x.device())?;
        match &self.shared {
            Some(shared) => routed + shared.forward(x, activation)?,
            None => Ok(routed),
        }
    }
}

impl Beside {
    /// The two branches over `x` (the residual stream) and `normed` (it normed for the dense
    /// branch), each normed after.
    pub(crate) fn forward(
        &self,
        x: &Tensor,
        normed: &Tensor,
        activation: Activation,
        eps: f32,
    ) -> Result<Tensor> {
        let Ffn::Dense { gate, up, down } = &self.dense else {
            candle_core::bail!("the branch beside the experts is a dense feed-forward");
        };
        let dense = down.forward(&gated(
            activation,
            &gate.forward(normed)?,
            &up.forward(normed)?,
        )?)?;
        let dense = candle_nn::ops::rms_norm(&dense, &self.post_dense_norm, eps)?;
        let hidden = x.dim(candle_core::D::Minus1)?;
        let ones = Tensor::ones(hidden, x.dtype(), x.device())?;
        let routed = (candle_nn::ops::rms_norm(x, &ones, eps)? / (hidden as f64).sqrt())?
            .broadcast_mul(&self.router_scale)?;
        let inputs = candle_nn::ops::rms_norm(x, &self.pre_experts_norm, eps)?;
        let experts = self.experts.forward_routed(&inputs, &routed, activation)?;
        dense + candle_nn::ops::rms_norm(&experts, &self.post_experts_norm, eps)?
    }
}

impl SharedExpert {
    /// Every token's pass through the shared expert, weighed by the sigmoid of its gate's
    /// logit (`x . router`).
    fn forward(&self, x: &Tensor, activation: Activation) -> Result<Tensor> {
        let out = self.down.forward(&gated(
            activation,
            &self.gate.forward(x)?,
            &self.up.forward(x)?,
        )?)?;
        let logit = x
            .broadcast_mul(&self.router)?
            .sum_keepdim(candle_core::D::Minus1)?;
        out.broadcast_mul(&candle_nn::ops::sigmoid(&logit)?)
    }
}

/// The `used` most likely experts, most likely first (the lower index first among equals),
/// with weights that sum to one: their probabilities under the softmax of all `logits`
/// renormalised, or the softmax of their logits alone.
fn route(logits: &[f32], used: usize, gating: Gating) -> Vec<(usize, f32)> {
    let softmax = |logits: &[f32]| -> Vec<f32> {
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let exps: Vec<f32> = logits.iter().map(|&l| (l - max).exp()).collect();
        let total: f32 = exps.iter().sum();
        exps.iter().map(|e| e / total).collect()
    };
    // Ranked as llama.cpp ranks them: by probability, or by logit.
    let probs = match gating {
        Gating::SoftmaxThenTopK => softmax(logits),
        Gating::TopKThenSoftmax => logits.to_vec(),
    };
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
    let chosen = &order[..used];
    let weights = match gating {
        Gating::SoftmaxThenTopK => {
            let sum: f32 = chosen.iter().map(|&e| probs[e]).sum();
            chosen.iter().map(|&e| probs[e] / sum).collect()
        }
        Gating::TopKThenSoftmax => softmax(&chosen.iter().map(|&e| logits[e]).collect::<Vec<_>>()),
    };
    chosen.iter().copied().zip(weights).collect()
}

#[cfg(test)]
mod tests {
    use super::{Gating, route};

    #[test]
    fn a_token_takes_its_most_likely_experts_with_weights_that_sum_to_one() {
        let chosen = route(&[0.0, 2.0, 1.0, 2.0, -1.0], 3, Gating::SoftmaxThenTopK);
        let experts: Vec<usize> = chosen.iter().map(|&(e, _)| e).collect();
        assert_eq!(experts, [1, 3, 2], "ties keep the lower index first");
        let sum: f32 = chosen.iter().map(|&(_, w)| w).sum();
        assert!((sum - 1.0).abs() < 1e-6);
        // e^2 : e^2 : e^1, renormalised.
        let e = std::f32::consts::E;
        assert!(
            (chosen[2].1 - 1.0 / (2.0 * e + 1.0)).abs() < 1e-6,
            "{chosen:?}"
        );
    }

    #[test]
    fn top_k_then_softmax_weighs_the_chosen_logits_alone() {
        let chosen = route(&[0.5, 3.0, -2.0, 1.0], 2, Gating::TopKThenSoftmax);
        let experts: Vec<usize> = chosen.iter().map(|&(e, _)| e).collect();
        assert_eq!(experts, [1, 3]);
        // e^3 : e^1, whatever the experts left out.
        let want = 1.0 / (1.0 + (-2f32).exp());
        assert!((chosen[0].1 - want).abs() < 1e-6, "{chosen:?}");
        assert!((chosen[0].1 + chosen[1].1 - 1.0).abs() < 1e-6);
    }
}
