//! A Gated DeltaNet layer (Qwen3.5's linear attention): in place of keys and values of every
//! position, each value head keeps one `head_dim x head_dim` state matrix that decays and takes
//! a delta-rule update per token, read out by the query.
//!
//! The recurrence runs token by token, each row and head on its own, so a row's result does not
//! depend on how its prompt was split or which rows decode beside it. The projections run
//! through the usual matrix products; the rest is here, on the CPU's f32.

use super::weights::DeltaNet;
use crate::model::kernels::Isa;
use crate::model::kernels::parallel::in_parallel;
use crate::model::state::Snapshots;
use crate::model::state::recurrent::{RecurrentLayer, Row, RowState};
use candle_core::Tensor;
use std::sync::Mutex;

impl DeltaNet {
    /// `x` (`[rows, len, hidden]`, normed) through the layer, after the `start` positions its
    /// state holds.
    pub(crate) fn forward(
        &self,
        x: &Tensor,
        state: &mut RecurrentLayer,
        start: usize,
    ) -> candle_core::Result<Tensor> {
        let (rows, len, _) = x.dims3()?;
        let flat = |t: Tensor| t.flatten_all()?.to_vec1::<f32>();
        let qkv = flat(self.qkv.forward(x)?)?;
        let z = flat(self.gate.forward(x)?)?;
        let beta = flat(self.beta.forward(x)?)?;
        let alpha = flat(self.alpha.forward(x)?)?;
        let s = self.shape;
        let (channels, heads, dim) = (s.conv_channels(), s.v_heads, s.head_dim);
        let inner = heads * dim;
        let policy = state.policy();
        let row_states = state.rows_mut();
        if row_states.len() != rows {
            candle_core::bail!(
                "a recurrent state of {} rows for {rows} rows",
                row_states.len()
            );
        }
        // Each row's convolution, norms and gates, position by position; then each (row,
        // head)'s recurrence over the positions, all on the barrier pool's threads.
        let rows_locked: Vec<Mutex<&mut Row>> = row_states.iter_mut().map(Mutex::new).collect();
        let prepared = in_parallel(rows, |r| {
            let span = r * len..(r + 1) * len;
            let inputs = Inputs {
                qkv: &qkv[span.start * channels..span.end * channels],
                beta: &beta[span.start * heads..span.end * heads],
                alpha: &alpha[span.start * heads..span.end * heads],
            };
            let mut row = rows_locked[r].lock().unwrap_or_else(|p| p.into_inner());
            self.prepare(&mut row, &inputs, start, policy)
        });
        let mut row_states: Vec<&mut Row> = rows_locked
            .into_iter()
            .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
            .collect();
        let tasks: Vec<Mutex<&mut [f32]>> = row_states
            .iter_mut()
            .flat_map(|row| row.now.matrix.chunks_exact_mut(dim * dim))
            .map(Mutex::new)
            .collect();
        let runs = in_parallel(tasks.len(), |i| {
            let mut matrix = tasks[i].lock().unwrap_or_else(|p| p.into_inner());
            self.run_head(&prepared[i / heads], i % heads, &mut matrix, start)
        });
        drop(tasks);
        let mut out = vec![0f32; rows * len * inner];
        for (i, run) in runs.iter().enumerate() {
            let (r, h) = (i / heads, i % heads);
            for (t, o) in run.out.chunks_exact(dim).enumerate() {
                let at = (r * len + t) * inner + h * dim;
                let slot = &mut out[at..at + dim];
                slot.copy_from_slice(o);
                self.gated_norm(slot, &z[at..at + dim]);
            }
        }
        for (r, (row, prepared)) in row_states.iter_mut().zip(&prepared).enumerate() {
            let heads_of_row = &runs[r * heads..(r + 1) * heads];
            for (i, (at, conv)) in prepared.due.iter().enumerate() {
                let matrix = heads_of_row
                    .iter()
                    .flat_map(|run| run.snapshots[i].iter().copied());
                let taken = RowState {
                    conv: conv.clone(),
                    matrix: matrix.collect(),
                };
                row.offer(*at, taken, policy);
            }
        }
        let out = Tensor::from_vec(out, (rows, len, inner), x.device())?;
        self.out.forward(&out)
    }

