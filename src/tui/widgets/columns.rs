//! The sample columns: every token with what the inspector needs, its text wrapped as it
//! arrives, a scroll position per column, the token cursor, and a footer with how and why the
//! sample ended.

use super::chain_view::TokenTrace;
use super::layout::Grid;
use super::spark;
use super::wrap::Wrapped;
use crate::engine::TokenEvent;
use crate::engine::score::common_prefix;
use crate::params::LogprobsMode;
use crate::response::channels::Channel;
use crate::response::{
    BranchOrigin, CrossScore, StopMatched, StopReason, mean_and_perplexity, stop_label,
};
use crate::tui::comparison::{Mark, SideId, SideTitle};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use unicode_width::UnicodeWidthStr;

/// Which probability colours the tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Heat {
    /// After the sampler's processing: what the token was drawn with.
    #[default]
    Kept,
    /// The one the logprobs report (`logprobs_mode`): the model's own under the raw modes,
    /// what the token was drawn with under the processed ones.
    Reported,
    /// Another compared model's raw probability of the token: where the two disagree (see
    /// [`super::disagreement`]).
    Other,
}

impl Heat {
    /// The logprobs' p, or back to kept p from it (`h`).
    pub fn toggled(self) -> Self {
        match self {
            Heat::Reported => Heat::Kept,
            Heat::Kept | Heat::Other => Heat::Reported,
        }
    }

    /// The other model's p, or back to kept p from it.
    pub fn toggled_other(self) -> Self {
        match self {
            Heat::Other => Heat::Kept,
            Heat::Kept | Heat::Reported => Heat::Other,
        }
    }

