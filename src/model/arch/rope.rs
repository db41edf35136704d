//! Rotary position embeddings: per-pair frequencies from the config, cos/sin computed only
//! for the positions a forward step needs (a table for a 128k context would cost 64 MB).

use crate::model::formats::config::{ModelConfig, RopeScaling};
use candle_core::{Device, Result, Tensor};

#[derive(Debug, Clone)]
pub(crate) struct Rope {
    inv_freq: Vec<f32>,
    /// cos and sin are multiplied by this (LongRoPE's attention factor).
    scale: f32,
}

impl Rope {
    /// The model's global RoPE: its base, stretched as the model says.
    pub(crate) fn global(config: &ModelConfig) -> Self {
        Self::new(
            config.rope_dims,
            config.rope_theta,
            config.rope_scaling.as_ref(),
            config.rope_attn_factor,
        )
    }

    /// The RoPE of windowed layers where the model gives them their own (unscaled).
    pub(crate) fn local(config: &ModelConfig) -> Option<Self> {
        config
            .rope_theta_local
            .map(|theta| Self::new(config.rope_dims_local, theta, None, 1.0))
    }

    /// `dims`: how many of a head's dimensions rotate.
    fn new(dims: usize, theta: f32, scaling: Option<&RopeScaling>, scale: f32) -> Self {
        let half = dims / 2;
        let base = f64::from(theta);
        let mut inv_freq: Vec<f64> = (0..half)
            .map(|i| base.powf(-2.0 * i as f64 / dims as f64))
            .collect();
        match scaling {
            None => {}
            Some(RopeScaling::Linear { factor }) => {
                inv_freq.iter_mut().for_each(|f| *f /= f64::from(*factor));
            }
            Some(RopeScaling::FreqFactors(factors)) => {
                for (f, d) in inv_freq.iter_mut().zip(factors) {
                    *f /= f64::from(*d);
                }
            }
            Some(RopeScaling::Yarn {
                factor,
                original_context,
                beta_fast,
                beta_slow,
            }) => {
                // The pair whose wavelength fits `turns` times into the original context.
                let pair = |turns: f32| {
                    let turns = f64::from(turns);
                    dims as f64
                        * (*original_context as f64 / (turns * 2.0 * std::f64::consts::PI)).ln()
                        / (2.0 * base.ln())
                };
                let low = pair(*beta_fast).floor().max(0.0);
                let high = pair(*beta_slow).ceil().min(dims as f64 - 1.0);
                for (i, f) in inv_freq.iter_mut().enumerate() {
                    // 1 below `low` (kept), 0 above `high` (stretched by `factor`).
                    let kept = 1.0 - ((i as f64 - low) / (high - low).max(0.001)).clamp(0.0, 1.0);
                    *f = *f / f64::from(*factor) * (1.0 - kept) + *f * kept;
                }
            }
            Some(RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position_embeddings,
            }) => {
                let (factor, low, high) = (
                    f64::from(*factor),
                    f64::from(*low_freq_factor),
                    f64::from(*high_freq_factor),
                );
                let original = *original_max_position_embeddings as f64;
                for f in inv_freq.iter_mut() {
                    // Short wavelengths (local detail) keep their frequency, long ones are
                    // stretched by `factor`, the band between is interpolated.
                    let wavelen = 2.0 * std::f64::consts::PI / *f;
                    if wavelen > original / low {
                        *f /= factor;
                    } else if wavelen >= original / high {
                        let smooth = (original / wavelen - low) / (high - low);
                        *f = (1.0 - smooth) * *f / factor + smooth * *f;
                    }
                }
            }
        }
        Self {
            inv_freq: inv_freq.into_iter().map(|f| f as f32).collect(),
            scale,
        }
    }

    /// cos and sin, each `[len, rotated dims / 2]`, for positions `start..start + len`.
    pub(crate) fn cos_sin(
        &self,
        start: usize,
        len: usize,
        device: &Device,
    ) -> Result<(Tensor, Tensor)> {
        let half = self.inv_freq.len();
        let mut cos = Vec::with_capacity(len * half);
        let mut sin = Vec::with_capacity(len * half);
        for pos in start..start + len {
            for &f in &self.inv_freq {
                let angle = pos as f32 * f;
                cos.push(angle.cos() * self.scale);
                sin.push(angle.sin() * self.scale);
            }
        }
        Ok((
            Tensor::from_vec(cos, (len, half), device)?,
            Tensor::from_vec(sin, (len, half), device)?,
        ))
    }
}
