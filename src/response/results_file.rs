//! Reading a results file back (what `samplab sample --json` prints and the playground's `w`
//! writes): one SampleResponse or an array of them, read strictly, so that a file cut short,
//! of another shape, of one that knows fields this one does not or whose per-token lists
//! disagree is refused with what is wrong, never half read. `samplab replay` also needs the
//! provenance that a samplab before it did not write; `samplab render` shows what there is.

use super::SampleResponse;
use serde_json::Value;
use std::path::Path;

/// Why a results file cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// The OS's reason is said once, in the message: as a `source` it would be said again.
    #[error(
        "cannot read the results file {file}: {reason}; give a file that `samplab sample \
         --json` printed or the playground's `w` wrote"
    )]
    Read {
        file: String,
        reason: std::io::Error,
    },
    #[error(
        "the results file {file} ends early (line {line}, column {column}): it was cut off, by a \
         copy or a write that did not finish; write it again"
    )]
    Truncated {
        file: String,
        line: usize,
        column: usize,
    },
    #[error(
        "the results file {file} is not JSON ({message}): give a file that `samplab sample \
         --json` printed or the playground's `w` wrote"
    )]
    NotJson { file: String, message: String },
    #[error(
        "{what} of {file} is not a SampleResponse (an object with `model`, `params` and \
         `trajectories`): give a file that `samplab sample --json` printed or the playground's \
         `w` wrote"
    )]
    NotAResponse { what: String, file: String },
    #[error(
        "{what} of {file} is in twinkle's shape, which keeps no seeds, token ids or provenance: \
         write it in samplab's (`samplab sample --json` without `--shape twinkle`, or `w` in the \
         playground with the samplab shape)"
    )]
    Twinkle { what: String, file: String },
    #[error(
        "{what} of {file} has no `provenance`: it was written by a samplab older than \
         provenance (or by another tool), so it does not say which model file (by sha256), \
         device and seeds made it; sample it again with this samplab ({ours})"
    )]
    NoProvenance {
        what: String,
        file: String,
        ours: &'static str,
    },
    #[error(
        "this samplab ({ours}) cannot read {file}, written by samplab {theirs}: {message}; \
         use the samplab that wrote it"
    )]
    Unreadable {
        file: String,
        ours: &'static str,
        theirs: String,
        message: String,
    },
    #[error(
        "{what} of {file} has trajectory {trajectory} with {tokens} tokens but {entries} \
         entries in `{list}`: every per-token list has one entry per token; write the file again"
    )]
    Uneven {
        what: String,
        file: String,
        trajectory: u32,
        tokens: usize,
        entries: usize,
        list: String,
    },
}

/// The runs of the results file at `path`, in order.
pub fn read(path: &Path) -> Result<Vec<SampleResponse>, ResultsError> {
    let file = path.display().to_string();
    let text = crate::regular_file::read_to_string(path).map_err(|reason| ResultsError::Read {
        file: file.clone(),
        reason,
    })?;
    parse(&text, &file)
}

/// The runs of a results file's `text`; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Vec<SampleResponse>, ResultsError> {
    let value: Value = serde_json::from_str(text).map_err(|e| match e.classify() {
        serde_json::error::Category::Eof => ResultsError::Truncated {
            file: file.to_owned(),
            line: e.line(),
            column: e.column(),
        },
        _ => ResultsError::NotJson {
            file: file.to_owned(),
            message: e.to_string(),
        },
    })?;
    let runs = match &value {
        Value::Array(runs) => runs.iter().collect(),
        one => vec![one],
    };
    if runs.is_empty() {
        return Err(ResultsError::NotAResponse {
            what: "the empty list".to_owned(),
            file: file.to_owned(),
        });
    }
    for (i, run) in runs.iter().enumerate() {
        check_shape(run).map_err(|shape| shape.error(run_name(i, runs.len()), file))?;
    }
    // Read again from the text, so that an error names its line and column.
    let read = match value {
        Value::Array(_) => serde_json::from_str::<Vec<SampleResponse>>(text),
        _ => serde_json::from_str::<SampleResponse>(text).map(|run| vec![run]),
    };
    let read = read.map_err(|e| ResultsError::Unreadable {
        file: file.to_owned(),
        ours: env!("CARGO_PKG_VERSION"),
        theirs: runs
            .iter()
            .find_map(|run| run["provenance"]["samplab"].as_str())
            .unwrap_or("of another version")
            .to_owned(),
        message: e.to_string(),
    })?;
    for (i, run) in read.iter().enumerate() {
        check_lengths(run).map_err(|(trajectory, tokens, entries, list)| ResultsError::Uneven {
            what: run_name(i, read.len()),
            file: file.to_owned(),
            trajectory,
            tokens,
            entries,
            list,
        })?;
    }
    Ok(read)
}