    /// One row's positions through the convolution (which moves the row's window on), the
    /// heads' L2 norms, β and the decay; the window at each position a snapshot may fall on.
    fn prepare(&self, row: &mut Row, inputs: &Inputs, start: usize, policy: Snapshots) -> Prepared {
        let s = self.shape;
        let (channels, heads, dim) = (s.conv_channels(), s.v_heads, s.head_dim);
        let len = inputs.beta.len() / heads;
        let mut mixed = vec![0f32; len * channels];
        let mut due = Vec::new();
        for (t, mixed) in mixed.chunks_exact_mut(channels).enumerate() {
            let input = &inputs.qkv[t * channels..(t + 1) * channels];
            self.convolve(&mut row.now.conv, input, mixed);
            for head in mixed[..2 * s.k_heads * dim].chunks_exact_mut(dim) {
                l2_normalize(head, self.eps);
            }
            if row.due(start + t + 1, policy) {
                due.push((start + t + 1, row.now.conv.clone()));
            }
        }
        let gates = (0..len * heads)
            .map(|i| {
                let h = i % heads;
                let decay = (softplus(inputs.alpha[i] + self.dt_bias[h]) * self.a[h]).exp();
                (sigmoid(inputs.beta[i]), decay)
            })
            .collect();
        Prepared { mixed, gates, due }
    }

    /// Value head `h`'s state matrix through the row's positions: each decays, takes the
    /// delta rule's update towards the value, and is read by the query. The outputs, and the
    /// matrix at each position the row keeps a snapshot of.
    fn run_head(&self, row: &Prepared, h: usize, matrix: &mut [f32], start: usize) -> HeadRun {
        match Isa::detect() {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 | Isa::Avx512 => {
                // SAFETY: the CPU has AVX2.
                unsafe { self.run_head_avx2(row, h, matrix, start) }
            }
            _ => self.run_head_with(row, h, matrix, start),
        }
    }

    /// [`DeltaNet::run_head`] compiled for AVX2: the same operations in the same order, on
    /// eight lanes at once.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn run_head_avx2(
        &self,
        row: &Prepared,
        h: usize,
        matrix: &mut [f32],
        start: usize,
    ) -> HeadRun {
        self.run_head_with(row, h, matrix, start)
    }

    #[inline(always)]
    fn run_head_with(&self, row: &Prepared, h: usize, matrix: &mut [f32], start: usize) -> HeadRun {
        let s = self.shape;
        let (channels, heads, dim) = (s.conv_channels(), s.v_heads, s.head_dim);
        let (key_span, kh) = (s.k_heads * dim, s.k_head(h));
        let scale = 1.0 / (dim as f32).sqrt();
        let len = row.gates.len() / heads;
        let mut out = vec![0f32; len * dim];
        let mut snapshots = Vec::with_capacity(row.due.len());
        let mut due = row.due.iter().map(|(at, _)| *at).peekable();
        for (t, o) in out.chunks_exact_mut(dim).enumerate() {
            let mixed = &row.mixed[t * channels..(t + 1) * channels];
            let q = &mixed[kh * dim..(kh + 1) * dim];
            let k = &mixed[key_span + kh * dim..key_span + (kh + 1) * dim];
            let v = &mixed[2 * key_span + h * dim..2 * key_span + (h + 1) * dim];
            let (beta, decay) = row.gates[t * heads + h];
            let qk = dot(q, k);
            // One read of each row of the matrix for both dot products, one update: the same
            // sums as decaying first, up to rounding.
            for ((m, &vj), oj) in matrix.chunks_exact_mut(dim).zip(v).zip(o.iter_mut()) {
                let (mk, mq) = dot2(m, k, q);
                let delta = (vj - decay * mk) * beta;
                m.iter_mut()
                    .zip(k)
                    .for_each(|(x, &kk)| *x = decay * *x + delta * kk);
                *oj = (decay * mq + delta * qk) * scale;
            }
            if due.next_if_eq(&(start + t + 1)).is_some() {
                snapshots.push(matrix.to_vec());
            }
        }
        HeadRun { out, snapshots }
    }

    /// The causal convolution of one position: `window` (the last `kernel - 1` inputs, oldest
    /// first) then `input`, each channel through its own filter and SiLU, into `mixed`; the
    /// window moves on by `input`.
    fn convolve(&self, window: &mut [f32], input: &[f32], mixed: &mut [f32]) {
        let channels = input.len();
        let kernel = self.shape.conv_kernel;
        for (c, m) in mixed.iter_mut().enumerate() {
            let filter = &self.conv[c * kernel..(c + 1) * kernel];
            let mut sum = 0f32;
            for (i, w) in filter[..kernel - 1].iter().enumerate() {
                sum += window[i * channels + c] * w;
            }
            sum += input[c] * filter[kernel - 1];
            *m = silu(sum);
        }
        window.copy_within(channels.., 0);
        let last = window.len() - channels;
        window[last..].copy_from_slice(input);
    }

    /// `rms_norm(o) * silu(z)`, in place.
    fn gated_norm(&self, o: &mut [f32], z: &[f32]) {
        let mean = o.iter().map(|x| x * x).sum::<f32>() / o.len() as f32;
        let inv = 1.0 / (mean + self.eps).sqrt();
        for ((x, w), &g) in o.iter_mut().zip(&self.norm).zip(z) {
            *x = *x * inv * w * silu(g);
        }
    }
}

