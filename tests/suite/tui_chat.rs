//! Chat in the playground: chat mode per model (issue 14 item 7), the prompt box showing what
//! the model sees (issue 18), and the conversation's earlier turns.

use crate::common;

use common::tui::{done, find, press_key, render, row, started, state_sized, token};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use samplab::engine::{Event, Prompt, PromptToken, Request};
use samplab::response::{CrossScore, StopReason, TopLogprob};
use samplab::tui::{
    Action, DialogAction, Effect, Focus, KeyMap, ListMove, ModelId, PromptView, SideId, State,
    Theme, update,
};

fn loaded(name: &str, chat_template: bool) -> Event {
    Event::Loaded {
        model: name.into(),
        device: "cpu".into(),
        defaults: None,
        chat_template,
        vocab: 0,
        vocab_size: Some(1024),
        special_tokens: vec!["<|im_end|>".into()],
        warnings: Vec::new(),
        activations: None,
        backend: None,
    }
}

fn runs(effects: &[Effect]) -> Vec<(usize, &Request)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Run(model, request) => Some((model.0, request)),
            _ => None,
        })
        .collect()
}

/// An instruct model (0) and a base model (1), both loaded.
fn chat_and_base() -> State {
    let mut s = state_sized(200, 50);
    s.comparison
        .compare(&["instruct".into(), "base".into()], None);
    update(&mut s, Action::Engine(ModelId(0), loaded("instruct", true)));
    update(&mut s, Action::Engine(ModelId(1), loaded("base", false)));
    s
}

#[test]
fn m_puts_the_chat_model_in_chat_mode_and_tells_that_the_base_model_stays_raw() {
    let mut s = chat_and_base();
    let effects = update(&mut s, Action::ToggleChat);
    assert!(effects.contains(&Effect::ScheduleRun), "{effects:?}");
    assert!(s.comparison.models[0].chat && !s.comparison.models[1].chat);
    let notice = s.status.notice.clone().unwrap();
    assert!(notice.contains("base has no chat template"), "{notice}");
    assert!(
        s.status.log.iter().any(|m| m.text == notice),
        "kept in the log"
    );

    let effects = update(&mut s, Action::DebounceElapsed);
    let runs = runs(&effects);
    assert_eq!(runs.len(), 2);
    for (model, request) in runs {
        match model {
            0 => assert_eq!(request.prompt, Prompt::chat(vec![msg("user", "Once")])),
            _ => assert_eq!(request.prompt, Prompt::raw("Once")),
        }
    }
    let title = row(&render(&s, &Theme::plain()), 0);
    assert!(title.contains("chat template · raw for base"), "{title}");

    update(&mut s, Action::ToggleChat);
    assert!(!s.comparison.models[0].chat, "and back to raw for all");
}

#[test]
fn with_the_samples_focused_m_switches_only_the_model_of_the_cursors_column() {
    let mut s = state_sized(200, 50);
    s.comparison.compare(&["one".into(), "two".into()], None);
    update(&mut s, Action::Engine(ModelId(0), loaded("one", true)));
    update(&mut s, Action::Engine(ModelId(1), loaded("two", true)));
    update(&mut s, Action::Engine(ModelId(0), started(1, vec![7])));
    update(&mut s, Action::Engine(ModelId(1), started(2, vec![7])));
    s.focus = Focus::Columns;
    s.columns.cursor.column = 1;
    update(&mut s, Action::ToggleChat);
    assert!(!s.comparison.models[0].chat && s.comparison.models[1].chat);
    let effects = update(&mut s, Action::DebounceElapsed);
    let chat: Vec<(usize, bool)> = runs(&effects)
        .into_iter()
        .map(|(model, r)| (model, r.prompt.is_chat()))
        .collect();
    assert_eq!(chat, [(0, false), (1, true)]);
}

