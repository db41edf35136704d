//! Branching from any token and step mode in the playground (issue 14): the requests a branch,
//! a step and a deletion make, the tree the keys walk, and what the columns say of a branch.

use crate::common;

use common::tui::*;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use samplab::engine::{Alternative, Branch, Event, Request, RunId, TokenEvent};
use samplab::response::{BranchOrigin, StopReason};
use samplab::tui::{
    Action, BranchAction, Effect, Focus, KeyMap, ModelId, SideId, State, Theme, areas, mouse,
    update,
};

/// Token `id` of a sample, with three alternatives: itself, then `id + 100` and `id + 200`.
fn token_with(run_id: RunId, sample: u32, id: u32) -> Event {
    let alternative = |id: u32, p: f32| Alternative {
        id,
        text: format!("t{id}"),
        logprob: p.ln(),
        prob: p,
    };
    Event::Token {
        run_id,
        token: TokenEvent {
            sample,
            id,
            text: format!(" t{id}"),
            logprob: 0.5f32.ln(),
            prob: 0.5,
            reported_prob: 0.5,
            rank: 1,
            top: vec![
                alternative(id, 0.5),
                alternative(id + 100, 0.3),
                alternative(id + 200, 0.2),
            ],
            entropy: Some(1.0),
            watched: Vec::new(),
            constraint: None,
            channel: None,
        },
    }
}

/// The run the effects start on model 0.
pub(crate) fn run_of(effects: &[Effect]) -> Request {
    effects
        .iter()
        .find_map(|e| match e {
            Effect::Run(ModelId(0), request) => Some(request.clone()),
            _ => None,
        })
        .expect("a run starts")
}

/// Plays `request` to its end: sample `i` takes tokens `10 * i + 1, …`, `tokens` of them; a
/// branch takes its path, then, when it steps, one token more (its proposal, `path + 50`).
pub(crate) fn play(s: &mut State, request: &Request, tokens: u32) {
    let id = request.run_id;
    let n = request.params.num_samples;
    let seeds: Vec<u64> = (0..n + request.branches.len() as u32)
        .map(u64::from)
        .collect();
    update(s, Action::Engine(ModelId(0), started(id, seeds)));
    for sample in 0..n {
        for t in 0..tokens {
            update(
                s,
                Action::Engine(ModelId(0), token_with(id, sample, 10 * sample + t + 1)),
            );
        }
    }
    for (j, branch) in request.branches.iter().enumerate() {
        let sample = n + j as u32;
        for &t in &branch.path {
            update(s, Action::Engine(ModelId(0), token_with(id, sample, t)));
        }
        if branch.then.is_some() {
            let proposal = 50 + branch.path.len() as u32;
            update(
                s,
                Action::Engine(ModelId(0), token_with(id, sample, proposal)),
            );
        }
    }
    let reasons = vec![StopReason::Length; (n as usize) + request.branches.len()];
    update(s, Action::Engine(ModelId(0), done(id, &reasons)));
}

/// A finished run of the playground's samples, three tokens each, the columns focused.
fn finished_run() -> (State, Request) {
    let mut s = state_sized(160, 45);
    s.comparison.params.params.num_samples = 3;
    let request = run_of(&update(&mut s, Action::Engine(ModelId(0), loaded())));
    play(&mut s, &request, 3);
    while s.focus != Focus::Columns {
        update(&mut s, Action::FocusNext);
    }
    (s, request)
}

/// Puts the cursor on token `token` of the column of sample `sample`.
pub(crate) fn cursor_to(s: &mut State, sample: u32, token: usize) {
    let column = s
        .columns
        .index_of(SideId(0), sample)
        .expect("the column is shown");
    let grid = s.grid();
    s.columns.select(column, Some(token), &grid);
}

fn branch(sample: u32, parent: u32, at: u32, path: &[u32], then: Option<u32>) -> Branch {
    Branch {
        sample,
        origin: BranchOrigin { parent, at },
        path: path.to_vec(),
        then,
    }
}

fn act(s: &mut State, action: BranchAction) -> Vec<Effect> {
    update(s, Action::Branch(action))
}

