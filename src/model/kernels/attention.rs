//! Causal attention over the KV cache on the CPU, one query at a time.
//!
//! candle's batched matmuls block their work by the number of queries, so a query's result
//! changes in its last bits with the queries computed beside it: a prompt prefilled from the
//! middle (the prompt cache) or a row decoded in another batch would differ from a fresh run.
//! Here each (row, head, query) is computed on its own, in one fixed order: the scores over
//! the positions it may see, their softmax, and the weighted sum of values. It reads the cache
//! in place (no per-head copies) and writes `[rows, len, heads * head_dim]`, the layout the
//! output projection takes.

use super::Isa;
use super::parallel::{Disjoint, for_each_range};
use super::prefetch;
use crate::fast_exp::exp;
use candle_core::{CpuStorage, CustomOp3, Layout, Shape};

/// Values summed side by side in a dot product before the fixed reduction.
const LANES: usize = 8;
/// Queries of one head handed to a thread at once.
const QUERIES_PER_TASK: usize = 16;
/// Tasks enough to share among the threads when each takes a whole group of heads.
const MIN_GROUPED_TASKS: usize = 8;

/// `softmax(q k^T * scale + causal mask) v` for q `[rows, heads, len, head_dim]` and k, v
/// `[rows, kv_heads, total, head_dim]` (query `i` sits at position `total - len + i`); query
/// heads share kv heads in consecutive groups. With a window, a query sees only the last
/// `window` positions up to its own. With sinks (one logit per query head, gpt-oss), each
/// head's softmax has one more term in its denominator, as if a key of that score held a zero
/// value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CausalAttention<'a> {
    pub scale: f32,
    pub window: Option<usize>,
    pub sinks: Option<&'a [f32]>,
}

/// A 4-d tensor's f32 values with the strides to index them.
struct View<'a> {
    values: &'a [f32],
    offset: usize,
    strides: [usize; 4],
}

impl<'a> View<'a> {
    fn new(storage: &'a CpuStorage, layout: &Layout) -> candle_core::Result<Self> {
        let CpuStorage::F32(values) = storage else {
            candle_core::bail!("attention takes f32 tensors");
        };
        let strides: [usize; 4] = layout
            .stride()
            .try_into()
            .map_err(|_| candle_core::Error::Msg("attention takes 4-d tensors".into()))?;
        if strides[3] != 1 {
            candle_core::bail!("attention takes head vectors stored contiguously");
        }
        Ok(Self {
            values,
            offset: layout.start_offset(),
            strides,
        })
    }

    fn at(&self, a: usize, b: usize, c: usize) -> usize {
        self.offset + a * self.strides[0] + b * self.strides[1] + c * self.strides[2]
    }

    /// The head vector at `[a, b, c, ..]`.
    fn vector(&self, a: usize, b: usize, c: usize, len: usize) -> &'a [f32] {
        let at = self.at(a, b, c);
        &self.values[at..at + len]
    }

    /// Asks the memory for the head vector at `[a, b, c, ..]`, which may lie past the end.
    fn prefetch(&self, a: usize, b: usize, c: usize, len: usize) {
        let start = self.values.as_ptr().wrapping_add(self.at(a, b, c));
        prefetch::elements(start, len);
    }
}

fn dims4(layout: &Layout) -> candle_core::Result<(usize, usize, usize, usize)> {
    layout.shape().dims4()
}

