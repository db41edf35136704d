//! The prompt box: a multi-line editor whose text is wrapped by grapheme clusters, by the cells
//! they take, so that the cursor can be placed exactly; or, read-only, what the model saw of it:
//! the chat template's rendering, or its tokens with the special ones marked, coloured by
//! their probability when the run asked for prompt_logprobs, one of them inspected.

use super::cells::{word_rows, word_wrap};
use super::text::TextBuffer;
use super::undo::Undo;
use crate::engine::PromptToken;
use crate::model::text::chat_template::Message;
use crate::response::TopLogprob;
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};
use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptState {
    pub buffer: TextBuffer,
    /// In chat mode, special-token text typed in the message stays plain text.
    pub literal_specials: bool,
    /// A system message and earlier turns: in chat mode the template gets them before the
    /// prompt, which is the last user message.
    pub history: Vec<Message>,
    pub view: PromptView,
    /// The token inspected in the token view (clamped to the last when past it).
    pub token_cursor: usize,
    /// The text before the last edits, for Ctrl+Z.
    pub undo: Undo,
}

/// What the prompt box shows: `o` cycles them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PromptView {
    /// The text as typed, to edit.
    #[default]
    Typed,
    /// The chat template's rendering (the text itself for a raw prompt).
    Rendered,
    /// The rendered prompt split into the model's tokens.
    Tokens,
}

impl PromptView {
    pub fn next(self) -> Self {
        match self {
            PromptView::Typed => PromptView::Rendered,
            PromptView::Rendered => PromptView::Tokens,
            PromptView::Tokens => PromptView::Typed,
        }
    }
}

/// What a model saw of the prompt in its last run.
#[derive(Debug, Clone, PartialEq)]
pub struct SeenPrompt {
    /// The model's name.
    pub model: String,
    /// The chat template's rendering; `None` for a raw prompt.
    pub rendered: Option<String>,
    pub tokens: Vec<PromptToken>,
}

impl SeenPrompt {
    /// Not a token to start from: an empty prompt to a model that adds no BOS token.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

impl PromptState {
    pub fn new(text: &str) -> Self {
        Self {
            buffer: TextBuffer::new(text),
            token_cursor: usize::MAX,
            ..Self::default()
        }
    }

    pub fn text(&self) -> &str {
        &self.buffer.text
    }

    /// Applies `change` (which says whether the text changed) so that Ctrl+Z can take it
    /// back; returns whether the text changed.
    pub fn edit(&mut self, change: impl FnOnce(&mut TextBuffer) -> bool) -> bool {
        let before = self.buffer.clone();
        if change(&mut self.buffer) {
            self.undo.record(before, &self.buffer);
            true
        } else {
            if self.buffer.cursor != before.cursor {
                self.undo.moved();
            }
            false
        }
    }

    /// Ctrl+Z: the text as it was before the last edit; whether there was one.
    pub fn undo(&mut self) -> bool {
        match self.undo.undo() {
            Some(before) => {
                self.buffer = before;
                true
            }
            None => false,
        }
    }
}

/// Splits each line into rows of at most `width` cells, between words where it can (a word
/// longer than a row is cut between grapheme clusters); also returns the cursor's (row, cell).
pub fn wrap(buffer: &TextBuffer, width: usize) -> (Vec<String>, (usize, usize)) {
    let width = width.max(1);
    let mut rows: Vec<String> = Vec::new();
    let mut cursor = (0, 0);
    // Where the line starts in the text.
    let mut at = 0;
    for line in buffer.text.split('\n') {
        let clusters: Vec<(usize, &str)> = line.grapheme_indices(true).collect();
        for range in word_rows(&clusters, width) {
            let row = &clusters[range];
            if let Some(i) = row.iter().position(|&(b, _)| at + b == buffer.cursor) {
                let cells = row[..i].iter().map(|(_, g)| g.width()).sum();
                cursor = (rows.len(), cells);
            }
            rows.push(row.iter().map(|&(_, g)| g).collect());
        }
        if at + line.len() == buffer.cursor {
            let cells = rows.last().map_or(0, |row| row.width());
            if cells >= width {
                // A cursor after a full row sits at the start of the row below it.
                rows.push(String::new());
                cursor = (rows.len() - 1, 0);
            } else {
                cursor = (rows.len() - 1, cells);
            }
        }
        // The newline.
        at += line.len() + 1;
    }
    (rows, cursor)
}

/// The prompt's tokens as the model scored them (a run with prompt_logprobs): each one's
/// logprob (none for the first) and, where asked for, the top alternatives at its place.
#[derive(Debug, Clone, Copy)]
pub struct PromptScores<'a> {
    pub logprobs: &'a [Option<f32>],
    pub top: Option<&'a [Option<Vec<TopLogprob>>]>,
}