#[test]
fn chat_asked_for_a_model_without_a_template_is_an_error_in_the_log() {
    let mut s = state_sized(120, 30);
    s.comparison.compare(&["base".into()], None);
    // `--chat` asks every model for chat before any has loaded.
    s.comparison.models[0].chat = true;
    let effects = update(&mut s, Action::Engine(ModelId(0), loaded("base", false)));
    assert!(!s.comparison.models[0].chat);
    assert!(matches!(&runs(&effects)[..], [(0, r)] if !r.prompt.is_chat()));
    let error = s.status.error.clone().unwrap();
    assert!(error.contains("base has no chat template"), "{error}");
    assert!(s.status.log.iter().any(|m| m.error && m.text == error));

    s.status.error = None;
    assert!(
        update(&mut s, Action::ToggleChat).is_empty(),
        "nothing to re-run"
    );
    assert!(s.status.error.unwrap().contains("no chat template"));
}

fn msg(role: &str, content: &str) -> samplab::model::text::chat_template::Message {
    samplab::model::text::chat_template::Message::new(role, content)
}

fn prompted(run_id: u64) -> Event {
    let token = |text: &str, special| PromptToken {
        id: Some(0),
        text: text.into(),
        special,
    };
    Event::Prompted {
        run_id,
        rendered: Some("<|im_start|>user\nOnce<|im_end|>\n".into()),
        tokens: vec![
            token("<|im_start|>", true),
            token("user", false),
            token("\n", false),
            token("Once", false),
            token("<|im_end|>", true),
            token("\n", false),
        ],
    }
}

#[test]
fn o_shows_the_rendered_prompt_then_its_tokens_then_the_typed_text() {
    let theme = Theme::dark();
    let mut s = state_sized(120, 30);
    let effects = update(&mut s, Action::Engine(ModelId(0), loaded("instruct", true)));
    let run_id = runs(&effects)[0].1.run_id;
    update(&mut s, Action::Engine(ModelId(0), prompted(run_id)));

    update(&mut s, Action::CyclePromptView);
    assert_eq!(s.prompt.view, PromptView::Rendered);
    let screen = render(&s, &theme);
    assert!(
        row(&screen, 0).contains("as instruct sees it"),
        "{}",
        row(&screen, 0)
    );
    assert!(find(&screen, "<|im_start|>user").is_some());
    assert!(find(&screen, "Once<|im_end|>").is_some());

    update(&mut s, Action::CyclePromptView);
    let screen = render(&s, &theme);
    assert!(
        row(&screen, 0).contains("6 tokens of instruct"),
        "{}",
        row(&screen, 0)
    );
    let (x, y) = find(&screen, "<|im_start|>user↵").expect("tokens, newline shown");
    assert_eq!(
        screen[(x, y)].fg,
        theme.error.fg.unwrap(),
        "special tokens marked"
    );
    let user = &screen[(x + 12, y)];
    assert_ne!(user.fg, theme.error.fg.unwrap());
    let (x, y) = find(&screen, "Once<|im_end|>").unwrap();
    assert_eq!(screen[(x + 4, y)].fg, theme.error.fg.unwrap());
    assert_ne!(screen[(x, y)].fg, theme.error.fg.unwrap());

    // Typing shows the typed text again.
    s.focus = Focus::Prompt;
    update(&mut s, Action::InsertChar('!'));
    assert_eq!(s.prompt.view, PromptView::Typed);
    assert!(find(&render(&s, &theme), "Once!").is_some());
}

/// Issue 51: a rendering that fills the box lost its first line to the empty row after the
/// template's closing line break.
#[test]
fn o_shows_a_template_that_fits_the_box_from_its_first_line() {
    let mut s = state_sized(120, 30);
    let effects = update(&mut s, Action::Engine(ModelId(0), loaded("instruct", true)));
    let run_id = runs(&effects)[0].1.run_id;
    let rendered = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nOnce<|im_end|>\n\
                    <|im_start|>assistant\n";
    let prompted = Event::Prompted {
        run_id,
        rendered: Some(rendered.into()),
        tokens: Vec::new(),
    };
    update(&mut s, Action::Engine(ModelId(0), prompted));
    update(&mut s, Action::CyclePromptView);
    let screen = render(&s, &Theme::plain());
    let prompt = samplab::tui::areas(s.size).prompt;
    assert_eq!(
        prompt.height - 2,
        5,
        "the box holds the template's five lines"
    );
    assert_eq!(
        find(&screen, "<|im_start|>system"),
        Some((1, 1)),
        "the first line, on the box's first row"
    );
    assert!(find(&screen, "<|im_start|>assistant").is_some());
}