impl CustomOp3 for CausalAttention<'_> {
    fn name(&self) -> &'static str {
        "causal-attention"
    }

    fn cpu_fwd(
        &self,
        q_storage: &CpuStorage,
        q_layout: &Layout,
        k_storage: &CpuStorage,
        k_layout: &Layout,
        v_storage: &CpuStorage,
        v_layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (rows, heads, len, dim) = dims4(q_layout)?;
        let (k_rows, kv_heads, total, k_dim) = dims4(k_layout)?;
        if k_rows != rows
            || k_dim != dim
            || v_layout.shape() != k_layout.shape()
            || kv_heads == 0
            || heads % kv_heads != 0
            || total < len
            || self.sinks.is_some_and(|s| s.len() != heads)
        {
            candle_core::bail!(
                "attention: q {:?} does not fit k {:?}, v {:?}",
                q_layout.dims(),
                k_layout.dims(),
                v_layout.dims()
            );
        }
        let (q, k, v) = (
            View::new(q_storage, q_layout)?,
            View::new(k_storage, k_layout)?,
            View::new(v_storage, v_layout)?,
        );
        let group = heads / kv_heads;
        let start = total - len;
        let width = heads * dim;
        // A task takes the query heads that share a kv head, so that its keys and values are
        // read from memory once for all of them; with too few such tasks to keep every thread
        // busy (one row's decode step), one head each.
        let per_task = if rows * kv_heads * len.div_ceil(QUERIES_PER_TASK) >= MIN_GROUPED_TASKS {
            group
        } else {
            1
        };
        let tasks: Vec<(usize, usize, usize)> = (0..rows)
            .flat_map(|r| (0..heads).step_by(per_task).map(move |h| (r, h)))
            .flat_map(|(r, h)| (0..len).step_by(QUERIES_PER_TASK).map(move |i| (r, h, i)))
            .collect();
        let isa = Isa::detect();
        let mut out = vec![0f32; rows * len * width];
        let shared = Disjoint::new(&mut out);
        for_each_range(tasks.len(), |range| {
            for &(r, h, first) in &tasks[range] {
                let queries = first..(first + QUERIES_PER_TASK).min(len);
                let task = Task {
                    q: &q,
                    k: &k,
                    v: &v,
                    row: r,
                    heads: h..h + per_task,
                    kv_head: h / group,
                    dim,
                    start,
                    scale: self.scale,
                    window: self.window,
                    sinks: self.sinks,
                };
                let part = attend_with(isa, &task, queries);
                let per_query = part.chunks_exact(per_task * dim);
                for (i, values) in (first..).zip(per_query) {
                    // SAFETY: query `i` of heads `h..h + per_task` in row `r` belongs to this
                    // task alone.
                    unsafe { shared.write((r * len + i) * width + h * dim, values) };
                }
            }
        });
        Ok((CpuStorage::F32(out), Shape::from((rows, len, width))))
    }
}

/// Query heads of one row that share a kv head, for a run of their queries.
struct Task<'a> {
    q: &'a View<'a>,
    k: &'a View<'a>,
    v: &'a View<'a>,
    row: usize,
    heads: std::ops::Range<usize>,
    kv_head: usize,
    dim: usize,
    /// The position of query 0.
    start: usize,
    scale: f32,
    window: Option<usize>,
    sinks: Option<&'a [f32]>,
}