/// Which models get chat and which raw text, as the prompt box's title says it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatModes {
    /// Some model is in chat mode.
    pub chat: bool,
    /// Some loaded model has a chat template, so `m` can switch.
    pub available: bool,
    /// With models in chat mode, the names of those that get raw text.
    pub raw: Vec<String>,
    /// Models have loaded and none has a chat template (Gemma 3's GGUF): said in the title, so
    /// that nobody waits for `m` to work.
    pub missing: bool,
}

/// What the prompt box draws beside its own state.
pub struct Shown<'a> {
    pub modes: &'a ChatModes,
    /// Special-token texts, marked in a chat message.
    pub specials: &'a [&'a str],
    /// What the model of the selected side saw, for the rendered and token views.
    pub seen: Option<&'a SeenPrompt>,
    /// The scores of `seen`'s tokens, when the side's last run has them.
    pub scores: Option<PromptScores<'a>>,
    pub focused: bool,
}

/// The title says how the text reaches the model, and that `m` switches it when it can.
pub fn render(frame: &mut Frame, area: Rect, state: &PromptState, shown: &Shown, theme: &Theme) {
    let title = match (state.view, shown.seen) {
        (PromptView::Typed, _) => typed_title(state, shown),
        (_, None) => " prompt · not run yet (o: typed) ".to_owned(),
        (PromptView::Rendered, Some(seen)) => {
            format!(" prompt · as {} sees it (o: tokens) ", seen.model)
        }
        (PromptView::Tokens, Some(seen)) => format!(
            " prompt · {} tokens of {}{} · ←/→ inspect (o: typed) ",
            seen.tokens.len(),
            seen.model,
            if shown.scores.is_some() {
                " by probability"
            } else {
                ""
            }
        ),
    };
    let block = Block::bordered()
        .title(Span::styled(title, theme.title))
        .border_style(theme.frame(shown.focused));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.width == 0 || inner.height == 0 {
        return;
    }
    let width = usize::from(inner.width);
    let height = usize::from(inner.height);
    let lines = match (state.view, shown.seen) {
        (PromptView::Typed, _) => return render_typed(frame, inner, state, shown, theme),
        (_, None) => Vec::new(),
        (PromptView::Rendered, Some(seen)) => {
            let text = seen.rendered.as_deref().unwrap_or(state.text());
            // A template ends its last turn with a line break: the empty row after it would
            // push the template's first line out of a box it fits.
            word_wrap(text.trim_end_matches('\n'), width)
                .into_iter()
                .map(Line::from)
                .collect()
        }
        (PromptView::Tokens, Some(seen)) => {
            return render_tokens(frame, inner, seen, shown.scores, state.token_cursor, theme);
        }
    };
    // The end is where the model goes on: keep it in view.
    let top = lines.len().saturating_sub(height);
    let lines: Vec<Line> = lines.into_iter().skip(top).collect();
    frame.render_widget(Paragraph::new(lines).style(theme.base), inner);
}

