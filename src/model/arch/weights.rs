//! Loading a model's tensors from GGUF (kept quantized) or safetensors (f32, f16 and bf16
//! kept as stored) into one in-memory form, so that the forward pass has a single code path.

use super::registry::{Family, Part, QkNorm};
use crate::model::error::{ModelError, without_backtrace};
use crate::model::formats::config::{ModelConfig, io_error};
use crate::model::formats::gguf_checks;
use crate::model::kernels::dense::DenseMatrix;
use crate::model::kernels::{Arithmetic, QuantMatrix};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor, gguf_file};
use candle_core::{DType, Device, Module, Tensor};
use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `x W^T + b`. On the CPU every matrix keeps its stored type: quantized, f32, f16 or bf16.
#[derive(Debug, Clone)]
pub(crate) struct Linear {
    weight: Matrix,
    bias: Option<Tensor>,
}

#[derive(Debug, Clone)]
enum Matrix {
    Candle(QMatMul),
    /// A quantized matrix on the CPU in a format we have a kernel for: f32 activations
    /// against the exact dequantized weights, and several times faster than candle's.
    Ours(Arc<QuantMatrix>),
    /// f32, f16 or bf16 on the CPU: our batch-invariant product (a row's logits must not
    /// depend on the rows decoded beside it, or a re-run would differ from a fresh run).
    Dense(Arc<DenseMatrix>),
}

impl Linear {
    /// A float matrix on the CPU moves into our batch-invariant product. With `ours`, a
    /// quantized CPU matrix in a format we have a kernel for moves into our layout, to
    /// multiply with that arithmetic; `None` keeps candle's product, for comparisons.
    /// candle's copy is freed unless shared, as a tied embedding is.
    fn new(
        weight: QMatMul,
        bias: Option<Tensor>,
        ours: Option<Arithmetic>,
    ) -> candle_core::Result<Self> {
        if let QMatMul::QTensor(q) = &weight
            && q.device().is_cpu()
        {
            let (rows, cols) = q.shape().dims2()?;
            let data = q.data()?;
            if let Some(dense) = DenseMatrix::from_ggml(q.dtype(), rows, cols, &data)? {
                let weight = Matrix::Dense(Arc::new(dense));
                return Ok(Self { weight, bias });
            }
            if let Some(arithmetic) = ours
                && let Some(matrix) = QuantMatrix::from_gguf(q.dtype(), rows, cols, &data)?
            {
                let weight = Matrix::Ours(Arc::new(matrix.with(arithmetic)));
                return Ok(Self { weight, bias });
            }
        }
        let weight = Matrix::Candle(weight);
        Ok(Self { weight, bias })
    }

    /// The weight type and the product that runs it, e.g. `("q4_1", "samplab avx512, f32
    /// activations")`.
    fn kernel(&self) -> (String, String) {
        match &self.weight {
            Matrix::Ours(q) => (
                ggml_name(q.dtype()),
                format!("samplab {}", q.arithmetic().name()),
            ),
            Matrix::Candle(QMatMul::QTensor(q)) => {
                (ggml_name(q.dtype()), "candle, 8-bit activations".to_owned())
            }
            Matrix::Candle(QMatMul::Tensor(t) | QMatMul::TensorF16(t)) => (
                format!("{:?}", t.dtype()).to_lowercase(),
                "candle matmul".to_owned(),
            ),
            Matrix::Dense(w) => (
                w.dtype_name().to_owned(),
                format!("samplab {}, batch invariant", w.dtype_name()),
            ),
        }
    }

    /// Bytes of the weight matrix as stored, quantized or not.
    fn bytes(&self) -> u64 {
        let bytes = match &self.weight {
            Matrix::Candle(QMatMul::QTensor(q)) => q.storage_size_in_bytes(),
            Matrix::Candle(QMatMul::Tensor(t) | QMatMul::TensorF16(t)) => {
                t.elem_count() * t.dtype().size_in_bytes()
            }
            Matrix::Ours(q) => q.storage_size_in_bytes(),
            Matrix::Dense(w) => w.storage_size_in_bytes(),
        };
        bytes as u64
    }