    /// What the legend calls the probability, for a run whose logprobs `mode` reports.
    pub fn name(self, mode: LogprobsMode) -> &'static str {
        match self {
            Heat::Kept => "kept p",
            Heat::Reported if mode.processed() => "processed p",
            Heat::Reported => "raw p",
            Heat::Other => "other model's p",
        }
    }

    /// The probability that colours token `t` of `column`; `None` where it has none (no other
    /// model has scored the sample, or it has no figures for it).
    pub fn of(self, column: &Column, t: usize) -> Option<f32> {
        let token = &column.tokens[t];
        match self {
            Heat::Kept => Some(token.prob),
            Heat::Reported => Some(token.reported_prob),
            Heat::Other => super::disagreement::other_prob(&column.cross, t),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// The side (model and parameter set) whose run this sample belongs to.
    pub side: SideId,
    /// What the run's logprobs report, which `h` colours by.
    pub logprobs_mode: LogprobsMode,
    /// The sample's index within its run.
    pub sample: u32,
    /// `None` in a column reserved for a run that has not started and whose seed is drawn at
    /// random.
    pub seed: Option<u64>,
    /// Every generated token as the engine reported it, alternatives included.
    pub tokens: Vec<TokenEvent>,
    sum_logprob: f64,
    /// The stop reason as the footer shows it, once the sample has ended.
    pub finish: Option<String>,
    /// Text held back for a stop string that never came, released when the sample ended.
    tail: String,
    pub text: Wrapped,
    /// The first row shown once the user scrolled; `None` follows the newest rows.
    pub scroll: Option<usize>,
    /// How likely the other compared models find this sample, once they scored it.
    pub cross: Vec<CrossScore>,
    /// The compared models that could not score it (a server without prompt logprobs).
    pub unscored: Vec<String>,
    /// The token where this sample first parts from the samples of the other sides that
    /// share its seed; `None` while they agree (or there are none).
    pub diverge: Option<usize>,
    /// The token where this sample first parts from its run's sample 0, once the run ended;
    /// `None` for sample 0, for branches and for samples equal to sample 0.
    pub parts: Option<usize>,
    /// Once the sample ended: how many of its tokens were replayed from the run before and how
    /// many were decoded anew.
    pub replay: Option<(u32, u32)>,
    /// The chain's trace of the token the inspector last asked about.
    pub trace: Option<TokenTrace>,
    /// Where a branch parts from its parent; `None` for the run's own samples.
    pub origin: Option<BranchOrigin>,
    /// A branch in step mode: its last token is the sampler's proposal.
    pub stepping: bool,
}

impl Column {
    pub fn new(seed: Option<u64>, width: usize, whitespace: bool) -> Self {
        Self {
            side: SideId::default(),
            logprobs_mode: LogprobsMode::default(),
            sample: 0,
            seed,
            tokens: Vec::new(),
            sum_logprob: 0.0,
            finish: None,
            tail: String::new(),
            text: Wrapped::new(width, whitespace),
            scroll: None,
            cross: Vec::new(),
            unscored: Vec::new(),
            diverge: None,
            parts: None,
            replay: None,
            trace: None,
            origin: None,
            stepping: false,
        }
    }

    /// `#2`; for a branch, its parent and the token where it parts (`#5 ←#2@14`, counted from
    /// 1 as everywhere a position is shown), and `step` in step mode.
    pub fn name(&self) -> String {
        let mut name = format!("#{}", self.sample);
        if let Some(origin) = self.origin {
            name.push_str(&format!(" ←#{}@{}", origin.parent, origin.at + 1));
        }
        if self.stepping {
            name.push_str(" step");
        }
        name
    }

    /// The generated text so far, tokens only (a released stop tail is not the model's).
    pub fn token_text(&self) -> String {
        self.tokens.iter().map(|t| t.text.as_str()).collect()
    }

    /// Keeps one score per scoring model, the newest.
    pub fn add_cross_score(&mut self, score: CrossScore) {
        self.cross.retain(|s| s.model != score.model);
        self.unscored.retain(|m| *m != score.model);
        self.cross.push(score);
    }

    /// Notes that `model` could not score this sample; its footer says so.
    pub fn add_unscored(&mut self, model: &str) {
        if !self.unscored.iter().any(|m| m == model) {
            self.unscored.push(model.to_owned());
        }
    }

    pub fn push_token(&mut self, token: TokenEvent) {
        self.sum_logprob += f64::from(token.logprob);
        self.text.push_token(&token.text);
        self.tokens.push(token);
    }

    /// How many steps the run's constraint left one token: the model had no say.
    fn forced(&self) -> usize {
        self.tokens
            .iter()
            .filter(|t| t.constraint.is_some_and(|c| c.forced()))
            .count()
    }

    pub fn push_tail(&mut self, text: &str) {
        self.text.push_text(text);
        self.tail.push_str(text);
    }

    /// Ends the sample; `token_text` is the stop token's own text, when one ended it.
    pub fn finish(
        &mut self,
        reason: StopReason,
        matched: Option<&StopMatched>,
        token_text: Option<&str>,
    ) {
        self.finish = Some(stop_label(reason, matched, token_text));
    }

    /// Wraps the text again when the width or the whitespace marks change.
    pub fn rewrap(&mut self, width: usize, whitespace: bool) {
        if width.max(1) == self.text.width() && whitespace == self.text.whitespace() {
            return;
        }
        self.text = Wrapped::new(width, whitespace);
        for token in &self.tokens {
            self.text.push_token(&token.text);
        }
        self.text.push_text(&self.tail);
    }

    /// The footer that fits in `width` cells, dropping statistics from the right:
    /// `■ stop "\n\n" 37 tok lp -1.23 ppl 3.42`; a running sample shows `…` instead of `■`,
    /// a stepping branch waiting for its next step `‖ paused`.
    /// A re-run's sample says how many tokens it replayed and decoded: `37 tok ↺30+7`.
    /// When models are compared, the other models' perplexities follow (`⇄tiny 8.10`, with `*`
    /// when the text was tokenized again, `†` when the scoring model has no chat template and
    /// scored after this model's rendering) and where the sample parts from the others (`≠12`, the token counted from 1).
    /// Where the sample parts from its run's sample 0 comes first (`≠#0@5`).
    /// These marks are what a narrow column is read for, so the stop reason and the statistics
    /// shrink to `■ 37 tok`, then `■`, before the scores lose their model names and then go.
    pub fn footer(&self, width: usize) -> String {
        let own = self.own_forms();
        let compact = self.compact_forms();
        let marked = self
            .compare_forms()
            .into_iter()
            .filter(|compare| !compare.is_empty())
            .find_map(|compare| {
                own.iter()
                    .chain(&compact)
                    .find(|o| o.width() + compare.width() <= width)
                    .map(|o| format!("{o}{compare}"))
            });
        // Unmarked, the stop reason stays whole, cut by the border if it must.
        let [.., reason] = &own;
        marked.unwrap_or_else(|| {
            own.iter()
                .find(|o| o.width() <= width)
                .unwrap_or(reason)
                .clone()
        })
    }

    /// The marks of the comparisons, richest first: in full, with the scores unnamed, and the
    /// partings alone.
    fn compare_forms(&self) -> [String; 3] {
        let mut parts = String::new();
        if let Some(token) = self.parts {
            parts.push_str(&format!(" ≠#0@{}", token + 1));
        }
        if let Some(token) = self.diverge {
            parts.push_str(&format!(" ≠{}", token + 1));
        }
        let (mut named, mut unnamed) = (parts.clone(), parts.clone());
        for score in &self.cross {
            let value = score.perplexity_label();
            named.push_str(&format!(" ⇄{} {value}", score.model));
            unnamed.push_str(&format!(" ⇄{value}"));
        }
        for model in &self.unscored {
            named.push_str(&format!(" ⇄{model} –"));
            unnamed.push_str(" ⇄–");
        }
        [named, unnamed, parts]
    }

    /// This sample's own part of the footer, richest first, down to the stop reason.
    fn own_forms(&self) -> [String; 4] {
        let reason = match &self.finish {
            // A stepping branch ends each step only to wait for the next key: no stop reason.
            Some(_) if self.stepping => "‖ paused".to_owned(),
            Some(reason) => format!("■ {reason}"),
            None => "…".to_owned(),
        };
        let mut count = format!(" {} tok", self.tokens.len());
        let forced = self.forced();
        if forced > 0 {
            count.push_str(&format!(" ({forced} forced)"));
        }
        if let Some((replayed, decoded)) = self.replay.filter(|&(replayed, _)| replayed > 0) {
            count.push_str(&format!(" ↺{replayed}+{decoded}"));
        }
        let (lp, ppl) = match self.tokens.len() {
            0 => (String::new(), String::new()),
            n => {
                let (mean, ppl) = mean_and_perplexity(self.sum_logprob, n);
                (format!(" lp {mean:.2}"), format!(" ppl {ppl:.2}"))
            }
        };
        [
            format!("{reason}{count}{lp}{ppl}"),
            format!("{reason}{count}{ppl}"),
            format!("{reason}{count}"),
            reason,
        ]
    }

    /// Shorter than the stop reason, only to make room for the comparison marks: `■ 37 tok`,
    /// then `■` (`…` running, `‖` paused).
    fn compact_forms(&self) -> [String; 2] {
        let sign = match &self.finish {
            Some(_) if self.stepping => "‖",
            Some(_) => "■",
            None => "…",
        };
        [format!("{sign} {} tok", self.tokens.len()), sign.to_owned()]
    }

    /// The raw entropy along the whole sample in `width` cells (see [`spark::chart`]) on a
    /// fixed scale so that columns compare: `─` is certain (0 nats), `█` is
    /// [`ENTROPY_SCALE`] nats or more; `None` when the tokens carry no entropy (a served
    /// model) or there are none. The cell holding `cursor` comes with it.
    pub fn sparkline(
        &self,
        width: usize,
        cursor: Option<usize>,
    ) -> Option<(String, Option<usize>)> {
        let entropies: Vec<f32> = self
            .tokens
            .iter()
            .map(|t| t.entropy)
            .collect::<Option<_>>()?;
        spark::chart(&entropies, ENTROPY_SCALE, width, cursor)
    }

    /// The first row shown in a view of `rows` rows.
    pub fn top(&self, rows: usize) -> usize {
        let bottom = self.text.lines.len().saturating_sub(rows);
        self.scroll.map_or(bottom, |top| top.min(bottom))
    }

    /// Shows from row `top`; reaching the bottom follows the newest rows again.
    pub fn scroll_to(&mut self, top: usize, rows: usize) {
        let bottom = self.text.lines.len().saturating_sub(rows);
        self.scroll = (top < bottom).then_some(top);
    }

    pub fn scroll_by(&mut self, delta: isize, rows: usize) {
        let top = self.top(rows).saturating_add_signed(delta);
        self.scroll_to(top, rows);
    }

    /// Scrolls as little as possible to bring `row` into a view of `rows` rows.
    pub fn reveal(&mut self, row: usize, rows: usize) {
        let top = self.top(rows);
        if row < top {
            self.scroll_to(row, rows);
        } else if row >= top + rows {
            self.scroll_to(row + 1 - rows, rows);
        }
    }
}

/// The entropy (nats) a full sparkline cell stands for: a choice as open as among e^4 ≈ 55
/// equally likely tokens.
pub const ENTROPY_SCALE: f32 = 4.0;

/// Which token the cursor is on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenCursor {
    pub column: usize,
    /// `None` sits on the newest token and stays on it as tokens arrive. An index past a
    /// column's end means its last token, so the index survives a switch to a shorter column.
    pub token: Option<usize>,
}