/// Refuses runs without `provenance`, which a samplab before it did not write: what ran them
/// is unknown, so they cannot be made again.
pub fn require_provenance(runs: &[SampleResponse], file: &str) -> Result<(), ResultsError> {
    match runs.iter().position(|run| run.provenance.is_none()) {
        Some(i) => Err(ResultsError::NoProvenance {
            what: run_name(i, runs.len()),
            file: file.to_owned(),
            ours: env!("CARGO_PKG_VERSION"),
        }),
        None => Ok(()),
    }
}

/// The first per-token list of a trajectory that has not one entry per token: the
/// trajectory's index, its tokens, the list's entries and the list's name.
fn check_lengths(run: &SampleResponse) -> Result<(), (u32, usize, usize, String)> {
    for t in &run.trajectories {
        let tokens = t.token_ids.len();
        let lists = [
            ("logprobs", Some(t.logprobs.len())),
            ("top_logprobs", t.top_logprobs.as_ref().map(Vec::len)),
            ("alternatives", t.alternatives.as_ref().map(Vec::len)),
            ("entropy", t.entropy.as_ref().map(Vec::len)),
            ("kept_entropy", t.kept_entropy.as_ref().map(Vec::len)),
            ("trace", t.trace.as_ref().map(Vec::len)),
        ]
        .into_iter()
        .map(|(name, len)| (name.to_owned(), len));
        let watched = t.watched.iter().flatten();
        let watched =
            watched.map(|(name, series)| (format!("watched {name:?}"), Some(series.len())));
        for (list, entries) in lists.chain(watched) {
            if let Some(entries) = entries.filter(|&n| n != tokens) {
                return Err((t.index, tokens, entries, list));
            }
        }
    }
    Ok(())
}

/// Run `i` of a file of `runs` runs, as messages name it: `the run`, `run 2 (of 3)`.
pub fn run_name(i: usize, runs: usize) -> String {
    match runs {
        1 => "the run".to_owned(),
        _ => format!("run {} (of {runs})", i + 1),
    }
}

/// What a run's JSON is, when it is not samplab's shape.
enum Shape {
    NotAResponse,
    Twinkle,
}

impl Shape {
    fn error(self, what: String, file: &str) -> ResultsError {
        let file = file.to_owned();
        match self {
            Shape::NotAResponse => ResultsError::NotAResponse { what, file },
            Shape::Twinkle => ResultsError::Twinkle { what, file },
        }
    }
}

fn check_shape(run: &Value) -> Result<(), Shape> {
    let Some(fields) = run.as_object() else {
        return Err(Shape::NotAResponse);
    };
    let as_messages = run["trajectories"][0].get("messages").is_some();
    match fields.contains_key("model") {
        false if as_messages => Err(Shape::Twinkle),
        false => Err(Shape::NotAResponse),
        true => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_is_named() {
        let refusal = |text: &str| parse(text, "f.json").unwrap_err().to_string();
        assert!(refusal("{\"model\": \"m\", ").contains("f.json ends early (line 1"));
        assert!(refusal("model: m").contains("f.json is not JSON"));
        assert!(refusal("3").contains("the run of f.json is not a SampleResponse"));
        let twinkle = r#"{"trajectories": [{"messages": []}], "logprobs": null}"#;
        assert!(refusal(twinkle).contains("twinkle's shape"));
        let old = r#"{"model": "m", "params": {}, "prompt_token_ids": [], "trajectories": [],
            "timings": {"prefill_ms": 0, "decode_ms": 0, "decode_tok_per_s": 0}}"#;
        let runs = parse(old, "f.json").expect("a run without provenance reads");
        let said = require_provenance(&runs, "f.json").unwrap_err().to_string();
        assert!(said.contains("no `provenance`"), "{said}");
        let uneven = r#"{"model": "m", "params": {}, "prompt_token_ids": [], "timings":
            {"prefill_ms": 0, "decode_ms": 0, "decode_tok_per_s": 0}, "trajectories": [{
            "index": 0, "seed": 1, "token_ids": [5, 6], "text": "", "stop_reason": "length",
            "stop_matched": null, "logprobs": [-0.5]}]}"#;
        assert!(
            refusal(uneven).contains(
                "the run of f.json has trajectory 0 with 2 tokens but 1 entries in `logprobs`"
            ),
            "{}",
            refusal(uneven)
        );
        let unknown = r#"{"model": "m", "provenance": {"samplab": "7.0.0"}, "colour": 1}"#;
        let said = refusal(unknown);
        assert!(said.contains("written by samplab 7.0.0"), "{said}");
    }
}
