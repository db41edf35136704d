//! What the table says about each parameter: how it is checked, which engines have it, and how
//! the playground moves it. Validation, YAML, `--set`, the sliders and help all read this.

use super::engine::{Engine, Engines};
use serde_yaml_ng::Value;
use std::borrow::Cow;

/// One parameter's row.
#[derive(Debug, Clone, Copy)]
pub struct FieldSpec {
    /// The short label of the params panel.
    pub label: &'static str,
    /// One line for the panel and `samplab presets list`.
    pub help: &'static str,
    pub engines: Engines,
    /// The engines whose exports write the field, where they are not `engines` (a report
    /// samplab gives under every profile that only some engines can ask for).
    pub exported: Option<Engines>,
    pub knob: Knob,
    /// The numbers `validate` accepts; `None` for values checked by type or by hand.
    pub bounds: Option<Bounds>,
    /// What a refused value is told, where [`FieldSpec::valid`]'s words from the bounds and
    /// the off value would not say enough; empty otherwise.
    pub valid: &'static str,
    /// The value (as YAML) that turns the parameter off; `None` where nothing does.
    pub off: Option<&'static str>,
    /// Its names in each engine and on each kind of server.
    pub names: Names,
    /// Where the engines spell off differently from each other.
    pub off_below_one: Option<OffBelowOne>,
}

impl FieldSpec {
    /// The engines whose exports write the field.
    pub fn exported_by(&self) -> Engines {
        self.exported.unwrap_or(self.engines)
    }

    /// `value` as `engine` (or its servers) spells it: off in the engine's own way.
    pub fn value_for(&self, engine: Engine, value: Value) -> Value {
        match self.off_below_one {
            Some(off) if value.as_i64().is_some_and(|n| n < 1) => Value::from(match engine {
                Engine::Vllm => off.vllm,
                Engine::Transformers | Engine::LlamaCpp => off.others,
            }),
            _ => value,
        }
    }

    /// What a refused value is told: the row's own words, or the bounds and the off value in
    /// words (`must be in (0, 1]; 1 is off`).
    pub fn valid(&self) -> Cow<'static, str> {
        if !self.valid.is_empty() {
            return Cow::Borrowed(self.valid);
        }
        let Some(b) = self.bounds else {
            return Cow::Borrowed("");
        };
        let whole = matches!(
            self.knob,
            Knob::Count { .. } | Knob::Doubling { .. } | Knob::Seed
        );
        let range = match (b.hi.is_finite(), whole) {
            (true, true) if !b.lo_open && !b.hi_open => format!("in {}..={}", b.lo, b.hi),
            (true, _) => format!(
                "in {}{}, {}{}",
                if b.lo_open { '(' } else { '[' },
                b.lo,
                b.hi,
                if b.hi_open { ')' } else { ']' }
            ),
            (false, true) => format!("{} {}", if b.lo_open { ">" } else { ">=" }, b.lo),
            (false, false) => format!(
                "a finite number {} {}",
                if b.lo_open { ">" } else { ">=" },
                b.lo
            ),
        };
        let off = match self.off_value() {
            Some(Value::Null) => ", or null for none".to_owned(),
            Some(Value::Number(n)) => format!("; {} is off", n.as_f64().unwrap_or_default()),
            _ => String::new(),
        };
        Cow::Owned(format!("must be {range}{off}"))
    }

    /// The value that turns the parameter off, parsed from its row.
    pub fn off_value(&self) -> Option<Value> {
        self.off.and_then(|text| serde_yaml_ng::from_str(text).ok())
    }
}

/// A parameter's names outside samplab: in each engine's API (what the exports write) and in
/// the request body of each kind of OpenAI-compatible server (what a served model is sent).
/// `None` where that place has no such parameter. The value goes as it is, in the engine's
/// spelling of off ([`FieldSpec::value_for`]), unless the writer gives the field a form of its
/// own (stops, seeds, biases, watched tokens, constraints), which its writer builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Names {
    /// vLLM's `SamplingParams` keyword, which its server takes as the JSON name too.
    pub vllm: Option<&'static str>,
    /// transformers' `generate()` keyword.
    pub transformers: Option<&'static str>,
    /// llama.cpp's command-line flag (llama-completion's and llama-server's alike).
    pub llama_cpp: Option<&'static str>,
    /// twinkle's `SamplingParams` field.
    pub twinkle: Option<&'static str>,
    /// OpenAI's API, and servers samplab does not know.
    pub openai: Option<&'static str>,
    /// llama.cpp's own server.
    pub llama_server: Option<&'static str>,
    pub llama_cpp_python: Option<&'static str>,
}

impl Names {
    pub const NONE: Self = Self {
        vllm: None,
        transformers: None,
        llama_cpp: None,
        twinkle: None,
        openai: None,
        llama_server: None,
        llama_cpp_python: None,
    };

    /// The same JSON name on every server.
    pub const fn all(name: &'static str) -> Self {
        Self::local(name).openai(name)
    }

