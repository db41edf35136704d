//! Structured outputs as a sampling stage: a JSON schema, regex, choice or grammar compiled by
//! llguidance into a parser per sample, which says before every step which tokens may come
//! next (its mask) and follows the tokens the sample takes.
//!
//! Where the mask applies is each engine's business (the chains place [`Mask`] as a stage);
//! this module compiles constraints, keeps each sample's parser, and reports what a mask cut.

mod gbnf;
mod vocabulary;

pub use vocabulary::Vocabulary;

use crate::params::{Field, StructuredOutputs, is_gbnf};
use llguidance::api::{StopReason, TopLevelGrammar};
use llguidance::toktrie::SimpleVob;
use llguidance::{Matcher, toktrie::TokenId};
use std::sync::Arc;

/// Why a constraint cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConstraintError {
    #[error("structured outputs cannot use this model's vocabulary: {0}")]
    Vocabulary(String),
    #[error("`{field}` is not a valid {kind}: {message}")]
    Invalid {
        field: String,
        kind: &'static str,
        message: String,
    },
    #[error(
        "`{field}`: no token of the model's vocabulary can start text the {kind} accepts, or no \
         text satisfies it at all (check it against the text you expect)"
    )]
    NoStart { field: String, kind: &'static str },
    #[error("the constraint stopped working mid-sample: {0}")]
    Failed(String),
}

/// A compiled constraint, ready to start a parser per sample.
#[derive(Clone)]
pub struct Constraint {
    fresh: Matcher,
    eos_ids: Arc<[u32]>,
}

impl std::fmt::Debug for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Constraint").finish_non_exhaustive()
    }
}

impl Constraint {
    /// Compiles `spec`, held by `field`, over the model's vocabulary: refused when it does not
    /// parse, or when no token can start it. Messages name `structured_outputs.regex` and the
    /// like, or llama.cpp's own `grammar` and `json_schema`.
    pub fn compile(
        spec: &StructuredOutputs,
        field: Field,
        vocabulary: &Vocabulary,
    ) -> Result<Self, ConstraintError> {
        let kind = kind_in_words(spec);
        let field = match field {
            Field::StructuredOutputs => format!("{}.{}", field.name(), spec.kind()),
            _ => field.name().to_owned(),
        };
        let invalid = |message: String| ConstraintError::Invalid {
            field: field.clone(),
            kind,
            message,
        };
        let grammar = grammar_of(spec).map_err(&invalid)?;
        let parser = vocabulary
            .factory
            .create_parser(grammar)
            .map_err(|e| invalid(e.to_string()))?;
        let mut fresh = Matcher::new(Ok(parser));
        if let Err(e) = fresh.compute_mask() {
            return Err(if no_token_fits(&e) {
                ConstraintError::NoStart { field, kind }
            } else {
                invalid(first_line(&e))
            });
        }
        Ok(Self {
            fresh,
            eos_ids: vocabulary.eos_ids.clone(),
        })
    }

    /// A parser at the start of the text, for one sample.
    pub fn start(&self) -> Parser {
        Parser {
            matcher: self.fresh.deep_clone(),
            eos_ids: self.eos_ids.clone(),
            mask: None,
            failed: None,
        }
    }
}

/// Whether the constraint of `params`, if any, parses: compiled over a vocabulary of bytes, for
/// an editor that checks what was typed before any model sees it.
pub fn check(params: &crate::params::SamplingParams) -> Result<(), ConstraintError> {
    static BYTES: std::sync::OnceLock<Vocabulary> = std::sync::OnceLock::new();
    match params.constraint() {
        Some((field, spec)) => {
            Constraint::compile(&spec, field, BYTES.get_or_init(Vocabulary::bytes)).map(|_| ())
        }
        None => Ok(()),
    }
}

fn kind_in_words(spec: &StructuredOutputs) -> &'static str {
    match spec {
        StructuredOutputs::Json(_) => "JSON schema",
        StructuredOutputs::Regex(_) => "regex",
        StructuredOutputs::Choice(_) => "choice",
        StructuredOutputs::Grammar(g) if is_gbnf(g) => "GBNF grammar",
        StructuredOutputs::Grammar(_) => "Lark grammar",
        StructuredOutputs::JsonObject => "JSON object constraint",
    }
}

/// What llguidance compiles for each kind.
fn grammar_of(spec: &StructuredOutputs) -> Result<TopLevelGrammar, String> {
    Ok(match spec {
        StructuredOutputs::Json(schema) => TopLevelGrammar::from_json_schema(schema.0.clone()),
        StructuredOutputs::Regex(regex) => TopLevelGrammar::from_regex(regex),
        StructuredOutputs::Choice(choice) => {
            let alternatives: Vec<String> = choice.iter().map(|c| escape_regex(c)).collect();
            TopLevelGrammar::from_regex(&alternatives.join("|"))
        }
        StructuredOutputs::Grammar(grammar) if is_gbnf(grammar) => {
            TopLevelGrammar::from_lark(gbnf::to_lark(grammar).map_err(|e| e.to_string())?)
        }
        StructuredOutputs::Grammar(lark) => TopLevelGrammar::from_lark(lark.clone()),
        StructuredOutputs::JsonObject => {
            TopLevelGrammar::from_json_schema(serde_json::json!({"type": "object"}))
        }
    })
}

