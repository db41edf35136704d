//! The playground's `w`: pressed in the playground itself (not only in the export dialog), it
//! asks where, says where it wrote, and keeps every token's alternatives whatever `logprobs`
//! asked, so that `samplab render` shows the run as the playground did (issue 51).

use crate::common;

use common::tui::{NoEngine, loaded, started, state_sized};
use common::{samplab, stderr};
use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use samplab::engine::{Alternative, Event, TokenEvent};
use samplab::response::{SampleResponse, StopMatched, StopReason, TopLogprob, Trajectory};
use samplab::tui::{Action, App, Focus, KeyMap, ModelId};

fn press(app: &mut App<NoEngine>, code: KeyCode) {
    app.on_terminal(TermEvent::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

/// Token `id` of sample 0 in run 1, with its raw logprob and the alternatives the engine sent.
fn token(id: u32, text: &str, logprob: f32, top: &[(u32, &str, f32)]) -> Event {
    Event::Token {
        run_id: 1,
        token: TokenEvent {
            sample: 0,
            id,
            text: text.into(),
            logprob,
            prob: logprob.exp(),
            reported_prob: logprob.exp(),
            rank: 1,
            top: top
                .iter()
                .map(|&(id, text, logprob)| Alternative {
                    id,
                    text: text.into(),
                    logprob,
                    prob: logprob.exp(),
                })
                .collect(),
            entropy: None,
            watched: Vec::new(),
            constraint: None,
            channel: None,
        },
    }
}

/// Sample 0 of run 1, " Once" then the stop token `</s>` (id 2), sampled without `logprobs`:
/// the engine's response keeps no alternatives, its token events do.
fn finished_run(app: &mut App<NoEngine>) {
    let events = [
        started(1, vec![42]),
        token(7, " Once", -0.2, &[(7, " Once", -0.2), (9, " Then", -1.9)]),
        token(2, "", -2.5, &[(5, " the", -0.3), (2, "</s>", -2.5)]),
        Event::Finished {
            run_id: 1,
            sample: 0,
            reason: StopReason::Stop,
            matched: Some(StopMatched::Token(2)),
            stop_token: Some("</s>".into()),
            tail: String::new(),
            replayed: 0,
            decoded: 2,
        },
    ];
    for event in events {
        app.dispatch(Action::Engine(ModelId(0), event));
    }
    let trajectory = Trajectory {
        token_ids: vec![7, 2],
        text: " Once".into(),
        logprobs: vec![-0.2, -2.5],
        stop_reason: StopReason::Stop,
        stop_matched: Some(StopMatched::Token(2)),
        ..Trajectory::empty(0, 42, None)
    };
    let done = Event::Done {
        run_id: 1,
        response: Box::new(common::tui::response(vec![trajectory])),
    };
    app.dispatch(Action::Engine(ModelId(0), done));
}

#[test]
fn w_in_the_playground_says_where_it_wrote_every_tokens_alternatives() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = state_sized(100, 30);
    state.export.results_dir = dir.path().to_owned();
    let mut app = App::new(state, vec![NoEngine], KeyMap::default());
    app.dispatch(Action::Engine(ModelId(0), loaded()));
    app.state.focus = Focus::Columns;

    press(&mut app, KeyCode::Char('w'));
    let said = app.state.status.notice.clone().unwrap_or_default();
    assert!(said.contains("no finished run yet"), "{said:?}");

    finished_run(&mut app);
    press(&mut app, KeyCode::Char('w'));
    assert!(app.state.overlay.is_some(), "w asks where to write");
    press(&mut app, KeyCode::Enter);
    assert!(
        app.state.overlay.is_none(),
        "written: back to the playground"
    );
    let said = app.state.status.notice.clone().unwrap_or_default();
    let path = said
        .strip_prefix("wrote the results to ")
        .unwrap_or_else(|| panic!("the status bar says where: {said:?}"));
    assert_eq!(std::path::Path::new(path).parent(), Some(dir.path()));

    let text = std::fs::read_to_string(path).unwrap();
    let written: SampleResponse = serde_json::from_str(&text).unwrap();
    let t = &written.trajectories[0];
    assert_eq!(
        t.top_logprobs, None,
        "top_logprobs stays what logprobs asked"
    );
    let top = |id, text: &str, logprob| TopLogprob(id, text.to_owned(), logprob);
    assert_eq!(
        t.alternatives,
        Some(vec![
            vec![top(7, " Once", -0.2), top(9, " Then", -1.9)],
            vec![top(5, " the", -0.3), top(2, "</s>", -2.5)],
        ])
    );

    // The page of that file colours and names every token, the stop token by its text.
    let page = dir.path().join("run.html");
    let rendered = samplab(&["render", path, "--html", page.to_str().unwrap()]);
    assert!(rendered.status.success(), "{}", stderr(&rendered));
    let html = std::fs::read_to_string(page).unwrap();
    assert!(!html.contains("no per-token texts"), "{html}");
    assert_eq!(html.matches("<span class=t ").count(), 2);
    assert!(html.contains("stop &lt;/s&gt; · 2 tokens"), "{html}");
    assert!(!html.contains("&lt;token 2&gt;"), "{html}");
    assert!(
        html.contains(r#"" Then""#),
        "the hover's data names the alternatives"
    );
}
