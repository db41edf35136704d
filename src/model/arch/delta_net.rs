//! A Gated DeltaNet layer (Qwen3.5's linear attention): in place of keys and values of every
//! position, each value head keeps one `head_dim x head_dim` state matrix that decays and takes
//! a delta-rule update per token, read out by the query.
//!
//! The recurrence runs token by token, each row and head on its own, so a row's result does not
//! depend on how its prompt was split or which rows decode beside it. The projections run
//! through the usual matrix products; the rest is here, on the CPU's f32.

use super::weights::DeltaNet;
use crate::fast_exp::exp;
use crate::model::formats::config::DeltaNetShape;
use crate::model::kernels::Isa;
#[cfg(target_arch = "x86_64")]
use crate::model::kernels::lanes::{Avx2, Avx512};
use crate::model::kernels::lanes::{Lanes, Portable};
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
                start,
                policy,
            };
            let mut row = rows_locked[r].lock().unwrap_or_else(|p| p.into_inner());
            self.prepare(&mut row, &inputs)
        });
        let mut row_states: Vec<&mut Row> = rows_locked
            .into_iter()
            .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
            .collect();
        // Each row's matrices at its due positions, which the heads' tasks fill in place.
        let mut taken: Vec<Vec<Vec<f32>>> = prepared
            .iter()
            .map(|p| {
                p.due
                    .iter()
                    .map(|_| vec![0f32; heads * dim * dim])
                    .collect()
            })
            .collect();
        let tasks: Vec<Mutex<Head>> = row_states
            .iter_mut()
            .zip(&mut taken)
            .flat_map(|(row, taken)| {
                let mut snapshots: Vec<Vec<&mut [f32]>> = (0..heads).map(|_| Vec::new()).collect();
                for matrix in taken.iter_mut() {
                    for (h, part) in matrix.chunks_exact_mut(dim * dim).enumerate() {
                        snapshots[h].push(part);
                    }
                }
                let matrices = row.now.matrix.chunks_exact_mut(dim * dim);
                matrices
                    .zip(snapshots)
                    .map(|(matrix, snapshots)| Mutex::new(Head { matrix, snapshots }))
            })
            .collect();
        // Each head's outputs leave its task normed and gated.
        let at = |r: usize, t: usize, h: usize| (r * len + t) * inner + h * dim;
        let runs = in_parallel(tasks.len(), |i| {
            let (r, h) = (i / heads, i % heads);
            let mut head = tasks[i].lock().unwrap_or_else(|p| p.into_inner());
            let mut out = run_head(s, &prepared[r], h, &mut head, start);
            for (t, o) in out.chunks_exact_mut(dim).enumerate() {
                self.gated_norm(o, &z[at(r, t, h)..][..dim]);
            }
            out
        });
        drop(tasks);
        let mut out = vec![0f32; rows * len * inner];
        for (i, run) in runs.iter().enumerate() {
            let (r, h) = (i / heads, i % heads);
            for (t, o) in run.chunks_exact(dim).enumerate() {
                out[at(r, t, h)..][..dim].copy_from_slice(o);
            }
        }
        let rows_taken = row_states.iter_mut().zip(prepared).zip(taken);
        for ((row, prepared), taken) in rows_taken {
            for ((at, conv), matrix) in prepared.due.into_iter().zip(taken) {
                row.offer(at, RowState { conv, matrix }, policy);
            }
        }
        let out = Tensor::from_vec(out, (rows, len, inner), x.device())?;
        self.out.forward(&out)
    }

    /// One row's positions through the convolution (which moves the row's window on), the
    /// heads' L2 norms, β and the decay; the window at each position a snapshot may fall on.
    fn prepare(&self, row: &mut Row, inputs: &Inputs) -> Prepared {
        match Isa::detect() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the CPU has AVX-512F.
            Isa::Avx512 => unsafe { self.prepare_avx512(row, inputs) },
            _ => self.prepare_with(row, inputs),
        }
    }

    /// [`Self::prepare_with`] in AVX-512's registers: its loops over channels are the same
    /// operations on each channel, so they give the same bits at any width.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn prepare_avx512(&self, row: &mut Row, inputs: &Inputs) -> Prepared {
        self.prepare_with(row, inputs)
    }

    #[inline(always)]
    fn prepare_with(&self, row: &mut Row, inputs: &Inputs) -> Prepared {
        let (start, policy) = (inputs.start, inputs.policy);
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

    /// The causal convolution of one position: `window` (the last `kernel - 1` inputs, oldest
    /// first) then `input`, each channel through its own filter and SiLU, into `mixed`; the
    /// window moves on by `input`.
    #[inline(always)]
    fn convolve(&self, window: &mut [f32], input: &[f32], mixed: &mut [f32]) {
        let channels = input.len();
        let inputs = window.chunks_exact(channels).chain([input]);
        mixed.fill(0.0);
        for (taps, x) in self.conv.chunks_exact(channels).zip(inputs) {
            for ((m, &w), &x) in mixed.iter_mut().zip(taps).zip(x) {
                *m += x * w;
            }
        }
        mixed.iter_mut().for_each(|m| *m = silu(*m));
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

/// Value head `h`'s state matrix through the row's positions: each decays, takes the
/// delta rule's update towards the value, and is read by the query; the matrix is copied
/// into `head.snapshots` at the row's due positions, in order. The outputs, `[len, dim]`.
fn run_head(s: DeltaNetShape, row: &Prepared, h: usize, head: &mut Head, start: usize) -> Vec<f32> {
    match Isa::detect() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX-512F.
        Isa::Avx512 => unsafe { run_head_avx512(s, row, h, head, start) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX2 and FMA.
        Isa::Avx2 => unsafe { run_head_avx2(s, row, h, head, start) },
        // SAFETY: plain arrays need no instructions beyond the target's.
        Isa::Portable => unsafe { run_head_with::<Portable>(s, row, h, head, start) },
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn run_head_avx512(
    s: DeltaNetShape,
    row: &Prepared,
    h: usize,
    head: &mut Head,
    start: usize,
) -> Vec<f32> {
    // SAFETY: AVX-512F is enabled here, as `Avx512` requires.
    unsafe { run_head_with::<Avx512>(s, row, h, head, start) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn run_head_avx2(
    s: DeltaNetShape,
    row: &Prepared,
    h: usize,
    head: &mut Head,
    start: usize,
) -> Vec<f32> {
    // SAFETY: AVX2 and FMA are enabled here, as `Avx2` requires.
    unsafe { run_head_with::<Avx2>(s, row, h, head, start) }
}

/// # Safety
/// The CPU must have what `L` needs.
#[inline(always)]
unsafe fn run_head_with<L: Lanes>(
    s: DeltaNetShape,
    row: &Prepared,
    h: usize,
    head: &mut Head,
    start: usize,
) -> Vec<f32> {
    let (channels, heads, dim) = (s.conv_channels(), s.v_heads, s.head_dim);
    let (key_span, kh) = (s.k_heads * dim, s.k_head(h));
    let len = row.gates.len() / heads;
    let wide = dim / COLUMNS * COLUMNS;
    let mut out = vec![0f32; len * dim];
    let matrix = &mut *head.matrix;
    let mut snapshots = head.snapshots.iter_mut();
    let mut due = row.due.iter().map(|(at, _)| *at).peekable();
    let mut spare = Spare::new(dim, dim - wide);
    let scale = 1.0 / (dim as f32).sqrt();
    for (t, o) in out.chunks_exact_mut(dim).enumerate() {
        let mixed = &row.mixed[t * channels..(t + 1) * channels];
        let q = &mixed[kh * dim..(kh + 1) * dim];
        let k = &mixed[key_span + kh * dim..key_span + (kh + 1) * dim];
        let v = &mixed[2 * key_span + h * dim..2 * key_span + (h + 1) * dim];
        let (beta, decay) = row.gates[t * heads + h];
        let step = Step {
            q,
            k,
            beta,
            decay,
            scale,
        };
        let (blocks, rest) = matrix.split_at_mut(wide * dim);
        let (v_wide, v_rest) = v.split_at(wide);
        let (o_wide, o_rest) = o.split_at_mut(wide);
        let blocks = blocks.chunks_exact_mut(COLUMNS * dim);
        let v_blocks = v_wide.chunks_exact(COLUMNS);
        for ((block, v), o) in blocks.zip(v_blocks).zip(o_wide.chunks_exact_mut(COLUMNS)) {
            // SAFETY: as this function's.
            unsafe { step.columns::<L>(block, v, o) };
        }
        if !rest.is_empty() {
            spare.fill(rest, v_rest);
            // SAFETY: as this function's.
            unsafe { step.columns::<L>(&mut spare.block, &spare.v, &mut spare.o) };
            spare.empty(rest, o_rest);
        }
        if due.next_if_eq(&(start + t + 1)).is_some() {
            let snapshot = snapshots.next().expect("a snapshot for every due position");
            snapshot.copy_from_slice(matrix);
        }
    }
    out
}

/// One row's projections over its positions.
struct Inputs<'a> {
    qkv: &'a [f32],
    beta: &'a [f32],
    alpha: &'a [f32],
    /// The positions before the first, and when the row keeps snapshots.
    start: usize,
    policy: Snapshots,
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

/// One head's state matrix, and its part of the row's matrix at each due position.
struct Head<'a> {
    matrix: &'a mut [f32],
    snapshots: Vec<&'a mut [f32]>,
}

/// Value columns a head's matrix keeps side by side: its first `dim / COLUMNS` blocks hold
/// `COLUMNS` columns each, key row by key row (`[dim][COLUMNS]`), and the columns left over
/// follow as one narrower block. A block streams through once per position and every sum
/// runs down its lanes, with no sum across lanes.
const COLUMNS: usize = 16;

/// Interleaved chains of the sums over the key rows, so that the multiply-adds overlap.
const CHAINS: usize = 4;

/// One position's inputs to a head's matrix.
struct Step<'a> {
    q: &'a [f32],
    k: &'a [f32],
    beta: f32,
    decay: f32,
    scale: f32,
}

impl Step<'_> {
    /// `COLUMNS` value columns of the matrix (`block`, `[dim][COLUMNS]`) through the
    /// position, in llama.cpp's order: the decayed columns read by the key, the update, the
    /// updated columns read by the query; the second pass finds the block in the nearest
    /// cache. Each column's arithmetic is its own lane's, so neither the layout nor the
    /// columns beside it change its bits.
    ///
    /// # Safety
    /// The CPU must have what `L` needs.
    #[inline(always)]
    unsafe fn columns<L: Lanes>(&self, block: &mut [f32], v: &[f32], o: &mut [f32]) {
        assert!(block.len() == self.k.len() * COLUMNS && v.len() == COLUMNS && o.len() == COLUMNS);
        // Row `i` sums into chain `i % CHAINS`; the chains are indexed by constants only, so
        // that they stay in registers.
        // SAFETY (whole body): each load and store is of one 16-value row of `block`, or of
        // `v` or `o`, whose lengths were checked above; the CPU has what `L` needs.
        unsafe {
            let decay = L::splat(self.decay);
            let mut by_k = [L::zero(); CHAINS];
            for (group, k) in block.chunks(CHAINS * COLUMNS).zip(self.k.chunks(CHAINS)) {
                for (chain, sum) in by_k.iter_mut().enumerate().take(k.len()) {
                    let m = L::mul(decay, L::load(group[chain * COLUMNS..].as_ptr()));
                    *sum = L::fma(L::splat(k[chain]), m, *sum);
                }
            }
            let by_k = chained::<L>(by_k);
            // `v - read`: the product with -1 is exact, so one rounding, as a subtraction.
            let delta = L::fma(L::splat(-1.0), by_k, L::load(v.as_ptr()));
            let delta = L::mul(delta, L::splat(self.beta));
            let mut by_q = [L::zero(); CHAINS];
            let keys = self.k.chunks(CHAINS).zip(self.q.chunks(CHAINS));
            for (group, (k, q)) in block.chunks_mut(CHAINS * COLUMNS).zip(keys) {
                for (chain, sum) in by_q.iter_mut().enumerate().take(k.len()) {
                    let row = group[chain * COLUMNS..].as_mut_ptr();
                    let m = L::fma(L::splat(k[chain]), delta, L::mul(decay, L::load(row)));
                    L::store(m, row);
                    *sum = L::fma(L::splat(q[chain]), m, *sum);
                }
            }
            L::store(
                L::mul(chained::<L>(by_q), L::splat(self.scale)),
                o.as_mut_ptr(),
            );
        }
    }
}

/// The chains' sums, in chain order.
///
/// # Safety
/// The CPU must have what `L` needs.
#[inline(always)]
unsafe fn chained<L: Lanes>(chains: [L::F; CHAINS]) -> L::F {
    let mut sum = chains[0];
    for &chain in &chains[1..] {
        // SAFETY: as this function's.
        sum = unsafe { L::add(sum, chain) };
    }
    sum
}

/// A whole block for the columns left over past the last whole one (`[dim][n]`, `n` under
/// `COLUMNS`): they go through it padded with zeros, a lane each as in any block.
struct Spare {
    n: usize,
    block: Vec<f32>,
    v: [f32; COLUMNS],
    o: [f32; COLUMNS],
}

impl Spare {
    fn new(dim: usize, n: usize) -> Self {
        let len = if n == 0 { 0 } else { dim * COLUMNS };
        Self {
            n,
            block: vec![0.0; len],
            v: [0.0; COLUMNS],
            o: [0.0; COLUMNS],
        }
    }

    fn fill(&mut self, rest: &[f32], v: &[f32]) {
        let rows = self.block.chunks_exact_mut(COLUMNS);
        for (padded, row) in rows.zip(rest.chunks_exact(self.n)) {
            padded[..self.n].copy_from_slice(row);
        }
        self.v[..self.n].copy_from_slice(v);
    }

    fn empty(&self, rest: &mut [f32], o: &mut [f32]) {
        for (row, padded) in rest
            .chunks_exact_mut(self.n)
            .zip(self.block.chunks_exact(COLUMNS))
        {
            row.copy_from_slice(&padded[..self.n]);
        }
        o.copy_from_slice(&self.o[..self.n]);
    }
}

/// `x / sqrt(sum(x²) + eps)`, llama.cpp's L2 norm of the heads.
#[inline(always)]
fn l2_normalize(x: &mut [f32], eps: f32) {
    let sum: f32 = x.iter().map(|v| v * v).sum();
    let inv = 1.0 / (sum + eps).sqrt();
    x.iter_mut().for_each(|v| *v *= inv);
}

/// With our own e^x, which vectorises over a position's channels where libm's is a call each.
#[inline(always)]
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

#[inline(always)]
fn silu(x: f32) -> f32 {
    x * sigmoid(x)
}

/// `ln(1 + e^x)`, as ggml computes it (linear past 20).
fn softplus(x: f32) -> f32 {
    if x > 20.0 { x } else { x.exp().ln_1p() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values in `-1..1` from a fixed seed.
    fn noise(n: usize, seed: u64) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    fn shape(dim: usize) -> DeltaNetShape {
        DeltaNetShape {
            conv_kernel: 4,
            k_heads: 1,
            v_heads: 2,
            head_dim: dim,
            grouped: false,
        }
    }

    /// `len` positions of normed queries and keys, values, and gates; a snapshot due at 3.
    fn prepared(s: DeltaNetShape, len: usize) -> Prepared {
        let channels = s.conv_channels();
        let mut mixed = noise(len * channels, s.head_dim as u64);
        for position in mixed.chunks_exact_mut(channels) {
            for head in position[..2 * s.k_heads * s.head_dim].chunks_exact_mut(s.head_dim) {
                l2_normalize(head, 1e-6);
            }
        }
        let gates = noise(2 * len * s.v_heads, 7)
            .chunks_exact(2)
            .map(|g| (0.5 + 0.5 * g[0], 0.6 + 0.4 * g[1]))
            .collect();
        Prepared {
            mixed,
            gates,
            due: vec![(3, Vec::new())],
        }
    }

    /// Head `h`'s outputs as the recurrence is written, in f64: decay, read by the key,
    /// the delta rule, read by the query.
    fn by_the_book(s: DeltaNetShape, row: &Prepared, h: usize) -> Vec<f64> {
        let (dim, channels) = (s.head_dim, s.conv_channels());
        let mut state = vec![vec![0f64; dim]; dim];
        let mut out = Vec::new();
        for (t, mixed) in row.mixed.chunks_exact(channels).enumerate() {
            let at = |from: usize| -> Vec<f64> {
                mixed[from..from + dim]
                    .iter()
                    .map(|&x| f64::from(x))
                    .collect()
            };
            let kh = s.k_head(h) * dim;
            let (q, k) = (at(kh), at(s.k_heads * dim + kh));
            let v = at(2 * s.k_heads * dim + h * dim);
            let (beta, decay) = row.gates[t * s.v_heads + h];
            state
                .iter_mut()
                .flatten()
                .for_each(|x| *x *= f64::from(decay));
            for j in 0..dim {
                let read: f64 = (0..dim).map(|i| state[i][j] * k[i]).sum();
                let delta = (v[j] - read) * f64::from(beta);
                (0..dim).for_each(|i| state[i][j] += k[i] * delta);
            }
            let scale = 1.0 / (dim as f64).sqrt();
            out.extend((0..dim).map(|j| (0..dim).map(|i| state[i][j] * q[i]).sum::<f64>() * scale));
        }
        out
    }

    /// Head `h` of `row` from `matrix` on, with one snapshot buffer (NaN until written): its
    /// outputs, the matrix after and the snapshot.
    fn run(
        s: DeltaNetShape,
        row: &Prepared,
        h: usize,
        mut matrix: Vec<f32>,
        start: usize,
        portable: bool,
    ) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let mut snapshot = vec![f32::NAN; matrix.len()];
        let mut head = Head {
            matrix: &mut matrix,
            snapshots: vec![&mut snapshot],
        };
        let out = match portable {
            // SAFETY: plain arrays need nothing of the CPU.
            true => unsafe { run_head_with::<Portable>(s, row, h, &mut head, start) },
            false => run_head(s, row, h, &mut head, start),
        };
        (out, matrix, snapshot)
    }

    #[test]
    fn heads_of_any_size_run_the_recurrence_on_every_path_and_resume_from_snapshots() {
        // Narrower than a block, one block, blocks and a rest, and a rest under the chains.
        for dim in [8, 16, 20, 50] {
            let s = shape(dim);
            let row = prepared(s, 6);
            for h in 0..s.v_heads {
                let expected = by_the_book(s, &row, h);
                let (out, matrix, snapshot) = run(s, &row, h, vec![0f32; dim * dim], 0, false);
                for (i, (&got, &want)) in out.iter().zip(&expected).enumerate() {
                    let err = (f64::from(got) - want).abs();
                    assert!(err < 1e-5, "dim {dim} head {h} output {i}: {got} vs {want}");
                }
                let (portable, ..) = run(s, &row, h, vec![0f32; dim * dim], 0, true);
                for (&a, &b) in portable.iter().zip(&out) {
                    assert!((a - b).abs() < 1e-5, "dim {dim}: portable {a} vs {b}");
                }
                // The snapshot at position 3 was taken, and from it the last three positions
                // come out again, to the bit.
                assert!(snapshot.iter().all(|x| !x.is_nan()), "dim {dim} head {h}");
                let channels = s.conv_channels();
                let rest = Prepared {
                    mixed: row.mixed[3 * channels..].to_vec(),
                    gates: row.gates[3 * s.v_heads..].to_vec(),
                    due: Vec::new(),
                };
                let (again, resumed, _) = run(s, &rest, h, snapshot, 3, false);
                assert_eq!(again, out[3 * dim..], "dim {dim} head {h}");
                assert_eq!(resumed, matrix, "dim {dim} head {h}");
            }
        }
    }
}
