//! The llama-family forward pass and the per-run state that decodes a batch of samples.

mod delta_net;
mod moe;
mod per_layer;
pub(crate) mod registry;
mod rope;
pub(crate) mod weights;

use crate::model::device::cpu_paths;
use crate::model::error::ModelError;
use crate::model::formats::config::{ModelConfig, RopeScaling};
use crate::model::formats::tensors;
use crate::model::kernels::attention::CausalAttention;
use crate::model::kernels::fused::{gated, rope_heads};
use crate::model::kernels::{Activations, Arithmetic};
use crate::model::parallel::{in_parallel, inline_rayon};
use crate::model::state::{Cuts, DEFAULT_REPLAY_BUDGET, LONGEST_APPEND, SequenceState, Snapshots};
use candle_core::quantized::gguf_file;
use candle_core::{DType, Device, Tensor};
use registry::QkNorm;
use rope::Rope;
use std::fs::File;
use std::io::BufReader;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use weights::{Attention, Ffn, Mixer, Weights};

/// A loaded model: immutable weights; runs happen in [`Session`]s.
#[derive(Debug)]
pub struct Model {
    config: ModelConfig,
    weights: Weights,
    rope: Rope,
    /// Windowed layers' own RoPE (Gemma 3's local layers).
    rope_local: Option<Rope>,
    device: Device,
    /// On the CPU with every matrix in our products: candle's small ops run inline.
    inline_small_ops: bool,
    /// When recurrent layers keep snapshots of a row's state.
    snapshots: Snapshots,
}

/// A GGUF file with its header read and its tensors still on disk.
pub struct OpenGguf {
    path: PathBuf,
    tables: tensors::GgufTables,
    reader: BufReader<File>,
    config: ModelConfig,
}

impl OpenGguf {
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The tensors' types and shapes, as the header lists them: those of types candle reads.
    pub fn tensor_infos(&self) -> impl Iterator<Item = &gguf_file::TensorInfo> {
        self.tables.content.tensor_infos.values()
    }

    /// Values in the MXFP4 tensors, which candle has no type for.
    pub fn mxfp4_values(&self) -> u64 {
        self.tables.mxfp4.values()
    }

    /// Reads the weights; hands back the metadata too, so that the tokenizer is built from
    /// the same read of the header.
    pub fn load(
        self,
        device: &Device,
        activations: Activations,
    ) -> Result<(Model, gguf_file::Content), ModelError> {
        let arithmetic = activations.arithmetic()?;
        self.load_with(device, Some(arithmetic))
    }

    fn load_with(
        mut self,
        device: &Device,
        ours: Option<Arithmetic>,
    ) -> Result<(Model, gguf_file::Content), ModelError> {
        let weights = Weights::load_gguf(
            &self.tables,
            self.reader,
            &self.config,
            &self.path,
            device,
            ours,
        )?;
        if let Some(factors) = &weights.rope_freqs {
            self.config.rope_scaling = Some(RopeScaling::FreqFactors(factors.clone()));
        }
        Ok((
            Model::new(self.config, weights, device),
            self.tables.content,
        ))
    }
}

impl Model {
    /// Loads a `.gguf` file or a Hugging Face model directory (config.json + safetensors).
    pub fn load(path: &Path, device: &Device) -> Result<Self, ModelError> {
        Self::load_with_activations(path, device, Activations::Exact)
    }

    /// [`Model::load`], with quantized matrices multiplying activations at that precision.
    pub fn load_with_activations(
        path: &Path,
        device: &Device,
        activations: Activations,
    ) -> Result<Self, ModelError> {
        Self::load_with(path, device, Some(activations.arithmetic()?))
    }

    /// Loads a GGUF file's quantized matrices into candle's product instead of ours.
    #[cfg(test)]
    pub(crate) fn load_with_candle_kernels(
        path: &Path,
        device: &Device,
    ) -> Result<Self, ModelError> {
        Self::load_with(path, device, None)
    }