/// [`attend`] compiled for the running CPU: with AVX2 and FMA the fused multiply-adds are
/// single instructions and the loops vectorise; elsewhere they are calls.
fn attend_with(isa: Isa, task: &Task, queries: std::ops::Range<usize>) -> Vec<f32> {
    match isa {
        Isa::Portable => attend::<false>(task, queries),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::detect` reports AVX2 with FMA.
        Isa::Avx2 => unsafe { attend_avx2(task, queries) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::detect` reports AVX-512F, which implies AVX2 and FMA.
        Isa::Avx512 => unsafe { attend_avx512(task, queries) },
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn attend_avx2(task: &Task, queries: std::ops::Range<usize>) -> Vec<f32> {
    attend::<true>(task, queries)
}

/// The same operations in the same order as [`attend_avx2`] (every sum runs element by element
/// or in written-out lanes, so the vector width changes no result), with twice as many values a
/// register: the exponentials and the weighted sum of a 256-wide head keep up with the keys.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
fn attend_avx512(task: &Task, queries: std::ops::Range<usize>) -> Vec<f32> {
    attend::<true>(task, queries)
}

/// Each query's output `[queries, heads, dim]`: for each head, its scores over the positions
/// it may see, their softmax, and the weighted sum of the values, each in one fixed order
/// (whatever heads share the task). `AVX2` is set only where the caller is compiled with AVX2
/// and FMA.
#[inline(always)]
fn attend<const AVX2: bool>(task: &Task, queries: std::ops::Range<usize>) -> Vec<f32> {
    let dim = task.dim;
    let heads = task.heads.len();
    let mut out = vec![0f32; queries.len() * heads * dim];
    let mut weights = vec![Vec::new(); heads];
    let first = queries.start;
    for (i, out) in queries.zip(out.chunks_exact_mut(heads * dim)) {
        let query: Vec<&[f32]> = task
            .heads
            .clone()
            .map(|h| task.q.vector(task.row, h, i, dim))
            .collect();
        let seen = task.start + i + 1;
        // The first position this query sees: its window's start.
        let oldest = task.window.map_or(0, |w| seen.saturating_sub(w));
        weights.iter_mut().for_each(Vec::clear);
        // Plain loops, not closures: a closure would not inherit the caller's target features,
        // and its multiply-adds would become library calls.
        // Keys four at a time: four independent chains of multiply-adds keep the unit busy.
        let mut j = oldest;
        while j + KEYS <= seen {
            // The keys a few steps on, and the values of these keys (the weighted sum reads
            // them next): the cache streams from memory with more lines in flight than the
            // hardware's prefetchers keep. The task's later queries (prefill) find them in
            // cache.
            if i == first {
                for d in j..j + KEYS {
                    task.k.prefetch(task.row, task.kv_head, d + KEYS_AHEAD, dim);
                    task.v.prefetch(task.row, task.kv_head, d, dim);
                }
            }
            let keys: [&[f32]; KEYS] =
                std::array::from_fn(|d| task.k.vector(task.row, task.kv_head, j + d, dim));
            for (weights, query) in weights.iter_mut().zip(&query) {
                weights.extend_from_slice(&dots::<KEYS, AVX2>(query, keys));
            }
            j += KEYS;
        }
        for j in j..seen {
            let key = task.k.vector(task.row, task.kv_head, j, dim);
            for (weights, query) in weights.iter_mut().zip(&query) {
                weights.push(dots::<1, AVX2>(query, [key])[0]);
            }
        }
        for ((h, weights), out) in task
            .heads
            .clone()
            .zip(weights.iter_mut())
            .zip(out.chunks_exact_mut(dim))
        {
            let sink = task.sinks.map(|s| s[h]);
            mix_values(task, oldest, weights, sink, out);
        }
    }
    out
}

/// `out = softmax(weights * scale) · values` (weight `j` for the value at `oldest + j`): the
/// weights become their exponentials, summed in order, and the values' weighted sum is divided
/// by that sum, which counts the sink's exponential last where the head has one.
#[inline(always)]
fn mix_values(task: &Task, oldest: usize, weights: &mut [f32], sink: Option<f32>, out: &mut [f32]) {
    let dim = task.dim;
    let mut max = sink.unwrap_or(f32::NEG_INFINITY);
    for w in weights.iter_mut() {
        *w *= task.scale;
        max = max.max(*w);
    }
    // Exponentials first, in a loop that vectorises; then their sum, in order.
    for w in weights.iter_mut() {
        *w = exp(*w - max);
    }
    let mut sum = 0f32;
    for &w in weights.iter() {
        sum += w;
    }
    if let Some(sink) = sink {
        sum += exp(sink - max);
    }
    match dim {
        64 => weighted_sum::<64>(task, oldest, weights, out),
        128 => weighted_sum::<128>(task, oldest, weights, out),
        256 => weighted_sum::<256>(task, oldest, weights, out),
        _ => {
            for (j, &w) in (oldest..).zip(weights.iter()) {
                let value = task.v.vector(task.row, task.kv_head, j, dim);
                for (o, &x) in out.iter_mut().zip(value) {
                    *o = w.mul_add(x, *o);
                }
            }
        }
    }
    let inverse = sum.recip();
    for o in out.iter_mut() {
        *o *= inverse;
    }
}

/// `out += Σ_j weights[j] · value_j`, each element summed over `j` in order, as the loop for
/// any head size does; with the size known the accumulators stay in registers instead of
/// waiting on memory every step.
#[inline(always)]
fn weighted_sum<const D: usize>(task: &Task, oldest: usize, weights: &[f32], out: &mut [f32]) {
    let mut acc = [0f32; D];
    acc.copy_from_slice(out);
    for (j, &w) in (oldest..).zip(weights.iter()) {
        let value = task.v.vector(task.row, task.kv_head, j, D);
        for d in 0..D {
            acc[d] = w.mul_add(value[d], acc[d]);
        }
    }
    out.copy_from_slice(&acc);
}

/// Keys whose scores are computed side by side.
const KEYS: usize = 4;
/// How far ahead of the dot products keys are prefetched.
const KEYS_AHEAD: usize = 2 * KEYS;

/// `query · key` for each key, each in one fixed order whatever keys are beside it: lane `l`
/// sums the products at `l, l + 8, ...` of the full chunks with fused multiply-adds, the lanes
/// are added pairwise, then the rest one by one.
#[inline(always)]
fn dots<const N: usize, const AVX2: bool>(query: &[f32], keys: [&[f32]; N]) -> [f32; N] {
    let full = query.len() - query.len() % LANES;
    let lanes = lane_sums::<N, AVX2>(query, keys, full);
    let mut sums = [0f32; N];
    for ((sum, lanes), key) in sums.iter_mut().zip(&lanes).zip(&keys) {
        let quad: [f32; 4] = [
            lanes[0] + lanes[4],
            lanes[1] + lanes[5],
            lanes[2] + lanes[6],
            lanes[3] + lanes[7],
        ];
        *sum = (quad[0] + quad[2]) + (quad[1] + quad[3]);
        for (x, y) in query[full..].iter().zip(&key[full..]) {
            *sum = x.mul_add(*y, *sum);
        }
    }
    sums
}

/// Each key's lanes: lane `l` sums `query[j] * key[j]` for `j = l, l + 8, ..` below `full`,
/// one fused multiply-add at a time. The compiler does not find the one-register form of this
/// loop for several keys (it shuffles the keys into registers instead), so with AVX2 it is
/// written out.
#[inline(always)]
fn lane_sums<const N: usize, const AVX2: bool>(
    query: &[f32],
    keys: [&[f32]; N],
    full: usize,
) -> [[f32; LANES]; N] {
    let mut lanes = [[0f32; LANES]; N];
    #[cfg(target_arch = "x86_64")]
    if AVX2 {
        use std::arch::x86_64::*;
        assert!(query.len() >= full && keys.iter().all(|k| k.len() >= full));
        // SAFETY: AVX2 and FMA are enabled in the caller (the contract of `AVX2`), and every
        // load is of 8 values below `full`, which every vector reaches (asserted above).
        unsafe {
            let mut acc = [_mm256_setzero_ps(); N];
            for at in (0..full).step_by(LANES) {
                let q = _mm256_loadu_ps(query.as_ptr().add(at));
                for (acc, key) in acc.iter_mut().zip(&keys) {
                    *acc = _mm256_fmadd_ps(q, _mm256_loadu_ps(key.as_ptr().add(at)), *acc);
                }
            }
            for (lanes, acc) in lanes.iter_mut().zip(acc) {
                _mm256_storeu_ps(lanes.as_mut_ptr(), acc);
            }
        }
        return lanes;
    }
    for at in (0..full).step_by(LANES) {
        let q = &query[at..at + LANES];
        for (lanes, key) in lanes.iter_mut().zip(&keys) {
            let k = &key[at..at + LANES];
            for l in 0..LANES {
                lanes[l] = q[l].mul_add(k[l], lanes[l]);
            }
        }
    }
    lanes
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use candle_core::{Device, Tensor};

    /// Reproducible values in [-1, 1) of the given shape.
    pub(crate) fn noise(shape: (usize, usize, usize, usize), seed: u64) -> Tensor {
        let len = shape.0 * shape.1 * shape.2 * shape.3;
        let mut state = seed | 1;
        let values: Vec<f32> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect();
        Tensor::from_vec(values, shape, &Device::Cpu).unwrap()
    }

    /// The f64 reference for one query; a sink adds its exponential to the denominator.
    fn reference(
        q: &[f32],
        keys: &[Vec<f32>],
        values: &[Vec<f32>],
        scale: f64,
        sink: Option<f64>,
    ) -> Vec<f64> {
        let scores: Vec<f64> = keys
            .iter()
            .map(|k| {
                q.iter()
                    .zip(k)
                    .map(|(a, b)| f64::from(*a) * f64::from(*b))
                    .sum::<f64>()
                    * scale
            })
            .collect();
        let max = scores
            .iter()
            .copied()
            .fold(sink.unwrap_or(f64::NEG_INFINITY), f64::max);
        let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let sum = weights.iter().sum::<f64>() + sink.map_or(0.0, |s| (s - max).exp());
        (0..q.len())
            .map(|d| {
                weights
                    .iter()
                    .zip(values)
                    .map(|(w, v)| w * f64::from(v[d]))
                    .sum::<f64>()
                    / sum
            })
            .collect()
    }

    #[test]
    fn matches_the_f64_softmax_of_the_visible_positions() {
        // Head sizes with their own accumulators (64, 128, 256) and without (12); no window,
        // one that cuts (with keys four at a time and one by one) and one wider than the cache.
        for dim in [12, 64, 128, 256] {
            for window in [None, Some(1), Some(2), Some(5), Some(64)] {
                check_against_f64(dim, window, None);
            }
        }
    }

    /// Sinks well below, among and above the scores: each head's own takes its share.
    #[test]
    fn a_sink_takes_its_share_of_each_heads_softmax() {
        let sinks = [-3.0, 0.1, 0.7, 4.0];
        for dim in [12, 64] {
            for window in [None, Some(2)] {
                check_against_f64(dim, window, Some(&sinks));
            }
        }
    }

    fn check_against_f64(dim: usize, window: Option<usize>, sinks: Option<&[f32]>) {
        let (rows, heads, kv_heads, len, total) = (2, 4, 2, 3, 7);
        let q = noise((rows, heads, len, dim), 1);
        // k and v as a narrowed view of a larger cache, as the KV cache hands them over.
        let k = noise((rows, kv_heads, 10, dim), 2)
            .narrow(2, 0, total)
            .unwrap();
        let v = noise((rows, kv_heads, 10, dim), 3)
            .narrow(2, 0, total)
            .unwrap();
        let scale = 0.3f32;
        let out = q
            .apply_op3_no_bwd(
                &k,
                &v,
                &CausalAttention {
                    scale,
                    window,
                    sinks,
                },
            )
            .unwrap();
        assert_eq!(out.dims(), [rows, len, heads * dim]);
        let out = out.to_vec3::<f32>().unwrap();
        let (q4, k4, v4) = (q.to_vec3_4(), k.to_vec3_4(), v.to_vec3_4());
        for r in 0..rows {
            for h in 0..heads {
                for i in 0..len {
                    let seen = total - len + i + 1;
                    let oldest = window.map_or(0, |w| seen.saturating_sub(w));
                    let want = reference(
                        &q4[r][h][i],
                        &k4[r][h / 2][oldest..seen],
                        &v4[r][h / 2][oldest..seen],
                        f64::from(scale),
                        sinks.map(|s| f64::from(s[h])),
                    );
                    let got = &out[r][i][h * dim..(h + 1) * dim];
                    for (g, w) in got.iter().zip(&want) {
                        assert!(
                            (f64::from(*g) - w).abs() < 1e-5,
                            "[{r}][{h}][{i}] window {window:?}: {g} vs {w}"
                        );
                    }
                }
            }
        }
    }

    /// The AVX-512 build runs the AVX2 build's operations in its order: the same bits, so a
    /// model's logits do not depend on which of the two a CPU has.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512_gives_the_bits_of_avx2() {
        if Isa::detect() != Isa::Avx512 {
            println!("skipped: this CPU has no AVX-512F");
            return;
        }
        let view = |t: &Tensor, f: &mut dyn FnMut(&View)| {
            let (storage, layout) = t.storage_and_layout();
            let candle_core::Storage::Cpu(storage) = &*storage else {
                unreachable!("noise is on the CPU")
            };
            f(&View::new(storage, layout).unwrap());
        };
        for dim in [12, 64, 128, 256] {
            let (q, k, v) = (
                noise((1, 2, 3, dim), 7),
                noise((1, 1, 9, dim), 8),
                noise((1, 1, 9, dim), 9),
            );
            view(&q, &mut |q| {
                view(&k, &mut |k| {
                    view(&v, &mut |v| {
                        for window in [None, Some(5)] {
                            let task = Task {
                                q,
                                k,
                                v,
                                row: 0,
                                heads: 0..2,
                                kv_head: 0,
                                dim,
                                start: 6,
                                scale: 0.3,
                                window,
                                sinks: None,
                            };
                            let bits = |isa| -> Vec<u32> {
                                let out = attend_with(isa, &task, 0..3);
                                out.iter().map(|x| x.to_bits()).collect()
                            };
                            assert_eq!(bits(Isa::Avx2), bits(Isa::Avx512), "dim {dim}");
                        }
                    })
                })
            });
        }
    }

    /// A query's result is the same bits whatever queries and rows are computed beside it.
    #[test]
    fn a_query_does_not_depend_on_the_queries_beside_it() {
        let (heads, kv_heads, total, dim) = (6, 3, 40, 64);
        let q = noise((2, heads, total, dim), 4);
        let k = noise((2, kv_heads, total, dim), 5);
        let v = noise((2, kv_heads, total, dim), 6);
        let op = CausalAttention {
            scale: 0.25,
            window: Some(7),
            sinks: None,
        };
        let all = q.apply_op3_no_bwd(&k, &v, &op).unwrap();
        let bits = |t: &Tensor| {
            t.flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
                .iter()
                .map(|f| f.to_bits())
                .collect::<Vec<_>>()
        };
        // The last 5 queries of row 1 alone, as a prefill that starts mid-prompt computes them.
        let tail = q
            .narrow(0, 1, 1)
            .unwrap()
            .narrow(2, total - 5, 5)
            .unwrap()
            .contiguous()
            .unwrap();
        let (k1, v1) = (k.narrow(0, 1, 1).unwrap(), v.narrow(0, 1, 1).unwrap());
        let alone = tail.apply_op3_no_bwd(&k1, &v1, &op).unwrap();
        let whole = all
            .narrow(0, 1, 1)
            .unwrap()
            .narrow(1, total - 5, 5)
            .unwrap();
        assert_eq!(bits(&alone), bits(&whole.contiguous().unwrap()));
    }

    trait Nested {
        fn to_vec3_4(&self) -> Vec<Vec<Vec<Vec<f32>>>>;
    }

    impl Nested for Tensor {
        fn to_vec3_4(&self) -> Vec<Vec<Vec<Vec<f32>>>> {
            (0..self.dim(0).unwrap())
                .map(|r| self.get(r).unwrap().to_vec3::<f32>().unwrap())
                .collect()
        }
    }
}
