//! The Jinja environment transformers' `apply_chat_template` renders in, rebuilt on minijinja:
//! `trim_blocks` and `lstrip_blocks` on, loop controls, Python's string and dict methods,
//! values printed as Python's `str()` prints them, Python's `%` string formatting (see
//! `percent`), and the globals and filter transformers adds (`raise_exception`,
//! `strftime_now`, `tojson`).

use super::clock::Clock;
use super::python;
use super::tojson::tojson;
use super::{percent, printf};
use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, Error, ErrorKind};

/// Steps a template may take for one render: real templates take a few thousand, and a loop of
/// 1e5 x 1e5 would otherwise never end.
pub const FUEL: u64 = 5_000_000;

/// Marks the error `raise_exception` returns, so it reads as the template's refusal rather than
/// a fault in the template.
#[derive(Debug, thiserror::Error)]
#[error("the template raised an exception")]
pub struct Refusal;

pub fn environment(clock: Clock) -> Environment<'static> {
    let mut env = Environment::new();
    env.set_fuel(Some(FUEL));
    // Spans for errors (line and column) even in release builds.
    env.set_debug(true);
    let syntax = SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()
        .expect("the default delimiters are valid");
    env.set_syntax(syntax);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", |message: String| -> Result<(), Error> {
        Err(Error::new(ErrorKind::InvalidOperation, message).with_source(Refusal))
    });
    env.add_function("strftime_now", move |format: String| {
        clock.now().strftime(&format)
    });
    env.add_filter("tojson", tojson);
    env.set_formatter(python::format);
    env.add_filter("string", python::str);
    env.add_filter(percent::FILTER, printf::percent_format);
    env
}

/// transformers registers a `{% generation %}` block tag (it marks the assistant's text for
/// training masks) that renders its body unchanged. minijinja has no custom tags, so each tag
/// becomes an `if` that is always true, padded to the same length so error columns stay right.
/// (A tag written inside a string literal would be rewritten too; no template does that.)
pub fn open_generation_blocks(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(start) = rest.find("{%") {
        let (before, tag) = rest.split_at(start);
        out.push_str(before);
        let Some(end) = tag[2..].find("%}") else {
            rest = tag;
            break;
        };
        let (tag, after) = tag.split_at(end + 4);
        let body = tag[2..tag.len() - 2].trim_matches(|c| c == '-' || c == '+');
        let replacement = match body.trim() {
            "generation" => Some(("generation", "if    true")),
            "endgeneration" => Some(("endgeneration", "endif        ")),
            _ => None,
        };
        match replacement {
            Some((keyword, same_length)) => out.push_str(&tag.replacen(keyword, same_length, 1)),
            None => out.push_str(tag),
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::open_generation_blocks;

    #[test]
    fn generation_tags_become_same_length_ifs() {
        let source = "a{%- generation +%}b{% endgeneration -%}c{%}{% if x %}{% endif %}{% x";
        let opened = open_generation_blocks(source);
        assert_eq!(
            opened,
            "a{%- if    true +%}b{% endif         -%}c{%}{% if x %}{% endif %}{% x"
        );
        assert_eq!(opened.len(), source.len());
    }
}
