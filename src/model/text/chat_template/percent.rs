//! Python's `%` string formatting (`'%s' % x`, `'%d|%s' % (a, b)`), which templates written for
//! transformers' Jinja use and minijinja refuses (`%` on a string is an error there).
//!
//! minijinja has no operator hooks, so the template's source is rewritten before it is compiled:
//! with minijinja's own lexer, each string literal followed by `%` and its right operand becomes
//! the literal piped into the `percent_format` filter, `'%s' | percent_format(x)`; a filter binds
//! tighter than `%` did, so the result takes the same place in the expression. The right operand
//! is found as minijinja's parser finds it (Jinja2's precedence): a unary expression with its
//! postfix operators, filters and tests, and `**` chains. A parenthesised tuple gives one
//! argument per item, as Python's tuple does; anything else is one argument (a list or a dict
//! too, as in Python). Where the format string is not a literal, `%` is still refused.
//!
//! Only lines holding such an expression change, so an error elsewhere keeps its line and column.

use minijinja::machinery::{Span, Token, tokenize};
use minijinja::syntax::SyntaxConfig;

/// The filter the rewrite calls (see [`super::printf`]).
pub const FILTER: &str = "percent_format";

/// `source` with every `STRING % operand` rewritten; unchanged when it has none or does not
/// lex (the compiler then reports the error on the original text).
pub fn rewrite(source: &str) -> String {
    let Ok(tokens) =
        tokenize(source, false, SyntaxConfig::default()).collect::<Result<Vec<(Token, Span)>, _>>()
    else {
        return source.to_owned();
    };
    let mut out = String::with_capacity(source.len());
    let end = Rewriter {
        source,
        tokens: &tokens,
        out: &mut out,
    }
    .range(0, tokens.len(), 0);
    out.push_str(&source[end..]);
    out
}

struct Rewriter<'a, 's> {
    source: &'s str,
    tokens: &'a [(Token<'s>, Span)],
    out: &'a mut String,
}

impl Rewriter<'_, '_> {
    /// Copies the source from byte `from` through the tokens `start..end`, rewriting as it
    /// goes; returns the byte offset copied up to.
    fn range(&mut self, start: usize, end: usize, mut from: usize) -> usize {
        let mut i = start;
        while i < end {
            let rewritable = matches!(self.tokens[i].0, Token::Str(_) | Token::String(_))
                && matches!(self.tokens.get(i + 1), Some((Token::Mod, _)));
            let Some(operand_end) = rewritable
                .then(|| operand(self.tokens, i + 2))
                .flatten()
                .filter(|&e| e <= end)
            else {
                i += 1;
                continue;
            };
            let literal = self.span(i);
            self.out.push_str(&self.source[from..literal.0]);
            self.out.push_str(&self.source[literal.0..literal.1]);
            self.out.push_str(" | ");
            self.out.push_str(FILTER);
            self.out.push('(');
            // A tuple's items are the arguments; any other operand is one.
            let (first, last) = match tuple(self.tokens, i + 2, operand_end) {
                Some((open, close)) => (open + 1, close),
                None => (i + 2, operand_end),
            };
            if first < last {
                let args_from = self.span(first).0;
                let copied = self.range(first, last, args_from);
                self.out
                    .push_str(&self.source[copied..self.span(last - 1).1]);
            }
            self.out.push(')');
            from = self.span(operand_end - 1).1;
            i = operand_end;
        }
        from
    }

    fn span(&self, token: usize) -> (usize, usize) {
        let span = self.tokens[token].1;
        (span.start_offset as usize, span.end_offset as usize)
    }
}

/// Where the operand starting at token `at` ends (exclusive), as minijinja's `parse_pow`
/// reads it; `None` when no operand starts there.
fn operand(tokens: &[(Token, Span)], at: usize) -> Option<usize> {
    let mut end = unary(tokens, at)?;
    while matches!(tokens.get(end), Some((Token::Pow, _))) {
        end = unary(tokens, end + 1)?;
    }
    Some(end)
}

/// A unary expression: minus signs, a primary, its postfix operators, then filters and tests.
fn unary(tokens: &[(Token, Span)], at: usize) -> Option<usize> {
    let mut end = unary_only(tokens, at)?;
    loop {
        end = match tokens.get(end).map(|t| &t.0) {
            Some(Token::Pipe) => call_args(tokens, name(tokens, end + 1)?)?,
            Some(Token::Ident("is")) => {
                let mut next = end + 1;
                if matches!(tokens.get(next), Some((Token::Ident("not"), _))) {
                    next += 1;
                }
                let after = name(tokens, next)?;
                match tokens.get(after).map(|t| &t.0) {
                    Some(Token::ParenOpen) => close(tokens, after)? + 1,
                    Some(Token::Ident("and" | "or" | "else" | "is")) => after,
                    Some(
                        Token::Ident(_)
                        | Token::Str(_)
                        | Token::String(_)
                        | Token::Int(_)
                        | Token::Int128(_)
                        | Token::Float(_)
                        | Token::Plus
                        | Token::Minus
                        | Token::BracketOpen
                        | Token::BraceOpen,
                    ) => unary_only(tokens, after)?,
                    _ => after,
                }
            }
            _ => return Some(end),
        };
    }
}

