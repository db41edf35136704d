//! Scoring another model's samples through a vLLM server: the prompt and the sample's text are
//! tokenized by the server (`POST /tokenize`, a conversation through its chat template), then
//! sent back as token ids to `/v1/completions` with `prompt_logprobs: 0` and one token to
//! generate; the logprobs of the sample's positions are its score. Other servers return no
//! prompt logprobs (llama-cpp-python's `echo` scores each token against the wrong position),
//! so they cannot score.

use super::http::Client;
use super::params::messages;
use super::server::{ServerInfo, ServerKind};
use crate::engine::Prompt;
use crate::engine::score::ScoreRequest;
use crate::response::{CrossScore, PerToken, mean_and_perplexity};
use serde_json::{Value, json};

/// The score of every sample of `request`, checking `interrupted` between samples.
pub fn score(
    client: &Client,
    info: &ServerInfo,
    request: &ScoreRequest,
    interrupted: &mut dyn FnMut() -> bool,
) -> anyhow::Result<Vec<CrossScore>> {
    if info.kind != ServerKind::Vllm {
        anyhow::bail!(
            "{} returns no prompt logprobs, so {} cannot score other models' samples (vLLM can)",
            info.kind.name(),
            info.name()
        );
    }
    let prompt_ids = tokenize_prompt(client, info, &request.prompt)?;
    let mut scores = Vec::with_capacity(request.samples.len());
    for sample in &request.samples {
        if interrupted() {
            break;
        }
        let sample_ids = tokenize(
            client,
            info,
            json!({"prompt": sample.text, "add_special_tokens": false}),
        )?;
        let ids = [&prompt_ids[..], &sample_ids[..]].concat();
        let body = json!({
            "model": info.model, "prompt": ids, "max_tokens": 1, "temperature": 0,
            "prompt_logprobs": 0,
        });
        let url = client.spec.url("completions");
        let answer = client.post_json(&url, &body)?;
        let logprobs = sample_logprobs(&answer, prompt_ids.len(), ids.len()).map_err(|what| {
            anyhow::anyhow!("{url} gave no usable prompt_logprobs ({what}): is it vLLM?")
        })?;
        let sum: f64 = logprobs.iter().sum();
        let (mean_logprob, perplexity) = mean_and_perplexity(sum, logprobs.len());
        scores.push(CrossScore {
            model: info.name(),
            sample: sample.index,
            tokens: logprobs.len(),
            mean_logprob,
            perplexity,
            retokenized: true,
            foreign_prompt: false,
            per_token: Some(PerToken::unavailable(
                "a server scores its own tokenization of the text and gives no distributions",
            )),
        });
    }
    Ok(scores)
}

/// The prompt's token ids as the server's tokenizer (and chat template) makes them.
fn tokenize_prompt(
    client: &Client,
    info: &ServerInfo,
    prompt: &Prompt,
) -> anyhow::Result<Vec<u64>> {
    match prompt {
        Prompt::Raw(text) | Prompt::Literal(text) => {
            tokenize(client, info, json!({"prompt": text}))
        }
        Prompt::Chat(conversation) => tokenize(
            client,
            info,
            json!({"messages": messages(conversation), "add_generation_prompt": true}),
        ),
    }
}

/// `POST /tokenize` (at the server's root, beside `/v1`) with `request` and the model.
fn tokenize(client: &Client, info: &ServerInfo, mut request: Value) -> anyhow::Result<Vec<u64>> {
    request["model"] = json!(info.model);
    let url = format!("{}/tokenize", client.spec.root());
    let answer = client.post_json(&url, &request)?;
    answer
        .get("tokens")
        .and_then(Value::as_array)
        .and_then(|ids| ids.iter().map(Value::as_u64).collect())
        .ok_or_else(|| anyhow::anyhow!("{url} answered without a list of `tokens`"))
}

/// The logprobs at positions `from..to` of `choices[0].prompt_logprobs`, where each entry maps
/// token ids (as text) to `{logprob, rank, decoded_token}` and holds the prompt's own token.
pub fn sample_logprobs(answer: &Value, from: usize, to: usize) -> Result<Vec<f64>, String> {
    let entries = answer
        .pointer("/choices/0/prompt_logprobs")
        .and_then(Value::as_array)
        .ok_or("no choices[0].prompt_logprobs")?;
    if entries.len() < to {
        return Err(format!("{} positions for {to} tokens", entries.len()));
    }
    entries[from..to]
        .iter()
        .map(|entry| {
            let map = entry.as_object().ok_or("a position without logprobs")?;
            // With prompt_logprobs 0 the entry holds the prompt's own token only; with more,
            // the best alternatives too, and the own token is the one vLLM ranks as given.
            let own = if map.len() == 1 {
                map.values().next()
            } else {
                None
            };
            own.and_then(|v| v.get("logprob"))
                .and_then(Value::as_f64)
                .ok_or_else(|| "a position without its token's logprob".to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_samples_positions_are_read_from_vllms_prompt_logprobs() {
        // The shape of vLLM's CompletionResponse with prompt_logprobs: the first position has
        // none; each other maps its token id to a Logprob.
        let answer = json!({
            "id": "cmpl-1", "object": "text_completion", "model": "m",
            "choices": [{
                "index": 0, "text": " x", "logprobs": null, "finish_reason": "length",
                "stop_reason": null,
                "prompt_logprobs": [
                    null,
                    {"791": {"logprob": -2.5, "rank": 3, "decoded_token": " upon"}},
                    {"264": {"logprob": -0.5, "rank": 1, "decoded_token": " a"}},
                    {"882": {"logprob": -1.0, "rank": 1, "decoded_token": " time"}},
                ],
            }],
        });
        assert_eq!(sample_logprobs(&answer, 2, 4).unwrap(), [-0.5, -1.0]);
        assert!(
            sample_logprobs(&answer, 2, 6)
                .unwrap_err()
                .contains("4 positions")
        );
        assert!(
            sample_logprobs(&answer, 0, 2).is_err(),
            "position 0 has none"
        );
    }
}