#[test]
fn enter_on_a_picked_alternative_runs_a_branch_that_the_cursor_follows() {
    let (mut s, first) = finished_run();
    let n = first.params.num_samples;
    cursor_to(&mut s, 1, 1);
    assert!(
        act(&mut s, BranchAction::Take).is_empty(),
        "nothing is picked yet"
    );
    act(&mut s, BranchAction::Pick(1));
    act(&mut s, BranchAction::Pick(1));
    act(&mut s, BranchAction::Pick(1));
    assert_eq!(s.columns.pick, Some(0), "the highlight wraps round");
    act(&mut s, BranchAction::Pick(-1));
    assert_eq!(s.columns.pick, Some(2), "and back");
    act(&mut s, BranchAction::Pick(-1));
    let request = run_of(&act(&mut s, BranchAction::Take));
    assert_eq!(request.params, first.params, "the same samples run again");
    assert_eq!(request.branches, [branch(1, 1, 1, &[11, 112], None)]);

    play(&mut s, &request, 3);
    let column = s
        .columns
        .index_of(SideId(0), n)
        .expect("the branch has a column");
    assert_eq!(s.columns.cursor_token(), Some((column, 1)), "on the pick");
    assert_eq!(s.columns.columns[column].name(), format!("#{n} ←#1@2"));
    let buffer = render(&s, &Theme::dark());
    assert!(find(&buffer, &format!("#{n} ←#1@2 seed {n}")).is_some());

    // The token the sample took is no branch (unlit, `]` skips it; moving back reaches it).
    cursor_to(&mut s, 0, 0);
    act(&mut s, BranchAction::Pick(1));
    act(&mut s, BranchAction::Pick(-1));
    assert!(act(&mut s, BranchAction::Take).is_empty());
    assert!(
        s.status
            .notice
            .as_deref()
            .unwrap()
            .contains("the token the sample took")
    );
}

#[test]
fn branches_of_branches_form_a_tree_the_keys_walk_and_deleting_takes_a_subtree() {
    let (mut s, first) = finished_run();
    let n = first.params.num_samples;
    // Two branches of sample 0 (at tokens 1 and 2), and one of the first branch.
    cursor_to(&mut s, 0, 1);
    act(&mut s, BranchAction::Pick(1));
    let request = run_of(&act(&mut s, BranchAction::Take));
    play(&mut s, &request, 3);
    cursor_to(&mut s, 0, 2);
    act(&mut s, BranchAction::Pick(1));
    act(&mut s, BranchAction::Pick(1));
    let request = run_of(&act(&mut s, BranchAction::Take));
    play(&mut s, &request, 3);
    cursor_to(&mut s, n, 0);
    act(&mut s, BranchAction::Pick(1));
    let request = run_of(&act(&mut s, BranchAction::Take));
    assert_eq!(
        request.branches,
        [
            branch(0, 0, 1, &[1, 102], None),
            branch(0, 0, 2, &[1, 2, 203], None),
            branch(0, n, 0, &[101], None),
        ],
        "the third follows sample 0's stream through its parent, branch #{n}"
    );
    play(&mut s, &request, 3);

    let at = |s: &State| {
        let (column, token) = s.columns.cursor_token().unwrap();
        (s.columns.columns[column].sample, token)
    };
    assert_eq!(at(&s), (n + 2, 0));
    act(&mut s, BranchAction::Parent);
    assert_eq!(at(&s), (n, 0), "to the parent, where the branch parts");
    act(&mut s, BranchAction::Parent);
    assert_eq!(at(&s), (0, 1));
    act(&mut s, BranchAction::Parent);
    assert!(s.status.notice.as_deref().unwrap().contains("no parent"));
    act(&mut s, BranchAction::Child);
    assert_eq!(at(&s), (n, 1), "to the first child");
    act(&mut s, BranchAction::Sibling(1));
    assert_eq!(at(&s), (n + 1, 2));
    act(&mut s, BranchAction::Sibling(1));
    assert_eq!(at(&s), (n, 1), "siblings wrap around");
    act(&mut s, BranchAction::Sibling(-1));
    assert_eq!(at(&s), (n + 1, 2));

    // Deleting the first branch takes its child; the cursor goes to the parent.
    cursor_to(&mut s, n, 0);
    let request = run_of(&act(&mut s, BranchAction::Delete));
    assert_eq!(request.branches, [branch(0, 0, 2, &[1, 2, 203], None)]);
    play(&mut s, &request, 3);
    assert_eq!(at(&s), (0, 1));
    cursor_to(&mut s, 1, 0);
    assert!(act(&mut s, BranchAction::Delete).is_empty());
    assert!(
        s.status
            .notice
            .as_deref()
            .unwrap()
            .contains("only branches")
    );
}