    /// Whether [`Linear::look_up`] can read rows: our products hold the matrix.
    fn holds_rows(&self) -> bool {
        matches!(self.weight, Matrix::Ours(_) | Matrix::Dense(_))
    }

    /// Rows `ids` of the matrix, for an embedding tied to it.
    fn look_up(&self, ids: &Tensor) -> candle_core::Result<Tensor> {
        let (rows, cols) = match &self.weight {
            Matrix::Ours(w) => w.shape(),
            Matrix::Dense(w) => w.shape(),
            Matrix::Candle(_) => candle_core::bail!("candle's matrices have their own lookup"),
        };
        let wanted = ids.flatten_all()?.to_vec1::<u32>()?;
        let mut values = vec![0f32; wanted.len() * cols];
        for (&id, out) in wanted.iter().zip(values.chunks_exact_mut(cols)) {
            let id = id as usize;
            if id >= rows {
                candle_core::bail!("embedding id {id} is out of range for {rows} rows");
            }
            match &self.weight {
                Matrix::Ours(w) => w.row(id, out),
                Matrix::Dense(w) => w.row(id, out),
                Matrix::Candle(_) => unreachable!("refused above"),
            }
        }
        let mut dims = ids.dims().to_vec();
        dims.push(cols);
        Tensor::from_vec(values, dims, ids.device())
    }

    pub(crate) fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let y = match &self.weight {
            Matrix::Candle(w) => w.forward(x)?,
            Matrix::Ours(w) => x.contiguous()?.apply_op1_no_bwd(w.as_ref())?,
            Matrix::Dense(w) => x.contiguous()?.apply_op1_no_bwd(w.as_ref())?,
        };
        match &self.bias {
            Some(b) => y.broadcast_add(b),
            None => Ok(y),
        }
    }
}

/// llama.cpp's name of a GGML type: `q4_1`, `q6_k`, `f16`.
fn ggml_name(dtype: GgmlDType) -> String {
    let name = format!("{dtype:?}").to_lowercase();
    match name.strip_suffix('k') {
        Some(base) => format!("{base}_k"),
        None => name,
    }
}

#[derive(Debug)]
pub(crate) struct Layer {
    /// Norms of the block's input and of the attention's residual sum (all but OLMo 2).
    pub attn_norm: Option<Tensor>,
    pub q: Linear,
    pub k: Linear,
    pub v: Linear,
    pub o: Linear,
    /// Per-head norms, applied to q and k before RoPE (Qwen3, Gemma 3).
    pub q_norm: Option<Tensor>,
    pub k_norm: Option<Tensor>,
    /// Norms of the attention's and the feed-forward's outputs (Gemma 3).
    pub post_attn_norm: Option<Tensor>,
    pub ffn_norm: Option<Tensor>,
    pub post_ffn_norm: Option<Tensor>,
    pub gate: Linear,
    pub up: Linear,
    pub down: Linear,
}

/// Where token embeddings are looked up.
#[derive(Debug)]
pub(crate) enum Embedding {
    /// Their own (possibly quantized) matrix, in candle.
    Table(QMatMul),
    /// The rows of the tied output matrix, which one of our products holds: one copy of
    /// the matrix serves both.
    Output,
}

#[derive(Debug)]
pub(crate) struct Weights {
    embed: Embedding,
    pub layers: Vec<Layer>,
    pub norm: Tensor,
    pub output: Linear,
    /// The output projection is the embedding matrix (configured so, or none was stored).
    pub tied_output: bool,
    /// GGUF `rope_freqs.weight` (Llama 3.1 RoPE scaling baked in by convert).
    pub rope_freqs: Option<Vec<f32>>,
}