#[test]
fn before_any_run_the_rendered_view_says_so() {
    let mut s = state_sized(80, 24);
    update(&mut s, Action::CyclePromptView);
    assert!(row(&render(&s, &Theme::plain()), 0).contains("not run yet"));
}

fn dialog(action: DialogAction) -> Action {
    Action::Dialog(action)
}

fn type_in(s: &mut State, text: &str) {
    for c in text.chars() {
        update(s, Action::InsertChar(c));
    }
}

#[test]
fn the_conversation_dialog_adds_edits_recasts_and_deletes_turns_that_chat_runs_send() {
    let mut s = state_sized(120, 30);
    update(&mut s, Action::Engine(ModelId(0), loaded("instruct", true)));
    update(&mut s, Action::ToggleChat);
    update(&mut s, dialog(DialogAction::OpenConversation));
    let keymap = KeyMap::default();
    let a = KeyEvent::new(KeyCode::Char('a'), KeyModifiers::NONE);
    assert_eq!(
        keymap.action(&s.modes(), a),
        Some(dialog(DialogAction::AddTurn))
    );

    // The first turn is a system message, edited at once: `a` is typed, not a new turn.
    let effects = update(&mut s, dialog(DialogAction::AddTurn));
    assert!(effects.contains(&Effect::ScheduleRun));
    assert_eq!(keymap.action(&s.modes(), a), Some(Action::InsertChar('a')));
    type_in(&mut s, "Be brief");
    let effects = update(&mut s, Action::CommitEdit);
    assert!(effects.contains(&Effect::ScheduleRun), "{effects:?}");
    // Then a user turn, an assistant's answer after it.
    update(&mut s, dialog(DialogAction::AddTurn));
    type_in(&mut s, "Hi");
    update(&mut s, Action::CommitEdit);
    update(&mut s, dialog(DialogAction::AddTurn));
    type_in(&mut s, "Hello");
    update(&mut s, Action::CommitEdit);
    let roles: Vec<&str> = s.prompt.history.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant"]);

    let screen = render(&s, &Theme::plain());
    assert!(find(&screen, " conversation ").is_some());
    assert!(find(&screen, "   system Be brief").is_some());
    assert!(find(&screen, "assistant Hello").is_some());
    assert!(
        find(&screen, "     user Once").is_some(),
        "the prompt comes last"
    );

    let effects = update(&mut s, Action::DebounceElapsed);
    let [(0, request)] = &runs(&effects)[..] else {
        panic!("{effects:?}");
    };
    assert_eq!(
        request.prompt.messages(),
        [
            msg("system", "Be brief"),
            msg("user", "Hi"),
            msg("assistant", "Hello"),
            msg("user", "Once")
        ]
    );

    // Enter edits the selected turn; Esc keeps its text.
    update(&mut s, Action::Select(ListMove::Step(-1)));
    update(&mut s, dialog(DialogAction::EditTurn));
    type_in(&mut s, " there");
    update(&mut s, Action::CancelEdit);
    assert_eq!(s.prompt.history[1].content, "Hi");
    update(&mut s, dialog(DialogAction::EditTurn));
    type_in(&mut s, " there");
    update(&mut s, Action::CommitEdit);
    assert_eq!(s.prompt.history[1].content, "Hi there");

    update(&mut s, dialog(DialogAction::CycleRole));
    assert_eq!(s.prompt.history[1].role, "assistant");
    update(&mut s, dialog(DialogAction::CycleRole));
    assert_eq!(s.prompt.history[1].role, "system");
    update(&mut s, dialog(DialogAction::DeleteTurn));
    let contents: Vec<&str> = s
        .prompt
        .history
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(contents, ["Be brief", "Hello"]);
    update(&mut s, Action::Select(ListMove::Step(5)));
    update(&mut s, dialog(DialogAction::DeleteTurn));
    update(&mut s, dialog(DialogAction::DeleteTurn));
    update(&mut s, dialog(DialogAction::DeleteTurn));
    assert!(s.prompt.history.is_empty());
    assert!(find(&render(&s, &Theme::plain()), "no earlier turns").is_some());

    // A raw prompt sends no turns.
    update(&mut s, Action::CloseOverlay);
    s.prompt.history.push(msg("system", "x"));
    update(&mut s, Action::ToggleChat);
    let effects = update(&mut s, Action::DebounceElapsed);
    assert!(matches!(&runs(&effects)[..], [(0, r)] if r.prompt == Prompt::raw("Once")));
}

