//! A loaded model's structured outputs: its vocabulary as the constraint library needs it,
//! built at the first constrained run, and the last constraint compiled over it (a rerun with
//! the same constraint does not compile it again).

use crate::params::{SamplingParams, StructuredOutputs};
use crate::sampling::{Constraint, ConstraintError, Vocabulary};
use tokenizers::Tokenizer;

#[derive(Debug, Default)]
pub struct Structured {
    vocabulary: Option<Vocabulary>,
    /// The last constraint compiled: its field, its YAML, and the result.
    last: Option<(String, Constraint)>,
}

impl Structured {
    /// The constraint of `params` compiled over the model's vocabulary; `None` without one.
    pub fn compile(
        &mut self,
        params: &SamplingParams,
        tokenizer: &Tokenizer,
        eos_ids: &[u32],
        vocab_size: usize,
    ) -> Result<Option<&Constraint>, ConstraintError> {
        let Some((field, spec)) = params.constraint() else {
            return Ok(None);
        };
        let key = key(field, &spec);
        if self.last.as_ref().is_none_or(|(last, _)| *last != key) {
            let vocabulary = match &mut self.vocabulary {
                Some(vocabulary) => vocabulary,
                empty => empty.insert(Vocabulary::new(tokenizer, eos_ids, vocab_size)?),
            };
            let constraint = Constraint::compile(&spec, field, vocabulary)?;
            self.last = Some((key, constraint));
        }
        Ok(self.last.as_ref().map(|(_, constraint)| constraint))
    }

    /// The constraint of `params` as the last run compiled it, for tracing that run's steps;
    /// `Ok(None)` without one.
    pub fn compiled(&self, params: &SamplingParams) -> anyhow::Result<Option<&Constraint>> {
        let Some((field, spec)) = params.constraint() else {
            return Ok(None);
        };
        match &self.last {
            Some((last, constraint)) if *last == key(field, &spec) => Ok(Some(constraint)),
            _ => anyhow::bail!(
                "this run's constraint is no longer compiled (a later run used another): run \
                 again to inspect it"
            ),
        }
    }
}

/// What tells one constraint from another.
fn key(field: &str, spec: &StructuredOutputs) -> String {
    format!(
        "{field}: {}",
        serde_yaml_ng::to_string(spec).unwrap_or_default()
    )
}