impl Weights {
    /// The embeddings of token ids `[rows, len]`: `[rows, len, hidden]`.
    pub(crate) fn embed(&self, ids: &Tensor) -> candle_core::Result<Tensor> {
        match &self.embed {
            Embedding::Table(table) => table.embedding(ids),
            Embedding::Output => self.output.look_up(ids),
        }
    }

    /// Bytes of matrices read by one decode step: every layer and the output projection
    /// (the embedding is only looked up row by row).
    pub(crate) fn bytes_per_step(&self) -> u64 {
        self.matrices().map(Linear::bytes).sum()
    }

    /// Whether every matrix runs through our products (none through candle's).
    pub(crate) fn all_ours(&self) -> bool {
        self.matrices().all(Linear::holds_rows)
    }

    fn matrices(&self) -> impl Iterator<Item = &Linear> {
        self.layers
            .iter()
            .flat_map(|l| [&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down])
            .chain([&self.output])
    }

    /// Each weight type of the matrices and the kernel that runs it, once each.
    pub(crate) fn kernels(&self) -> Vec<(String, String)> {
        let mut kernels: Vec<(String, String)> = self.matrices().map(Linear::kernel).collect();
        kernels.sort();
        kernels.dedup();
        kernels
    }
}

/// Where tensors come from: by name, shape-checked, `None` when absent.
trait Source {
    fn name(&self, layer: Option<usize>, part: Part, suffix: &str) -> String;
    fn matrix(&mut self, name: &str, shape: (usize, usize)) -> Result<Option<QMatMul>, ModelError>;
    fn vector(&mut self, name: &str, len: usize) -> Result<Option<Tensor>, ModelError>;
    /// An RMSNorm's weight as the forward pass multiplies by it.
    fn norm(&mut self, name: &str, len: usize) -> Result<Option<Tensor>, ModelError> {
        self.vector(name, len)
    }
    fn path(&self) -> &Path;
    /// The family whose tensors these are, for errors.
    fn family(&self) -> &'static Family;
}

impl Weights {
    /// Reads a GGUF file's header and config; the tensors stay on disk until `load_gguf`.
    pub(crate) fn open_gguf(
        path: &Path,
    ) -> Result<(gguf_file::Content, BufReader<File>, ModelConfig), ModelError> {
        let file = crate::regular_file::open(path).map_err(|e| io_error(path, e))?;
        let file_size = file.metadata().map_err(|e| io_error(path, e))?.len();
        let mut reader = BufReader::new(file);
        let mut magic = [0u8; 4];
        std::io::Read::read_exact(&mut reader, &mut magic)
            .map_err(|_| ModelError::NotGguf(path.to_owned()))?;
        if &magic != b"GGUF" {
            return Err(ModelError::NotGguf(path.to_owned()));
        }
        std::io::Seek::rewind(&mut reader).map_err(|e| io_error(path, e))?;
        let header = gguf_checks::scan(&mut reader, file_size).map_err(|r| corrupt_as(path, r))?;
        std::io::Seek::rewind(&mut reader).map_err(|e| io_error(path, e))?;
        let content = gguf_file::Content::read(&mut reader).map_err(|e| corrupt(path, e))?;
        let needed =
            gguf_checks::check_tensors(&content, header).map_err(|r| corrupt_as(path, r))?;
        if needed > file_size {
            return Err(ModelError::Truncated {
                path: path.to_owned(),
                needed,
                actual: file_size,
            });
        }
        let mut config = ModelConfig::from_gguf(&content, path)?;
        // llama.cpp accepts bytes after the last tensor, as a type changed to a smaller one
        // leaves them; past the alignment padding they are worth a word.
        let trailing = file_size - needed;
        if trailing >= header.alignment {
            config.warnings.push(format!(
                "{}: {trailing} bytes after the last tensor, which no tensor reads: a tensor's \
                 type or shape may not be what it was written with",
                path.display()
            ));
        }
        Ok((content, reader, config))
    }