    /// The same JSON name on every server but OpenAI's.
    pub const fn local(name: &'static str) -> Self {
        Self::NONE
            .vllm(name)
            .llama_server(name)
            .llama_cpp_python(name)
    }

    /// `name` in every engine's export (llama.cpp's flag aside) and twinkle's.
    pub const fn engines(self, name: &'static str) -> Self {
        self.vllm(name).transformers(name).twinkle(name)
    }

    pub const fn vllm(self, name: &'static str) -> Self {
        Self {
            vllm: Some(name),
            ..self
        }
    }

    pub const fn transformers(self, name: &'static str) -> Self {
        Self {
            transformers: Some(name),
            ..self
        }
    }

    pub const fn flag(self, name: &'static str) -> Self {
        Self {
            llama_cpp: Some(name),
            ..self
        }
    }

    pub const fn twinkle(self, name: &'static str) -> Self {
        Self {
            twinkle: Some(name),
            ..self
        }
    }

    pub const fn openai(self, name: &'static str) -> Self {
        Self {
            openai: Some(name),
            ..self
        }
    }

    pub const fn llama_server(self, name: &'static str) -> Self {
        Self {
            llama_server: Some(name),
            ..self
        }
    }

    pub const fn llama_cpp_python(self, name: &'static str) -> Self {
        Self {
            llama_cpp_python: Some(name),
            ..self
        }
    }

    /// The name in `engine`'s export: its keyword, or llama.cpp's flag.
    pub fn in_engine(&self, engine: Engine) -> Option<&'static str> {
        match engine {
            Engine::Vllm => self.vllm,
            Engine::Transformers => self.transformers,
            Engine::LlamaCpp => self.llama_cpp,
        }
    }

    /// Every name with whose it is, for recognising one typed where samplab's is meant;
    /// long flags as the keys they become (`--top-nsigma` as `top_nsigma`).
    pub fn every(&self) -> impl Iterator<Item = (&'static str, String)> {
        let flag = self
            .llama_cpp
            .filter(|flag| flag.starts_with("--"))
            .map(|flag| ("llama.cpp", flag.trim_start_matches('-').replace('-', "_")));
        [
            ("vLLM", self.vllm),
            ("transformers", self.transformers),
            ("twinkle", self.twinkle),
            ("OpenAI", self.openai),
            ("llama.cpp", self.llama_server),
            ("llama.cpp", self.llama_cpp_python),
        ]
        .into_iter()
        .filter_map(|(whose, name)| Some((whose, name?.to_owned())))
        .chain(flag)
    }
}

/// How the engines write "off" for a count that samplab reads as off at any value below 1
/// (top_k: -1 or 0): vLLM as `vllm`, transformers and llama.cpp, and their servers, as
/// `others`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffBelowOne {
    pub vllm: i64,
    pub others: i64,
}

/// How the playground moves a parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Knob {
    /// A decimal moved on a grid of `fine` (or `coarse`) steps within `limit`, exactly in
    /// decimal; its slider spans `slider`. An off value beyond `limit` (null: above it) lies
    /// just past that end, as off lies below 1 on a count.
    Decimal {
        fine: f64,
        coarse: f64,
        limit: (f64, f64),
        slider: (f64, f64),
    },
    /// A count moved through powers of two up to `max` (and the vocabulary's size when
    /// `vocab`: top_k beyond it changes nothing); below 1 is off.
    Doubling {
        max: u32,
        vocab: bool,
    },
    /// A whole number moved by 1 (or `coarse`) within `limit`, off just below it when the
    /// parameter can be off; `log` draws its slider on a log scale.
    Count {
        coarse: i64,
        limit: (i64, i64),
        log: bool,
    },
    /// A seed: moved by 1 or 100, rolled at random, no slider.
    Seed,
    Toggle,
    /// One of the names; moving cycles through them.
    Choice(&'static [&'static str]),
    /// Typed only (lists and mappings).
    Text,
    /// Typed only: strings and token ids in any mix (`"\n\n", #13, The End`), where bare text
    /// is one string.
    TokenList,
}

/// A numeric range; infinite ends still require finite values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    pub lo: f64,
    pub hi: f64,
    pub lo_open: bool,
    pub hi_open: bool,
}

impl Bounds {
    pub const fn closed(lo: f64, hi: f64) -> Self {
        Self {
            lo,
            hi,
            lo_open: false,
            hi_open: false,
        }
    }

    pub const fn at_least(lo: f64) -> Self {
        Self::closed(lo, f64::INFINITY)
    }

    pub const fn above(lo: f64) -> Self {
        Self {
            lo_open: true,
            ..Self::at_least(lo)
        }
    }

    /// `(lo, hi]`
    pub const fn above_to(lo: f64, hi: f64) -> Self {
        Self {
            lo_open: true,
            ..Self::closed(lo, hi)
        }
    }

    pub fn contains(&self, x: f64) -> bool {
        x.is_finite()
            && (if self.lo_open {
                x > self.lo
            } else {
                x >= self.lo
            })
            && (if self.hi_open {
                x < self.hi
            } else {
                x <= self.hi
            })
    }
}
