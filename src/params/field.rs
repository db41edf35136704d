//! What the table says about each parameter: how it is checked, which engines have it, and how
//! the playground moves it. Validation, YAML, `--set`, the sliders and help all read this.

use super::engine::Engines;

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
    /// What a refused value is told: the valid range in words.
    pub valid: &'static str,
    /// The value (as YAML) that turns the parameter off; `None` where nothing does.
    pub off: Option<&'static str>,
    /// Its JSON name on each kind of server that takes it as it is.
    pub served: Served,
}

impl FieldSpec {
    /// The engines whose exports write the field.
    pub fn exported_by(&self) -> Engines {
        self.exported.unwrap_or(self.engines)
    }

    /// The value that turns the parameter off, parsed from its row.
    pub fn off_value(&self) -> Option<serde_yaml_ng::Value> {
        self.off.and_then(|text| serde_yaml_ng::from_str(text).ok())
    }
}

/// A parameter's JSON name in the request body of each kind of OpenAI-compatible server;
/// `None` where that server has no such parameter, or where the request carries it in a way of
/// its own (stops, seeds, logprobs, constraints).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    /// OpenAI, and servers samplab does not know.
    pub openai: Option<&'static str>,
    pub vllm: Option<&'static str>,
    /// llama.cpp's own server.
    pub llama_server: Option<&'static str>,
    pub llama_cpp_python: Option<&'static str>,
}

impl Served {
    pub const NONE: Self = Self {
        openai: None,
        vllm: None,
        llama_server: None,
        llama_cpp_python: None,
    };

    /// The same name on every server.
    pub const fn all(name: &'static str) -> Self {
        Self::local(name).openai(name)
    }

    /// The same name on every server but OpenAI's.
    pub const fn local(name: &'static str) -> Self {
        Self::NONE
            .vllm(name)
            .llama_server(name)
            .llama_cpp_python(name)
    }

    pub const fn openai(self, name: &'static str) -> Self {
        Self {
            openai: Some(name),
            ..self
        }
    }

    pub const fn vllm(self, name: &'static str) -> Self {
        Self {
            vllm: Some(name),
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