    /// `ours`: quantized matrices on the CPU run through our kernels, with that arithmetic
    /// (see [`Linear::new`]).
    pub(crate) fn load_gguf(
        content: &gguf_file::Content,
        reader: BufReader<File>,
        config: &ModelConfig,
        path: &Path,
        device: &Device,
        ours: Option<Arithmetic>,
    ) -> Result<Self, ModelError> {
        let mut source = GgufSource {
            content,
            reader,
            path: path.to_owned(),
            device: device.clone(),
            family: config.architecture.family(),
        };
        Self::load(&mut source, config, ours)
    }

    /// The `*.safetensors` files of a Hugging Face model directory, in name order.
    pub(crate) fn safetensors_files(dir: &Path) -> Result<Vec<PathBuf>, ModelError> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| io_error(dir, e))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
            .collect();
        if files.is_empty() {
            return Err(ModelError::NoWeights(dir.to_owned()));
        }
        files.sort();
        Ok(files)
    }

    /// Loads every `*.safetensors` file of a Hugging Face model directory.
    pub(crate) fn load_hf(
        dir: &Path,
        config: &ModelConfig,
        device: &Device,
    ) -> Result<Self, ModelError> {
        let mut tensors = HashMap::new();
        let mut first_file = HashMap::new();
        for file in &Self::safetensors_files(dir)? {
            crate::regular_file::check(file).map_err(|e| io_error(file, e))?;
            let loaded =
                candle_core::safetensors::load(file, device).map_err(|e| corrupt(file, e))?;
            for (name, tensor) in loaded {
                if let Some(first) = first_file.insert(name.clone(), file) {
                    return Err(corrupt_as(
                        file,
                        format!("tensor `{name}` is also in {}", first.display()),
                    ));
                }
                tensors.insert(name, tensor);
            }
        }
        let mut source = HfSource {
            tensors,
            path: dir.to_owned(),
            family: config.architecture.family(),
        };
        Self::load(&mut source, config, Some(Arithmetic::exact()))
    }

    fn load(
        source: &mut impl Source,
        config: &ModelConfig,
        ours: Option<Arithmetic>,
    ) -> Result<Self, ModelError> {
        let (h, kv) = (config.hidden_size, config.num_kv_heads * config.head_dim);
        let q_dim = config.num_heads * config.head_dim;
        let ffn = config.intermediate_size;
        let embed_name = source.name(None, Part::Embed, "weight");
        let embed = require(source, &embed_name, |s, n| {
            s.matrix(n, (config.vocab_size, h))
        })?;
        let output_name = source.name(None, Part::Output, "weight");
        let (output, tied_output) = match source.matrix(&output_name, (config.vocab_size, h))? {
            Some(weight) if !config.tie_word_embeddings => (weight, false),
            _ => (embed.clone(), true),
        };
        // Not reserved up front: a header may claim 2^61 layers; the first missing one ends it.
        let mut layers = Vec::new();
        for i in 0..config.num_layers {
            let mut linear = |part: Part, shape: (usize, usize)| -> Result<Linear, ModelError> {
                let name = source.name(Some(i), part, "weight");
                let weight = require(source, &name, |s, n| s.matrix(n, shape))?;
                let bias_name = source.name(Some(i), part, "bias");
                let bias = source.vector(&bias_name, shape.0)?;
                Ok(Linear::new(weight, bias, ours)?)
            };
            let (q, k, v, o) = (
                linear(Part::Q, (q_dim, h))?,
                linear(Part::K, (kv, h))?,
                linear(Part::V, (kv, h))?,
                linear(Part::O, (h, q_dim))?,
            );
            let (gate, up, down) = (
                linear(Part::Gate, (ffn, h))?,
                linear(Part::Up, (ffn, h))?,
                linear(Part::Down, (h, ffn))?,
            );
            let family = config.architecture.family();
            let mut norm = |part: Part, len: usize| {
                let name = source.name(Some(i), part, "weight");
                require(source, &name, |s, n| s.norm(n, len))
            };
            let (attn_norm, ffn_norm) = if family.pre_norms {
                (
                    Some(norm(Part::AttnNorm, h)?),
                    Some(norm(Part::FfnNorm, h)?),
                )
            } else {
                (None, None)
            };
            let (q_norm, k_norm) = match family.qk_norm {
                QkNorm::None => (None, None),
                QkNorm::PerHead => (
                    Some(norm(Part::QNorm, config.head_dim)?),
                    Some(norm(Part::KNorm, config.head_dim)?),
                ),
                QkNorm::Whole => (
                    Some(norm(Part::QNorm, q_dim)?),
                    Some(norm(Part::KNorm, kv)?),
                ),
            };
            let (post_attn_norm, post_ffn_norm) = if family.post_norms {
                (
                    Some(norm(Part::PostAttnNorm, h)?),
                    Some(norm(Part::PostFfnNorm, h)?),
                )
            } else {
                (None, None)
            };
            layers.push(Layer {
                attn_norm,
                q,
                k,
                v,
                o,
                q_norm,
                k_norm,
                post_attn_norm,
                ffn_norm,
                post_ffn_norm,
                gate,
                up,
                down,
            });
        }
        let norm_name = source.name(None, Part::Norm, "weight");
        let norm = require(source, &norm_name, |s, n| s.norm(n, h))?;
        let rope_freqs_name = source.name(None, Part::RopeFreqs, "weight");
        let rope_freqs = source
            .vector(&rope_freqs_name, config.head_dim / 2)?
            .map(|t| t.to_vec1::<f32>())
            .transpose()?;
        let output = Linear::new(output, None, ours)?;
        // A tied matrix in our layout serves the lookups too, and candle's copy is dropped.
        let embed = if tied_output && output.holds_rows() {
            Embedding::Output
        } else {
            Embedding::Table(embed)
        };
        Ok(Self {
            embed,
            layers,
            norm,
            output,
            tied_output,
            rope_freqs,
        })
    }
}