/// The token view: the tokens, the inspected one kept in view, and on the last row what is
/// known of it.
fn render_tokens(
    frame: &mut Frame,
    inner: Rect,
    seen: &SeenPrompt,
    scores: Option<PromptScores>,
    cursor: usize,
    theme: &Theme,
) {
    let cursor = cursor.min(seen.tokens.len().saturating_sub(1));
    let width = usize::from(inner.width);
    let (lines, cursor_row) = token_lines(&seen.tokens, width, theme, scores, cursor);
    let height = usize::from(inner.height).saturating_sub(1).max(1);
    let top = (cursor_row + 1).saturating_sub(height);
    let mut lines: Vec<Line> = lines.into_iter().skip(top).take(height).collect();
    if inner.height > 1 {
        lines.push(Line::styled(
            token_detail(&seen.tokens, scores, cursor),
            theme.dim,
        ));
    }
    frame.render_widget(Paragraph::new(lines).style(theme.base), inner);
}

/// `token 3/7 " upon" (id 5193) · p 0.421 (logprob -0.865) · next best: " a" 0.310, " the" 0.052`.
fn token_detail(tokens: &[PromptToken], scores: Option<PromptScores>, i: usize) -> String {
    let Some(token) = tokens.get(i) else {
        return String::new();
    };
    // Counted from 1, as the inspector counts a sample's tokens.
    let place = format!("token {}/{}", i + 1, tokens.len());
    let mut detail = match token.id {
        Some(id) => format!("{place} {:?} (id {id})", token.text),
        None => format!("{place} {:?} (the server tokenizes it)", token.text),
    };
    let Some(scores) = scores else {
        return detail + " · set prompt_logprobs to see how likely each token was";
    };
    match scores.logprobs.get(i).copied().flatten() {
        Some(lp) => detail.push_str(&format!(" · p {:.3} (logprob {lp:.3})", lp.exp())),
        None => detail.push_str(" · the first token: nothing before it to predict it"),
    }
    let others: Vec<String> = scores
        .top
        .and_then(|top| top.get(i)?.as_ref())
        .map(|top| {
            top.iter()
                .filter(|alt| Some(alt.0) != token.id)
                .map(|alt| format!("{:?} {:.3}", alt.1, alt.2.exp()))
                .collect()
        })
        .unwrap_or_default();
    if !others.is_empty() {
        detail.push_str(&format!(" · next best: {}", others.join(", ")));
    }
    detail
}

fn typed_title(state: &PromptState, shown: &Shown) -> String {
    // Special-token text becomes the control token (as transformers, vLLM and llama-server
    // read it) unless the user says otherwise: mark it either way, and say which.
    let modes = shown.modes;
    let typed = shown.specials.iter().any(|s| state.text().contains(s));
    let title = match (modes.chat, modes.available, typed, state.literal_specials) {
        (true, _, true, false) => " prompt · chat · marked text = control tokens (m: as text)",
        (true, _, true, true) => " prompt · chat · marked text stays text (m: raw)",
        (true, ..) => " prompt · chat template",
        (false, true, true, false) => " prompt · raw · marked text = control tokens (m: chat)",
        (false, false, true, false) => " prompt · raw · marked text = control tokens",
        (false, _, true, true) => " prompt · raw · marked text stays text (m: as tokens)",
        (false, true, ..) => " prompt · raw (m: chat)",
        (false, false, ..) => " prompt",
    };
    let mut title = title.to_owned();
    if modes.chat && !state.history.is_empty() {
        title.push_str(&format!(" · {} earlier", state.history.len()));
    }
    if !modes.raw.is_empty() {
        title.push_str(&format!(" · raw for {}", modes.raw.join(", ")));
    }
    if modes.missing {
        title.push_str(" · no chat template");
    }
    title + " "
}

/// Shown dimmed in an empty prompt box, under the cursor.
const PLACEHOLDER: &str = "type a prompt";

fn render_typed(frame: &mut Frame, inner: Rect, state: &PromptState, shown: &Shown, theme: &Theme) {
    let marked = shown.specials;
    let mark = if state.literal_specials {
        theme.dim
    } else {
        theme.error
    };
    let (rows, (row, col)) = wrap(&state.buffer, usize::from(inner.width));
    let height = usize::from(inner.height);
    // Keep the cursor's row in view.
    let top = (row + 1).saturating_sub(height);
    let lines: Vec<Line> = if state.text().is_empty() {
        vec![Line::styled(PLACEHOLDER, theme.dim)]
    } else {
        rows.into_iter()
            .skip(top)
            .take(height)
            .map(|row| marked_line(row, marked, mark))
            .collect()
    };
    frame.render_widget(Paragraph::new(lines).style(theme.base), inner);
    if shown.focused {
        frame.set_cursor_position(Position::new(
            inner.x + col as u16,
            inner.y + (row - top) as u16,
        ));
    }
}