/// The samples of the run on screen.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Columns {
    pub columns: Vec<Column>,
    pub cursor: TokenCursor,
    /// The first row of columns shown when not all of them fit.
    pub first_row: usize,
    /// Spaces, tabs and newlines drawn as `·`, `→` and `↵`.
    pub whitespace: bool,
    /// Which probability colours the tokens.
    pub heat: Heat,
    /// The alternative of the cursor's token highlighted in the inspector, to branch from.
    pub pick: Option<usize>,
}

impl Columns {
    /// A new run of `side`: fresh columns that follow their tails, in place of the side's old
    /// ones (sides stay in order); the cursor keeps its place so that the same position can
    /// be compared across runs. `mode` is what the run's logprobs report; `grid` is laid out
    /// for every column after the change.
    pub fn start(&mut self, side: SideId, seeds: &[Option<u64>], mode: LogprobsMode, grid: &Grid) {
        let width = grid.text_width();
        let fresh = seeds.iter().enumerate().map(|(i, &seed)| Column {
            side,
            logprobs_mode: mode,
            sample: i as u32,
            ..Column::new(seed, width, self.whitespace)
        });
        let at = self.columns.iter().filter(|c| c.side < side).count();
        self.columns.retain(|c| c.side != side);
        self.columns.splice(at..at, fresh);
        self.cursor.column = self.cursor.column.min(self.columns.len().saturating_sub(1));
        // The other sides' columns become narrower (or wider) with this side's count.
        self.rewrap(grid);
    }