/// Presses `code` with `modifiers` through the default key map, for the effects.
fn press(s: &mut State, code: KeyCode, modifiers: KeyModifiers) -> Vec<Effect> {
    let action = KeyMap::default()
        .action(&s.modes(), KeyEvent::new(code, modifiers))
        .unwrap_or_else(|| panic!("{code:?} is bound in {:?}", s.modes()));
    update(s, action)
}

#[test]
fn del_says_what_it_removed_and_shift_u_brings_the_subtree_back_in_place() {
    let (mut s, first) = finished_run();
    let n = first.params.num_samples;
    let undo = |s: &mut State| press(s, KeyCode::Char('U'), KeyModifiers::SHIFT);
    let notice = |s: &State| s.status.notice.clone().unwrap_or_default();
    // Branch #n of sample 0, branch #n+1 of it, and branch #n+2 of sample 1.
    for (sample, token) in [(0, 1), (n, 0), (1, 2)] {
        cursor_to(&mut s, sample, token);
        act(&mut s, BranchAction::Pick(1));
        let request = run_of(&act(&mut s, BranchAction::Take));
        play(&mut s, &request, 3);
    }
    let tree = s.comparison.sides[0].tree.nodes.clone();
    let branches = s.comparison.sides[0].tree.requests(n);

    cursor_to(&mut s, n, 1);
    let request = run_of(&press(&mut s, KeyCode::Delete, KeyModifiers::NONE));
    assert_eq!(
        notice(&s),
        format!("removed branch #{n} and its descendant · U brings them back")
    );
    assert_eq!(request.branches, [branch(1, 1, 2, &[11, 12, 113], None)]);
    play(&mut s, &request, 3);

    let request = run_of(&undo(&mut s));
    assert_eq!(s.comparison.sides[0].tree.nodes, tree, "as it was");
    assert_eq!(request.branches, branches, "each branch in its old place");
    assert_eq!(
        notice(&s),
        format!("brought back branch #{n} and its descendant")
    );
    play(&mut s, &request, 3);
    let (column, token) = s.columns.cursor_token().unwrap();
    assert_eq!(
        (s.columns.columns[column].sample, token),
        (n, 1),
        "on the restored branch, where it parts"
    );
    assert!(undo(&mut s).is_empty(), "undone once");
    assert!(notice(&s).contains("no deleted branch"), "{}", notice(&s));

    // A branch made after a deletion may hang on the renumbered tree: no undo then.
    cursor_to(&mut s, n + 2, 1);
    let request = run_of(&press(&mut s, KeyCode::Delete, KeyModifiers::NONE));
    assert_eq!(
        notice(&s),
        format!("removed branch #{} · U brings it back", n + 2)
    );
    play(&mut s, &request, 3);
    cursor_to(&mut s, 2, 0);
    act(&mut s, BranchAction::Pick(1));
    let request = run_of(&act(&mut s, BranchAction::Take));
    play(&mut s, &request, 3);
    let tree = s.comparison.sides[0].tree.nodes.clone();
    assert!(undo(&mut s).is_empty());
    assert!(
        notice(&s).contains("made or stepped since"),
        "{}",
        notice(&s)
    );
    assert_eq!(s.comparison.sides[0].tree.nodes, tree);
}

