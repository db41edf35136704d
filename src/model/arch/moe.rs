//! A mixture of experts in place of the feed-forward: the router's softmax picks each token's
//! `used` most likely experts, their weights are renormalised to sum to one (llama.cpp's
//! `build_moe_ffn` with softmax gating and `norm_w`; Qwen3 MoE's `norm_topk_prob`, Mixtral),
//! and each chosen expert runs once over all the tokens routed to it.
//!
//! A token's output is the sum of its experts' weighted outputs in the order of their rank,
//! whatever other tokens are in the batch: our products compute each row on its own, so a row
//! decoded beside others equals the row decoded alone.

use super::registry::Activation;
use super::weights::Moe;
use crate::model::kernels::fused::gated;
use candle_core::{DType, Result, Tensor};

impl Moe {
    /// `x` `[.., hidden]` through the experts each token is routed to.
    pub(crate) fn forward(&self, x: &Tensor, activation: Activation) -> Result<Tensor> {
        let dims = x.dims().to_vec();
        let hidden = *dims.last().expect("a feed-forward input has a hidden axis");
        let flat = x.reshape(((), hidden))?.contiguous()?;
        let logits = self
            .router
            .forward(&flat)?
            .to_dtype(DType::F32)?
            .to_vec2::<f32>()?;
        let routes: Vec<Vec<(usize, f32)>> = logits.iter().map(|l| route(l, self.used)).collect();
        // (token, rank) of every token each expert serves.
        let mut served: Vec<Vec<(usize, usize)>> = vec![Vec::new(); self.gate.len()];
        for (token, chosen) in routes.iter().enumerate() {
            for (rank, &(expert, _)) in chosen.iter().enumerate() {
                served[expert].push((token, rank));
            }
        }
        // Each (token, rank)'s weighted expert output, summed per token in rank order below.
        let mut slots = vec![0f32; routes.len() * self.used * hidden];
        for (expert, tokens) in served.iter().enumerate() {
            if tokens.is_empty() {
                continue;
            }
            let ids: Vec<u32> = tokens.iter().map(|&(t, _)| t as u32).collect();
            let rows = flat.index_select(&Tensor::new(ids, x.device())?, 0)?;
            let (gate, up) = (
                self.gate[expert].forward(&rows)?,
                self.up[expert].forward(&rows)?,
            );
            let out = self.down[expert].forward(&gated(activation, &gate, &up)?)?;
            let out = out.to_dtype(DType::F32)?.to_vec2::<f32>()?;
            for (&(token, rank), values) in tokens.iter().zip(&out) {
                let weight = routes[token][rank].1;
                let slot = &mut slots[(token * self.used + rank) * hidden..][..hidden];
                for (s, v) in slot.iter_mut().zip(values) {
                    *s = v * weight;
                }
            }
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
        Tensor::from_vec(sums, dims, x.device())
    }
}

/// The `used` most likely experts under the softmax of `logits`, most likely first (the
/// lower index first among equals), with their probabilities renormalised to sum to one.
fn route(logits: &[f32], used: usize) -> Vec<(usize, f32)> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let exps: Vec<f32> = logits.iter().map(|&l| (l - max).exp()).collect();
    let total: f32 = exps.iter().sum();
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| exps[b].total_cmp(&exps[a]).then(a.cmp(&b)));
    let chosen: Vec<(usize, f32)> = order[..used]
        .iter()
        .map(|&e| (e, exps[e] / total))
        .collect();
    let sum: f32 = chosen.iter().map(|&(_, p)| p).sum();
    chosen.into_iter().map(|(e, p)| (e, p / sum)).collect()
}

#[cfg(test)]
mod tests {
    use super::route;

    #[test]
    fn a_token_takes_its_most_likely_experts_with_weights_that_sum_to_one() {
        let chosen = route(&[0.0, 2.0, 1.0, 2.0, -1.0], 3);
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
}