fn require<S: Source, T>(
    source: &mut S,
    name: &str,
    get: impl FnOnce(&mut S, &str) -> Result<Option<T>, ModelError>,
) -> Result<T, ModelError> {
    get(source, name)?.ok_or_else(|| ModelError::MissingTensor {
        path: source.path().to_owned(),
        name: name.to_owned(),
        family: source.family().name,
    })
}

fn check_shape(
    path: &Path,
    family: &Family,
    name: &str,
    expected: &[usize],
    actual: &[usize],
) -> Result<(), ModelError> {
    if expected == actual {
        Ok(())
    } else {
        Err(ModelError::TensorShape {
            path: path.to_owned(),
            name: name.to_owned(),
            family: family.name,
            expected: expected.to_vec(),
            actual: actual.to_vec(),
        })
    }
}

fn corrupt(path: &Path, e: candle_core::Error) -> ModelError {
    corrupt_as(path, without_backtrace(e).to_string())
}

fn corrupt_as(path: &Path, reason: String) -> ModelError {
    ModelError::Corrupt {
        path: path.to_owned(),
        reason,
    }
}

struct GgufSource<'a> {
    content: &'a gguf_file::Content,
    reader: BufReader<File>,
    path: PathBuf,
    device: Device,
    family: &'static Family,
}

impl GgufSource<'_> {
    fn qtensor(&mut self, name: &str, shape: &[usize]) -> Result<Option<QTensor>, ModelError> {
        if !self.content.tensor_infos.contains_key(name) {
            return Ok(None);
        }
        let tensor = self
            .content
            .tensor(&mut self.reader, name, &self.device)
            .map_err(|e| corrupt(&self.path, e))?;
        check_shape(&self.path, self.family, name, shape, tensor.shape().dims())?;
        Ok(Some(tensor))
    }
}