#[test]
fn step_mode_proposes_one_token_at_a_time_to_take_or_replace() {
    let (mut s, _) = finished_run();
    let n = s.comparison.sides[0]
        .run_params
        .as_ref()
        .unwrap()
        .num_samples;
    cursor_to(&mut s, 1, 0);
    let request = run_of(&act(&mut s, BranchAction::ToggleStep));
    assert_eq!(request.branches, [branch(1, 1, 1, &[11], Some(1))]);
    play(&mut s, &request, 3);
    let column = s.columns.index_of(SideId(0), n).unwrap();
    assert_eq!(
        s.columns.cursor_token(),
        Some((column, 1)),
        "on the proposal"
    );
    assert_eq!(s.columns.columns[column].name(), format!("#{n} ←#1@2 step"));
    let buffer = render(&s, &Theme::dark());
    assert!(
        find(&buffer, "Space: ▶ · Enter: pick").is_some(),
        "the inspector says how"
    );
    // Issue 34: it said `■ length 2 tok`, as if the sample had ended.
    let footer = s.columns.columns[column].footer(40);
    assert!(footer.starts_with("‖ paused 2 tok"), "{footer}");
    assert!(find(&buffer, "‖ paused").is_some());

    // Space takes the proposal (51), and the next is proposed.
    let request = run_of(&act(&mut s, BranchAction::Step));
    assert_eq!(request.branches, [branch(1, 1, 1, &[11, 51], Some(1))]);
    play(&mut s, &request, 3);
    // Enter on an alternative of the proposal (52) takes that one instead.
    act(&mut s, BranchAction::Pick(1));
    let request = run_of(&act(&mut s, BranchAction::Take));
    assert_eq!(request.branches, [branch(1, 1, 1, &[11, 51, 152], Some(1))]);
    play(&mut s, &request, 3);
    // Enter on the proposal itself takes it, as Space does.
    act(&mut s, BranchAction::Pick(1));
    act(&mut s, BranchAction::Pick(-1));
    let request = run_of(&act(&mut s, BranchAction::Take));
    assert_eq!(
        request.branches,
        [branch(1, 1, 1, &[11, 51, 152, 53], Some(1))]
    );
    play(&mut s, &request, 3);
    // z again: the branch samples on to max_tokens.
    let request = run_of(&act(&mut s, BranchAction::ToggleStep));
    assert_eq!(
        request.branches,
        [branch(1, 1, 1, &[11, 51, 152, 53], None)]
    );
    play(&mut s, &request, 3);
    let column = s.columns.index_of(SideId(0), n).unwrap();
    assert!(
        s.columns.columns[column].footer(40).starts_with("■ length"),
        "sampled on, it ends as any sample does"
    );
    assert!(act(&mut s, BranchAction::Step).is_empty());
    assert!(s.status.notice.as_deref().unwrap().contains("not stepping"));
}

/// Issue 51: in step mode `[` lit the last alternative, wherever the proposal was listed.
#[test]
fn in_step_mode_the_brackets_move_one_alternative_from_the_proposal_and_wrap() {
    let (mut s, _) = finished_run();
    let n = s.comparison.sides[0]
        .run_params
        .as_ref()
        .unwrap()
        .num_samples;
    cursor_to(&mut s, 1, 0);
    let request = run_of(&act(&mut s, BranchAction::ToggleStep));
    play(&mut s, &request, 3);
    let column = s.columns.index_of(SideId(0), n).unwrap();
    assert_eq!(
        s.columns.cursor_token(),
        Some((column, 1)),
        "on the proposal"
    );
    // A proposal drawn from the middle of the list: listed second of three.
    s.columns.columns[column].tokens[1].top.swap(0, 1);
    act(&mut s, BranchAction::Pick(-1));
    assert_eq!(
        s.columns.pick,
        Some(0),
        "`[` lights the one before the proposal"
    );
    act(&mut s, BranchAction::Pick(-1));
    assert_eq!(s.columns.pick, Some(2), "and wraps round to the last");
    act(&mut s, BranchAction::Pick(1));
    assert_eq!(s.columns.pick, Some(0), "`]` wraps round to the first");
    act(&mut s, BranchAction::Pick(1));
    assert_eq!(
        s.columns.pick,
        Some(1),
        "one at a time, the proposal included"
    );
    s.columns.pick = None;
    act(&mut s, BranchAction::Pick(1));
    assert_eq!(
        s.columns.pick,
        Some(2),
        "`]` lights the one after the proposal"
    );
}

#[test]
fn a_new_prompt_or_seed_clears_the_branches_and_fewer_samples_drop_theirs() {
    let (mut s, first) = finished_run();
    let n = first.params.num_samples;
    assert!(n >= 2);
    for sample in [0, n - 1] {
        cursor_to(&mut s, sample, 1);
        act(&mut s, BranchAction::Pick(1));
        let request = run_of(&act(&mut s, BranchAction::Take));
        play(&mut s, &request, 3);
    }
    // One sample fewer: the branch of the last one goes.
    let mut params = s.comparison.params.params.clone();
    params.num_samples = n - 1;
    s.comparison.params.params = params;
    let request = run_of(&update(&mut s, Action::Rerun));
    assert_eq!(request.branches, [branch(0, 0, 1, &[1, 102], None)]);
    assert!(
        s.status
            .notice
            .as_deref()
            .unwrap()
            .contains("1 branch(es) cleared")
    );
    play(&mut s, &request, 3);

    update(&mut s, Action::Branch(BranchAction::Pick(0)));
    update(&mut s, Action::FocusNext);
    update(&mut s, Action::RollSeed);
    let request = run_of(&update(&mut s, Action::DebounceElapsed));
    assert!(request.branches.is_empty());
    assert!(
        s.status
            .notice
            .as_deref()
            .unwrap()
            .contains("the seed changed")
    );
}

