//! A loaded model's structured outputs: its vocabulary as the constraint library needs it,
//! built at the first constrained run, and the last constraint compiled over it (a rerun with
//! the same constraint does not compile it again).

use crate::params::{Field, SamplingParams, StructuredOutputs};
use crate::sampling::{Constraint, ConstraintError, Vocabulary};
use tokenizers::Tokenizer;

#[derive(Debug, Default)]
pub struct Structured {
    vocabulary: Option<Vocabulary>,
    /// The last constraint compiled: its field and spec, and the result.
    last: Option<((Field, StructuredOutputs), Constraint)>,
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
        let Some(wanted) = params.constraint() else {
            return Ok(None);
        };
        if self.last.as_ref().is_none_or(|(last, _)| *last != wanted) {
            let vocabulary = match &mut self.vocabulary {
                Some(vocabulary) => vocabulary,
                empty => empty.insert(Vocabulary::new(tokenizer, eos_ids, vocab_size)?),
            };
            let constraint = Constraint::compile(&wanted.1, wanted.0, vocabulary)?;
            self.last = Some((wanted, constraint));
        }
        Ok(self.last.as_ref().map(|(_, constraint)| constraint))
    }

    /// The constraint of `params` as the last run compiled it, for tracing that run's steps;
    /// `Ok(None)` without one.
    pub fn compiled(&self, params: &SamplingParams) -> anyhow::Result<Option<&Constraint>> {
        let Some(wanted) = params.constraint() else {
            return Ok(None);
        };
        match &self.last {
            Some((last, constraint)) if *last == wanted => Ok(Some(constraint)),
            _ => anyhow::bail!(
                "this run's constraint is no longer compiled (a later run used another): run \
                 again to inspect it"
            ),
        }
    }
}