impl Source for GgufSource<'_> {
    fn name(&self, layer: Option<usize>, part: Part, suffix: &str) -> String {
        match layer {
            Some(i) => format!("blk.{i}.{}.{suffix}", part.gguf()),
            None => format!("{}.{suffix}", part.gguf()),
        }
    }

    fn matrix(&mut self, name: &str, shape: (usize, usize)) -> Result<Option<QMatMul>, ModelError> {
        self.qtensor(name, &[shape.0, shape.1])?
            .map(|t| as_stored(t).map_err(|e| corrupt(&self.path, e)))
            .transpose()
    }

    fn vector(&mut self, name: &str, len: usize) -> Result<Option<Tensor>, ModelError> {
        self.qtensor(name, &[len])?
            .map(|t| {
                t.dequantize(&self.device)
                    .map_err(|e| corrupt(&self.path, e))
            })
            .transpose()
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn family(&self) -> &'static Family {
        self.family
    }
}

/// On the CPU a GGUF matrix stays as stored (quantized, f32, f16 or bf16) for our products
/// ([`Linear::new`]) and the embedding lookup; elsewhere candle widens float matrices to f32
/// for its own product.
fn as_stored(tensor: QTensor) -> candle_core::Result<QMatMul> {
    let tensor = Arc::new(tensor);
    if tensor.device().is_cpu() {
        Ok(QMatMul::QTensor(tensor))
    } else {
        QMatMul::from_arc(tensor)
    }
}

struct HfSource {
    tensors: HashMap<String, Tensor>,
    path: PathBuf,
    family: &'static Family,
}

impl HfSource {
    /// Takes a tensor out of the loaded files, so that each is freed once converted.
    fn take(&mut self, name: &str, shape: &[usize]) -> Result<Option<Tensor>, ModelError> {
        let Some(tensor) = self.tensors.remove(name) else {
            return Ok(None);
        };
        check_shape(&self.path, self.family, name, shape, tensor.dims())?;
        Ok(Some(tensor))
    }
}

/// The GGML type a safetensors matrix is kept in on the CPU: f16 and bf16 as they are,
/// anything else as f32.
fn stored_type(dtype: DType) -> GgmlDType {
    match dtype {
        DType::F16 => GgmlDType::F16,
        DType::BF16 => GgmlDType::BF16,
        _ => GgmlDType::F32,
    }
}

impl Source for HfSource {
    fn name(&self, layer: Option<usize>, part: Part, suffix: &str) -> String {
        match layer {
            Some(i) => format!("model.layers.{i}.{}.{suffix}", part.hf(self.family)),
            None => format!("{}.{suffix}", part.hf(self.family)),
        }
    }

    fn matrix(&mut self, name: &str, shape: (usize, usize)) -> Result<Option<QMatMul>, ModelError> {
        let Some(tensor) = self.take(name, &[shape.0, shape.1])? else {
            return Ok(None);
        };
        if !tensor.device().is_cpu() {
            return Ok(Some(QMatMul::Tensor(tensor.to_dtype(DType::F32)?)));
        }
        // The conversion passes through f32 one tensor at a time; the values are exact in
        // their own type, so they come back unchanged.
        let stored = QTensor::quantize(&tensor, stored_type(tensor.dtype()))?;
        Ok(Some(QMatMul::QTensor(Arc::new(stored))))
    }

    fn vector(&mut self, name: &str, len: usize) -> Result<Option<Tensor>, ModelError> {
        Ok(self
            .take(name, &[len])?
            .map(|t| t.to_dtype(DType::F32))
            .transpose()?)
    }

    /// Gemma's checkpoints store `w - 1`; convert adds the one for GGUF, we add it here.
    fn norm(&mut self, name: &str, len: usize) -> Result<Option<Tensor>, ModelError> {
        let weight = self.vector(name, len)?;
        match weight {
            Some(w) if self.family.hf_norm_plus_one => Ok(Some((w + 1.0)?)),
            other => Ok(other),
        }
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn family(&self) -> &'static Family {
        self.family
    }
}
