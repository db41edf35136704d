//! The sample columns: streamed tokens wrapped as they arrive (not every frame), a title with
//! the sample's seed, and a footer with how and why it ended.

use super::layout::column_rects;
use super::theme::Theme;
use crate::response::{StopMatched, StopReason};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

/// A piece of shown text; `prob` is `None` for text that is no token (a released stop tail).
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub text: String,
    pub prob: Option<f32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub seed: u64,
    pub tokens: usize,
    sum_logprob: f64,
    /// The stop reason as the footer shows it, once the sample has ended.
    pub finish: Option<String>,
    /// Everything as it arrived, kept to re-wrap after a resize.
    pieces: Vec<Segment>,
    pub lines: Vec<Vec<Segment>>,
    width: usize,
    line_chars: usize,
}

impl Column {
    pub fn new(seed: u64, width: usize) -> Self {
        Self {
            seed,
            tokens: 0,
            sum_logprob: 0.0,
            finish: None,
            pieces: Vec::new(),
            lines: vec![Vec::new()],
            width: width.max(1),
            line_chars: 0,
        }
    }

    pub fn push_token(&mut self, text: &str, prob: f32, logprob: f32) {
        self.tokens += 1;
        self.sum_logprob += f64::from(logprob);
        self.push(text, Some(prob));
    }

    pub fn push(&mut self, text: &str, prob: Option<f32>) {
        if text.is_empty() {
            return;
        }
        let text: String = text
            .chars()
            .map(|c| if c.is_control() && c != '\n' { ' ' } else { c })
            .collect();
        self.place(&text, prob);
        self.pieces.push(Segment { text, prob });
    }

    /// `stop_ids` are the run's stop token ids: a matched id outside them must be EOS.
    pub fn finish(&mut self, reason: StopReason, matched: Option<&StopMatched>, stop_ids: &[u32]) {
        self.finish = Some(match (reason, matched) {
            (StopReason::Stop, Some(StopMatched::Text(s))) => {
                format!("stop \"{}\"", s.escape_debug())
            }
            (StopReason::Stop, Some(StopMatched::Token(id))) if stop_ids.contains(id) => {
                format!("stop <token {id}>")
            }
            (StopReason::Stop, Some(StopMatched::Token(_))) => "stop <eos>".to_owned(),
            (reason, _) => reason.as_str().to_owned(),
        });
    }

    pub fn rewrap(&mut self, width: usize) {
        let width = width.max(1);
        if width == self.width {
            return;
        }
        self.width = width;
        self.lines = vec![Vec::new()];
        self.line_chars = 0;
        for piece in std::mem::take(&mut self.pieces) {
            self.place(&piece.text, piece.prob);
            self.pieces.push(piece);
        }
    }

    fn new_line(&mut self) {
        self.lines.push(Vec::new());
        self.line_chars = 0;
    }

    /// Token-level wrapping: a token that does not fit starts a new row; only tokens wider than
    /// a whole row are split.
    fn place(&mut self, text: &str, prob: Option<f32>) {
        for (i, part) in text.split('\n').enumerate() {
            if i > 0 {
                self.new_line();
            }
            let mut chars: Vec<char> = part.chars().collect();
            if chars.is_empty() {
                continue;
            }
            if self.line_chars > 0
                && self.line_chars + chars.len() > self.width
                && chars.len() <= self.width
            {
                self.new_line();
            }
            while !chars.is_empty() {
                let room = self.width - self.line_chars;
                if room == 0 {
                    self.new_line();
                    continue;
                }
                let rest = chars.split_off(room.min(chars.len()));
                self.line_chars += chars.len();
                let segment = Segment {
                    text: chars.into_iter().collect(),
                    prob,
                };
                if let Some(line) = self.lines.last_mut() {
                    line.push(segment);
                }
                chars = rest;
            }
        }
    }

    /// `■ stop "\n\n" 37 tok lp -1.23 ppl 3.42`; a running sample shows `…` instead.
    pub fn footer(&self) -> String {
        let mut footer = match &self.finish {
            Some(reason) => format!("■ {reason} {} tok", self.tokens),
            None => format!("… {} tok", self.tokens),
        };
        if self.tokens > 0 {
            let mean = self.sum_logprob / self.tokens as f64;
            footer.push_str(&format!(" lp {mean:.2} ppl {:.2}", (-mean).exp()));
        }
        footer
    }
}