/// Tokens laid out in rows of `width` cells, and the row of token `cursor`. Unscored tokens
/// are every other one underlined so that their boundaries show, special ones in the marked
/// style; scored ones have their probability's heatmap colour. The inspected token is drawn
/// reversed. A newline inside a token shows as `↵` and breaks the row after it.
fn token_lines<'a>(
    tokens: &[PromptToken],
    width: usize,
    theme: &Theme,
    scores: Option<PromptScores>,
    cursor: usize,
) -> (Vec<Line<'a>>, usize) {
    let mut lines = Vec::new();
    let mut spans: Vec<Span> = Vec::new();
    let mut cells = 0;
    let mut cursor_row = 0;
    for (i, token) in tokens.iter().enumerate() {
        let logprob = scores.and_then(|s| s.logprobs.get(i).copied().flatten());
        let style = match logprob {
            Some(lp) if i == cursor => theme.cursor_style(lp.exp()),
            Some(lp) => theme.token_style(lp.exp()),
            None if token.special => theme.error,
            None if i % 2 == 1 => theme.value.add_modifier(Modifier::UNDERLINED),
            None => theme.value,
        };
        let style = match (i == cursor, logprob) {
            (true, None) => style.add_modifier(Modifier::REVERSED | Modifier::BOLD),
            _ => style,
        };
        for cluster in token.text.graphemes(true) {
            let newline = cluster.contains('\n');
            let shown = match cluster {
                _ if newline => "↵",
                "\t" => "→",
                other => other,
            };
            let w = shown.width();
            if cells > 0 && cells + w > width.max(1) {
                lines.push(Line::from(std::mem::take(&mut spans)));
                cells = 0;
            }
            spans.push(Span::styled(shown.to_owned(), style));
            cells += w;
            if i == cursor {
                cursor_row = lines.len();
            }
            if newline {
                lines.push(Line::from(std::mem::take(&mut spans)));
                cells = 0;
            }
        }
    }
    lines.push(Line::from(spans));
    (lines, cursor_row)
}

