//! One streamed chunk, as the servers write them, turned into tokens: the legacy completions
//! shape (`logprobs.tokens`, `token_logprobs`, `top_logprobs` as maps) and the chat shape
//! (`logprobs.content` entries with their `top_logprobs` lists), which llama.cpp's server uses
//! for completions too; vLLM's `token:123` texts and llama.cpp's `id` fields give token ids.

use crate::response::StopMatched;
use serde_json::Value;

/// A token as the server reported it.
#[derive(Debug, Clone, PartialEq)]
pub struct Piece {
    /// The model's token id, where the server says it.
    pub id: Option<u32>,
    pub text: String,
    pub logprob: f32,
    /// The best alternatives, best first, each with its id where known.
    pub top: Vec<(Option<u32>, String, f32)>,
}

/// How a sample ended, as the server said.
#[derive(Debug, Clone, PartialEq)]
pub enum Finish {
    Length,
    Stop(Option<StopMatched>),
    /// vLLM's `repetition`: `repetition_detection` ended it.
    Repetition,
    /// Any other reason (`abort`, `error`, `content_filter`): the sample failed.
    Other(String),
}

/// What one chunk carries.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chunk {
    pub pieces: Vec<Piece>,
    pub finish: Option<Finish>,
    /// Whether its text is reasoning that the server split from the answer (a chat delta's
    /// `reasoning_content`, vLLM's newer `reasoning`).
    pub reasoning: bool,
}

/// The delta fields a server writes a reasoning model's reasoning in, apart from `content`.
const REASONING_FIELDS: [&str; 2] = ["/delta/reasoning_content", "/delta/reasoning"];

