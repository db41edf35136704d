//! What the engine needs from a model: one prefill of the shared prompt, then batched decode steps.
//!
//! The trait keeps the generation loop independent of candle, so it is tested with a
//! deterministic fake model as well as the real llama forward.

/// A model whose KV cache serves a batch of rows that share one prompt.
pub trait Backend {
    fn vocab_size(&self) -> usize;

    /// Bytes of weights read by one forward step, for the bandwidth figure of `samplab bench`.
    fn weight_bytes(&self) -> u64;

    /// Each weight type of the model's matrices and the kernel that runs it, for `samplab
    /// bench`; empty where the backend does not say.
    fn kernels(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// The most positions (prompt + generated) the model can attend over.
    fn context_length(&self) -> usize;

    /// Runs the prompt and resets the cache to it. Returns the logits of the last position, or of
    /// every position when `all_positions` (for prompt logprobs).
    fn prefill(&mut self, prompt: &[u32], all_positions: bool) -> anyhow::Result<Vec<Vec<f32>>>;

    /// Replicates the prefilled cache into `rows` identical rows.
    fn fork(&mut self, rows: usize) -> anyhow::Result<()>;

    /// Feeds one token to each live row; returns one logits row per live row, in order.
    fn decode(&mut self, tokens: &[u32]) -> anyhow::Result<Vec<Vec<f32>>>;

    /// Keeps only the rows whose flag is set (in the current row order).
    fn retain(&mut self, keep: &[bool]) -> anyhow::Result<()>;
}
