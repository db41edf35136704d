//! Reading a results file: the SampleResponse JSON that `samplab sample --json` prints and the
//! playground's `w` writes, one run or an array of them, each with the `provenance` it may
//! carry. Files come from anywhere, so every way one can be wrong is said with where and what
//! would be right.

use crate::response::SampleResponse;
use serde_json::Value;

/// What a results file holds, for people reading an error.
const EXPECTED: &str = "samplab's SampleResponse JSON, as `samplab sample --json` prints it (an \
                        array of them with several --model) and the playground's `w` writes it";

/// One run of a results file.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub response: SampleResponse,
    /// Where the run came from (samplab's version, the model file, the device…), shown as the
    /// file has it: its keys and values are not samplab's to interpret here.
    pub provenance: Option<Value>,
}

/// The runs in `text`, in file order; the error says what is wrong, where, and what was expected.
pub fn parse(text: &str) -> Result<Vec<Run>, String> {
    if text.trim().is_empty() {
        return Err(format!("the file is empty; expected {EXPECTED}"));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| {
        if e.is_eof() {
            format!(
                "the JSON ends early (line {}, column {}): the file is cut short; write it again",
                e.line(),
                e.column()
            )
        } else {
            format!("not JSON: {e}; expected {EXPECTED}")
        }
    })?;
    let items = match &value {
        Value::Array(items) if items.is_empty() => {
            return Err(format!("the array holds no runs; expected {EXPECTED}"));
        }
        Value::Array(items) => items.iter().collect(),
        Value::Object(_) => vec![&value],
        other => {
            return Err(format!(
                "the file holds {}; expected {EXPECTED}",
                kind(other)
            ));
        }
    };
    for (i, item) in items.iter().enumerate() {
        check_shape(item).map_err(|e| format!("{}{e}", run_label(i, items.len())))?;
    }
    // Read again from the text, so that a field of the wrong type is named by its line.
    let responses: Vec<SampleResponse> = match value {
        Value::Array(_) => serde_json::from_str(text),
        _ => serde_json::from_str(text).map(|one| vec![one]),
    }
    .map_err(|e| format!("{e}; expected {EXPECTED}"))?;
    for (i, response) in responses.iter().enumerate() {
        check_lengths(response).map_err(|e| format!("{}{e}", run_label(i, responses.len())))?;
    }
    Ok(responses
        .into_iter()
        .zip(items)
        .map(|(response, item)| Run {
            response,
            provenance: item.get("provenance").cloned(),
        })
        .collect())
}

/// Refuses what is plainly not a samplab response before serde's terser word on it.
fn check_shape(item: &Value) -> Result<(), String> {
    let Value::Object(map) = item else {
        return Err(format!("holds {}, not a SampleResponse object", kind(item)));
    };
    let twinkle = map
        .get("trajectories")
        .and_then(|t| t.get(0))
        .is_some_and(|t| t.get("messages").is_some() && t.get("token_ids").is_none());
    if twinkle {
        return Err(
            "is in twinkle's shape (`--shape twinkle`), which keeps no token ids; \
                    render reads samplab's own: write it with `samplab sample --json`"
                .to_owned(),
        );
    }
    if !map.contains_key("trajectories") {
        return Err(format!("has no `trajectories`; expected {EXPECTED}"));
    }
    Ok(())
}