    /// Drops the columns of `side`, which no longer exists; later sides move up by one.
    pub fn remove_side(&mut self, side: SideId) {
        self.columns.retain(|c| c.side != side);
        for column in self.columns.iter_mut().filter(|c| c.side > side) {
            column.side = SideId(column.side.0 - 1);
        }
        self.cursor.column = self.cursor.column.min(self.columns.len().saturating_sub(1));
    }

    /// The column of `sample` in `side`'s run.
    pub fn index_of(&self, side: SideId, sample: u32) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.side == side && c.sample == sample)
    }

    pub fn get_mut(&mut self, side: SideId, sample: u32) -> Option<&mut Column> {
        let index = self.index_of(side, sample)?;
        self.columns.get_mut(index)
    }

    /// Marks in every column where it first parts from the columns of other sides that share
    /// its sample index (and so its seed): compared by text, since tokenizers may differ; and
    /// where it parts from its own run's sample 0, by token ids.
    pub fn mark_divergence(&mut self) {
        let firsts: Vec<(SideId, Vec<u32>)> = self
            .columns
            .iter()
            .filter(|c| c.sample == 0 && c.origin.is_none())
            .map(|c| (c.side, c.tokens.iter().map(|t| t.id).collect()))
            .collect();
        for column in &mut self.columns {
            let first = firsts.iter().find(|(side, _)| *side == column.side);
            column.parts = match first {
                Some((_, first)) if column.sample > 0 && column.origin.is_none() => {
                    let ids: Vec<u32> = column.tokens.iter().map(|t| t.id).collect();
                    crate::response::stats::parts_at(first, &ids)
                }
                _ => None,
            };
        }
        let texts: Vec<(SideId, u32, Vec<char>)> = self
            .columns
            .iter()
            .map(|c| (c.side, c.sample, c.token_text().chars().collect()))
            .collect();
        for (column, (side, sample, text)) in self.columns.iter_mut().zip(&texts) {
            let parted = texts
                .iter()
                .filter(|(s, i, _)| s != side && i == sample)
                .map(|(_, _, other)| common_prefix(text, other))
                .filter(|&shared| shared < text.len())
                .min();
            column.diverge = parted.and_then(|chars| token_at_char(column, chars));
        }
    }

    /// After a resize or a whitespace toggle; scroll positions stay as the user left them.
    pub fn rewrap(&mut self, grid: &Grid) {
        for column in &mut self.columns {
            column.rewrap(grid.text_width(), self.whitespace);
        }
        self.first_row = grid.first_row_showing(self.cursor.column, self.first_row);
    }

    pub fn toggle_whitespace(&mut self, grid: &Grid) {
        self.whitespace = !self.whitespace;
        self.rewrap(grid);
    }

    /// Adds a token; `hold` (the cursor is shown) stops the column from following its tail
    /// when that would scroll a cursor placed on an earlier token out of view.
    pub fn push_token(&mut self, side: SideId, token: TokenEvent, grid: &Grid, hold: bool) {
        let Some(index) = self.index_of(side, token.sample) else {
            return;
        };
        let rows = grid.text_rows();
        let cursor = self.cursor_token();
        let Some(column) = self.columns.get_mut(index) else {
            return;
        };
        let before = column.top(rows);
        column.push_token(token);
        let held = cursor
            .filter(|_| hold && self.cursor.token.is_some() && column.scroll.is_none())
            .filter(|&(c, _)| c == index)
            .and_then(|(_, t)| column.text.start(t));
        if let Some((row, _)) = held
            && row < column.top(rows)
        {
            column.scroll_to(before.min(row), rows);
        }
    }

    /// Ends the samples of `side` still running: `abort` when a newer run cut them short,
    /// `error` when the engine failed.
    pub fn end_unfinished(&mut self, side: SideId, reason: StopReason) {
        for column in self
            .columns
            .iter_mut()
            .filter(|c| c.side == side && c.finish.is_none())
        {
            column.finish(reason, None, None);
        }
    }

    /// The (column, token) under the cursor, if that column has a token yet.
    /// The side of the cursor's column.
    pub fn cursor_side(&self) -> Option<SideId> {
        let column = self.cursor.column.min(self.columns.len().checked_sub(1)?);
        Some(self.columns[column].side)
    }

    /// What the legend calls the probability that colours the tokens, for the cursor's
    /// column; `None` while there is no column.
    pub fn heat_name(&self) -> Option<&'static str> {
        let column = self
            .columns
            .get(self.cursor.column)
            .or(self.columns.last())?;
        Some(self.heat.name(column.logprobs_mode))
    }

    pub fn cursor_token(&self) -> Option<(usize, usize)> {
        let column = self.cursor.column.min(self.columns.len().checked_sub(1)?);
        let last = self.columns[column].tokens.len().checked_sub(1)?;
        Some((column, self.cursor.token.map_or(last, |t| t.min(last))))
    }

    /// Moves the cursor by `delta` tokens within its column.
    pub fn step_token(&mut self, delta: isize, grid: &Grid) {
        if let Some((column, token)) = self.cursor_token() {
            let last = self.columns[column].tokens.len() - 1;
            self.cursor.token = Some(token.saturating_add_signed(delta).min(last));
            self.reveal_cursor(grid);
        }
    }

    pub fn first_token(&mut self, grid: &Grid) {
        self.cursor.token = Some(0);
        self.reveal_cursor(grid);
    }

    /// The newest token, followed as more arrive.
    pub fn last_token(&mut self, grid: &Grid) {
        self.cursor.token = None;
        self.reveal_cursor(grid);
    }

    /// Moves the cursor `delta` rows up or down, to the token nearest the same cell.
    pub fn step_row(&mut self, delta: isize, grid: &Grid) {
        let Some((column, token)) = self.cursor_token() else {
            return;
        };
        let text = &self.columns[column].text;
        let Some((row, cell)) = text.start(token) else {
            return;
        };
        let last_row = text.lines.len() - 1;
        let target = row.saturating_add_signed(delta).min(last_row);
        if let Some(token) = text.nearest(target, cell) {
            self.cursor.token = Some(token);
        }
        self.reveal_cursor(grid);
    }

    /// PageUp/PageDown: scrolls the cursor's column by whole views, the cursor moving along.
    pub fn page(&mut self, pages: isize, grid: &Grid) {
        let rows = grid.text_rows().max(1);
        let lines = pages.saturating_mul(rows as isize);
        if let Some(column) = self.columns.get_mut(self.cursor.column) {
            column.scroll_by(lines, rows);
        }
        self.step_row(lines, grid);
    }

    /// Moves to the next (or previous) column, keeping the token index; returns false when
    /// there is none, so that the caller can move the focus on instead.
    pub fn step_column(&mut self, delta: isize, grid: &Grid) -> bool {
        let Some(column) = self
            .cursor
            .column
            .checked_add_signed(delta)
            .filter(|&c| c < self.columns.len())
        else {
            return false;
        };
        self.select(column, self.cursor.token, grid);
        true
    }

    /// Puts the cursor on `token` of `column` (a click) and brings both into view.
    pub fn select(&mut self, column: usize, token: Option<usize>, grid: &Grid) {
        self.cursor = TokenCursor { column, token };
        self.first_row = grid.first_row_showing(column, self.first_row);
        self.reveal_cursor(grid);
    }

    /// Scrolls the cursor's column so that the cursor's token is in view.
    pub fn reveal_cursor(&mut self, grid: &Grid) {
        if let Some((column, token)) = self.cursor_token() {
            let column = &mut self.columns[column];
            if let Some((row, _)) = column.text.start(token) {
                column.reveal(row, grid.text_rows());
            }
        }
    }
}

