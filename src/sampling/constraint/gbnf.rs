//! llama.cpp's GBNF grammars, translated into llguidance's Lark-like syntax.
//!
//! The two formats disagree on one thing that matters: llama.cpp matches its grammar one
//! character at a time, with no lexer, while llguidance splits the text into lexemes (its
//! terminals: strings, regexes and uppercase rules) and lexes greedily: once a lexeme could go
//! on, it does, and a shorter match is never tried again. Translated naively,
//! `num ::= [0-9]+ ws` followed by `"\n"` (llama.cpp's own arithmetic example) never finishes,
//! because the `ws` inside the number eats every newline.
//!
//! So the translation works in two steps. First every rule that is a regular language (no
//! recursion, no special tokens) becomes an uppercase Lark terminal, and runs of such items in
//! the other rules become one terminal each: few, long lexemes, which is what keeps llguidance
//! fast. Then an analysis in the spirit of FIRST/FOLLOW sets looks for a lexeme that the lexer
//! could extend, by itself or by another lexeme it may be running at the same time (allowed
//! at the same place, or by another parse of the same text), with a character that could also
//! come right after it. Each such lexeme is broken into smaller ones, down to single
//! characters if need be (a single character cannot be extended), until none is left. The
//! analysis errs on the side of breaking up: it does not tell apart the places a rule is used
//! from, so a lexeme may be cut finer than it needs to be, which costs speed, not strings.
//!
//! Syntax (llama.cpp's `src/llama-grammar.cpp` parser is the reference, including its quirks):
//! - `name ::= alternatives`, names of ASCII letters, digits and `-`, a rule per line; a newline
//!   ends a rule except inside parentheses, right after `::=` and right after `|`.
//! - A later definition of a name replaces an earlier one, as in llama.cpp.
//! - `"literal"` and `[class]`/`[^class]` with escapes `\n \r \t \\ \" \[ \] \- \xHH \uHHHH
//!   \UHHHHHHHH`; `a-z` ranges; `.` is any character, newline included.
//! - `* + ?`, `{m}`, `{m,}`, `{m,n}`; `( )` groups; `#` comments.
//! - Special tokens `<[id]>`, `!<[id]>` (any token but that one) and `<name>`.
//!
//! Where it departs from llama.cpp:
//! - Repetition counts are kept as written; llama.cpp refuses a minimum over 2000 and reads a
//!   maximum over 2000 as no maximum (llguidance expands `{m,n}` in logarithmic size).
//! - Left recursion is translated (llguidance's Earley parser handles it); llama.cpp refuses it.
//! - `!<name>` is an error: llguidance can only exclude tokens by id. A `<name>` must be
//!   writable in Lark (no whitespace or `<`); whether it is one token is checked by llguidance
//!   against the tokenizer, where llama.cpp checks while parsing.
//! - An escape that is not a Unicode character (a surrogate like `\uD800`, or past U+10FFFF)
//!   is an error; llama.cpp takes it, but no UTF-8 text can match it.
//! - Groups and repetitions nest at most 256 deep.

use std::fmt::Write as _;

/// A GBNF grammar (llama.cpp's format) as llguidance's Lark: `root` becomes the start rule.
pub fn to_lark(gbnf: &str) -> Result<String, GbnfError> {
    if gbnf.len() > MAX_GBNF_BYTES {
        let at = (0..=MAX_GBNF_BYTES)
            .rev()
            .find(|&i| gbnf.is_char_boundary(i))
            .unwrap_or(0);
        return Err(GbnfError::at(
            gbnf,
            at,
            format!(
                "the grammar has {} bytes; at most 16 KiB are translated (splitting lexemes \
                 takes time that grows faster than the grammar)",
                gbnf.len()
            ),
        ));
    }
    let grammar = Parser::new(gbnf).grammar()?;
    let info = Info::new(&grammar);
    let mut flags = Flags {
        split: vec![false; grammar.n_seqs],
        expanded: vec![false; grammar.n_nodes],
    };
    loop {
        let built = Builder::new(&grammar, &info, &flags).build();
        let targets = conflicts(&built.ir);
        if !flags.refine(&targets, &info) {
            return Ok(built.lark);
        }
    }
}

/// The largest grammar translated: about 500 rules, which take a second.
const MAX_GBNF_BYTES: usize = 16 << 10;

/// Why a GBNF grammar cannot be translated, and where (1-based; columns count characters).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("GBNF grammar, line {line}, column {column}: {message}")]
pub struct GbnfError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl GbnfError {
    fn at(src: &str, offset: usize, message: impl Into<String>) -> Self {
        let before = &src[..offset];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        GbnfError {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
            message: message.into(),
        }
    }
}

/// Groups and repetitions nest at most this deep (llama.cpp sets no limit; this one keeps the
/// recursive passes below well inside the stack).
const MAX_NESTING: usize = 256;
const MAX_CHAR: u32 = 0x10FFFF;
/// Any character, newline included.
const ANY_REGEX: &str = "/(?s:.)/";
/// No string at all: what a class with only reversed ranges (`[z-a]`) matches.
const NOTHING_REGEX: &str = r"/[^\x{0}-\x{10FFFF}]/";

// ---------------------------------------------------------------------------------------------
// The parsed grammar

struct Grammar {
    /// The final definition of each name, in source order.
    rules: Vec<Rule>,
    /// The start rule's body: a single reference to `root`.
    start: Seq,
    n_nodes: usize,
    n_seqs: usize,
}

struct Rule {
    name: String,
    body: Vec<Seq>,
}

/// A sequence of items; `id` numbers it among all sequences.
struct Seq {
    id: usize,
    items: Vec<Node>,
}

/// An item of a sequence; `id` numbers it among all nodes.
struct Node {
    id: usize,
    kind: Kind,
}

enum Kind {
    /// A string literal (empty for `""`, and for `[]` and `[^]`, which llama.cpp reads as nothing).
    Lit(Vec<char>),
    /// A character class; reversed ranges match nothing, as in llama.cpp.
    Class {
        negated: bool,
        ranges: Vec<(u32, u32)>,
    },
    /// `.`
    Any,
    /// A rule reference; `rule` indexes `Grammar::rules` once resolved.
    Ref {
        name: String,
        pos: usize,
        rule: usize,
    },
    /// A special token, already in Lark syntax.
    Token(String),
    Group(Vec<Seq>),
    Repeat {
        item: Box<Node>,
        min: u32,
        max: Option<u32>,
    },
}