/// Refuses a trajectory whose per-token lists do not have one entry per token: the page would
/// show tokens against another token's figures.
fn check_lengths(response: &SampleResponse) -> Result<(), String> {
    for t in &response.trajectories {
        let tokens = t.token_ids.len();
        let lists = [
            ("logprobs", Some(t.logprobs.len())),
            ("top_logprobs", t.top_logprobs.as_ref().map(Vec::len)),
            ("entropy", t.entropy.as_ref().map(Vec::len)),
            ("kept_entropy", t.kept_entropy.as_ref().map(Vec::len)),
            ("trace", t.trace.as_ref().map(Vec::len)),
        ]
        .into_iter()
        .map(|(name, len)| (name.to_owned(), len));
        let watched = t.watched.iter().flatten();
        let watched =
            watched.map(|(name, series)| (format!("watched {name:?}"), Some(series.len())));
        for (name, len) in lists.chain(watched) {
            if let Some(len) = len.filter(|&len| len != tokens) {
                return Err(format!(
                    "has trajectory {} with {tokens} tokens but {len} entries in `{name}`: \
                     every per-token list has one entry per token",
                    t.index
                ));
            }
        }
    }
    Ok(())
}

/// `run 2 of 3 ` in an array, `the file ` for a lone run: what the message is about.
fn run_label(index: usize, runs: usize) -> String {
    if runs > 1 {
        format!("run {} of {runs} ", index + 1)
    } else {
        "the file ".to_owned()
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::SamplingParams;
    use crate::response::{StopReason, Timings, Trajectory};
    use serde_json::json;

    fn response() -> SampleResponse {
        SampleResponse {
            model: "m".into(),
            prompt: None,
            params: SamplingParams::default(),
            prompt_token_ids: vec![1],
            prompt_logprobs: None,
            prompt_top_logprobs: None,
            watch: None,
            prompt_watched: None,
            trajectories: vec![Trajectory {
                token_ids: vec![5],
                text: "x".into(),
                logprobs: vec![-0.5],
                stop_reason: StopReason::Length,
                ..Trajectory::empty(0, 42, None)
            }],
            stats: None,
            timings: Timings::default(),
        }
    }

    #[test]
    fn one_run_or_an_array_of_them_with_their_provenance() {
        let one = serde_json::to_string_pretty(&response()).unwrap();
        assert_eq!(parse(&one).unwrap()[0].response, response());
        assert_eq!(parse(&one).unwrap()[0].provenance, None);

        let mut with = serde_json::to_value(response()).unwrap();
        with["provenance"] = json!({"samplab": "0.1.0", "model": {"sha256": "ab"}});
        let two = serde_json::to_string(&json!([response(), with])).unwrap();
        let runs = parse(&two).unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].provenance, None);
        assert_eq!(
            runs[1].provenance.as_ref().unwrap()["model"]["sha256"],
            "ab"
        );
        assert_eq!(runs[1].response, response());
    }

    #[test]
    fn every_wrong_file_says_what_is_wrong_and_what_was_expected() {
        let full = serde_json::to_string_pretty(&response()).unwrap();
        let cases = [
            (
                "",
                "the file is empty; expected samplab's SampleResponse JSON",
            ),
            (&full[..full.len() / 2], "the JSON ends early (line "),
            (
                "{\"model\": nope}",
                "not JSON: expected ident at line 1 column 12",
            ),
            ("42", "the file holds a number; expected samplab's"),
            ("[]", "the array holds no runs"),
            ("{\"model\": \"m\"}", "the file has no `trajectories`"),
            (
                &format!("[{full}, 3]"),
                "run 2 of 2 holds a number, not a SampleResponse object",
            ),
            (
                r#"{"trajectories": [{"messages": []}]}"#,
                "the file is in twinkle's shape",
            ),
            (
                &full.replace(
                    "\"token_ids\": [\n        5\n      ]",
                    "\"token_ids\": \"5\"",
                ),
                "invalid type: string \"5\", expected a sequence at line",
            ),
            (
                &full.replace(
                    "\"token_ids\": [\n        5\n      ]",
                    "\"token_ids\": [5, 6]",
                ),
                "the file has trajectory 0 with 2 tokens but 1 entries in `logprobs`: every \
                 per-token list has one entry per token",
            ),
        ];
        for (text, expected) in cases {
            let err = parse(text).unwrap_err();
            assert!(err.starts_with(expected), "{text:?}:\n{err}");
        }
    }
}