/// A row with every occurrence of a special-token text in `mark` (longest texts first).
fn marked_line<'a>(row: String, specials: &[&str], mark: Style) -> Line<'a> {
    let mut spans = Vec::new();
    let mut rest = row.as_str();
    while let Some((at, special)) = specials
        .iter()
        .filter_map(|s| rest.find(s).map(|at| (at, *s)))
        .min_by_key(|&(at, s)| (at, std::cmp::Reverse(s.len())))
    {
        spans.push(Span::raw(rest[..at].to_owned()));
        spans.push(Span::styled(special.to_owned(), mark));
        rest = &rest[at + special.len()..];
    }
    spans.push(Span::raw(rest.to_owned()));
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_places_the_cursor_on_the_right_row() {
        let buffer = TextBuffer::new("abcdef\ngh");
        let (rows, cursor) = wrap(&buffer, 4);
        assert_eq!(rows, ["abcd", "ef", "gh"]);
        assert_eq!(cursor, (2, 2));
        let (rows, cursor) = wrap(&TextBuffer::new("abcd"), 4);
        assert_eq!(rows, ["abcd", ""]);
        assert_eq!(cursor, (1, 0));
    }

    /// Issue 34: the prompt wrapped mid-word.
    #[test]
    fn rows_break_between_words_and_only_a_word_too_long_for_a_row_is_cut() {
        let (rows, _) = wrap(&TextBuffer::new("Once upon a time there"), 10);
        assert_eq!(rows, ["Once upon ", "a time ", "there"]);
        let (rows, _) = wrap(&TextBuffer::new("a extraordinarily long"), 8);
        assert_eq!(rows, ["a ", "extraord", "inarily ", "long"]);
        let mut buffer = TextBuffer::new("Once upon a time");
        buffer.cursor = "Once upon a t".len();
        assert_eq!(
            wrap(&buffer, 10).1,
            (1, 3),
            "in `time`, moved to the second row"
        );
        buffer.cursor = "Once ".len();
        assert_eq!(wrap(&buffer, 10).1, (0, 5));
    }

    #[test]
    fn wide_clusters_take_their_cells_and_the_cursor_counts_cells() {
        let (rows, cursor) = wrap(&TextBuffer::new("日本x"), 3);
        assert_eq!(rows, ["日", "本x", ""]);
        assert_eq!(cursor, (2, 0));
        let mut buffer = TextBuffer::new("e\u{301}日");
        buffer.cursor = 3;
        assert_eq!(wrap(&buffer, 10), (vec!["e\u{301}日".to_owned()], (0, 1)));
        buffer.cursor = buffer.text.len();
        assert_eq!(
            wrap(&buffer, 10).1,
            (0, 3),
            "after é (one cell) and 日 (two)"
        );
    }

    #[test]
    fn tokens_break_rows_at_newlines_and_at_the_width() {
        let token = |text: &str, special| PromptToken {
            id: Some(0),
            text: text.to_owned(),
            special,
        };
        let theme = Theme::plain();
        let tokens = [
            token("<|im_start|>", true),
            token("user", false),
            token("\n", false),
            token("Hello", false),
        ];
        let (lines, cursor_row) = token_lines(&tokens, 8, &theme, None, 1);
        let texts: Vec<String> = lines.iter().map(ToString::to_string).collect();
        assert_eq!(texts, ["<|im_sta", "rt|>user", "↵", "Hello"]);
        assert_eq!(cursor_row, 1, "`user` is on the second row");
        assert_eq!(
            lines[0].spans[0].style, theme.error,
            "special tokens marked"
        );
        let hello = &lines[3].spans[0];
        assert!(
            hello.style.add_modifier.contains(Modifier::UNDERLINED),
            "{hello:?}"
        );
        // A span per grapheme: `rt|>` ends the special token, `u` starts `user`.
        let user = &lines[1].spans[4];
        assert!(
            user.style.add_modifier.contains(Modifier::REVERSED),
            "{user:?}"
        );
    }

    #[test]
    fn scored_tokens_take_their_probabilitys_colour_and_the_detail_names_the_alternatives() {
        let token = |id, text: &str| PromptToken {
            id: Some(id),
            text: text.to_owned(),
            special: false,
        };
        let theme = Theme::dark();
        let tokens = [token(1, "Once"), token(7, " upon"), token(9, " a")];
        let logprobs = [None, Some(-0.5f32), Some(-3.0)];
        let top = [
            None,
            Some(vec![
                TopLogprob(7, " upon".into(), -0.5),
                TopLogprob(8, " there".into(), -1.5),
            ]),
            None,
        ];
        let scores = PromptScores {
            logprobs: &logprobs,
            top: Some(&top),
        };
        let (lines, _) = token_lines(&tokens, 40, &theme, Some(scores), 1);
        // A span per grapheme: `Once`, then ` upon` from the fifth, ` a` from the tenth.
        let spans = &lines[0].spans;
        assert_eq!(spans[0].style, theme.value, "the first token has no score");
        assert_eq!(spans[4].style, theme.cursor_style((-0.5f32).exp()));
        assert_eq!(spans[9].style, theme.token_style((-3.0f32).exp()));
        assert_eq!(
            token_detail(&tokens, Some(scores), 1),
            "token 2/3 \" upon\" (id 7) · p 0.607 (logprob -0.500) · next best: \" there\" 0.223"
        );
        assert!(token_detail(&tokens, Some(scores), 0).contains("the first token"));
        assert!(token_detail(&tokens, None, 2).contains("set prompt_logprobs"));
        // A served model's raw prompt is one piece with no id of ours.
        let served = [PromptToken {
            id: None,
            text: "Once upon".into(),
            special: false,
        }];
        assert!(
            token_detail(&served, None, 0)
                .starts_with("token 1/1 \"Once upon\" (the server tokenizes it)")
        );
    }
}