/// llguidance's message without the parser state it appends for debugging.
fn first_line(error: &anyhow::Error) -> String {
    let message = error.to_string();
    message.lines().next().unwrap_or_default().to_owned()
}

/// Whether llguidance stopped because no token at all fits (the matcher reports it as an
/// error named by the stop reason, and forgets the reason).
fn no_token_fits(error: &anyhow::Error) -> bool {
    first_line(error) == StopReason::NoExtensionBias.to_string()
}

/// `text` matched literally by a regex.
fn escape_regex(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// One sample's parser: where it is in the constraint, and the mask of its next step once
/// computed (ahead of the step where the engine can, while the forward pass runs).
#[derive(Clone)]
pub struct Parser {
    matcher: Matcher,
    eos_ids: Arc<[u32]>,
    mask: Option<Mask>,
    /// Why the parser stopped working: a token it could not take.
    failed: Option<String>,
}

impl std::fmt::Debug for Parser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parser")
            .field("mask", &self.mask)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl Parser {
    /// Computes the next step's mask, if not yet done.
    pub fn prepare(&mut self) -> Result<&Mask, ConstraintError> {
        if let Some(message) = &self.failed {
            return Err(ConstraintError::Failed(message.clone()));
        }
        if self.mask.is_none() {
            let mut allowed = self.matcher.compute_mask_or_eos().map_err(|e| {
                ConstraintError::Failed(if no_token_fits(&e) {
                    "no token of the model's vocabulary can continue the text here".into()
                } else {
                    first_line(&e)
                })
            })?;
            let eos = self.eos_ids[0];
            if allowed.is_allowed(eos) {
                for &id in &self.eos_ids[1..] {
                    if (id as usize) < allowed.len() {
                        allowed.allow_token(id);
                    }
                }
            }
            let count = allowed.num_set() as u32;
            self.mask = Some(Mask { allowed, count });
        }
        Ok(self.mask.as_ref().expect("computed above"))
    }

    /// The current step's mask, once prepared.
    pub fn mask(&self) -> Option<&Mask> {
        self.mask.as_ref()
    }

    /// Follows the token the sample took; a token the constraint does not allow leaves the
    /// parser failed (the next `prepare` says why).
    pub fn accept(&mut self, id: u32) {
        self.mask = None;
        if self.failed.is_some() {
            return;
        }
        let token: TokenId = if self.eos_ids.contains(&id) {
            self.eos_ids[0]
        } else {
            id
        };
        if let Err(e) = self.matcher.consume_token(token) {
            self.failed = Some(first_line(&e));
        }
    }

    /// How many of `path`'s tokens, from the parser's place, the constraint allows in a row.
    pub fn allowed_prefix(&self, path: &[u32]) -> usize {
        let mut probe = self.clone();
        path.iter()
            .take_while(|&&id| {
                let allowed = probe.prepare().is_ok_and(|mask| mask.allows(id));
                if allowed {
                    probe.accept(id);
                }
                allowed
            })
            .count()
    }

    /// Whether the text is complete and nothing more may follow: the sample ends.
    pub fn is_finished(&self) -> bool {
        self.failed.is_none() && self.matcher.is_stopped()
    }
}

/// The tokens a constraint allows at one step.
#[derive(Debug, Clone)]
pub struct Mask {
    allowed: SimpleVob,
    /// How many tokens it allows.
    pub count: u32,
}

impl Mask {
    pub fn allows(&self, id: u32) -> bool {
        (id as usize) < self.allowed.len() && self.allowed.is_allowed(id)
    }

    /// Sets every logit the mask refuses to -inf (ids past the mask are refused).
    pub fn apply(&self, logits: &mut [f32]) {
        let words = self.allowed.as_slice();
        for (chunk, &word) in logits.chunks_mut(32).zip(words) {
            if word == u32::MAX {
                continue;
            }
            for (bit, logit) in chunk.iter_mut().enumerate() {
                if word & (1 << bit) == 0 {
                    *logit = f32::NEG_INFINITY;
                }
            }
        }
        let covered = (words.len() * 32).min(self.allowed.len());
        logits
            .iter_mut()
            .skip(covered)
            .for_each(|l| *l = f32::NEG_INFINITY);
    }

    /// The share of the distribution `exp(logits - log_norm)` the mask refuses, summed over
    /// whichever side of the mask is smaller.
    pub fn refused_mass(&self, logits: &[f32], log_norm: f32) -> f32 {
        let p = |id: usize| match logits.get(id) {
            Some(&l) if !l.is_nan() => f64::from(crate::fast_exp::exp(l - log_norm)),
            _ => 0.0,
        };
        let mut sum = 0.0;
        let refused = if (self.count as usize) * 2 < logits.len() {
            self.allowed.iter_set_entries(|id| sum += p(id));
            1.0 - sum
        } else {
            self.allowed.iter_unset_entries(|id| sum += p(id));
            sum + (self.allowed.len()..logits.len()).map(p).sum::<f64>()
        };
        refused.clamp(0.0, 1.0) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_are_matched_literally() {
        assert_eq!(escape_regex("a.b*(c)"), r"a\.b\*\(c\)");
        assert_eq!(escape_regex("yes"), "yes");
    }
}