/// The token whose text holds character `chars` of the column's text.
fn token_at_char(column: &Column, chars: usize) -> Option<usize> {
    let mut seen = 0;
    column.tokens.iter().position(|t| {
        seen += t.text.chars().count();
        seen > chars
    })
}

/// Why there are no columns yet: waiting for the model, for a prompt it can start from, or
/// the model could not load.
pub enum Empty {
    Waiting,
    AwaitsPrompt,
    Failed(String),
}

/// What the columns say about their sides, derived from the state for one draw.
pub struct Sides {
    /// How each side's columns are titled; empty when only one side is shown.
    pub titles: Vec<SideTitle>,
    /// Each side's mark, by side.
    pub marks: Vec<Mark>,
    /// Said when there is no column.
    pub empty: Empty,
}

/// A column's title in `room` cells. The sample's name and seed always show: what its side
/// adds (the model, the parameter set, and over the first sample the device and speed) is
/// shortened first, then left out.
fn column_title(side: Option<&SideTitle>, column: &Column, room: usize) -> String {
    let seed = column
        .seed
        .map_or_else(|| "?".to_owned(), |seed| seed.to_string());
    let own = format!("{} seed {seed}", column.name());
    let Some(side) = side else {
        return format!(" {own} ");
    };
    let full = match column.sample {
        0 => format!(" {} · {own} ", side.header),
        _ => format!(" {} {own} ", side.label),
    };
    let labelled = format!(" {} {own} ", side.label);
    // Spaces round both parts, and a label cut shorter than this says nothing.
    let left = room.saturating_sub(own.width() + 3);
    if full.width() <= room {
        full
    } else if labelled.width() <= room {
        labelled
    } else if left >= 4 {
        format!(" {} {own} ", super::cells::fit(&side.label, left))
    } else {
        format!(" {own} ")
    }
}

