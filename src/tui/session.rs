//! A playground session as one YAML file: the models, the prompt and conversation, both
//! parameter sets and the branch tree, so that `S` and `O` (or `samplab --session FILE`) take
//! the user back to where they were. Branches keep their forced tokens and where they part, not
//! their logits: opening a session runs them again, which replay makes cheap.
//!
//! Read strictly, and checked whole before anything is restored: a file of a newer version, cut
//! short, with keys this samplab does not know, hostile (huge, deeply nested, tagged), or whose
//! branches or models do not fit is refused with what is wrong.

use crate::engine::BackendKind;
use crate::engine::remote::spec::RemoteSpec;
use crate::model::source::check_named;
use crate::model::text::chat_template::Message;
use crate::params::SamplingParams;
use crate::tui::branch_tree::Parent;
use crate::tui::comparison::SetId;
use crate::tui::focus::Focus;
use crate::yaml_guard;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_yaml_ng::Value;
use std::path::{Path, PathBuf};

/// The version this samplab writes and the newest it reads.
pub const VERSION: u64 = 1;

/// Everything a session file holds, in the order it is written. Every key is written and
/// required, so that a file cut short misses one and is refused rather than half read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Session {
    pub version: u64,
    /// As given to `--model` or the model picker, in column order.
    pub models: Vec<SavedModel>,
    pub prompt: String,
    /// Special-token text in the prompt is kept as text (`m`'s last stops).
    pub literal_specials: bool,
    /// The turns before the prompt, the accepted replies of the chat loop among them.
    pub conversation: Vec<Message>,
    /// Set A, then set B when two are compared.
    pub sets: Vec<SavedSet>,
    /// The set the params panel edits.
    pub editing: SetId,
    pub branches: Vec<SavedBranch>,
    pub cursor: Option<SavedCursor>,
    /// Last, and one line: a file cut anywhere misses it or ends inside a value.
    pub focus: Focus,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedModel {
    pub spec: String,
    /// The model gets the prompt through its chat template.
    pub chat: bool,
    /// The backend that ran it, which it loads on again; absent in sessions saved before there
    /// were two (`auto` then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendKind>,
}

/// A parameter set: the preset it started from (what reset returns to and `*` compares with)
/// and its values now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedSet {
    pub preset: String,
    /// The user's preset file it was loaded from, if any.
    pub preset_file: Option<PathBuf>,
    pub preset_params: SavedParams,
    pub params: SavedParams,
}

/// Parameters written as a preset writes them (the keys that differ from the defaults) and
/// read as a preset is read, every key checked.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedParams(pub SamplingParams);

impl Serialize for SavedParams {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.non_default_mapping().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SavedParams {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        SamplingParams::from_value(value)
            .map(SavedParams)
            .map_err(serde::de::Error::custom)
    }
}

/// One branch of a side's tree (the side of model `model` with set `set`), listed in the
/// order the side's branches were made; `branch N` names the side's N-th (from 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedBranch {
    pub model: usize,
    pub set: SetId,
    pub parent: SavedParent,
    /// The step where it parts from its parent.
    pub at: usize,
    /// Its tokens from the first generated one: the parent's up to `at`, then the forced ones.
    pub path: Vec<u32>,
    /// Step mode: one token is proposed after the path.
    pub stepping: bool,
}

/// A branch's parent as written: `sample 2` or `branch 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SavedParent(pub Parent);

impl From<SavedParent> for String {
    fn from(parent: SavedParent) -> String {
        match parent.0 {
            Parent::Sample(sample) => format!("sample {sample}"),
            Parent::Branch(j) => format!("branch {j}"),
        }
    }
}

impl TryFrom<String> for SavedParent {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        let parent = match text.split_once(' ') {
            Some(("sample", n)) => n.parse().ok().map(Parent::Sample),
            Some(("branch", n)) => n.parse().ok().map(Parent::Branch),
            _ => None,
        };
        parent
            .map(SavedParent)
            .ok_or_else(|| format!("`{text}` is no parent: write `sample N` or `branch N`"))
    }
}

/// Where the token cursor was: a sample (or branch, by its index in the run) of a side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedCursor {
    pub model: usize,
    pub set: SetId,
    pub sample: u32,
    pub token: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("cannot read the session file {file}: {error}")]
    Read { file: String, error: std::io::Error },
    #[error("the session file {file} is not one samplab can read: {error}")]
    Yaml {
        file: String,
        error: yaml_guard::YamlError,
    },
    #[error(
        "{file} has no `version`: it is not a samplab session file (save one with `S` in the \
         playground)"
    )]
    NoVersion { file: String },
    #[error(
        "{file} is a version {found} session, but this samplab ({ours}) reads version {VERSION} \
         only: open it with the samplab that saved it"
    )]
    Version {
        file: String,
        found: String,
        ours: &'static str,
    },
    #[error("the session file {file} is invalid: {message}{hint}")]
    Invalid {
        file: String,
        message: String,
        hint: &'static str,
    },
    #[error("the session file {file} names model `{spec}`, which cannot be loaded: {why}")]
    Model {
        file: String,
        spec: String,
        why: String,
    },
}