/// Minus signs, a primary and its postfix operators (`.name`, `[...]`, `(...)`).
fn unary_only(tokens: &[(Token, Span)], mut at: usize) -> Option<usize> {
    while matches!(tokens.get(at), Some((Token::Minus, _))) {
        at += 1;
    }
    let mut end = match tokens.get(at).map(|t| &t.0)? {
        Token::Ident(_)
        | Token::Str(_)
        | Token::String(_)
        | Token::Int(_)
        | Token::Int128(_)
        | Token::Float(_) => at + 1,
        Token::ParenOpen | Token::BracketOpen | Token::BraceOpen => close(tokens, at)? + 1,
        _ => return None,
    };
    loop {
        end = match tokens.get(end).map(|t| &t.0) {
            Some(Token::Dot) => match tokens.get(end + 1).map(|t| &t.0) {
                Some(Token::Ident(_) | Token::Int(_)) => end + 2,
                _ => return None,
            },
            Some(Token::BracketOpen | Token::ParenOpen) => close(tokens, end)? + 1,
            _ => return Some(end),
        };
    }
}

/// A filter or test name, dotted or not; returns where it ends.
fn name(tokens: &[(Token, Span)], mut at: usize) -> Option<usize> {
    matches!(tokens.get(at), Some((Token::Ident(_), _))).then_some(())?;
    at += 1;
    while matches!(tokens.get(at), Some((Token::Dot, _)))
        && matches!(tokens.get(at + 1), Some((Token::Ident(_), _)))
    {
        at += 2;
    }
    Some(at)
}

/// A filter's optional `(...)` after its name.
fn call_args(tokens: &[(Token, Span)], at: usize) -> Option<usize> {
    match tokens.get(at) {
        Some((Token::ParenOpen, _)) => Some(close(tokens, at)? + 1),
        _ => Some(at),
    }
}

/// The token closing the bracket opened at `open`.
fn close(tokens: &[(Token, Span)], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, (token, _)) in tokens.iter().enumerate().skip(open) {
        match token {
            Token::ParenOpen | Token::BracketOpen | Token::BraceOpen => depth += 1,
            Token::ParenClose | Token::BracketClose | Token::BraceClose => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(i);
                }
            }
            Token::VariableEnd | Token::BlockEnd => return None,
            _ => {}
        }
    }
    None
}

/// The parentheses of an operand that is exactly a tuple, `(a, b)` or `(a,)`, not a
/// parenthesised expression `(a)`: `(open, close)`.
fn tuple(tokens: &[(Token, Span)], start: usize, end: usize) -> Option<(usize, usize)> {
    if !matches!(tokens.get(start), Some((Token::ParenOpen, _))) || close(tokens, start)? + 1 != end
    {
        return None;
    }
    let mut depth = 0usize;
    let mut comma = false;
    for (token, _) in &tokens[start + 1..end - 1] {
        match token {
            Token::ParenOpen | Token::BracketOpen | Token::BraceOpen => depth += 1,
            Token::ParenClose | Token::BracketClose | Token::BraceClose => {
                depth = depth.saturating_sub(1)
            }
            Token::Comma if depth == 0 => comma = true,
            _ => {}
        }
    }
    (comma || start + 2 == end).then_some((start, end - 1))
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    #[test]
    fn string_percent_operands_become_filter_calls() {
        let cases = [
            ("{{ '%s' % x }}", "{{ '%s' | percent_format(x) }}"),
            (
                "{{ \"%d|%s\" % (a, b) }}",
                "{{ \"%d|%s\" | percent_format(a, b) }}",
            ),
            ("{{ '%s' % (a,) }}", "{{ '%s' | percent_format(a,) }}"),
            ("{{ '%s' % (a) }}", "{{ '%s' | percent_format((a)) }}"),
            (
                "{{ 'x' ~ '%s' % m.content|trim ~ 'y' }}",
                "{{ 'x' ~ '%s' | percent_format(m.content|trim) ~ 'y' }}",
            ),
            (
                "{% set t = '%02d' % loop.index0 + 1 %}",
                "{% set t = '%02d' | percent_format(loop.index0) + 1 %}",
            ),
            (
                "{{ '%s' % ('%d' % n, x[0]) }}",
                "{{ '%s' | percent_format('%d' | percent_format(n), x[0]) }}",
            ),
            (
                "{{ '%s' % f(a, b).c }}",
                "{{ '%s' | percent_format(f(a, b).c) }}",
            ),
            (
                "{{ '%s' % -x ** 2 }}",
                "{{ '%s' | percent_format(-x ** 2) }}",
            ),
            (
                "{{ '%s' % x is defined and y }}",
                "{{ '%s' | percent_format(x is defined) and y }}",
            ),
            ("{{ '%s' % [1, 2] }}", "{{ '%s' | percent_format([1, 2]) }}"),
        ];
        for (source, want) in cases {
            assert_eq!(rewrite(source), want, "{source}");
        }
    }

    #[test]
    fn other_text_is_left_alone() {
        for source in [
            "{{ 10 % 3 }}",
            "{{ x % 2 }}",
            "'%s' % x outside any tag",
            "{# '%s' % x #}",
            "{{ '%s' % }}",
            "{% if x %}{{ 'a' }}{% endif %}",
            "{{ unclosed",
        ] {
            assert_eq!(rewrite(source), source);
        }
    }
}