/// Draws the columns on screen; only the rows in view are laid out, whatever the length.
pub fn render(
    frame: &mut Frame,
    area: Rect,
    state: &Columns,
    sides: Sides,
    focused: bool,
    theme: &Theme,
) {
    let Sides {
        titles,
        marks,
        empty,
    } = sides;
    if state.columns.is_empty() {
        let block = Block::bordered()
            .title(Span::styled(" samples ", theme.title))
            .border_style(theme.frame(focused));
        let line = match empty {
            Empty::Waiting => {
                Line::styled("samples appear here once the model is ready", theme.dim)
            }
            Empty::AwaitsPrompt => Line::styled(
                "type a prompt: the model needs text to start from",
                theme.dim,
            ),
            Empty::Failed(why) => Line::styled(why, theme.error),
        };
        let text = Paragraph::new(line).wrap(Wrap { trim: false }).block(block);
        frame.render_widget(text, area);
        return;
    }
    let grid = Grid::new(area, state.columns.len());
    let cursor = state.cursor_token().filter(|_| focused);
    for (i, rect) in grid.rects(state.first_row) {
        let column = &state.columns[i];
        // A row of columns may be a line taller than `grid.text_rows()`: it shows one more.
        let rows = usize::from(Grid::text_area(rect).height);
        let top = column.top(rows);
        let mut notes = Vec::new();
        match (state.heat, super::disagreement::shown_model(&column.cross)) {
            (Heat::Reported, _) => {
                let name = state.heat.name(column.logprobs_mode);
                notes.push(Span::styled(format!("{name} "), theme.dim));
            }
            (Heat::Other, Some(model)) => {
                notes.push(Span::styled(format!("⇄{model} p "), theme.dim));
            }
            (Heat::Other, None) => notes.push(Span::styled("⇄none ", theme.dim)),
            (Heat::Kept, _) => {}
        }
        match marks.get(column.side.0) {
            Some(Mark::Stale) => notes.push(Span::styled("stale ", theme.dim)),
            Some(Mark::Failed) => notes.push(Span::styled("run failed ", theme.error)),
            Some(Mark::Current) | None => {}
        }
        let room = usize::from(rect.width.saturating_sub(2))
            .saturating_sub(notes.iter().map(Span::width).sum());
        let name = column_title(titles.get(column.side.0), column, room);
        let mut title = vec![Span::styled(name, theme.title)];
        title.extend(notes);
        let mut block = Block::bordered()
            .title(Line::from(title))
            .border_style(theme.frame(focused && i == state.cursor.column));
        let below = column.text.lines.len().saturating_sub(top + rows);
        if below > 0 {
            block = block.title(Line::styled(format!(" ↓{below} "), theme.dim).right_aligned());
        }
        let cursor = cursor.filter(|&(c, _)| c == i).map(|(_, t)| t);
        let width = usize::from(rect.width.saturating_sub(2));
        if let Some((line, at)) = column.sparkline(width, cursor) {
            let lit = theme.title.add_modifier(Modifier::REVERSED);
            block = block.title_bottom(Line::from(spark::spans(&line, at, theme.dim, lit)));
        }
        let inner = block.inner(rect);
        frame.render_widget(block, rect);
        if inner.height == 0 {
            continue;
        }
        let heat = |t: usize| state.heat.of(column, t);
        // A token with nothing to colour it by (no other model scored it yet) is dim.
        let tinted = |t: usize| heat(t).map_or(theme.dim, |p| theme.token_style(p));
        let style = |token: Option<usize>| match token {
            None => theme.base,
            Some(t) if Some(t) == cursor => heat(t).map_or(
                theme.dim.add_modifier(Modifier::REVERSED | Modifier::BOLD),
                |p| theme.cursor_style(p),
            ),
            // Where compared samples part, underlined so the eye finds it in the colours.
            Some(t) if Some(t) == column.diverge => {
                tinted(t).add_modifier(Modifier::UNDERLINED | Modifier::BOLD)
            }
            // Where the sample parts from its run's first sample.
            Some(t) if Some(t) == column.parts => tinted(t).add_modifier(Modifier::UNDERLINED),
            // Forced by the constraint: dimmed, since the model did not choose it; reasoning
            // (gpt-oss's analysis channel) too, since it is not the answer.
            Some(t)
                if column.tokens[t].constraint.is_some_and(|c| c.forced())
                    || column.tokens[t].channel == Some(Channel::Analysis) =>
            {
                tinted(t).add_modifier(Modifier::DIM)
            }
            Some(t) => tinted(t),
        };
        let mut lines: Vec<Line> = column.text.lines[top..]
            .iter()
            .take(rows)
            .map(|segments| {
                Line::from(
                    segments
                        .iter()
                        .map(|s| Span::styled(s.text.as_str(), style(s.token)))
                        .collect::<Vec<_>>(),
                )
            })
            .collect();
        lines.resize(rows, Line::default());
        let footer_style = if column.finish.as_deref() == Some("error") {
            theme.error
        } else {
            theme.dim
        };
        lines.push(Line::styled(
            column.footer(usize::from(inner.width)),
            footer_style,
        ));
        frame.render_widget(Paragraph::new(lines), inner);
    }
    if let Some(line) = grid.indicator {
        let shown: Vec<usize> = grid.rects(state.first_row).map(|(i, _)| i).collect();
        if let (Some(first), Some(last)) = (shown.first(), shown.last()) {
            let text = format!(
                " columns {}–{} of {} ",
                first + 1,
                last + 1,
                state.columns.len()
            );
            frame.render_widget(Paragraph::new(Line::styled(text, theme.dim)), line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::layout::Rect;

    fn token(text: &str, logprob: f32) -> TokenEvent {
        TokenEvent {
            sample: 0,
            id: 1,
            text: text.into(),
            logprob,
            prob: 0.5,
            reported_prob: logprob.exp(),
            rank: 1,
            top: Vec::new(),
            entropy: None,
            watched: Vec::new(),
            constraint: None,
            channel: None,
        }
    }

    fn texts(column: &Column) -> Vec<String> {
        column
            .text
            .lines
            .iter()
            .map(|l| l.iter().map(|s| s.text.as_str()).collect())
            .collect()
    }

    #[test]
    fn rewrap_keeps_tokens_and_the_tail() {
        let mut c = Column::new(Some(1), 8, false);
        for t in ["Once", " upon", " a", "\ntime"] {
            c.push_token(token(t, -1.0));
        }
        c.push_tail(" end");
        assert_eq!(texts(&c), ["Once ", "upon a ", "time end"]);
        c.rewrap(40, true);
        assert_eq!(texts(&c), ["Once·upon·a↵", "time·end"]);
        assert_eq!(c.tokens.len(), 4);
    }

    #[test]
    fn footer_names_the_stop_and_drops_statistics_that_do_not_fit() {
        let mut c = Column::new(Some(1), 10, false);
        c.push_token(token("a", -1.0));
        c.push_token(token("b", -3.0));
        assert_eq!(c.footer(80), "… 2 tok lp -2.00 ppl 7.39");
        c.finish(
            StopReason::Stop,
            Some(&StopMatched::Text("\n\n".into())),
            None,
        );
        assert_eq!(c.footer(80), "■ stop \"\\n\\n\" 2 tok lp -2.00 ppl 7.39");
        assert_eq!(c.footer(30), "■ stop \"\\n\\n\" 2 tok ppl 7.39");
        assert_eq!(c.footer(20), "■ stop \"\\n\\n\" 2 tok");
        assert_eq!(c.footer(5), "■ stop \"\\n\\n\"");
        c.finish(StopReason::Stop, Some(&StopMatched::Token(2)), Some("</s>"));
        assert_eq!(c.finish.as_deref(), Some("stop </s>"));
        c.finish(StopReason::Stop, Some(&StopMatched::Token(13)), Some("\n"));
        assert_eq!(c.finish.as_deref(), Some("stop #13 \"\\n\""));
        c.finish(StopReason::Stop, Some(&StopMatched::Token(13)), None);
        assert_eq!(c.finish.as_deref(), Some("stop <token 13>"));
        c.finish(StopReason::Length, None, None);
        assert_eq!(c.footer(80), "■ length 2 tok lp -2.00 ppl 7.39");
        c.replay = Some((0, 2));
        assert_eq!(c.footer(80), "■ length 2 tok lp -2.00 ppl 7.39");
        c.replay = Some((1, 1));
        assert_eq!(c.footer(80), "■ length 2 tok ↺1+1 lp -2.00 ppl 7.39");
        assert_eq!(c.footer(20), "■ length 2 tok ↺1+1");
        assert_eq!(Column::new(Some(1), 10, false).footer(80), "… 0 tok");
    }

    #[test]
    fn a_narrow_footer_shortens_the_stop_and_statistics_before_the_marks() {
        let mut c = Column::new(Some(1), 10, false);
        c.push_token(token("a", -1.0));
        c.push_token(token("b", -3.0));
        c.finish(StopReason::Length, None, None);
        c.parts = Some(1);
        c.add_cross_score(CrossScore {
            model: "tiny".into(),
            sample: 0,
            tokens: 2,
            mean_logprob: -2.0,
            perplexity: 2f64.exp(),
            retokenized: false,
            foreign_prompt: false,
            per_token: None,
        });
        assert_eq!(c.footer(31), "■ length 2 tok ≠#0@2 ⇄tiny 7.39");
        assert_eq!(c.footer(25), "■ length ≠#0@2 ⇄tiny 7.39");
        assert_eq!(c.footer(24), "■ 2 tok ≠#0@2 ⇄tiny 7.39");
        assert_eq!(c.footer(18), "■ ≠#0@2 ⇄tiny 7.39");
        assert_eq!(c.footer(13), "■ ≠#0@2 ⇄7.39");
        assert_eq!(c.footer(12), "■ ≠#0@2");
        assert_eq!(
            c.footer(6),
            "■ length",
            "no mark fits: the reason, cut when drawn"
        );
    }

    #[test]
    fn a_scrolled_column_stays_put_and_follows_again_at_the_bottom() {
        let mut c = Column::new(Some(1), 4, false);
        for _ in 0..10 {
            c.push_token(token("abcd", -1.0));
        }
        assert_eq!(c.top(3), 7, "following: the newest rows");
        c.scroll_by(-5, 3);
        assert_eq!((c.scroll, c.top(3)), (Some(2), 2));
        c.push_token(token("efgh", -1.0));
        assert_eq!(c.top(3), 2, "a scrolled column does not follow");
        c.scroll_by(100, 3);
        assert_eq!(c.scroll, None);
        c.reveal(1, 3);
        assert_eq!(c.top(3), 1);
        c.reveal(5, 3);
        assert_eq!(c.top(3), 3);
    }

    #[test]
    fn the_cursor_resolves_past_the_end_and_holds_the_view_while_tokens_stream() {
        let grid = Grid::new(Rect::new(0, 0, 10, 6), 1);
        assert_eq!(grid.text_rows(), 3);
        let mut columns = Columns::default();
        columns.start(SideId(0), &[Some(7)], LogprobsMode::default(), &grid);
        assert_eq!(columns.cursor_token(), None, "no token yet");
        for _ in 0..3 {
            columns.push_token(SideId(0), token("abcdefgh", -1.0), &grid, true);
        }
        assert_eq!(columns.cursor_token(), Some((0, 2)));
        columns.step_token(-1, &grid);
        assert_eq!(columns.cursor.token, Some(1));
        for _ in 0..5 {
            columns.push_token(SideId(0), token("abcdefgh", -1.0), &grid, true);
        }
        let column = &columns.columns[0];
        assert!(column.top(3) <= 1, "the cursor's row stays in view");
        columns.cursor.token = Some(99);
        assert_eq!(columns.cursor_token(), Some((0, 7)));
    }
}