#[test]
fn a_click_on_an_alternative_branches_from_it() {
    let (mut s, first) = finished_run();
    cursor_to(&mut s, 0, 2);
    let inspector = areas(s.size).params;
    // The inside starts one row down; eight rows of token and heading, then the rule that
    // `logprobs` off draws, then the alternatives.
    let y = inspector.y + 1 + 8 + 1 + 2;
    let click = MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: inspector.x + 6,
        row: y,
        modifiers: crossterm::event::KeyModifiers::NONE,
    };
    assert_eq!(first.params.logprobs, None);
    let action = mouse::action(click).unwrap();
    let request = run_of(&update(&mut s, action));
    assert_eq!(request.branches, [branch(0, 0, 2, &[1, 2, 203], None)]);
}

#[test]
fn unlit_the_keys_skip_the_token_the_sample_took_and_served_models_cannot_branch() {
    let (mut s, _) = finished_run();
    cursor_to(&mut s, 0, 1);
    act(&mut s, BranchAction::Pick(1));
    assert_eq!(s.columns.pick, Some(1), "the best one not taken");
    s.columns.pick = None;
    act(&mut s, BranchAction::Pick(-1));
    assert_eq!(s.columns.pick, Some(2), "the worst one not taken");

    let served = Event::Served {
        server: "vLLM".into(),
        ignored: vec![samplab::params::Field::XtcProbability],
    };
    update(&mut s, Action::Engine(ModelId(0), served));
    assert!(act(&mut s, BranchAction::Take).is_empty());
    assert!(act(&mut s, BranchAction::ToggleStep).is_empty());
    let notice = s.status.notice.clone().unwrap();
    assert!(notice.contains("served by vLLM"), "{notice}");
    assert!(s.comparison.sides[0].tree.nodes.is_empty());
    let buffer = render(&s, &Theme::dark());
    for line in [
        "served by vLLM:",
        "raw logprobs only, kept = raw;",
        "it listed 2 other tokens",
    ] {
        assert!(find(&buffer, line).is_some(), "the inspector says {line:?}");
    }
    // A model that cannot score the run's samples says so in their footers.
    let run_id = s.comparison.sides[0].current.unwrap();
    let failed = Event::ScoreFailed {
        run_id,
        message: "llama-cpp-python returns no prompt logprobs".into(),
    };
    update(&mut s, Action::Engine(ModelId(0), failed));
    assert!(
        s.columns.columns[0].footer(200).ends_with("⇄fake –"),
        "{}",
        s.columns.columns[0].footer(200)
    );
    // The params panel marks what the server does not apply.
    update(&mut s, Action::FocusNext);
    update(&mut s, Action::FocusNext);
    assert_eq!(s.focus, Focus::Params);
    let buffer = render(&s, &Theme::dark());
    let (_, y) = find(&buffer, "xtc_prob").expect("the xtc row");
    assert!(row(&buffer, y).contains('✗'), "{}", row(&buffer, y));
}

// ---- edit and continue ----

/// `finished_run` with the prompt as the model saw it: ids 1 and 2.
fn finished_run_seen() -> (State, Request) {
    let (mut s, request) = finished_run();
    let prompted = Event::Prompted {
        run_id: request.run_id,
        rendered: None,
        tokens: [1, 2]
            .map(|id| samplab::engine::PromptToken {
                id: Some(id),
                text: format!("p{id}"),
                special: false,
            })
            .to_vec(),
    };
    update(&mut s, Action::Engine(ModelId(0), prompted));
    (s, request)
}

fn editing(s: &State) -> Option<&samplab::tui::SampleEditor> {
    match &s.overlay {
        Some(samplab::tui::Overlay::EditSample(editor)) => Some(editor),
        _ => None,
    }
}