/// The samples of the run on screen.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Columns {
    pub columns: Vec<Column>,
}

impl Columns {
    pub fn start(&mut self, seeds: &[u64], width: usize) {
        self.columns = seeds.iter().map(|&seed| Column::new(seed, width)).collect();
    }

    pub fn rewrap(&mut self, width: usize) {
        for column in &mut self.columns {
            column.rewrap(width);
        }
    }

    /// Samples cut short by a newer run end as `abort`.
    pub fn abort_unfinished(&mut self) {
        for column in self.columns.iter_mut().filter(|c| c.finish.is_none()) {
            column.finish(StopReason::Abort, None, &[]);
        }
    }
}

pub fn render(frame: &mut Frame, area: Rect, state: &Columns, focused: bool, theme: &Theme) {
    if state.columns.is_empty() {
        let block = Block::bordered()
            .title(Span::styled(" samples ", theme.title))
            .border_style(theme.frame(focused));
        let text = Paragraph::new(Line::styled(
            "samples appear here once the model is ready",
            theme.dim,
        ))
        .block(block);
        frame.render_widget(text, area);
        return;
    }
    for (i, (column, rect)) in state
        .columns
        .iter()
        .zip(column_rects(area, state.columns.len()))
        .enumerate()
    {
        let block = Block::bordered()
            .title(Span::styled(
                format!(" #{i} seed {} ", column.seed),
                theme.title,
            ))
            .border_style(theme.frame(focused));
        let inner = block.inner(rect);
        frame.render_widget(block, rect);
        if inner.height == 0 {
            continue;
        }
        let text_rows = usize::from(inner.height - 1);
        // Follow the stream: show the newest rows.
        let skip = column.lines.len().saturating_sub(text_rows);
        let mut lines: Vec<Line> = column.lines[skip..]
            .iter()
            .map(|segments| {
                Line::from(
                    segments
                        .iter()
                        .map(|s| {
                            let style = s.prob.map_or(theme.base, |p| theme.token_style(p));
                            Span::styled(s.text.as_str(), style)
                        })
                        .collect::<Vec<_>>(),
                )
            })
            .collect();
        lines.resize(text_rows, Line::default());
        let footer_style = if column.finish.as_deref().is_some_and(|f| f == "error") {
            theme.error
        } else {
            theme.dim
        };
        lines.push(Line::styled(column.footer(), footer_style));
        frame.render_widget(Paragraph::new(lines), inner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(column: &Column) -> Vec<String> {
        column
            .lines
            .iter()
            .map(|l| l.iter().map(|s| s.text.as_str()).collect())
            .collect()
    }

    #[test]
    fn tokens_wrap_whole_and_rewrap_on_resize() {
        let mut c = Column::new(1, 8);
        for t in ["Once", " upon", " a", "\ntime", " abcdefghijk"] {
            c.push_token(t, 0.5, -1.0);
        }
        assert_eq!(texts(&c), ["Once", " upon a", "time abc", "defghijk"]);
        c.rewrap(20);
        assert_eq!(texts(&c), ["Once upon a", "time abcdefghijk"]);
        assert_eq!(c.tokens, 5);
    }

    #[test]
    fn footer_names_the_stop_and_the_statistics() {
        let mut c = Column::new(1, 10);
        c.push_token("a", 0.5, -1.0);
        c.push_token("b", 0.5, -3.0);
        assert_eq!(c.footer(), "… 2 tok lp -2.00 ppl 7.39");
        c.finish(
            StopReason::Stop,
            Some(&StopMatched::Text("\n\n".into())),
            &[],
        );
        assert_eq!(c.footer(), "■ stop \"\\n\\n\" 2 tok lp -2.00 ppl 7.39");
        c.finish(StopReason::Stop, Some(&StopMatched::Token(2)), &[13]);
        assert_eq!(c.finish.as_deref(), Some("stop <eos>"));
        c.finish(StopReason::Stop, Some(&StopMatched::Token(13)), &[13]);
        assert_eq!(c.finish.as_deref(), Some("stop <token 13>"));
        c.finish(StopReason::Length, None, &[]);
        assert_eq!(c.finish.as_deref(), Some("length"));
    }
}