    fn load_with(
        path: &Path,
        device: &Device,
        ours: Option<Arithmetic>,
    ) -> Result<Self, ModelError> {
        if path.is_dir() {
            let mut config = ModelConfig::from_hf_dir(path)?;
            let weights = Weights::load_hf(path, &config, device)?;
            config.tie_word_embeddings = weights.tied_output;
            Ok(Self::new(config, weights, device))
        } else if path.exists() {
            Self::open_gguf(path)?
                .load_with(device, ours)
                .map(|(model, _)| model)
        } else {
            Err(ModelError::NotFound(path.to_owned()))
        }
    }

    /// Reads a `.gguf` file's header and config, leaving the tensors on disk: the config can be
    /// checked (does it fit in memory?) before [`OpenGguf::load`] reads the weights.
    pub fn open_gguf(path: &Path) -> Result<OpenGguf, ModelError> {
        let (tables, reader, config) = tensors::open_gguf(path)?;
        Ok(OpenGguf {
            path: path.to_owned(),
            tables,
            reader,
            config,
        })
    }

    fn new(config: ModelConfig, weights: Weights, device: &Device) -> Self {
        Self {
            rope: Rope::global(&config),
            rope_local: Rope::local(&config),
            inline_small_ops: cpu_paths(device) && weights.all_ours(),
            snapshots: Snapshots::within_replay_budget(&config, DEFAULT_REPLAY_BUDGET),
            config,
            weights,
            device: device.clone(),
        }
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// When recurrent layers keep snapshots of a row's state (unless set, as many as the
    /// default replay budget allows: [`Snapshots::within_replay_budget`]).
    pub fn set_snapshots(&mut self, snapshots: Snapshots) {
        self.snapshots = snapshots;
    }

    pub fn snapshots(&self) -> Snapshots {
        self.snapshots
    }

    pub fn context_length(&self) -> usize {
        self.config.context_length
    }

    /// Weight bytes one decode step reads, for bandwidth figures.
    pub fn weight_bytes_per_step(&self) -> u64 {
        self.weights.bytes_per_step()
    }

    /// Each weight type of the matrices and the kernel that runs it.
    pub fn kernels(&self) -> Vec<(String, String)> {
        self.weights.kernels()
    }

    /// What the quantized products on the CPU do with activations; `None` where no matrix
    /// runs through them (float weights, a GPU).
    pub fn activations(&self) -> Option<Activations> {
        self.weights.activations()
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// A fresh run borrowing the model: an empty cache of one row.
    pub fn session(&self) -> Session<&Model> {
        Session::new(self)
    }

    /// Runs `ids` (`[rows, len]`) after the cached positions; logits `[rows * len, vocab]`,
    /// or `[rows, vocab]` for the last position only.
    ///
    /// Runs inside the device's thread pool: the calling thread then takes part in each
    /// matrix product's parallel loop instead of sleeping until pool threads wake to do it,
    /// which costs more than a small product itself.
    fn forward(
        &self,
        cache: &mut SequenceState,
        ids: &Tensor,
        last_only: bool,
    ) -> candle_core::Result<Tensor> {
        if self.inline_small_ops {
            inline_rayon(|| self.forward_in_pool(cache, ids, last_only))
        } else {
            self.device
                .with_context(|| self.forward_in_pool(cache, ids, last_only))
        }
    }

    fn forward_in_pool(
        &self,
        cache: &mut SequenceState,
        ids: &Tensor,
        last_only: bool,
    ) -> candle_core::Result<Tensor> {
        let (_, len) = ids.dims2()?;
        let start = cache.len();
        let global = self.rope.cos_sin(start, len, &self.device)?;
        let local = match &self.rope_local {
            Some(rope) => Some(rope.cos_sin(start, len, &self.device)?),
            None => None,
        };
        let family = self.config.architecture.family();
        // Each position's query scale, `[1, 1, len, 1]` (Ministral 3).
        let q_scale = match self.config.attn_temperature {
            Some(t) => {
                let scales: Vec<f32> = (start..start + len).map(|p| t.scale(p)).collect();
                Some(Tensor::from_vec(scales, (1, 1, len, 1), &self.device)?)
            }
            None => None,
        };
        // Our CPU attention masks by position itself; elsewhere one mask per window and length
        // of the keys held, made when a layer first needs it.
        let mut masks = Masks::default();
        let mut x = self.weights.embed(ids)?;
        if let Some(scale) = self.config.embedding_scale {
            x = (x * f64::from(scale))?;
        }
        let per_layer_inputs = match &self.weights.per_layer_inputs {
            Some(inputs) => Some(per_layer::inputs(inputs, ids, &x, &self.config)?),
            None => None,
        };
        // Keys and values of the layers that later layers read (Gemma 4), in this forward.
        let mut lent: Vec<Option<(Tensor, Tensor)>> = vec![None; self.weights.layers.len()];
        let residual = |branch: Tensor| match self.config.residual_scale {
            Some(scale) => branch * f64::from(scale),
            None => Ok(branch),
        };
        for (i, layer) in self.weights.layers.iter().enumerate() {
            let plan = self.config.layers[i];
            let (cos, sin) = match (&local, plan.local_rope) {
                (Some(local), true) => local,
                _ => &global,
            };
            let normed = self.norm(&x, layer.attn_norm.as_ref())?;
            let rope = plan.rope.then_some((cos, sin));
            let mut attn = match &layer.mixer {
                Mixer::Attention(attention) => self.attention(
                    attention,
                    i,
                    &normed,
                    cache,
                    rope,
                    q_scale.as_ref(),
                    &mut masks,
                    &mut lent,
                )?,
                Mixer::DeltaNet(net) => {
                    let start = cache.len();
                    net.forward(&normed, cache.recurrent(i)?, start)?
                }
            };
            if let Some(norm) = &layer.post_attn_norm {
                attn = candle_nn::ops::rms_norm(&attn, norm, self.eps())?;
            }
            x = (x + residual(attn)?)?;
            let normed = self.norm(&x, layer.ffn_norm.as_ref())?;
            let mut ffn = match &layer.ffn {
                Ffn::Dense { gate, up, down } => {
                    let (gate, up) = (gate.forward(&normed)?, up.forward(&normed)?);
                    down.forward(&gated(family.activation, &gate, &up)?)?
                }
                Ffn::Experts(moe) => moe.forward(&normed, family.activation)?,
                Ffn::Beside(beside) => {
                    beside.forward(&x, &normed, family.activation, self.eps())?
                }
            };
            if let Some(norm) = &layer.post_ffn_norm {
                ffn = candle_nn::ops::rms_norm(&ffn, norm, self.eps())?;
            }
            x = (x + residual(ffn)?)?;
            if let (Some(gate), Some(inputs)) = (&layer.per_layer, &per_layer_inputs) {
                x = per_layer::mix(gate, &x, inputs, i, self.eps())?;
            }
            if let Some(scale) = &layer.output_scale {
                x = x.broadcast_mul(scale)?;
            }
        }
        cache.advance(len);
        if last_only {
            x = x.narrow(1, len - 1, 1)?;
        }
        let x = candle_nn::ops::rms_norm(&x, &self.weights.norm, self.eps())?;
        let mut logits = self.weights.output.forward(&x)?;
        if let Some(divisor) = self.config.logit_divisor {
            logits = (logits / f64::from(divisor))?;
        }
        if let Some(cap) = self.config.final_logit_softcap {
            logits = ((logits / f64::from(cap))?.tanh()? * f64::from(cap))?;
        }
        logits.flatten_to(1)
    }

    fn eps(&self) -> f32 {
        self.config.rms_norm_eps as f32
    }

    /// `x` RMS-normed by `weight`, or `x` itself where the family has no such norm.
    fn norm(&self, x: &Tensor, weight: Option<&Tensor>) -> candle_core::Result<Tensor> {
        match weight {
            Some(w) => candle_nn::ops::rms_norm(x, w, self.eps()),
            None => Ok(x.clone()),
        }
    }

    /// `lent`: the keys and values each layer attended over in this forward, kept for the
    /// layers that read them instead of their own.
    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        layer: &Attention,
        index: usize,
        x: &Tensor,
        cache: &mut SequenceState,
        rope: Option<(&Tensor, &Tensor)>,
        q_scale: Option<&Tensor>,
        masks: &mut Masks,
        lent: &mut [Option<(Tensor, Tensor)>],
    ) -> candle_core::Result<Tensor> {
        let c = &self.config;
        let plan = c.layers[index];
        let (window, head_dim, kv_heads) = (plan.window, plan.head_dim, plan.kv_heads);
        let (rows, len, _) = x.dims3()?;
        let family = c.architecture.family();
        let whole = family.qk_norm == QkNorm::Whole;
        // `[rows, len, n, head_dim]`, normed where the model says: each head (Qwen3, Gemma 3)
        // or the whole projection (OLMo 2).
        let split = |t: Tensor, n: usize, norm: Option<&Tensor>| -> candle_core::Result<Tensor> {
            let t = match norm.filter(|_| whole) {
                Some(w) => candle_nn::ops::rms_norm(&t, w, self.eps())?,
                None => t,
            };
            let t = t.reshape((rows, len, n, head_dim))?;
            match norm.filter(|_| !whole) {
                Some(w) => candle_nn::ops::rms_norm(&t, w, self.eps()),
                None => Ok(t),
            }
        };
        let q = layer.q.forward(x)?;
        // A gated attention's heads each hold the query then the gate.
        let (q, gate) = match family.gated_attention {
            true => {
                let both = q.reshape((rows, len, c.num_heads, 2, head_dim))?;
                let gate = both.narrow(3, 1, 1)?;
                let gate = gate.reshape((rows, len, c.num_heads * head_dim))?;
                (both.narrow(3, 0, 1)?.contiguous()?, Some(gate))
            }
            false => (q, None),
        };
        let q = q.reshape((rows, len, c.num_heads * head_dim))?;
        // Heads in attention's layout `[rows, heads, len, head_dim]`, rotated where the layer
        // rotates.
        let rotate = |t: Tensor| match rope {
            Some((cos, sin)) => rope_heads(&t, cos, sin, c.rope_layout),
            None => t.transpose(1, 2)?.contiguous(),
        };
        let q = rotate(split(q, c.num_heads, layer.q_norm.as_ref())?)?;
        let q = match q_scale {
            Some(scale) => q.broadcast_mul(scale)?,
            None => q,
        };
        let (k, v) = match (plan.kv_from, &layer.k) {
            (Some(source), _) => lent[source].clone().ok_or_else(|| {
                candle_core::Error::Msg(format!(
                    "layer {index} reads layer {source}'s keys, which it has not written"
                ))
            })?,
            (None, None) => candle_core::bail!("layer {index} has no keys"),
            (None, Some(k_proj)) => {
                let keys = k_proj.forward(x)?;
                // Without a v of its own the layer's keys (before their norm) are its values.
                let values = match &layer.v {
                    Some(v) => v.forward(x)?,
                    None => keys.clone(),
                };
                let k = rotate(split(keys, kv_heads, layer.k_norm.as_ref())?)?;
                let mut v = split(values, kv_heads, None)?;
                if family.v_norm {
                    let ones = Tensor::ones(head_dim, v.dtype(), v.device())?;
                    v = candle_nn::ops::rms_norm(&v, &ones, self.eps())?;
                }
                let v = v.transpose(1, 2)?.contiguous()?;
                let start = cache.len();
                let (k, v) = cache.kv(index)?.append(start, &k, &v)?;
                if c.layers.iter().any(|l| l.kv_from == Some(index)) {
                    lent[index] = Some((k.clone(), v.clone()));
                }
                (k, v)
            }
        };
        let scale = f64::from(c.attention_scale);
        let output = |out: Tensor| match &gate {
            Some(gate) => layer.o.forward(&(out * candle_nn::ops::sigmoid(gate)?)?),
            None => layer.o.forward(&out),
        };
        if cpu_paths(q.device()) && q.dtype() == DType::F32 {
            let op = CausalAttention {
                scale: scale as f32,
                window,
                sinks: layer.sinks.as_deref(),
            };
            return output(q.apply_op3_no_bwd(&k, &v, &op)?);
        }
        let total = k.dim(2)?;

        // Grouped-query attention without copying k/v per query head: the query heads that
        // share a kv head are stacked along the sequence axis of one matmul.
        let group = c.num_heads / kv_heads;
        let q = q.reshape((rows, kv_heads, group * len, head_dim))?;
        let mut scores = (q.matmul(&k.t()?)? * scale)?;
        if let Some(mask) = masks.get(window, total - len, len, q.device())? {
            scores = scores
                .reshape((rows, kv_heads, group, len, total))?
                .broadcast_add(mask)?
                .reshape((rows, kv_heads, group * len, total))?;
        }
        let probs = match &layer.sinks {
            Some(sinks) => with_sinks(&scores, sinks, len)?,
            None => candle_nn::ops::softmax_last_dim(&scores)?,
        };
        let out = probs
            .matmul(&v)?
            .reshape((rows, c.num_heads, len, head_dim))?
            .transpose(1, 2)?
            .reshape((rows, len, c.num_heads * head_dim))?;
        output(out)
    }
}

/// The softmax of `scores` `[rows, kv_heads, group * len, keys]` with each query head's sink
/// logit as one more key that holds no value: its column joins the softmax, then is dropped.
fn with_sinks(scores: &Tensor, sinks: &[f32], len: usize) -> candle_core::Result<Tensor> {
    let (rows, kv_heads, queries, keys) = scores.dims4()?;
    let column: Vec<f32> = sinks
        .iter()
        .flat_map(|&s| std::iter::repeat_n(s, len))
        .collect();
    let column = Tensor::from_vec(column, (1, kv_heads, queries, 1), scores.device())?
        .to_dtype(scores.dtype())?
        .broadcast_as((rows, kv_heads, queries, 1))?
        // A broadcast column made `cat` return a strided tensor for more than one row, which
        // candle's softmax refuses (a batch of gpt-oss rows failed on a GPU's path).
        .contiguous()?;
    let probs = candle_nn::ops::softmax_last_dim(&Tensor::cat(&[scores, &column], 3)?)?;
    probs.narrow(3, 0, keys)
}

/// The causal masks of one forward, by window and keys held.
#[derive(Default)]
struct Masks(Vec<((Option<usize>, usize), Tensor)>);

impl Masks {
    /// The mask of `len` queries after `start` held keys; none where nothing is hidden (a
    /// decode step without a window).
    fn get(
        &mut self,
        window: Option<usize>,
        start: usize,
        len: usize,
        device: &Device,
    ) -> candle_core::Result<Option<&Tensor>> {
        if len == 1 && window.is_none() {
            return Ok(None);
        }
        let key = (window, start + len);
        let at = match self.0.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                self.0.push((key, causal_mask(start, len, window, device)?));
                self.0.len() - 1
            }
        };
        Ok(Some(&self.0[at].1))
    }
}