/// Reads one chunk's JSON; an `error` object or text without logprobs is an error.
pub fn parse_chunk(json: &Value) -> Result<Chunk, String> {
    if let Some(error) = json.get("error") {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| error.to_string(), str::to_owned);
        return Err(format!(
            "the server reported an error mid-stream: {message}"
        ));
    }
    let Some(choice) = json.pointer("/choices/0") else {
        // Usage-only chunks and keep-alives carry no choice.
        return Ok(Chunk::default());
    };
    let reasoning = REASONING_FIELDS
        .iter()
        .find_map(|field| choice.pointer(field).and_then(Value::as_str))
        .filter(|text| !text.is_empty());
    let content = choice
        .get("text")
        .or_else(|| choice.pointer("/delta/content"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let pieces = match choice.get("logprobs") {
        Some(Value::Object(logprobs)) if logprobs.contains_key("content") => {
            chat_pieces(logprobs.get("content").unwrap_or(&Value::Null))?
        }
        Some(Value::Object(logprobs)) => legacy_pieces(logprobs)?,
        _ => Vec::new(),
    };
    let mut pieces = pieces;
    if let [piece] = pieces.as_mut_slice()
        && piece.id.is_some()
        && piece.text.starts_with("token:")
    {
        let text = if content.is_empty() {
            reasoning.unwrap_or_default()
        } else {
            content
        };
        piece.text = text.to_owned();
    }
    // Reasoning without logprobs is passed over, as before servers split it off: a server
    // that gives logprobs for the answer alone still serves.
    if pieces.is_empty() && !content.is_empty() {
        return Err(format!(
            "the server sent text ({content:?}) without logprobs: samplab needs them to colour \
             and inspect tokens; use a server that returns logprobs when asked"
        ));
    }
    let finish = match choice.get("finish_reason").and_then(Value::as_str) {
        None => None,
        Some("length") => Some(Finish::Length),
        Some("stop") => Some(Finish::Stop(match choice.get("stop_reason") {
            Some(Value::String(text)) => Some(StopMatched::Text(text.clone())),
            Some(Value::Number(id)) => id
                .as_u64()
                .and_then(|id| u32::try_from(id).ok())
                .map(StopMatched::Token),
            _ => None,
        })),
        Some("repetition") => Some(Finish::Repetition),
        Some(other) => Some(Finish::Other(other.to_owned())),
    };
    Ok(Chunk {
        pieces,
        finish,
        reasoning: reasoning.is_some(),
    })
}

fn malformed(what: &str) -> String {
    format!("the server's stream is malformed: {what}")
}

/// `tokens`, `token_logprobs` and `top_logprobs` (one `{text: logprob}` map per token).
fn legacy_pieces(logprobs: &serde_json::Map<String, Value>) -> Result<Vec<Piece>, String> {
    let list = |name: &str| logprobs.get(name).and_then(Value::as_array);
    let (Some(tokens), Some(values)) = (list("tokens"), list("token_logprobs")) else {
        return Ok(Vec::new());
    };
    if tokens.len() != values.len() {
        return Err(malformed("tokens and token_logprobs differ in length"));
    }
    let tops = list("top_logprobs");
    tokens
        .iter()
        .zip(values)
        .enumerate()
        .map(|(i, (token, value))| {
            let raw = token
                .as_str()
                .ok_or_else(|| malformed("a token is not text"))?;
            let (id, text) = token_id(raw);
            let logprob = number(value).ok_or_else(|| malformed("a logprob is not a number"))?;
            let mut top: Vec<(Option<u32>, String, f32)> = tops
                .and_then(|tops| tops.get(i))
                .and_then(Value::as_object)
                .map(|map| {
                    map.iter()
                        .filter_map(|(text, lp)| {
                            let (id, text) = token_id(text);
                            Some((id, text, number(lp)?))
                        })
                        .collect()
                })
                .unwrap_or_default();
            top.sort_by(|a, b| b.2.total_cmp(&a.2));
            Ok(Piece {
                id,
                text,
                logprob,
                top,
            })
        })
        .collect()
}

/// `content`: one `{token, logprob, top_logprobs: [{token, logprob}]}` per token, with `id`
/// from llama.cpp's server.
fn chat_pieces(content: &Value) -> Result<Vec<Piece>, String> {
    let Some(entries) = content.as_array() else {
        return Ok(Vec::new());
    };
    let entry = |e: &Value| -> Result<(Option<u32>, String, f32), String> {
        let raw = e
            .get("token")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("a logprobs entry has no token"))?;
        let (mut id, text) = token_id(raw);
        if let Some(own) = e.get("id").and_then(Value::as_u64) {
            id = u32::try_from(own).ok();
        }
        let logprob = e
            .get("logprob")
            .and_then(number)
            .ok_or_else(|| malformed("a logprobs entry has no logprob"))?;
        Ok((id, text, logprob))
    };
    entries
        .iter()
        .map(|e| {
            let (id, text, logprob) = entry(e)?;
            let top = e
                .get("top_logprobs")
                .and_then(Value::as_array)
                .map(|tops| tops.iter().map(entry).collect::<Result<Vec<_>, _>>())
                .transpose()?
                .unwrap_or_default();
            Ok(Piece {
                id,
                text,
                logprob,
                top,
            })
        })
        .collect()
}

/// A logprob; `-inf` arrives as a very large negative number or null from some servers.
fn number(value: &Value) -> Option<f32> {
    match value {
        Value::Number(n) => n.as_f64().map(|x| x as f32),
        Value::Null => Some(f32::NEG_INFINITY),
        _ => None,
    }
}

/// vLLM's `token:123` (a server started with `--return-tokens-as-token-ids`) is token 123;
/// its text stays `token:123`, as nothing here knows better (the chunk's text stands in for a
/// chunk's one token).
fn token_id(text: &str) -> (Option<u32>, String) {
    let id = text.strip_prefix("token:").and_then(|id| id.parse().ok());
    (id, text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// vLLM ends a sample its `repetition_detection` caught with finish reason `repetition`
    /// (stop reason `repetition_detected`): no failure.
    #[test]
    fn vllms_repetition_finish_is_a_stop_of_its_own() {
        let chunk = json!({"choices": [{"index": 0, "text": "", "logprobs": null,
            "finish_reason": "repetition", "stop_reason": "repetition_detected"}]});
        assert_eq!(
            parse_chunk(&chunk).unwrap().finish,
            Some(Finish::Repetition)
        );
    }
}
