//! Rotary position embeddings: per-pair frequencies from the config, cos/sin computed only
//! for the positions a forward step needs (a table for a 128k context would cost 64 MB).

use crate::model::formats::config::{ModelConfig, RopeScaling};
use candle_core::{Device, Result, Tensor};

#[derive(Debug, Clone)]
pub(crate) struct Rope {
    inv_freq: Vec<f32>,
}

impl Rope {
    /// The model's global RoPE: its base, stretched as the model says.
    pub(crate) fn global(config: &ModelConfig) -> Self {
        Self::new(
            config.head_dim,
            config.rope_theta,
            config.rope_scaling.as_ref(),
        )
    }

    /// The RoPE of windowed layers where the model gives them their own base (unscaled).
    pub(crate) fn local(config: &ModelConfig) -> Option<Self> {
        config
            .rope_theta_local
            .map(|theta| Self::new(config.head_dim, theta, None))
    }

    fn new(head_dim: usize, theta: f32, scaling: Option<&RopeScaling>) -> Self {
        let half = head_dim / 2;
        let base = f64::from(theta);
        let mut inv_freq: Vec<f64> = (0..half)
            .map(|i| base.powf(-2.0 * i as f64 / head_dim as f64))
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
        }
    }

    /// cos and sin, each `[len, head_dim / 2]`, for positions `start..start + len`.
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
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
        Ok((
            Tensor::from_vec(cos, (len, half), device)?,
            Tensor::from_vec(sin, (len, half), device)?,
        ))
    }
}