impl Session {
    /// The file's text: a comment that says what it is, then the YAML.
    pub fn to_yaml(&self) -> String {
        let yaml = serde_yaml_ng::to_string(self).expect("a session always serialises");
        format!("# samplab session: `samplab --session FILE`, or O in the playground\n{yaml}")
    }

    /// The side `(model, set)` exists in this session.
    fn has_side(&self, model: usize, set: SetId) -> bool {
        model < self.models.len() && (set as usize) < self.sets.len()
    }

    /// The parameters of set `set`, once the session is known to have it.
    pub fn set(&self, set: SetId) -> &SavedSet {
        &self.sets[set as usize]
    }

    /// What does not fit together: sides, parents and departure points that are not there.
    fn check(&self) -> Result<(), String> {
        if self.models.is_empty() {
            return Err("`models` is empty: a session has one model at least".to_owned());
        }
        if !(1..=2).contains(&self.sets.len()) {
            return Err(format!(
                "`sets` has {} entries: one parameter set, or two to compare (A/B)",
                self.sets.len()
            ));
        }
        if !self.has_side(0, self.editing) {
            return Err("`editing` is B, but there is one parameter set".to_owned());
        }
        for (i, branch) in self.branches.iter().enumerate() {
            let name = format!("branch {i} of `branches`");
            if !self.has_side(branch.model, branch.set) {
                return Err(format!(
                    "{name} is on model {} with set {}, which the session does not have",
                    branch.model,
                    branch.set.letter()
                ));
            }
            // The side's branches listed before this one: those a `branch N` parent may name.
            let before = self.branches[..i]
                .iter()
                .filter(|b| (b.model, b.set) == (branch.model, branch.set))
                .count();
            let num_samples = self.set(branch.set).params.0.num_samples;
            match branch.parent.0 {
                Parent::Sample(sample) if sample >= num_samples => {
                    return Err(format!(
                        "{name} follows sample {sample}, but its set runs {num_samples} samples \
                         (0..{num_samples})"
                    ));
                }
                Parent::Branch(j) if j >= before => {
                    return Err(format!(
                        "{name} follows branch {j} of its side, which has {before} branches \
                         before it: a parent comes before its branches"
                    ));
                }
                _ => {}
            }
            if branch.at > branch.path.len() {
                return Err(format!(
                    "{name} parts at token {}, past its {} tokens: `path` holds the sample's \
                     tokens up to where the branch parts",
                    branch.at,
                    branch.path.len()
                ));
            }
        }
        if let Some(cursor) = &self.cursor
            && !self.has_side(cursor.model, cursor.set)
        {
            return Err(format!(
                "`cursor` is on model {} with set {}, which the session does not have",
                cursor.model,
                cursor.set.letter()
            ));
        }
        Ok(())
    }
}

/// Reads and checks the session file at `path`, its models included.
pub fn read(path: &Path) -> Result<Session, SessionError> {
    let file = path.display().to_string();
    let text = crate::regular_file::read_to_string(path).map_err(|error| SessionError::Read {
        file: file.clone(),
        error,
    })?;
    let session = parse(&text, &file)?;
    for model in &session.models {
        let named = match RemoteSpec::parse(&model.spec) {
            Some(remote) => remote.map(drop),
            None => check_named(&model.spec).map_err(|e| e.to_string()),
        };
        named.map_err(|why| SessionError::Model {
            file: file.clone(),
            spec: model.spec.clone(),
            why,
        })?;
    }
    Ok(session)
}

/// A session file's `text`, checked except for its models; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Session, SessionError> {
    let value = yaml_guard::parse(text).map_err(|error| SessionError::Yaml {
        file: file.to_owned(),
        error,
    })?;
    // The version first: a newer file's other keys may be ones this samplab does not know.
    match value.get("version") {
        None => {
            return Err(SessionError::NoVersion {
                file: file.to_owned(),
            });
        }
        Some(Value::Number(n)) if n.as_u64() == Some(VERSION) => {}
        Some(found) => {
            let found = serde_yaml_ng::to_string(found).unwrap_or_default();
            return Err(SessionError::Version {
                file: file.to_owned(),
                found: found.trim().to_owned(),
                ours: env!("CARGO_PKG_VERSION"),
            });
        }
    }
    let invalid = |message: String| {
        // A missing key is what a file cut short looks like.
        let hint = if message.contains("missing field") {
            "; the file may have been cut short: save the session again"
        } else {
            ""
        };
        SessionError::Invalid {
            file: file.to_owned(),
            message,
            hint,
        }
    };
    // Read from the text, so that an error names its line and column.
    let session: Session = serde_yaml_ng::from_str(text).map_err(|e| invalid(e.to_string()))?;
    session.check().map_err(invalid)?;
    Ok(session)
}