/// `[len, start + len]`: 0 where query `i` (at key index `start + i`) may attend, -inf after
/// it and, with a window, `window` positions or more before it.
fn causal_mask(
    start: usize,
    len: usize,
    window: Option<usize>,
    device: &Device,
) -> candle_core::Result<Tensor> {
    let total = start + len;
    let mask: Vec<f32> = (0..len)
        .flat_map(|i| {
            (0..total).map(move |j| {
                let behind = (start + i).saturating_sub(j);
                if j > start + i || window.is_some_and(|w| behind >= w) {
                    f32::NEG_INFINITY
                } else {
                    0.0
                }
            })
        })
        .collect();
    Tensor::from_vec(mask, (len, total), device)
}

/// One run: a prompt prefilled once, then decoded as a batch of rows that share it.
/// `M` is `&Model` for a run inside a scope, or `Arc<Model>` for an owner such as the engine.
#[derive(Debug)]
pub struct Session<M: Deref<Target = Model>> {
    model: M,
    cache: SequenceState,
}

impl<M: Deref<Target = Model>> Session<M> {
    /// An empty cache of one row.
    pub fn new(model: M) -> Self {
        let cache = SequenceState::new(&model.config, model.snapshots);
        Self { model, cache }
    }

    /// A batch of no rows, which [`Session::extend`] fills.
    pub fn batch(model: M) -> Self {
        let cache = SequenceState::empty_batch(&model.config, model.snapshots);
        Self { model, cache }
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Appends one row per source (each a one-row session of the same model), cut to its first
    /// `len` positions (where its [`Session::cuts`] allow). The batch must be empty or
    /// hold `len` positions itself.
    pub fn extend(&mut self, sources: &[&Session<M>], len: usize) -> Result<(), ModelError> {
        let caches: Vec<&SequenceState> = sources.iter().map(|s| &s.cache).collect();
        self.cache
            .extend(&caches, len)
            .map_err(|e| ModelError::Usage(e.to_string()))
    }

    /// Takes the rows whose flag is false out of the batch, each as a one-row session that can
    /// join a batch again later; the others continue exactly as before.
    pub fn split_off(&mut self, keep: &[bool]) -> Result<Vec<Session<M>>, ModelError>
    where
        M: Clone,
    {
        if keep.len() != self.cache.rows() {
            return Err(ModelError::Usage(format!(
                "split_off got {} flags for {} rows",
                keep.len(),
                self.cache.rows()
            )));
        }
        let taken = self.cache.split_off(keep)?;
        Ok(taken
            .into_iter()
            .map(|cache| Session {
                model: self.model.clone(),
                cache,
            })
            .collect())
    }

    /// Runs prompt tokens through the model (the batch must be a single row). Returns the
    /// logits after every given token when `all_logits`, else after the last one only:
    /// row `i` predicts the token after `ids[i]`.
    pub fn prefill(&mut self, ids: &[u32], all_logits: bool) -> Result<Vec<Vec<f32>>, ModelError> {
        if self.cache.rows() != 1 {
            return Err(ModelError::Usage(format!(
                "prefill needs a single row, the batch has {}",
                self.cache.rows()
            )));
        }
        if ids.is_empty() {
            return Err(ModelError::Usage(
                "prefill needs at least one token".to_owned(),
            ));
        }
        self.check_room(ids.len())?;
        self.check_ids(ids)?;
        let chunks: Vec<&[u32]> = ids.chunks(LONGEST_APPEND).collect();
        let mut logits = Vec::new();
        for (i, chunk) in chunks.iter().enumerate() {
            let is_last = i + 1 == chunks.len();
            let input = Tensor::new(*chunk, &self.model.device)?.unsqueeze(0)?;
            let out = self.model.forward(&mut self.cache, &input, !all_logits)?;
            if all_logits || is_last {
                logits.extend(rows_to_vec(&out)?);
            }
        }
        Ok(logits)
    }

    /// Replicates the single cached row into `n` rows that decode independently.
    pub fn fork(&mut self, n: usize) -> Result<(), ModelError> {
        if self.cache.rows() != 1 || n == 0 {
            return Err(ModelError::Usage(format!(
                "fork makes n >= 1 rows from one; asked for {n} from {}",
                self.cache.rows()
            )));
        }
        self.cache.fork(n)?;
        Ok(())
    }

    /// Feeds one token per row, all in one forward; returns one logits row per row.
    pub fn decode_step(&mut self, ids: &[u32]) -> Result<Vec<Vec<f32>>, ModelError> {
        if ids.len() != self.cache.rows() {
            return Err(ModelError::Usage(format!(
                "decode_step got {} tokens for {} rows",
                ids.len(),
                self.cache.rows()
            )));
        }
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.check_room(1)?;
        self.check_ids(ids)?;
        let input = Tensor::new(ids, &self.model.device)?.unsqueeze(1)?;
        let out = self.model.forward(&mut self.cache, &input, true)?;
        rows_to_vec(&out)
    }

    /// Forgets every position from `len` on, so that a prompt sharing only the first `len`
    /// tokens can continue from there. [`Session::cuts`] must allow `len`.
    pub fn truncate(&mut self, len: usize) -> Result<(), ModelError> {
        self.cache
            .truncate(len)
            .map_err(|e| ModelError::Usage(e.to_string()))
    }

    /// Where the session can be cut back to without recomputing: anywhere, unless a windowed
    /// layer has dropped positions a shorter sequence would need or recurrent layers keep
    /// their state only at snapshots.
    pub fn cuts(&self) -> Cuts {
        self.cache.cuts()
    }

    /// Bytes of keys and values the cached positions hold.
    pub fn cache_bytes(&self) -> usize {
        self.cache.bytes()
    }

    /// Drops the rows whose flag is false; the others continue exactly as before.
    pub fn retain_rows(&mut self, keep: &[bool]) -> Result<(), ModelError> {
        if keep.len() != self.cache.rows() {
            return Err(ModelError::Usage(format!(
                "retain_rows got {} flags for {} rows",
                keep.len(),
                self.cache.rows()
            )));
        }
        self.cache.retain_rows(keep)?;
        Ok(())
    }

    /// Positions held per row (prompt + generated); decoding stops at `context_length`.
    pub fn position(&self) -> usize {
        self.cache.len()
    }

    pub fn rows(&self) -> usize {
        self.cache.rows()
    }

    pub fn context_length(&self) -> usize {
        self.model.context_length()
    }

    fn check_room(&self, new: usize) -> Result<(), ModelError> {
        let needed = self.position() + new;
        if needed > self.context_length() {
            return Err(ModelError::ContextFull {
                needed,
                context_length: self.context_length(),
            });
        }
        Ok(())
    }

    /// An out-of-range id would make the embedding lookup fail deep inside candle.
    fn check_ids(&self, ids: &[u32]) -> Result<(), ModelError> {
        let vocab = self.model.config.vocab_size;
        match ids.iter().find(|&&id| id as usize >= vocab) {
            Some(id) => Err(ModelError::Usage(format!(
                "token id {id} is outside the vocabulary of {vocab}"
            ))),
            None => Ok(()),
        }
    }
}

/// Each row of `[rows, vocab]` logits as its own vector. On the CPU the rows are copied on
/// the pool's threads: a batch's logits (8 MB for eight rows of a 248k vocabulary) took 1.1 ms
/// to copy on one thread while the others waited, 0.6 ms on two.
fn rows_to_vec(logits: &Tensor) -> Result<Vec<Vec<f32>>, ModelError> {
    let logits = logits.to_dtype(DType::F32)?;
    if !cpu_paths(logits.device()) {
        return Ok(logits.to_vec2::<f32>()?);
    }
    let rows = in_parallel(logits.dim(0)?, |r| logits.get(r)?.to_vec1::<f32>());
    Ok(rows.into_iter().collect::<candle_core::Result<_>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generic path's sinks (what a GPU runs): each head's own sink joins its softmax,
    /// heads grouped as the grouped-query matmul stacks them.
    #[test]
    fn a_sink_column_joins_each_heads_softmax_and_is_dropped() {
        let (kv_heads, group, len, keys) = (2, 2, 3, 5);
        let sinks = [-1.0f32, 0.5, 2.0, -3.0];
        let scores: Vec<f32> = (0..kv_heads * group * len * keys)
            .map(|i| ((i * 7919) % 13) as f32 / 4.0 - 1.5)
            .collect();
        let tensor = Tensor::from_vec(
            scores.clone(),
            (1, kv_heads, group * len, keys),
            &Device::Cpu,
        )
        .unwrap();
        let probs = with_sinks(&tensor, &sinks, len).unwrap();
        assert_eq!(probs.dims(), [1, kv_heads, group * len, keys]);
        let probs = probs.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for (row, (scores, probs)) in scores
            .chunks_exact(keys)
            .zip(probs.chunks_exact(keys))
            .enumerate()
        {
            let sink = f64::from(sinks[row / len]);
            let exps: Vec<f64> = scores.iter().map(|&s| f64::from(s).exp()).collect();
            let total = exps.iter().sum::<f64>() + sink.exp();
            for (p, e) in probs.iter().zip(&exps) {
                assert!((f64::from(*p) - e / total).abs() < 1e-6, "row {row}");
            }
        }
    }
}