/// `E` opens the cursor's sample as text; Enter asks its model for the edit's tokens, and the
/// answer runs a branch forced along the kept tokens and the typed ones, the cursor where it
/// parts.
#[test]
fn an_edited_sample_goes_on_from_the_edit_in_a_new_branch() {
    let (mut s, first) = finished_run_seen();
    let n = first.params.num_samples;
    cursor_to(&mut s, 1, 2);
    press_key(&mut s, KeyCode::Char('E'));
    let editor = editing(&s).expect("the editor is open");
    assert_eq!(editor.buffer.text, " t11 t12 t13");
    assert_eq!(editor.tokens, [11, 12, 13]);

    // Unchanged: nothing to ask.
    assert!(update(&mut s, Action::CommitEdit).is_empty());
    assert!(s.status.notice.as_deref().unwrap().contains("as it was"));
    assert_eq!(s.overlay, None);

    press_key(&mut s, KeyCode::Char('E'));
    for _ in 0..4 {
        update(&mut s, Action::DeleteBack);
    }
    update(&mut s, Action::Paste(" dragon".into()));
    let effects = update(&mut s, Action::CommitEdit);
    let [Effect::Edit(ModelId(0), request)] = &effects[..] else {
        panic!("{effects:?}")
    };
    assert_eq!(request.prompt, [1, 2]);
    assert_eq!(request.sample, [11, 12, 13]);
    assert_eq!(request.text, " t11 t12 dragon");
    assert_eq!(s.overlay, None);

    // The model kept the first two tokens and read " dragon" as 900, 901.
    let edit = samplab::engine::Edit {
        kept: 2,
        ids: vec![900, 901],
    };
    let answer = Event::Edited {
        id: request.id,
        edit: Ok(edit),
    };
    let run = run_of(&update(&mut s, Action::Engine(ModelId(0), answer.clone())));
    assert_eq!(run.branches, [branch(1, 1, 2, &[11, 12, 900, 901], None)]);
    assert!(
        s.status
            .notice
            .as_deref()
            .unwrap()
            .contains("2 typed token(s) forced"),
        "{:?}",
        s.status.notice
    );
    play(&mut s, &run, 3);
    let column = s
        .columns
        .index_of(SideId(0), n)
        .expect("the branch's column");
    assert_eq!(
        s.columns.cursor_token(),
        Some((column, 2)),
        "where it parts"
    );
    assert!(
        update(&mut s, Action::Engine(ModelId(0), answer)).is_empty(),
        "an answer comes once"
    );
}

#[test]
fn an_edit_that_only_cuts_or_cannot_be_tokenized_makes_no_branch() {
    let (mut s, _) = finished_run_seen();
    cursor_to(&mut s, 0, 0);
    for answer in [
        Ok(samplab::engine::Edit {
            kept: 1,
            ids: Vec::new(),
        }),
        Err("the tokenizer normalises text".to_owned()),
    ] {
        press_key(&mut s, KeyCode::Char('E'));
        update(&mut s, Action::DeleteBack);
        let effects = update(&mut s, Action::CommitEdit);
        let [Effect::Edit(_, request)] = &effects[..] else {
            panic!("{effects:?}")
        };
        let failed = answer.is_err();
        let edited = Event::Edited {
            id: request.id,
            edit: answer,
        };
        assert!(update(&mut s, Action::Engine(ModelId(0), edited)).is_empty());
        assert!(s.comparison.sides[0].tree.nodes.is_empty());
        if failed {
            let error = s.status.error.as_deref().unwrap();
            assert!(error.contains("normalises"), "{error}");
        } else {
            let notice = s.status.notice.as_deref().unwrap();
            assert!(notice.contains("change a word"), "{notice}");
        }
    }
    press_key(&mut s, KeyCode::Char('E'));
    press_key(&mut s, KeyCode::Esc);
    assert_eq!(s.overlay, None, "Esc leaves the sample as it was");
}

#[test]
fn the_sample_editor_shows_the_text_what_enter_does_and_its_keys() {
    let (mut s, _) = finished_run_seen();
    cursor_to(&mut s, 2, 0);
    press_key(&mut s, KeyCode::Char('E'));
    for (w, h) in [(80, 24), (160, 45), (10, 5)] {
        s.size = ratatui::layout::Rect::new(0, 0, w, h);
        let buffer = render(&s, &Theme::dark());
        if w < 20 {
            continue;
        }
        assert!(find(&buffer, " edit #2 ").is_some(), "{w}x{h}");
        assert!(find(&buffer, "t21 t22 t23").is_some());
        assert!(find(&buffer, "text you keep keeps its sampled tokens").is_some());
        assert!(find(&buffer, "Enter apply").is_some());
    }
}