impl Node {
    /// Matches only the empty string, so contributes nothing to a sequence.
    fn is_epsilon(&self) -> bool {
        matches!(&self.kind, Kind::Lit(s) if s.is_empty())
            || matches!(self.kind, Kind::Repeat { max: Some(0), .. })
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing, after llama.cpp's recursive descent

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    n_nodes: usize,
    n_seqs: usize,
}

struct RawRule {
    name: String,
    body: Vec<Seq>,
}

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Self {
        Parser {
            src,
            pos: 0,
            n_nodes: 0,
            n_seqs: 0,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.src.as_bytes().get(self.pos).copied()
    }

    fn peek_at(&self, k: usize) -> Option<u8> {
        self.src.as_bytes().get(self.pos + k).copied()
    }

    fn error(&self, at: usize, message: impl Into<String>) -> GbnfError {
        GbnfError::at(self.src, at, message)
    }

    /// The character at the cursor, for messages.
    fn found(&self) -> String {
        match self.src[self.pos..].chars().next() {
            Some(c) => format!("{c:?}"),
            None => "the end of the grammar".to_string(),
        }
    }

    fn node(&mut self, kind: Kind) -> Node {
        self.n_nodes += 1;
        Node {
            id: self.n_nodes - 1,
            kind,
        }
    }

    /// Spaces, tabs and comments; newlines too where `newline_ok`.
    fn skip_space(&mut self, newline_ok: bool) {
        while let Some(b) = self.peek() {
            match b {
                b' ' | b'\t' => self.pos += 1,
                b'\r' | b'\n' if newline_ok => self.pos += 1,
                b'#' => {
                    while !matches!(self.peek(), None | Some(b'\r' | b'\n')) {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn name(&mut self) -> Option<&'a str> {
        let start = self.pos;
        while matches!(self.peek(), Some(b) if is_name_byte(b)) {
            self.pos += 1;
        }
        (self.pos > start).then(|| &self.src[start..self.pos])
    }

    fn grammar(mut self) -> Result<Grammar, GbnfError> {
        let mut defs = Vec::new();
        self.skip_space(true);
        while self.pos < self.src.len() {
            defs.push(self.rule()?);
        }
        let start_ref = self.node(Kind::Ref {
            name: "root".to_string(),
            pos: 0,
            rule: 0,
        });
        let start = Seq {
            id: self.n_seqs,
            items: vec![start_ref],
        };
        self.n_seqs += 1;
        resolve(self.src, defs, start, self.n_nodes, self.n_seqs)
    }

    fn rule(&mut self) -> Result<RawRule, GbnfError> {
        let at = self.pos;
        let Some(name) = self.name() else {
            return Err(self.error(at, format!("expected a rule name, found {}", self.found())));
        };
        self.skip_space(false);
        if !self.src[self.pos..].starts_with("::=") {
            let message = format!(
                "expected '::=' after the rule name '{name}', found {}",
                self.found()
            );
            return Err(self.error(self.pos, message));
        }
        self.pos += 3;
        self.skip_space(true);
        let (body, _) = self.alternates(false, 0)?;
        match self.peek() {
            None => {}
            Some(b'\n') => self.pos += 1,
            Some(b'\r') => {
                self.pos += 1;
                if self.peek() == Some(b'\n') {
                    self.pos += 1;
                }
            }
            Some(_) => {
                let message = format!(
                    "unexpected {}: a rule ends at a newline or the end of the grammar (a \
                     newline inside a rule is only allowed within parentheses or after '|')",
                    self.found()
                );
                return Err(self.error(self.pos, message));
            }
        }
        self.skip_space(true);
        Ok(RawRule {
            name: name.to_string(),
            body,
        })
    }

    /// Alternatives and the deepest nesting among their items.
    fn alternates(&mut self, nested: bool, level: usize) -> Result<(Vec<Seq>, usize), GbnfError> {
        let (first, mut depth) = self.sequence(nested, level)?;
        let mut seqs = vec![first];
        while self.peek() == Some(b'|') {
            self.pos += 1;
            self.skip_space(true);
            let (seq, d) = self.sequence(nested, level)?;
            seqs.push(seq);
            depth = depth.max(d);
        }
        Ok((seqs, depth))
    }

    fn sequence(&mut self, nested: bool, level: usize) -> Result<(Seq, usize), GbnfError> {
        enum Step {
            /// An item, with how deep it nests.
            Item(Kind, usize),
            Repeat(u32, Option<u32>),
        }
        let mut items: Vec<Node> = Vec::new();
        // Nesting depth of each item, and whether the last one may take a repetition (llama.cpp
        // refuses one after an item that produced nothing: `""`, `[]`, `x{0}`).
        let mut depths: Vec<usize> = Vec::new();
        let mut repeatable = false;
        while let Some(b) = self.peek() {
            let at = self.pos;
            let step = match b {
                b'"' => Step::Item(Kind::Lit(self.literal()?), 1),
                b'[' => Step::Item(self.class()?, 1),
                b'<' | b'!' => Step::Item(Kind::Token(self.token()?), 1),
                b'.' => {
                    self.pos += 1;
                    Step::Item(Kind::Any, 1)
                }
                b'(' => {
                    if level >= MAX_NESTING {
                        return Err(self.nesting_error(at));
                    }
                    self.pos += 1;
                    self.skip_space(true);
                    let (alts, depth) = self.alternates(true, level + 1)?;
                    if self.peek() != Some(b')') {
                        let open = GbnfError::at(self.src, at, "");
                        let message = format!(
                            "expected ')' to close the group opened at line {}, column {}, found {}",
                            open.line,
                            open.column,
                            self.found()
                        );
                        return Err(self.error(self.pos, message));
                    }
                    self.pos += 1;
                    Step::Item(Kind::Group(alts), depth + 1)
                }
                b'*' | b'+' | b'?' => {
                    self.pos += 1;
                    match b {
                        b'*' => Step::Repeat(0, None),
                        b'+' => Step::Repeat(1, None),
                        _ => Step::Repeat(0, Some(1)),
                    }
                }
                b'{' => {
                    let (min, max) = self.braces(nested)?;
                    Step::Repeat(min, max)
                }
                _ if is_name_byte(b) => {
                    let name = self.name().unwrap_or_default().to_string();
                    let rule = usize::MAX;
                    Step::Item(
                        Kind::Ref {
                            name,
                            pos: at,
                            rule,
                        },
                        1,
                    )
                }
                _ => break,
            };
            self.skip_space(nested);
            let (kind, depth) = match step {
                Step::Item(kind, depth) => {
                    repeatable = !matches!(&kind, Kind::Lit(s) if s.is_empty());
                    (kind, depth)
                }
                Step::Repeat(min, max) => {
                    let (true, Some(item), Some(depth)) = (repeatable, items.pop(), depths.pop())
                    else {
                        let op = &self.src[at..at + 1];
                        let message = format!("'{op}' has no preceding item to repeat");
                        return Err(self.error(at, message));
                    };
                    repeatable = max != Some(0);
                    let item = Box::new(item);
                    (Kind::Repeat { item, min, max }, depth + 1)
                }
            };
            if depth > MAX_NESTING {
                return Err(self.nesting_error(at));
            }
            items.push(self.node(kind));
            depths.push(depth);
        }
        let depth = depths.iter().copied().max().unwrap_or(0);
        self.n_seqs += 1;
        let id = self.n_seqs - 1;
        Ok((Seq { id, items }, depth))
    }

    fn nesting_error(&self, at: usize) -> GbnfError {
        self.error(
            at,
            format!("groups and repetitions nest deeper than {MAX_NESTING} levels"),
        )
    }

    /// `{m}`, `{m,}` or `{m,n}`, from the `{`.
    fn braces(&mut self, nested: bool) -> Result<(u32, Option<u32>), GbnfError> {
        let open = self.pos;
        self.pos += 1;
        self.skip_space(nested);
        let min = self.number("'{'")?;
        self.skip_space(nested);
        let max = match self.peek() {
            Some(b'}') => Some(min),
            Some(b',') => {
                self.pos += 1;
                self.skip_space(nested);
                let max = match self.peek() {
                    Some(b'0'..=b'9') => Some(self.number("','")?),
                    _ => None,
                };
                self.skip_space(nested);
                if self.peek() != Some(b'}') {
                    let message = format!(
                        "expected '}}' to close the repetition, found {}",
                        self.found()
                    );
                    return Err(self.error(self.pos, message));
                }
                max
            }
            _ => {
                let message = format!(
                    "expected ',' or '}}' in the repetition, found {}",
                    self.found()
                );
                return Err(self.error(self.pos, message));
            }
        };
        self.pos += 1;
        if let Some(max) = max
            && max < min
        {
            let message = format!("the repetition's maximum {max} is below its minimum {min}");
            return Err(self.error(open, message));
        }
        Ok((min, max))
    }

    fn number(&mut self, after: &str) -> Result<u32, GbnfError> {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        if self.pos == start {
            return Err(self.error(
                start,
                format!("expected a number after {after}, found {}", self.found()),
            ));
        }
        self.src[start..self.pos]
            .parse()
            .map_err(|_| self.error(start, "the repetition count is too large"))
    }

    /// A string literal, from the opening quote.
    fn literal(&mut self) -> Result<Vec<char>, GbnfError> {
        let open = self.pos;
        self.pos += 1;
        let mut chars = Vec::new();
        loop {
            match self.peek() {
                None => {
                    return Err(self.error(open, "unterminated string literal: no closing '\"'"));
                }
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(chars);
                }
                Some(_) => chars.push(self.char_or_escape()?),
            }
        }
    }

    /// A character class, from the `[`; an empty literal for one without characters (`[]`,
    /// `[^]`), which llama.cpp reads as nothing.
    fn class(&mut self) -> Result<Kind, GbnfError> {
        let open = self.pos;
        self.pos += 1;
        let negated = self.peek() == Some(b'^');
        if negated {
            self.pos += 1;
        }
        let unterminated = |p: &Self| p.error(open, "unterminated character class: no closing ']'");
        let mut ranges = Vec::new();
        loop {
            match self.peek() {
                None => return Err(unterminated(self)),
                Some(b']') => {
                    self.pos += 1;
                    break;
                }
                Some(_) => {
                    let lo = self.char_or_escape()?;
                    let mut hi = lo;
                    // As llama.cpp: `-` before `]` is a plain character.
                    if self.peek() == Some(b'-') && self.peek_at(1) != Some(b']') {
                        if self.peek_at(1).is_none() {
                            return Err(unterminated(self));
                        }
                        self.pos += 1;
                        hi = self.char_or_escape()?;
                    }
                    ranges.push((lo as u32, hi as u32));
                }
            }
        }
        Ok(if ranges.is_empty() {
            Kind::Lit(Vec::new())
        } else {
            Kind::Class { negated, ranges }
        })
    }

    /// One character of a literal or class, escapes decoded; the cursor is not at the end.
    fn char_or_escape(&mut self) -> Result<char, GbnfError> {
        let at = self.pos;
        let c = self.src[self.pos..].chars().next().unwrap_or('\0');
        self.pos += c.len_utf8();
        if c != '\\' {
            return Ok(c);
        }
        let Some(e) = self.src[self.pos..].chars().next() else {
            return Err(self.error(at, "the grammar ends in the middle of an escape"));
        };
        self.pos += e.len_utf8();
        let digits = match e {
            'n' => return Ok('\n'),
            'r' => return Ok('\r'),
            't' => return Ok('\t'),
            '\\' | '"' | '[' | ']' | '-' => return Ok(e),
            'x' => 2,
            'u' => 4,
            'U' => 8,
            _ => return Err(self.error(at, format!("unknown escape '\\{e}'"))),
        };
        let hex = &self.src.as_bytes()[self.pos..];
        let n = hex
            .iter()
            .take(digits)
            .take_while(|b| b.is_ascii_hexdigit())
            .count();
        if n < digits {
            return Err(self.error(at, format!("expected {digits} hex digits after '\\{e}'")));
        }
        let text = &self.src[self.pos..self.pos + digits];
        self.pos += digits;
        let value = u32::from_str_radix(text, 16).unwrap_or(u32::MAX);
        char::from_u32(value).ok_or_else(|| {
            self.error(
                at,
                format!(
                    "'\\{e}{text}' is not a Unicode character (a surrogate, or beyond U+10FFFF)"
                ),
            )
        })
    }

    /// A special token, from the `<` or `!`, as Lark text.
    fn token(&mut self) -> Result<String, GbnfError> {
        let at = self.pos;
        let negated = self.peek() == Some(b'!');
        if negated {
            self.pos += 1;
            if self.peek() != Some(b'<') {
                return Err(self.error(
                    self.pos,
                    format!("expected '<' after '!', found {}", self.found()),
                ));
            }
        }
        let open = self.pos;
        self.pos += 1;
        if self.peek() == Some(b'[') {
            self.pos += 1;
            let start = self.pos;
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
            if self.pos == start {
                let message = format!("expected a token id after '<[', found {}", self.found());
                return Err(self.error(start, message));
            }
            let id: u32 = self.src[start..self.pos]
                .parse()
                .map_err(|_| self.error(start, "the token id does not fit in 32 bits"))?;
            for close in [']', '>'] {
                if self.peek() != Some(close as u8) {
                    let message = format!(
                        "expected '{close}' in the token <[{id}]>, found {}",
                        self.found()
                    );
                    return Err(self.error(self.pos, message));
                }
                self.pos += 1;
            }
            return Ok(if negated {
                format!("<[^{id}]>")
            } else {
                format!("<[{id}]>")
            });
        }
        let Some(len) = self.src[self.pos..].find('>') else {
            return Err(self.error(open, "unterminated token: no closing '>'"));
        };
        let inner = &self.src[self.pos..self.pos + len];
        self.pos += len + 1;
        if negated {
            let message = format!(
                "'!<{inner}>': llguidance can only exclude tokens by id; write '!<[id]>' with the id \
                 of <{inner}>"
            );
            return Err(self.error(at, message));
        }
        if inner.is_empty() || inner.contains(|c: char| c.is_whitespace() || c == '<') {
            let message = format!(
                "the token <{inner}> cannot be written in llguidance's syntax (a token name must \
                 be non-empty, without whitespace or '<'); use '<[id]>'"
            );
            return Err(self.error(open, message));
        }
        Ok(format!("<{inner}>"))
    }
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

/// Keeps the last definition of each name, checks every reference (in every definition, as
/// llama.cpp does) and that `root` exists.
fn resolve(
    src: &str,
    defs: Vec<RawRule>,
    mut start: Seq,
    n_nodes: usize,
    n_seqs: usize,
) -> Result<Grammar, GbnfError> {
    // The index of each name's last definition.
    let last: std::collections::HashMap<String, usize> = defs
        .iter()
        .enumerate()
        .map(|(i, d)| (d.name.clone(), i))
        .collect();
    let keep: Vec<bool> = defs
        .iter()
        .enumerate()
        .map(|(i, d)| last[&d.name] == i)
        .collect();
    let mut ids = std::collections::HashMap::new();
    for (def, &keep) in defs.iter().zip(&keep) {
        if keep {
            ids.insert(def.name.clone(), ids.len());
        }
    }
    let mut undefined = None;
    for def in &defs {
        for seq in &def.body {
            first_undefined(seq, &ids, &mut undefined);
        }
    }
    if let Some((name, pos)) = undefined {
        return Err(GbnfError::at(src, pos, format!("undefined rule '{name}'")));
    }
    if !ids.contains_key("root") {
        return Err(GbnfError::at(src, 0, "the grammar has no 'root' rule"));
    }
    let mut rules = Vec::new();
    for (mut def, keep) in defs.into_iter().zip(keep) {
        if keep {
            for seq in &mut def.body {
                link(seq, &ids);
            }
            rules.push(Rule {
                name: def.name,
                body: def.body,
            });
        }
    }
    link(&mut start, &ids);
    Ok(Grammar {
        rules,
        start,
        n_nodes,
        n_seqs,
    })
}

fn first_undefined(
    seq: &Seq,
    ids: &std::collections::HashMap<String, usize>,
    found: &mut Option<(String, usize)>,
) {
    for node in &seq.items {
        visit_nodes(node, &mut |n| {
            if let Kind::Ref { name, pos, .. } = &n.kind
                && !ids.contains_key(name)
                && found.as_ref().is_none_or(|(_, p)| pos < p)
            {
                *found = Some((name.clone(), *pos));
            }
        });
    }
}

fn link(seq: &mut Seq, ids: &std::collections::HashMap<String, usize>) {
    for node in &mut seq.items {
        link_node(node, ids);
    }
}

fn link_node(node: &mut Node, ids: &std::collections::HashMap<String, usize>) {
    match &mut node.kind {
        Kind::Ref { name, rule, .. } => *rule = ids[name.as_str()],
        Kind::Group(alts) => alts.iter_mut().for_each(|s| link(s, ids)),
        Kind::Repeat { item, .. } => link_node(item, ids),
        _ => {}
    }
}

/// Calls `f` on `node` and everything inside it.
fn visit_nodes<'a>(node: &'a Node, f: &mut impl FnMut(&'a Node)) {
    f(node);
    match &node.kind {
        Kind::Group(alts) => {
            for seq in alts {
                for n in &seq.items {
                    visit_nodes(n, f);
                }
            }
        }
        Kind::Repeat { item, .. } => visit_nodes(item, f),
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Sets of characters, and what the lexer needs to know of a regular language

/// Sorted, disjoint, non-adjacent inclusive ranges of code points.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct CharSet(Vec<(u32, u32)>);

impl CharSet {
    fn from_ranges(mut ranges: Vec<(u32, u32)>) -> Self {
        ranges.retain(|(lo, hi)| lo <= hi);
        ranges.sort_unstable();
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match out.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => out.push((lo, hi)),
            }
        }
        CharSet(out)
    }

    fn full() -> Self {
        CharSet(vec![(0, MAX_CHAR)])
    }

    fn of(chars: impl IntoIterator<Item = char>) -> Self {
        CharSet::from_ranges(chars.into_iter().map(|c| (c as u32, c as u32)).collect())
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn complement(&self) -> Self {
        let mut out = Vec::new();
        let mut next = 0;
        for &(lo, hi) in &self.0 {
            if lo > next {
                out.push((next, lo - 1));
            }
            next = hi + 1;
        }
        if next <= MAX_CHAR {
            out.push((next, MAX_CHAR));
        }
        CharSet(out)
    }

    fn union(&self, other: &CharSet) -> CharSet {
        let mut out = self.clone();
        out.union_with(other);
        out
    }

    /// Adds `other`; whether that changed anything.
    fn union_with(&mut self, other: &CharSet) -> bool {
        if other.is_empty() || self.contains(other) {
            return false;
        }
        let mut all = std::mem::take(&mut self.0);
        all.extend_from_slice(&other.0);
        *self = CharSet::from_ranges(all);
        true
    }

    fn contains(&self, other: &CharSet) -> bool {
        other.0.iter().all(|&(lo, hi)| {
            let i = self.0.partition_point(|&(_, h)| h < lo);
            self.0.get(i).is_some_and(|&(l, h)| l <= lo && hi <= h)
        })
    }

    fn intersects(&self, other: &CharSet) -> bool {
        let (mut i, mut j) = (0, 0);
        while i < self.0.len() && j < other.0.len() {
            let (a, b) = (self.0[i], other.0[j]);
            if a.1 < b.0 {
                i += 1;
            } else if b.1 < a.0 {
                j += 1;
            } else {
                return true;
            }
        }
        false
    }
}

/// What the greedy lexer needs to know of a regular language L.
#[derive(Clone, Debug, Default)]
struct Lang {
    /// The empty string is in L.
    nullable: bool,
    /// Characters that begin a word of L.
    first: CharSet,
    /// Characters c such that, for a word w of L, w·c begins a word of L: how a complete match
    /// can still grow. Empty when no word of L is a proper prefix of another.
    cont: CharSet,
    /// Characters that occur past the first position of a word of L.
    inner: CharSet,
}

impl Lang {
    fn epsilon() -> Lang {
        Lang {
            nullable: true,
            ..Lang::default()
        }
    }

    fn chars(first: CharSet) -> Lang {
        Lang {
            first,
            ..Lang::default()
        }
    }

    fn literal(s: &[char]) -> Lang {
        match s.split_first() {
            None => Lang::epsilon(),
            Some((&c, rest)) => Lang {
                nullable: false,
                first: CharSet::of([c]),
                cont: CharSet::default(),
                inner: CharSet::of(rest.iter().copied()),
            },
        }
    }

    /// Concatenation. Over-approximates `cont` where the boundary between the two parts can
    /// move (only when a word of `self` can grow with a character that begins `b`).
    fn then(&self, b: &Lang) -> Lang {
        let a = self;
        let mut first = a.first.clone();
        if a.nullable {
            first.union_with(&b.first);
        }
        let mut inner = a.inner.union(&b.inner);
        if !a.first.is_empty() {
            inner.union_with(&b.first);
        }
        let mut cont = b.cont.clone();
        if b.nullable {
            cont.union_with(&a.cont);
            cont.union_with(&b.first);
        }
        if a.cont.intersects(&b.first) {
            for set in [&a.cont, &a.inner, &b.first, &b.inner] {
                cont.union_with(set);
            }
        }
        Lang {
            nullable: a.nullable && b.nullable,
            first,
            cont,
            inner,
        }
    }

    /// Alternation.
    fn or(&self, b: &Lang) -> Lang {
        let a = self;
        let mut cont = a.cont.union(&b.cont);
        if a.nullable {
            cont.union_with(&b.first);
        }
        if b.nullable {
            cont.union_with(&a.first);
        }
        if a.first.intersects(&b.first) {
            cont.union_with(&a.inner);
            cont.union_with(&b.inner);
        }
        Lang {
            nullable: a.nullable || b.nullable,
            first: a.first.union(&b.first),
            cont,
            inner: a.inner.union(&b.inner),
        }
    }

    /// From `min` to `max` (`None`: no limit) repetitions.
    fn repeat(&self, min: u32, max: Option<u32>) -> Lang {
        if max == Some(0) {
            return Lang::epsilon();
        }
        let a = self;
        let many = max.is_none_or(|m| m >= 2);
        let can_add = max.is_none_or(|m| m > min) || a.nullable;
        let mut inner = a.inner.clone();
        let mut cont = a.cont.clone();
        if many {
            inner.union_with(&a.first);
        }
        if can_add {
            cont.union_with(&a.first);
        }
        if many && a.cont.intersects(&a.first) {
            cont.union_with(&a.inner);
            cont.union_with(&a.first);
        }
        Lang {
            nullable: min == 0 || a.nullable,
            first: a.first.clone(),
            cont,
            inner,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// What is known of the grammar before choosing lexemes

struct Info {
    /// Per rule: a regular language, so it can be a Lark terminal.
    regular: Vec<bool>,
    /// Per node: contains no special token and refers only to regular rules.
    terminal: Vec<bool>,
    /// Per node: can be broken into smaller lexemes.
    expandable: Vec<bool>,
    /// Per terminal node: its language.
    lang: Vec<Option<Lang>>,
    rule_lang: Vec<Option<Lang>>,
}

impl Info {
    fn new(g: &Grammar) -> Info {
        let n = g.rules.len();
        let mut edges = vec![Vec::new(); n];
        let mut has_token = vec![false; n];
        for (r, rule) in g.rules.iter().enumerate() {
            for node in rule.body.iter().flat_map(|s| &s.items) {
                visit_nodes(node, &mut |x| match &x.kind {
                    Kind::Ref { rule, .. } => edges[r].push(*rule),
                    Kind::Token(_) => has_token[r] = true,
                    _ => {}
                });
            }
        }
        let order = strongly_connected(&edges);
        let mut regular = vec![false; n];
        for scc in &order {
            let cyclic = scc.len() > 1 || edges[scc[0]].contains(&scc[0]);
            for &r in scc {
                regular[r] = !cyclic && !has_token[r] && edges[r].iter().all(|&t| regular[t]);
            }
        }
        let mut info = Info {
            regular,
            terminal: vec![false; g.n_nodes],
            expandable: vec![false; g.n_nodes],
            lang: vec![None; g.n_nodes],
            rule_lang: vec![None; n],
        };
        // Callees before callers, so a reference finds its rule's language computed.
        for &r in order.iter().flatten() {
            for node in g.rules[r].body.iter().flat_map(|s| &s.items) {
                info.classify(node);
            }
            if info.regular[r] {
                info.rule_lang[r] = Some(info.alts_lang(&g.rules[r].body));
            }
        }
        for node in &g.start.items {
            info.classify(node);
        }
        info
    }

    /// Fills `terminal`, `expandable` and, for terminal nodes, `lang` for `node` and its insides.
    fn classify(&mut self, node: &Node) -> bool {
        let terminal = match &node.kind {
            Kind::Lit(_) | Kind::Class { .. } | Kind::Any => true,
            Kind::Token(_) => false,
            Kind::Ref { rule, .. } => self.regular[*rule],
            Kind::Group(alts) => {
                let mut all = true;
                for n in alts.iter().flat_map(|s| &s.items) {
                    all &= self.classify(n);
                }
                all
            }
            Kind::Repeat { item, .. } => self.classify(item),
        };
        self.terminal[node.id] = terminal;
        self.expandable[node.id] = match &node.kind {
            Kind::Lit(s) => s.len() > 1,
            Kind::Ref { .. } | Kind::Group(_) | Kind::Repeat { .. } => true,
            Kind::Class { .. } | Kind::Any | Kind::Token(_) => false,
        };
        if terminal {
            let lang = match &node.kind {
                Kind::Lit(s) => Lang::literal(s),
                Kind::Class { negated, ranges } => Lang::chars(class_set(*negated, ranges)),
                Kind::Any => Lang::chars(CharSet::full()),
                Kind::Ref { rule, .. } => self.rule_lang[*rule].clone().unwrap_or_default(),
                Kind::Group(alts) => self.alts_lang(alts),
                Kind::Repeat { item, min, max } => self.node_lang(item).repeat(*min, *max),
                Kind::Token(_) => unreachable!("tokens are not terminal"),
            };
            self.lang[node.id] = Some(lang);
        }
        terminal
    }

    fn node_lang(&self, node: &Node) -> &Lang {
        self.lang[node.id]
            .as_ref()
            .expect("terminal nodes have a language")
    }

    fn alts_lang(&self, alts: &[Seq]) -> Lang {
        let mut langs = alts.iter().map(|s| {
            s.items
                .iter()
                .fold(Lang::epsilon(), |acc, n| acc.then(self.node_lang(n)))
        });
        let first = langs.next().unwrap_or_else(Lang::epsilon);
        langs.fold(first, |acc, l| acc.or(&l))
    }
}

fn class_set(negated: bool, ranges: &[(u32, u32)]) -> CharSet {
    let set = CharSet::from_ranges(ranges.to_vec());
    if negated { set.complement() } else { set }
}

/// Tarjan's strongly connected components, iteratively; each component comes after every
/// component it refers to.
fn strongly_connected(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = edges.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut out = Vec::new();
    let mut next = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut calls = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(top) = calls.last_mut() {
            let v = top.0;
            if let Some(&w) = edges[v].get(top.1) {
                top.1 += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    calls.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            calls.pop();
            if let Some(&(u, _)) = calls.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] == index[v] {
                let mut scc = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    scc.push(w);
                    if w == v {
                        break;
                    }
                }
                out.push(scc);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Choosing lexemes: flags that break lexemes up, and the Lark they give

/// How finely lexemes are cut; starts all false (the longest lexemes) and only ever grows.
struct Flags {
    /// Per sequence: each of its terminal items is a lexeme of its own, not one run of them.
    split: Vec<bool>,
    /// Per node: written as rule structure (its parts are lexemes), not as one lexeme.
    expanded: Vec<bool>,
}

impl Flags {
    /// Breaks up the lexemes at `targets`; whether anything changed.
    fn refine(&mut self, targets: &[Origin], info: &Info) -> bool {
        let mut changed = false;
        for target in targets {
            let flag = match *target {
                Origin::Run(seq) => &mut self.split[seq],
                Origin::Node(node) if info.expandable[node] => &mut self.expanded[node],
                Origin::Node(_) | Origin::Char => continue,
            };
            changed |= !*flag;
            *flag = true;
        }
        changed
    }
}

/// Where a lexeme comes from, to break it up.
#[derive(Clone, Copy, Debug)]
enum Origin {
    /// Several terminal items of a sequence.
    Run(usize),
    /// One node.
    Node(usize),
    /// One character of a literal already broken up.
    Char,
}

#[derive(Clone, Copy, Debug)]
enum Sym {
    Lex(usize),
    Nt(usize),
}

/// A lexeme, or a special token (no characters, but two parses may both take one).
struct Lexeme {
    lang: Lang,
    /// The lexeme's Lark body: equal keys, equal languages.
    key: String,
    origin: Origin,
}

/// The translated grammar as the analysis sees it: nonterminal 0 is `start`.
struct Ir {
    prods: Vec<Vec<Vec<Sym>>>,
    lexemes: Vec<Lexeme>,
}

struct Built {
    ir: Ir,
    lark: String,
}

/// Symbols and Lark text of a piece of a rule.
struct Emit {
    syms: Vec<Sym>,
    text: String,
    /// Can take a repetition operator without parentheses.
    atomic: bool,
}

struct Builder<'a> {
    g: &'a Grammar,
    info: &'a Info,
    flags: &'a Flags,
    ir: Ir,
    /// Per rule: its nonterminal when written as a Lark rule.
    lower: Vec<Option<usize>>,
    lower_queue: Vec<usize>,
    /// Per rule: its terminal is written (or queued).
    upper: Vec<bool>,
    upper_queue: Vec<usize>,
    /// Extra terminals for runs of items, as `NAME: body` lines.
    synthetic: Vec<String>,
    /// The Lark rule being written, and how many extra terminals it has.
    owner: String,
    owner_terminals: usize,
}

impl<'a> Builder<'a> {
    fn new(g: &'a Grammar, info: &'a Info, flags: &'a Flags) -> Self {
        Builder {
            g,
            info,
            flags,
            ir: Ir {
                prods: Vec::new(),
                lexemes: Vec::new(),
            },
            lower: vec![None; g.rules.len()],
            lower_queue: Vec::new(),
            upper: vec![false; g.rules.len()],
            upper_queue: Vec::new(),
            synthetic: Vec::new(),
            owner: String::new(),
            owner_terminals: 0,
        }
    }

    fn build(mut self) -> Built {
        let g = self.g;
        let start = self.new_nt();
        self.owner = "start".to_string();
        let (syms, text) = self.seq(&g.start);
        self.ir.prods[start] = vec![syms];
        let mut lark = format!("start: {text}\n");
        let mut i = 0;
        while let Some(&r) = self.lower_queue.get(i) {
            i += 1;
            let rule = &g.rules[r];
            self.owner = lower_name(&rule.name);
            self.owner_terminals = 0;
            let mut prods = Vec::new();
            let mut texts = Vec::new();
            for seq in &rule.body {
                let (syms, text) = self.seq(seq);
                prods.push(syms);
                texts.push(text);
            }
            let nt = self.lower[r].expect("queued rules have a nonterminal");
            self.ir.prods[nt] = prods;
            let _ = writeln!(lark, "{}: {}", self.owner, texts.join(" | "));
        }
        let mut i = 0;
        while let Some(&r) = self.upper_queue.get(i) {
            i += 1;
            let rule = &g.rules[r];
            let body: Vec<String> = rule.body.iter().map(|s| self.term_seq(s)).collect();
            let _ = writeln!(lark, "{}: {}", upper_name(&rule.name), body.join(" | "));
        }
        for line in &self.synthetic {
            let _ = writeln!(lark, "{line}");
        }
        Built { ir: self.ir, lark }
    }

    fn new_nt(&mut self) -> usize {
        self.ir.prods.push(Vec::new());
        self.ir.prods.len() - 1
    }

    /// A lexeme: not yet broken up, and free of special tokens and recursion.
    fn lexical(&self, node: &Node) -> bool {
        self.info.terminal[node.id] && !self.flags.expanded[node.id]
    }

    fn seq(&mut self, seq: &'a Seq) -> (Vec<Sym>, String) {
        let items: Vec<&Node> = seq.items.iter().filter(|n| !n.is_epsilon()).collect();
        let mut syms = Vec::new();
        let mut parts = Vec::new();
        let mut i = 0;
        while i < items.len() {
            let e = if self.lexical(items[i]) {
                let mut j = i + 1;
                if !self.flags.split[seq.id] {
                    while j < items.len() && self.lexical(items[j]) {
                        j += 1;
                    }
                }
                let e = self.lexeme(&items[i..j], seq.id);
                i = j;
                e
            } else {
                i += 1;
                self.structure(items[i - 1])
            };
            syms.extend(e.syms);
            parts.push(e.text);
        }
        let text = if parts.is_empty() {
            "\"\"".to_string()
        } else {
            parts.join(" ")
        };
        (syms, text)
    }

    /// One lexeme for terminal items in a row.
    fn lexeme(&mut self, items: &[&'a Node], seq: usize) -> Emit {
        let lang = items
            .iter()
            .fold(Lang::epsilon(), |acc, n| acc.then(self.info.node_lang(n)));
        let body: Vec<String> = items.iter().map(|n| self.term_text(n)).collect();
        let body = body.join(" ");
        let simple = items.len() == 1
            && matches!(
                items[0].kind,
                Kind::Lit(_) | Kind::Class { .. } | Kind::Any | Kind::Ref { .. }
            );
        let text = if simple {
            body.clone()
        } else {
            self.owner_terminals += 1;
            let name = format!(
                "{}__{}",
                self.owner.to_ascii_uppercase(),
                self.owner_terminals
            );
            self.synthetic.push(format!("{name}: {body}"));
            name
        };
        let origin = if items.len() == 1 {
            Origin::Node(items[0].id)
        } else {
            Origin::Run(seq)
        };
        self.ir.lexemes.push(Lexeme {
            lang,
            key: body,
            origin,
        });
        Emit {
            syms: vec![Sym::Lex(self.ir.lexemes.len() - 1)],
            text,
            atomic: true,
        }
    }

    /// A node written as rule structure.
    fn structure(&mut self, node: &'a Node) -> Emit {
        match &node.kind {
            Kind::Ref { rule, .. } => {
                let nt = match self.lower[*rule] {
                    Some(nt) => nt,
                    None => {
                        let nt = self.new_nt();
                        self.lower[*rule] = Some(nt);
                        self.lower_queue.push(*rule);
                        nt
                    }
                };
                let text = lower_name(&self.g.rules[*rule].name);
                Emit {
                    syms: vec![Sym::Nt(nt)],
                    text,
                    atomic: true,
                }
            }
            Kind::Token(token) => {
                let lexeme = Lexeme {
                    lang: Lang::default(),
                    key: token.clone(),
                    origin: Origin::Char,
                };
                self.ir.lexemes.push(lexeme);
                Emit {
                    syms: vec![Sym::Lex(self.ir.lexemes.len() - 1)],
                    text: token.clone(),
                    atomic: true,
                }
            }
            Kind::Lit(chars) => {
                let mut syms = Vec::new();
                let mut texts = Vec::new();
                for &c in chars {
                    let text = quote(&[c]);
                    let lang = Lang::literal(&[c]);
                    self.ir.lexemes.push(Lexeme {
                        lang,
                        key: text.clone(),
                        origin: Origin::Char,
                    });
                    syms.push(Sym::Lex(self.ir.lexemes.len() - 1));
                    texts.push(text);
                }
                Emit {
                    syms,
                    text: texts.join(" "),
                    atomic: chars.len() == 1,
                }
            }
            Kind::Class { .. } | Kind::Any => self.lexeme(&[node], usize::MAX),
            Kind::Group(alts) => {
                let nt = self.new_nt();
                let mut prods = Vec::new();
                let mut texts = Vec::new();
                for seq in alts {
                    let (syms, text) = self.seq(seq);
                    prods.push(syms);
                    texts.push(text);
                }
                self.ir.prods[nt] = prods;
                Emit {
                    syms: vec![Sym::Nt(nt)],
                    text: format!("({})", texts.join(" | ")),
                    atomic: true,
                }
            }
            Kind::Repeat { item, min, max } => {
                let inner = if self.lexical(item) {
                    self.lexeme(&[item.as_ref()], usize::MAX)
                } else {
                    self.structure(item)
                };
                let x = match inner.syms[..] {
                    [sym] => sym,
                    _ => {
                        let nt = self.new_nt();
                        self.ir.prods[nt] = vec![inner.syms];
                        Sym::Nt(nt)
                    }
                };
                // For the analysis: R -> x R | x, and R -> ε when it may be absent.
                let nt = self.new_nt();
                let mut prods = Vec::new();
                if max.is_none_or(|m| m >= 2) {
                    prods.push(vec![x, Sym::Nt(nt)]);
                }
                prods.push(vec![x]);
                if *min == 0 {
                    prods.push(Vec::new());
                }
                self.ir.prods[nt] = prods;
                let base = if inner.atomic {
                    inner.text
                } else {
                    format!("({})", inner.text)
                };
                Emit {
                    syms: vec![Sym::Nt(nt)],
                    text: base + &repetition(*min, *max),
                    atomic: false,
                }
            }
        }
    }

    /// A terminal node as part of a Lark terminal.
    fn term_text(&mut self, node: &'a Node) -> String {
        match &node.kind {
            Kind::Lit(s) => quote(s),
            Kind::Class { negated, ranges } => class_regex(*negated, ranges),
            Kind::Any => ANY_REGEX.to_string(),
            Kind::Ref { rule, .. } => {
                if !self.upper[*rule] {
                    self.upper[*rule] = true;
                    self.upper_queue.push(*rule);
                }
                upper_name(&self.g.rules[*rule].name)
            }
            Kind::Group(alts) => {
                let alts: Vec<String> = alts.iter().map(|s| self.term_seq(s)).collect();
                format!("({})", alts.join(" | "))
            }
            Kind::Repeat { item, min, max } => {
                let inner = self.term_text(item);
                match item.kind {
                    Kind::Repeat { .. } => format!("({inner}){}", repetition(*min, *max)),
                    _ => inner + &repetition(*min, *max),
                }
            }
            Kind::Token(_) => unreachable!("tokens are not terminal"),
        }
    }

    fn term_seq(&mut self, seq: &'a Seq) -> String {
        let items: Vec<String> = seq
            .items
            .iter()
            .filter(|n| !n.is_epsilon())
            .map(|n| self.term_text(n))
            .collect();
        if items.is_empty() {
            "\"\"".to_string()
        } else {
            items.join(" ")
        }
    }
}

fn repetition(min: u32, max: Option<u32>) -> String {
    match (min, max) {
        (0, None) => "*".to_string(),
        (1, None) => "+".to_string(),
        (0, Some(1)) => "?".to_string(),
        (1, Some(1)) => String::new(),
        (m, None) => format!("{{{m},}}"),
        (m, Some(n)) if m == n => format!("{{{m}}}"),
        (m, Some(n)) => format!("{{{m},{n}}}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Where greedy lexing would lose strings

/// A set of lexeme indices.
#[derive(Clone)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Self {
        Bits(vec![0; n.div_ceil(64)])
    }

    fn insert(&mut self, i: usize) -> bool {
        let (w, b) = (i / 64, 1u64 << (i % 64));
        let changed = self.0[w] & b == 0;
        self.0[w] |= b;
        changed
    }

    fn union_with(&mut self, other: &Bits) -> bool {
        let mut changed = false;
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            changed |= *b & !*a != 0;
            *a |= b;
        }
        changed
    }

    /// The members of `self` that are in `also` but not in `except`.
    fn new_in(&self, also: &Bits, except: &Bits) -> Vec<usize> {
        let words = self.0.iter().zip(&also.0).zip(&except.0);
        let mut out = Vec::new();
        for (w, ((&a, &b), &c)) in words.enumerate() {
            let mut word = a & b & !c;
            while word != 0 {
                out.push(w * 64 + word.trailing_zeros() as usize);
                word &= word - 1;
            }
        }
        out
    }

    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(w, &word)| {
            let mut word = word;
            std::iter::from_fn(move || {
                let bit = (word != 0).then(|| word.trailing_zeros() as usize)?;
                word &= word - 1;
                Some(w * 64 + bit)
            })
        })
    }
}

/// The lexemes to break up: those that the lexer could extend with a character that may also
/// follow them, either by themselves (`cont`) or by another lexeme allowed at the same place.
fn conflicts(ir: &Ir) -> Vec<Origin> {
    let n = ir.prods.len();
    let m = ir.lexemes.len();
    let lex = &ir.lexemes;

    // FIRST sets of the nonterminals: characters, and lexemes that can come first.
    let mut nullable = vec![false; n];
    let mut first = vec![CharSet::default(); n];
    let mut first_lex = vec![Bits::new(m); n];
    let mut changed = true;
    while changed {
        changed = false;
        for a in 0..n {
            for prod in &ir.prods[a] {
                let mut all_nullable = true;
                for &sym in prod {
                    let sym_nullable = match sym {
                        Sym::Lex(l) => {
                            changed |= first[a].union_with(&lex[l].lang.first);
                            changed |= first_lex[a].insert(l);
                            lex[l].lang.nullable
                        }
                        Sym::Nt(b) => {
                            if b != a {
                                let (chars, lexemes) = (first[b].clone(), first_lex[b].clone());
                                changed |= first[a].union_with(&chars);
                                changed |= first_lex[a].union_with(&lexemes);
                            }
                            nullable[b]
                        }
                    };
                    if !sym_nullable {
                        all_nullable = false;
                        break;
                    }
                }
                if all_nullable && !nullable[a] {
                    nullable[a] = true;
                    changed = true;
                }
            }
        }
    }

    // What may come next (characters, lexemes), walking a production from its end: `absorb`
    // puts a symbol in front of what follows it.
    let absorb = |sym: Sym, chars: &mut CharSet, lexemes: &mut Bits| {
        let (f, fl, null) = match sym {
            Sym::Lex(l) => {
                let mut only = Bits::new(m);
                only.insert(l);
                (lex[l].lang.first.clone(), only, lex[l].lang.nullable)
            }
            Sym::Nt(b) => (first[b].clone(), first_lex[b].clone(), nullable[b]),
        };
        if null {
            chars.union_with(&f);
            lexemes.union_with(&fl);
        } else {
            *chars = f;
            *lexemes = fl;
        }
    };

    let mut follow = vec![CharSet::default(); n];
    let mut follow_lex = vec![Bits::new(m); n];
    let mut changed = true;
    while changed {
        changed = false;
        for a in 0..n {
            for prod in &ir.prods[a] {
                let (mut chars, mut lexemes) = (follow[a].clone(), follow_lex[a].clone());
                for &sym in prod.iter().rev() {
                    if let Sym::Nt(b) = sym {
                        changed |= follow[b].union_with(&chars);
                        changed |= follow_lex[b].union_with(&lexemes);
                    }
                    absorb(sym, &mut chars, &mut lexemes);
                }
            }
        }
    }

    // Per lexeme: the characters and the lexemes that may come right after it. And which
    // lexemes the lexer may be running at once (`together`): first those allowed at the same
    // place of a production (or at the very start).
    let mut lex_follow = vec![CharSet::default(); m];
    let mut lex_next = vec![Bits::new(m); m];
    let mut together = vec![Bits::new(m); m];
    for a in 0..n {
        for prod in &ir.prods[a] {
            let (mut chars, mut lexemes) = (follow[a].clone(), follow_lex[a].clone());
            for (i, &sym) in prod.iter().enumerate().rev() {
                if let Sym::Lex(l) = sym {
                    lex_follow[l].union_with(&chars);
                    lex_next[l].union_with(&lexemes);
                }
                absorb(sym, &mut chars, &mut lexemes);
                // A gap at the start of a production is covered where its nonterminal is used.
                if i > 0 || a == 0 {
                    for l in lexemes.iter() {
                        together[l].union_with(&lexemes);
                    }
                }
            }
        }
    }
    // Then, when two lexemes running together may match the same text (one parse has one
    // where another has the other), so are the lexemes that follow each. A worklist: `reach[a]`
    // gathers what follows the partners of `a` seen so far (`seen[a]`), and is passed on to the
    // lexemes that follow `a`.
    // Lexemes whose first characters overlap (or two special tokens), by classes of lexemes
    // with the same first characters.
    let mut class_of = Vec::with_capacity(m);
    let mut classes: Vec<&CharSet> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for l in &lex[..] {
        let class = *index.entry(&l.lang.first.0).or_insert_with(|| {
            classes.push(&l.lang.first);
            classes.len() - 1
        });
        class_of.push(class);
    }
    let mut members = vec![Bits::new(m); classes.len()];
    for (l, &class) in class_of.iter().enumerate() {
        members[class].insert(l);
    }
    let alike: Vec<Bits> = (0..classes.len())
        .map(|c| {
            let mut set = Bits::new(m);
            for (d, other) in classes.iter().enumerate() {
                // Lexemes without a first character are special tokens (or match nothing).
                if c == d || classes[c].intersects(other) {
                    set.union_with(&members[d]);
                }
            }
            set
        })
        .collect();
    let mut seen = vec![Bits::new(m); m];
    let mut reach = vec![Bits::new(m); m];
    let mut queue: Vec<usize> = (0..m).collect();
    let mut queued = vec![true; m];
    while let Some(a) = queue.pop() {
        queued[a] = false;
        let mut grew = false;
        for b in together[a].new_in(&alike[class_of[a]], &seen[a]) {
            seen[a].insert(b);
            grew |= reach[a].union_with(&lex_next[b]);
        }
        if grew {
            for x in lex_next[a].iter() {
                if together[x].union_with(&reach[a]) && !queued[x] {
                    queued[x] = true;
                    queue.push(x);
                }
            }
        }
    }

    // A lexeme can grow with a character that may follow it: by itself, or because a match of
    // it is the beginning of a match of another lexeme running together with it (the lexer
    // then goes on with the other one).
    let mut flagged = vec![false; m];
    for l in 0..m {
        flagged[l] |= lex[l].lang.cont.intersects(&lex_follow[l]);
        if lex_follow[l].is_empty() {
            continue;
        }
        for other in together[l].iter() {
            let (a, b) = (&lex[l], &lex[other]);
            if other != l
                && !flagged[other]
                && a.key != b.key
                && b.lang.inner.intersects(&lex_follow[l])
                && a.lang.first.intersects(&b.lang.first)
            {
                flagged[other] = true;
            }
        }
    }
    (0..m)
        .filter(|&l| flagged[l])
        .map(|l| lex[l].origin)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Lark spelling

/// A GBNF name as a Lark rule name (`[a-z][a-z0-9_-]*`): kept when it already is one, else
/// `g_` and the name with each uppercase letter as `_` and its lowercase. GBNF names have no
/// `_`, so this is one-to-one and never meets the `__` of the extra terminals; `start` is taken.
fn lower_name(name: &str) -> String {
    let b = name.as_bytes();
    let plain = b[0].is_ascii_lowercase()
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-');
    if plain && name != "start" {
        return name.to_string();
    }
    let mut out = String::from("g_");
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A GBNF name as a Lark terminal name.
fn upper_name(name: &str) -> String {
    lower_name(name).to_ascii_uppercase()
}

/// A Lark string literal, which takes JSON's escapes (and refuses a raw DEL, which JSON keeps).
fn quote(s: &[char]) -> String {
    serde_json::to_string(&s.iter().collect::<String>())
        .expect("a string serialises")
        .replace('\x7f', "\\u007f")
}

/// A character class as a Lark regex; every character that could mean something in a regex
/// (or end it, like `/`) is written as `\x{..}`.
fn class_regex(negated: bool, ranges: &[(u32, u32)]) -> String {
    let set = CharSet::from_ranges(ranges.to_vec());
    if set.is_empty() {
        return if negated { ANY_REGEX } else { NOTHING_REGEX }.to_string();
    }
    let mut out = String::from(if negated { "/[^" } else { "/[" });
    for &(lo, hi) in &set.0 {
        push_regex_char(&mut out, lo);
        if hi > lo {
            out.push('-');
            push_regex_char(&mut out, hi);
        }
    }
    out.push_str("]/");
    out
}

fn push_regex_char(out: &mut String, c: u32) {
    match char::from_u32(c) {
        Some(c) if c.is_ascii_alphanumeric() || (!c.is_ascii() && c.is_alphanumeric()) => {
            out.push(c)
        }
        _ => {
            let _ = write!(out, "\\x{{{c:X}}}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use llguidance::api::TopLevelGrammar;
    use llguidance::toktrie::ApproximateTokEnv;
    use llguidance::{Matcher, ParserFactory};

    use super::*;

    /// A byte-level vocabulary: token id = byte value; 256.. are special tokens
    /// (`<|tool|>`, `<|/tool|>`, `<|user|>`, `<|system|>`, `<|assistant|>`, and EOS `<|end|>`).
    fn factory() -> &'static ParserFactory {
        static FACTORY: OnceLock<ParserFactory> = OnceLock::new();
        FACTORY.get_or_init(|| {
            let env = ApproximateTokEnv::single_byte_env();
            let mut factory = ParserFactory::new_simple(&env).expect("a parser factory");
            factory.set_stderr_log_level(0);
            factory
        })
    }

    const TOOL: u32 = 256;
    const END_TOOL: u32 = 257;
    const USER: u32 = 258;

    fn matcher(lark: &str) -> Matcher {
        let parser = factory().create_parser(TopLevelGrammar::from_lark(lark.to_string()));
        let matcher = Matcher::new(parser);
        if let Some(e) = matcher.get_error() {
            panic!("llguidance rejects the translation: {e}\n{lark}");
        }
        matcher
    }

    fn accepts_tokens(lark: &str, tokens: &[u32]) -> bool {
        let mut m = matcher(lark);
        if m.validate_tokens(tokens).expect("validation") < tokens.len() {
            return false;
        }
        m.consume_tokens(tokens).expect("valid tokens are consumed");
        m.is_accepting().expect("no error")
    }

    fn accepts(lark: &str, text: &str) -> bool {
        accepts_tokens(lark, &text.bytes().map(u32::from).collect::<Vec<_>>())
    }

    /// Translates `gbnf` and checks that llguidance accepts `good` and rejects `bad`.
    fn check(gbnf: &str, good: &[&str], bad: &[&str]) -> String {
        let lark = to_lark(gbnf).unwrap_or_else(|e| panic!("{e}"));
        for text in good {
            assert!(
                accepts(&lark, text),
                "should accept {text:?}; grammar:\n{lark}"
            );
        }
        for text in bad {
            assert!(
                !accepts(&lark, text),
                "should reject {text:?}; grammar:\n{lark}"
            );
        }
        lark
    }

    fn assert_error(gbnf: &str, line: usize, column: usize, needle: &str) {
        let e = to_lark(gbnf).expect_err("an invalid grammar");
        assert_eq!((e.line, e.column), (line, column), "{e}");
        assert!(
            e.message.contains(needle),
            "{e:?} should mention {needle:?}"
        );
    }

    // --- Whole grammars, after the kinds in llama.cpp's grammars/ folder ---------------------

    #[test]
    fn arithmetic() {
        let gbnf = r#"
# one equation per line
root    ::= line+
line    ::= sum " = " number "\n"
sum     ::= product (sp [+-] sp product)*
product ::= factor (sp [*/] sp factor)*
factor  ::= number | name | "(" sp sum sp ")"
number  ::= "-"? [0-9]+ ("." [0-9]+)?
name    ::= [a-z] [a-z0-9]*
sp      ::= " "?
"#;
        check(
            gbnf,
            &[
                "1 + 2 = 3\n",
                "(a+b)*2 = 10\n",
                "x1 = -0.5\n1/2 = 0.5\n",
                "((x)) = 1\n",
            ],
            &[
                "1 + = 3\n",
                "1 = 2",
                "",
                "1 + 2 = x\n",
                "(a = 1\n",
                "A = 1\n",
            ],
        );
    }

    #[test]
    fn trailing_whitespace_before_a_newline() {
        // llama.cpp's arithmetic example ends each number with `[ \t\n]*` and then wants "\n":
        // a greedy lexer would swallow that newline inside the number.
        let gbnf = r#"
root ::= (expr "=" ws num "\n")+
expr ::= num ([-+*/] num)* | "(" ws expr ")" ws
num  ::= [0-9]+ ws
ws   ::= [ \t\n]*
"#;
        check(
            gbnf,
            &["1+2=3\n", "1 +2 = 3 \n", "( 1 )=1\n\n", "1=1\n2=2\n"],
            &["1+2=3", "1+=3\n", "=1\n", "1 + 2=3\n"],
        );
    }

    #[test]
    fn chess() {
        let gbnf = r#"
# numbered pairs of moves in algebraic notation
root   ::= "1. " pair ("\n" [1-9] [0-9]{0,2} ". " pair)* "\n"?
pair   ::= ply " " ply
ply    ::= (castle | piece | pawn) [+#]?
castle ::= "O-O" "-O"?
piece  ::= [KQRBN] [a-h]? [1-8]? "x"? square
pawn   ::= ([a-h] "x")? square ("=" [QRBN])?
square ::= [a-h] [1-8]
"#;
        check(
            gbnf,
            &[
                "1. e4 e5\n2. Nf3 Nc6",
                "1. d4 d5\n2. c4 dxc4\n3. e8=Q+ O-O-O#\n",
                "1. Nbd2 Rxe1+",
            ],
            &[
                "1. e9 e5",
                "2. e4 e5",
                "1. e4",
                "1. O-O-O-O e5",
                "1. Pe4 e5",
            ],
        );
    }

    #[test]
    fn list() {
        let gbnf = "root ::= (\"- \" [^\\n\\r\\x0b\\x0c\\x85\\u2028\\u2029]+ \"\\n\")+\n";
        check(
            gbnf,
            &["- milk\n", "- a\n- b c\n", "- é ✓ \t\n"],
            &["", "- \n", "-milk\n", "- a\u{2028}b\n", "- a"],
        );
    }

    const JSON: &str = r#"
root   ::= ws value
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::= "{" ws (
             member
             ("," ws member)*
           )? "}" ws
member ::= string ":" ws value
array  ::= "[" ws ( value ("," ws value)* )? "]" ws

string ::= "\"" (
             [^"\\\x7F\x00-\x1F] |
             "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
           )* "\"" ws
number ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [-+]? [0-9]+)? ws
ws     ::= [ \t\n\r]*
"#;

    #[test]
    fn json() {
        let lark = check(
            JSON,
            &[
                r#"{"a": [1, 2.5e3, true, null], "b": {"c": "d\n\u00e9 ☃"}}"#,
                "[]",
                " -0.5 ",
                "{\n  \"k\" : \"v\"\n}\n",
                r#""\"quoted\"""#,
                "[[[]],{}]",
            ],
            &[
                r#"{"a" 1}"#,
                "[1,]",
                r#""open"#,
                "01",
                r#"{"a": tru}"#,
                "\"tab\there\"",
                r#""\x""#,
            ],
        );
        // The characters of a string or a number are never lexemes of their own: llguidance
        // would take a parser step for each.
        for line in lark
            .lines()
            .filter(|l| l.contains(r"\x{22}\x{5C}\x{7F}]/") || l.contains("/[1-9]/"))
        {
            assert!(
                line.starts_with(|c: char| c.is_ascii_uppercase()),
                "{line}\n{lark}"
            );
        }
        assert!(lark.contains("\nNUMBER: "), "{lark}");
    }

    #[test]
    fn japanese() {
        let gbnf = "
# sentences of kana and kanji
root     ::= sentence+
sentence ::= word (\"、\" word)* \"。\"
word     ::= (hiragana | katakana | kanji)+
hiragana ::= [ぁ-ゟ]
katakana ::= [ァ-ヿ]
kanji    ::= [一-鿿]
";
        check(
            gbnf,
            &["ひらがな、カタカナ。", "日本語。漢字とかな。"],
            &["abc。", "ひらがな", "、。"],
        );
    }

    #[test]
    fn keywords_and_identifiers() {
        // `return` is also the start of an identifier: llama.cpp tries both, a lexer would not.
        let gbnf = r#"
root  ::= stmt+
stmt  ::= "return" sp expr ";" nl | ident sp "=" sp expr ";" nl
expr  ::= ident | [0-9]+ | "(" expr ")"
ident ::= [a-z_] [a-z0-9_]*
sp    ::= " "*
nl    ::= "\n"
"#;
        check(
            gbnf,
            &[
                "return x;\n",
                "returned = 5;\n",
                "x = (y);\nreturn (1);\n",
                "return = 2;\n",
                "ret = return1;\n",
            ],
            &["return;\n", "1 = x;\n", "return x\n", "x = ;\n"],
        );
    }

    // --- Syntax --------------------------------------------------------------------------------

    #[test]
    fn escapes_in_literals() {
        let gbnf = r#"root ::= "\x41\u00e9\U0001F600 \t\n\r\\\"\[\]\-" "#;
        check(gbnf, &["Aé😀 \t\n\r\\\"[]-"], &["Aé😀", "A"]);
        check(
            "root ::= \"a/b\" \"\\x7f\" \"\\x00\"",
            &["a/b\x7f\0"],
            &["a/b"],
        );
        check("root ::= \"\"", &[""], &["a"]);
    }

    #[test]
    fn character_classes() {
        check(
            "root ::= [a-c\\-\\]x-z]+",
            &["a-]z", "cab"],
            &["d", "", "^"],
        );
        check(
            "root ::= [^a-z\\n]",
            &["A", "é", "\t", "/", "]"],
            &["a", "\n", ""],
        );
        check(
            "root ::= [\\x30-\\x39] [/] [\\u00e0-\\u00ff] [😀-😂]",
            &["5/é😁"],
            &["5/e😁", "a/é😁"],
        );
        // As llama.cpp: `-` last is a character, and `[]` matches nothing at all (an empty
        // sequence), so `[]` "x" is just "x".
        check("root ::= [a-] [] \"x\"", &["ax", "-x"], &["bx"]);
        // A reversed range matches no character.
        check("root ::= \"a\" | [z-a]", &["a"], &["z", "b"]);
        check("root ::= [^z-a]", &["z", "\n"], &[""]);
        // Class escapes and a literal quote.
        check(r#"root ::= ["\\\[\t]+"#, &["\"\\[\t"], &["x"]);
    }

    #[test]
    fn any_character() {
        check(
            "root ::= \"<\" . . \">\"",
            &["<ab>", "<\n😀>", "<>>>"],
            &["<a>", "<abc>"],
        );
        check("root ::= .*", &["", "anything\nat all ☃"], &[]);
    }

    #[test]
    fn repetitions() {
        let gbnf =
            "root ::= \"a\"{2} \"b\"{1,} \"c\"{0,2} \"d\"{ 1 , 3 } \"e\"? \"f\"* \"g\"+ \"h\"{0}\n";
        check(
            gbnf,
            &["aabdg", "aabbbccdddefffgg"],
            &["abdg", "aabcccdg", "aabdddddg", "aabg", "aabdgh"],
        );
        // Repeated groups, repeated repetitions, and a group repeated with bounds.
        check(
            "root ::= (\"ab\" | \"c\"){2,3} (\"x\"*)+",
            &["abc", "ccabxxx", "abab"],
            &["ab", "abababab"],
        );
        // {m,n} around a recursive rule.
        check(
            "root ::= (\"(\" p \")\"){2}\np ::= \"\" | \"(\" p \")\"",
            &["()(())", "(())()"],
            &["()", "()()()"],
        );
    }

    #[test]
    fn newlines_and_comments() {
        let gbnf = "# a comment before the rules\r\n\
                    root ::= # after ::=\r\n  item (\r\n    \", \" item # inside parentheses\r\n  )* |\r\n  \
                    \"none\"\r\n\r\n\
                    item ::= [a-z]+ # to the end of the line\r\n";
        check(gbnf, &["a, bc, d", "none", "none, a"], &["a,b", "a, B", ""]);
        // A newline ends a rule outside parentheses, so this `|` cannot start a line.
        assert_error("root ::= \"a\"\n  | \"b\"\n", 2, 3, "expected a rule name");
        // Nor can a continuation of a sequence.
        assert_error("root ::= \"a\"\n  \"b\"\n", 2, 3, "expected a rule name");
    }

    #[test]
    fn empty_alternatives() {
        check("root ::= \"a\" ( | \"b\") | ", &["", "a", "ab"], &["b"]);
        check("root ::=\n", &[""], &["a"]);
        check("root ::= ()* \"x\" () ", &["x"], &[""]);
    }

    #[test]
    fn rule_names() {
        let gbnf = r#"
root ::= dataType "," UPPER-CASE "," start "," 9lives "," -x- "," Start
dataType ::= "int" | "float"
UPPER-CASE ::= "U" | "V"
start ::= "s" root2
root2 ::= "" | "(" root2 ")"
9lives ::= "9"
-x- ::= "x"
Start ::= "S"
"#;
        let lark = check(
            gbnf,
            &["int,U,s(()),9,x,S", "float,V,s,9,x,S"],
            &["int,U,s(,9,x,S", "int,U,,9,x,S"],
        );
        assert!(lark.starts_with("start: root\n"), "{lark}");
        // `start` is renamed; the other names survive in some form.
        assert!(lark.contains("g_start: "), "{lark}");
    }

    #[test]
    fn a_later_definition_replaces_an_earlier_one() {
        check("root ::= \"a\"\nroot ::= \"b\"\n", &["b"], &["a"]);
        // References in the replaced definition must still be defined, as in llama.cpp.
        assert_error(
            "root ::= missing\nroot ::= \"b\"\n",
            1,
            10,
            "undefined rule 'missing'",
        );
    }

    #[test]
    fn special_tokens() {
        let gbnf = "root ::= <[256]> [a-z]+ !<[257]>* <[257]>\n";
        let lark = to_lark(gbnf).unwrap();
        assert!(
            lark.contains("<[256]>") && lark.contains("<[^257]>"),
            "{lark}"
        );
        let (a, b) = (u32::from(b'a'), u32::from(b'b'));
        assert!(accepts_tokens(&lark, &[TOOL, a, END_TOOL]));
        assert!(accepts_tokens(&lark, &[TOOL, a, b, USER, a, END_TOOL]));
        assert!(!accepts_tokens(&lark, &[TOOL, END_TOOL]));
        assert!(!accepts_tokens(&lark, &[a, END_TOOL]));
        assert!(!accepts_tokens(&lark, &[TOOL, a]));
        let lark = to_lark("root ::= <|user|> \" \" [a-z]+\n").unwrap();
        assert!(accepts_tokens(&lark, &[USER, u32::from(b' '), a, b]));
        assert!(!accepts_tokens(&lark, &[u32::from(b' '), a]));
        // After the same token, two parses go on: neither may lose to the lexer.
        let lark =
            to_lark("root ::= t \"1\" [2] \"3\" | t \"12\"\nt ::= <[256]> | \"(\" t \")\"\n")
                .unwrap();
        let digits = |s: &str| s.bytes().map(u32::from).collect::<Vec<_>>();
        assert!(
            accepts_tokens(&lark, &[&[TOOL][..], &digits("123")].concat()),
            "{lark}"
        );
        assert!(
            accepts_tokens(&lark, &[&[TOOL][..], &digits("12")].concat()),
            "{lark}"
        );
        assert!(
            !accepts_tokens(&lark, &[&[TOOL][..], &digits("13")].concat()),
            "{lark}"
        );
    }

    #[test]
    fn root_that_is_a_single_regex() {
        let lark = check(
            "root ::= [a-z]+ \"@\" [a-z]+ (\".\" [a-z]+)+",
            &["me@example.org"],
            &["me@org", "@a.b"],
        );
        assert!(lark.starts_with("start: ROOT\n"), "{lark}");
    }

    // --- Places where greedy lexing must not lose strings ----------------------------------

    #[test]
    fn greedy_lexer_conflicts() {
        // A lexeme that could grow with the character that follows it.
        let gbnf = "root ::= e\ne ::= [a-z]* f | \"(\" e \")\"\nf ::= \"x\" | \"[\" e \"]\"\n";
        check(gbnf, &["abx", "x", "a[bx]", "(x)", "xx"], &["ab", "(ab)"]);
        // One lexeme the prefix of another allowed at the same place.
        let gbnf = "root ::= e\ne ::= \"x\" | e op e | \"(\" e \")\"\nop ::= \"<\" | \"<=\"\n";
        check(gbnf, &["x<x", "x<=x", "x<=(x<x)"], &["x<", "x<=", "x=x"]);
        let gbnf =
            "root ::= e\ne ::= \"x\" | e op e | \"(\" e \")\" | \"=\" e\nop ::= \"<\" | \"<=\"\n";
        check(
            gbnf,
            &["x<=x", "x<==x", "x<=(x)", "=x", "x<=x<=x"],
            &["x<==", "x=<x"],
        );
    }

    // --- Errors --------------------------------------------------------------------------------

    #[test]
    fn missing_root() {
        assert_error("item ::= \"x\"\n", 1, 1, "no 'root' rule");
        assert_error("", 1, 1, "no 'root' rule");
        assert_error("# only a comment\n", 1, 1, "no 'root' rule");
    }

    #[test]
    fn undefined_rule() {
        assert_error("root ::= a b\na ::= \"x\"\n", 1, 12, "undefined rule 'b'");
        assert_error(
            "root ::= \"x\"\nother ::= (\"y\" | zz)*\n",
            2,
            18,
            "undefined rule 'zz'",
        );
    }

    #[test]
    fn unterminated_literal_and_class() {
        assert_error("root ::= \"abc\n", 1, 10, "unterminated string literal");
        assert_error(
            "root ::= \"a\" [a-z\n",
            1,
            14,
            "unterminated character class",
        );
        assert_error("root ::= [a-", 1, 10, "unterminated character class");
        assert_error("root ::= <think", 1, 10, "unterminated token");
    }

    #[test]
    fn bad_escapes() {
        assert_error("root ::= \"a\\qb\"", 1, 12, "unknown escape '\\q'");
        assert_error(
            "root ::= \"\\x4\"",
            1,
            11,
            "expected 2 hex digits after '\\x'",
        );
        assert_error(
            "root ::= [\\u12]",
            1,
            11,
            "expected 4 hex digits after '\\u'",
        );
        assert_error(
            "root ::= \"ok\"\nx ::= \"\\uD800\"",
            2,
            8,
            "is not a Unicode character",
        );
        assert_error(
            "root ::= \"\\U00110000\"",
            1,
            11,
            "is not a Unicode character",
        );
        assert_error("root ::= \"\\", 1, 11, "middle of an escape");
        // Column counts characters, not bytes.
        assert_error("root ::= \"é☃\\y\"", 1, 13, "unknown escape");
    }

    #[test]
    fn a_grammar_past_the_size_limit_is_refused_where_it_passes() {
        let big = format!("root ::= \"{}\"", "a".repeat(MAX_GBNF_BYTES));
        let error = to_lark(&big).unwrap_err();
        assert_eq!((error.line, error.column), (1, MAX_GBNF_BYTES + 1));
        assert!(error.message.contains("at most 16 KiB"), "{error}");
    }

    #[test]
    fn missing_rule_definition_marker() {
        assert_error("root = \"a\"\n", 1, 6, "expected '::='");
        assert_error("root ::= a\na \"b\"\n", 2, 3, "expected '::='");
        assert_error("::= \"a\"\n", 1, 1, "expected a rule name");
        assert_error("root_x ::= \"a\"\n", 1, 5, "expected '::='");
    }

    #[test]
    fn other_syntax_errors() {
        assert_error(
            "root ::= (\"a\" | \"b\"",
            1,
            20,
            "expected ')' to close the group opened at line 1, column 10",
        );
        assert_error("root ::= \"a\" )\n", 1, 14, "a rule ends at a newline");
        assert_error("root ::= * \"a\"\n", 1, 10, "'*' has no preceding item");
        assert_error("root ::= \"\"+\n", 1, 12, "'+' has no preceding item");
        assert_error("root ::= \"a\"{0}?\n", 1, 16, "'?' has no preceding item");
        assert_error("root ::= \"a\"{x}\n", 1, 14, "expected a number after '{'");
        assert_error("root ::= \"a\"{1 2}\n", 1, 16, "expected ',' or '}'");
        assert_error("root ::= \"a\"{1,2\n", 1, 17, "expected '}'");
        assert_error(
            "root ::= \"a\"{3,1}\n",
            1,
            13,
            "maximum 1 is below its minimum 3",
        );
        assert_error("root ::= \"a\"{99999999999}\n", 1, 14, "too large");
        let deep = format!("root ::= {}\"a\"{}\n", "(".repeat(300), ")".repeat(300));
        assert_error(&deep, 1, 10 + MAX_NESTING, "nest deeper");
    }

    #[test]
    fn token_errors() {
        assert_error(
            "root ::= !<think>\n",
            1,
            10,
            "can only exclude tokens by id",
        );
        assert_error("root ::= <[12>\n", 1, 14, "expected ']'");
        assert_error("root ::= <[]>\n", 1, 12, "expected a token id");
        assert_error("root ::= <[1]\n", 1, 14, "expected '>'");
        assert_error("root ::= <a b>\n", 1, 10, "cannot be written");
        assert_error("root ::= !x\n", 1, 11, "expected '<' after '!'");
    }

    #[test]
    fn error_display() {
        let e = to_lark("root ::= \"a\"\nroot ::= nope\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "GBNF grammar, line 2, column 10: undefined rule 'nope'"
        );
    }
}