/// Issue 34: a turn of the conversation could not hold a newline.
#[test]
fn ctrl_j_puts_a_newline_in_a_turn_and_nowhere_in_a_value() {
    let mut s = state_sized(120, 30);
    update(&mut s, Action::Engine(ModelId(0), loaded("instruct", true)));
    update(&mut s, dialog(DialogAction::OpenConversation));
    update(&mut s, dialog(DialogAction::AddTurn));
    let keymap = KeyMap::default();
    let newline = |s: &State, code, modifiers| {
        keymap
            .action(&s.modes(), KeyEvent::new(code, modifiers))
            .unwrap()
    };
    type_in(&mut s, "Line one");
    let ctrl_j = newline(&s, KeyCode::Char('j'), KeyModifiers::CONTROL);
    assert_eq!(ctrl_j, Action::InsertNewline);
    update(&mut s, ctrl_j.clone());
    type_in(&mut s, "two");
    update(&mut s, ctrl_j);
    update(&mut s, Action::Paste("three\r\nfour".into()));
    let screen = render(&s, &Theme::plain());
    assert!(find(&screen, "Line one↵two↵three↵four").is_some());
    update(&mut s, Action::CommitEdit);
    assert_eq!(s.prompt.history[0].content, "Line one\ntwo\nthree\nfour");
    let plain_enter = newline(&s, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(
        plain_enter,
        dialog(DialogAction::EditTurn),
        "Enter still edits"
    );
    update(&mut s, Action::CloseOverlay);

    // A value is one line: Ctrl+J leaves it alone.
    s.focus = Focus::Params;
    update(&mut s, Action::EditParam);
    let ctrl_j = newline(&s, KeyCode::Char('j'), KeyModifiers::CONTROL);
    assert!(update(&mut s, ctrl_j).is_empty());
    let editor = s.comparison.params.editor.as_ref().unwrap();
    assert!(
        !editor.buffer.text.contains('\n'),
        "{:?}",
        editor.buffer.text
    );
}

#[test]
fn the_base_model_scores_a_chat_sample_and_the_footer_marks_whose_rendering_it_followed() {
    let mut s = chat_and_base();
    update(&mut s, Action::ToggleChat);
    let effects = update(&mut s, Action::DebounceElapsed);
    let run_id = runs(&effects)
        .into_iter()
        .find(|(model, _)| *model == 0)
        .unwrap()
        .1
        .run_id;
    update(&mut s, Action::Engine(ModelId(0), started(run_id, vec![7])));
    update(
        &mut s,
        Action::Engine(ModelId(0), token(run_id, 0, "Hi", 0.5)),
    );
    let effects = update(
        &mut s,
        Action::Engine(ModelId(0), done(run_id, &[StopReason::Length])),
    );
    let [Effect::Score(ModelId(1), request)] = &effects[..] else {
        panic!("the base model is asked to score: {effects:?}");
    };
    assert_eq!(request.prompt, Prompt::chat(vec![msg("user", "Once")]));
    let score = CrossScore {
        model: "base".into(),
        sample: 0,
        tokens: 1,
        mean_logprob: -1.0,
        perplexity: 1f64.exp(),
        retokenized: false,
        foreign_prompt: true,
        per_token: None,
    };
    update(
        &mut s,
        Action::Engine(
            ModelId(1),
            Event::Scored {
                run_id,
                scores: vec![score],
            },
        ),
    );
    let column = s
        .columns
        .columns
        .iter()
        .find(|c| c.side == SideId(0))
        .unwrap();
    assert!(
        column.footer(60).ends_with("⇄base 2.72†"),
        "{}",
        column.footer(60)
    );
}

#[test]
fn a_model_added_while_in_chat_mode_joins_it_or_says_why_not() {
    let mut s = state_sized(120, 30);
    update(&mut s, Action::Engine(ModelId(0), loaded("instruct", true)));
    update(&mut s, Action::ToggleChat);
    update(&mut s, Action::DebounceElapsed);
    let chat = s.comparison.add_model("second");
    let base = s.comparison.add_model("base");
    assert!(s.comparison.slot(chat).unwrap().chat && s.comparison.slot(base).unwrap().chat);
    let effects = update(&mut s, Action::Engine(chat, loaded("second", true)));
    assert!(matches!(&runs(&effects)[..], [(_, r)] if r.prompt.is_chat()));
    let effects = update(&mut s, Action::Engine(base, loaded("base", false)));
    assert!(matches!(&runs(&effects)[..], [(_, r)] if !r.prompt.is_chat()));
    assert!(
        s.status
            .error
            .unwrap()
            .contains("base has no chat template")
    );
}

#[test]
fn a_long_conversation_scrolls_to_the_selected_turn() {
    let mut s = state_sized(80, 24);
    s.prompt.history = (0..40).map(|i| msg("user", &format!("turn {i}"))).collect();
    update(&mut s, dialog(DialogAction::OpenConversation));
    assert!(find(&render(&s, &Theme::plain()), "turn 0").is_some());
    update(&mut s, Action::Select(ListMove::Step(35)));
    let screen = render(&s, &Theme::plain());
    assert!(find(&screen, "turn 35").is_some());
    assert!(
        find(&screen, "turn 0 ").is_none(),
        "scrolled past the first turns"
    );
    // Issue 34: Home/End and pages, through the key map.
    let press = press_key;
    press(&mut s, KeyCode::End);
    assert!(find(&render(&s, &Theme::plain()), "turn 39").is_some());
    press(&mut s, KeyCode::Home);
    assert!(find(&render(&s, &Theme::plain()), "turn 0 ").is_some());
    // 24 lines: 22 inside the popup, the note and the prompt take two.
    press(&mut s, KeyCode::PageDown);
    let screen = render(&s, &Theme::plain());
    assert!(find(&screen, "turn 20").is_some() && find(&screen, "turn 21").is_none());
}

/// Issue 14 item 13: with prompt_logprobs, the token view colours the prompt by how likely
/// each token was, and ←/→ inspect a token and its alternatives.
#[test]
fn the_token_view_colours_the_prompt_by_its_logprobs_and_inspects_a_token() {
    let theme = Theme::dark();
    let mut s = state_sized(120, 30);
    let effects = update(&mut s, Action::Engine(ModelId(0), loaded("base", false)));
    let run_id = runs(&effects)[0].1.run_id;
    let token = |id, text: &str| PromptToken {
        id: Some(id),
        text: text.into(),
        special: false,
    };
    update(
        &mut s,
        Action::Engine(
            ModelId(0),
            Event::Prompted {
                run_id,
                rendered: None,
                tokens: vec![token(1, "Once"), token(7, " upon"), token(9, " a")],
            },
        ),
    );
    update(&mut s, Action::CyclePromptView);
    update(&mut s, Action::CyclePromptView);
    assert_eq!(s.prompt.view, PromptView::Tokens);
    let screen = render(&s, &theme);
    assert!(
        !row(&screen, 0).contains("by probability"),
        "not scored yet"
    );
    assert!(find(&screen, "set prompt_logprobs").is_some());

    let Event::Done { mut response, .. } = done(run_id, &[StopReason::Length]) else {
        unreachable!()
    };
    response.prompt_token_ids = vec![1, 7, 9];
    response.prompt_logprobs = Some(vec![None, Some(-0.5), Some(-3.0)]);
    response.prompt_top_logprobs = Some(vec![
        None,
        Some(vec![
            TopLogprob(7, " upon".into(), -0.5),
            TopLogprob(8, " there".into(), -1.5),
        ]),
        Some(vec![TopLogprob(3, " the".into(), -0.2)]),
    ]);
    update(
        &mut s,
        Action::Engine(ModelId(0), Event::Done { run_id, response }),
    );
    let screen = render(&s, &theme);
    assert!(
        row(&screen, 0).contains("3 tokens of base by probability"),
        "{}",
        row(&screen, 0)
    );
    let (x, y) = find(&screen, "Once upon a").expect("the tokens");
    assert_eq!(
        screen[(x + 5, y)].bg,
        theme.token_style((-0.5f32).exp()).bg.unwrap(),
        "` upon` in its probability's colour"
    );
    assert!(
        find(
            &screen,
            "token 3/3 \" a\" (id 9) · p 0.050 (logprob -3.000) · next best: \" the\" 0.819"
        )
        .is_some(),
        "the last token is inspected first"
    );

    s.focus = Focus::Prompt;
    update(&mut s, Action::CursorLeft);
    let screen = render(&s, &theme);
    assert!(find(&screen, "token 2/3 \" upon\" (id 7) · p 0.607").is_some());
    assert!(find(&screen, "next best: \" there\" 0.223").is_some());
    assert_eq!(
        s.prompt.view,
        PromptView::Tokens,
        "moving does not leave the view"
    );
    update(&mut s, Action::CursorLeft);
    update(&mut s, Action::CursorLeft);
    assert!(
        find(
            &render(&s, &theme),
            "token 1/3 \"Once\" (id 1) · the first token"
        )
        .is_some()
    );
    update(&mut s, Action::CursorRight);
    assert_eq!(s.prompt.token_cursor, 1);
}

// ---- the chat loop ----

/// One chat model in chat mode, whose run on "Once" gave two replies: `Hi there` and `Hello`.
fn answered() -> (State, Request) {
    let mut s = state_sized(160, 40);
    s.comparison.compare(&["instruct".into()], None);
    s.comparison.params.params.num_samples = 2;
    update(&mut s, Action::Engine(ModelId(0), loaded("instruct", true)));
    update(&mut s, Action::ToggleChat);
    let effects = update(&mut s, Action::DebounceElapsed);
    let request = runs(&effects)[0].1.clone();
    let id = request.run_id;
    update(&mut s, Action::Engine(ModelId(0), started(id, vec![7, 8])));
    for (sample, text) in [(0, "Hi"), (0, " there"), (1, "Hello")] {
        update(
            &mut s,
            Action::Engine(ModelId(0), token(id, sample, text, 0.5)),
        );
    }
    update(
        &mut s,
        Action::Engine(ModelId(0), done(id, &[StopReason::Stop, StopReason::Stop])),
    );
    s.focus = Focus::Columns;
    (s, request)
}

/// `>` swipes to the next reply (round the ends), `A` takes it as the assistant's turn: the
/// conversation gets the user turn and the reply, the prompt box empties for the next user
/// turn, and that turn runs after them as it is typed.
#[test]
fn a_swiped_reply_is_accepted_and_the_next_user_turn_follows_it() {
    let (mut s, _) = answered();
    press_key(&mut s, KeyCode::Char('>'));
    assert_eq!(s.columns.cursor.column, 1);
    assert!(
        s.status
            .notice
            .as_deref()
            .unwrap()
            .contains("#1 (reply 2 of 2)")
    );
    press_key(&mut s, KeyCode::Char('>'));
    assert_eq!(s.columns.cursor.column, 0, "round the end");
    press_key(&mut s, KeyCode::Char('<'));
    assert_eq!(s.columns.cursor.column, 1);

    // The conversation dialog shows the reply `A` would take.
    update(&mut s, Action::Dialog(DialogAction::OpenConversation));
    let buffer = render(&s, &Theme::dark());
    assert!(find(&buffer, "assistant #1 (reply 2 of 2): Hello").is_some());
    update(&mut s, Action::CloseOverlay);

    let effects = update(&mut s, Action::AcceptReply);
    assert!(
        !effects.contains(&Effect::ScheduleRun),
        "nothing runs before the next turn"
    );
    assert_eq!(
        s.prompt.history,
        [msg("user", "Once"), msg("assistant", "Hello")]
    );
    assert_eq!(s.prompt.text(), "");
    assert_eq!(s.focus, Focus::Prompt);
    assert!(
        s.status
            .notice
            .as_deref()
            .unwrap()
            .contains("type the next user turn")
    );
    let title = row(&render(&s, &Theme::plain()), 0);
    assert!(title.contains("2 earlier"), "{title}");

    for c in "Go on".chars() {
        update(&mut s, Action::InsertChar(c));
    }
    let effects = update(&mut s, Action::DebounceElapsed);
    assert_eq!(
        runs(&effects)[0].1.prompt,
        Prompt::chat(vec![
            msg("user", "Once"),
            msg("assistant", "Hello"),
            msg("user", "Go on")
        ])
    );
}

/// `R` after an accepted reply takes it back and asks the same user turn again on new seeds;
/// with a user turn in the box it only rolls the seeds.
#[test]
fn regenerate_asks_the_last_turn_again_on_new_seeds() {
    let (mut s, first) = answered();
    update(&mut s, Action::AcceptReply);
    let effects = update(&mut s, Action::Regenerate);
    let request = runs(&effects)[0].1.clone();
    assert_eq!(request.prompt, first.prompt, "the user turn again");
    assert_ne!(request.params.seed, first.params.seed, "on new seeds");
    assert!(s.prompt.history.is_empty());
    assert_eq!(s.prompt.text(), "Once");

    let seed = request.params.seed;
    let effects = update(&mut s, Action::Regenerate);
    let again = runs(&effects)[0].1.clone();
    assert_eq!(again.prompt, first.prompt);
    assert_ne!(again.params.seed, seed);
}

/// A model without a chat template has no turns to take, and says so; one in raw mode says how
/// to get to chat.
#[test]
fn accepting_a_raw_sample_says_why_not() {
    let mut s = chat_and_base();
    let effects = update(&mut s, Action::Rerun);
    for (model, request) in runs(&effects) {
        let id = request.run_id;
        update(&mut s, Action::Engine(ModelId(model), started(id, vec![7])));
        update(
            &mut s,
            Action::Engine(ModelId(model), token(id, 0, "x", 0.5)),
        );
        update(
            &mut s,
            Action::Engine(ModelId(model), done(id, &[StopReason::Stop])),
        );
    }
    s.focus = Focus::Columns;
    s.columns.cursor.column = 1;
    assert!(update(&mut s, Action::AcceptReply).is_empty());
    let error = s.status.error.clone().unwrap();
    assert!(error.contains("base has no chat template"), "{error}");
    assert!(error.contains("E edits a sample"), "{error}");
    s.columns.cursor.column = 0;
    update(&mut s, Action::AcceptReply);
    let notice = s.status.notice.clone().unwrap();
    assert!(notice.contains("m switches it to chat"), "{notice}");
    assert!(s.prompt.history.is_empty());
}