/// One row's projections over its positions.
struct Inputs<'a> {
    qkv: &'a [f32],
    beta: &'a [f32],
    alpha: &'a [f32],
}

/// One row's positions ready for the heads' recurrences.
struct Prepared {
    /// `[len, channels]`: q and k (L2-normed) and v of each position.
    mixed: Vec<f32>,
    /// `[len, heads]`: β and the decay.
    gates: Vec<(f32, f32)>,
    /// Positions a snapshot may fall on, with the convolution's window there.
    due: Vec<(usize, Vec<f32>)>,
}

/// One head's outputs `[len, dim]` and its matrix at each due position.
struct HeadRun {
    out: Vec<f32>,
    snapshots: Vec<Vec<f32>>,
}

/// `x / sqrt(sum(x²) + eps)`, llama.cpp's L2 norm of the heads.
fn l2_normalize(x: &mut [f32], eps: f32) {
    let sum: f32 = x.iter().map(|v| v * v).sum();
    let inv = 1.0 / (sum + eps).sqrt();
    x.iter_mut().for_each(|v| *v *= inv);
}

/// `(a . b, a . c)` in one pass over `a`.
#[inline(always)]
fn dot2(a: &[f32], b: &[f32], c: &[f32]) -> (f32, f32) {
    let (mut lb, mut lc) = ([0f32; 8], [0f32; 8]);
    let chunks = a
        .chunks_exact(8)
        .zip(b.chunks_exact(8))
        .zip(c.chunks_exact(8));
    for ((x, y), z) in chunks {
        for i in 0..8 {
            lb[i] += x[i] * y[i];
            lc[i] += x[i] * z[i];
        }
    }
    let tail = a.len() - a.len() % 8;
    let (mut tb, mut tc) = (0f32, 0f32);
    for i in tail..a.len() {
        tb += a[i] * b[i];
        tc += a[i] * c[i];
    }
    (lb.iter().sum::<f32>() + tb, lc.iter().sum::<f32>() + tc)
}

/// A dot product in eight lanes, so that it vectorises.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

fn silu(x: f32) -> f32 {
    x * sigmoid(x)
}

/// `ln(1 + e^x)`, as ggml computes it (linear past 20).
fn softplus(x: f32) -> f32 {
    if x > 20.0 { x } else { x.exp().ln_1p() }
}
