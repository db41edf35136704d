//! What the playground shows and how it exits when something fails: a model that cannot load,
//! a run that fails.

use crate::common;

use common::tui::{NoEngine, find, render, row, state_sized};
use samplab::engine::Event;
use samplab::tui::Ending;
use samplab::tui::action::Action;
use samplab::tui::app::App;
use samplab::tui::keymap::KeyMap;
use samplab::tui::theme::Theme;

fn load_failed(message: &str) -> Action {
    Action::Engine(
        0,
        Event::LoadFailed {
            message: message.into(),
        },
    )
}

#[test]
fn a_model_that_cannot_load_is_said_in_the_sample_area_and_ends_as_a_failure() {
    let mut state = state_sized(80, 24);
    state.compare(&["missing.gguf".to_owned()], None);
    let mut app = App::new(state, vec![NoEngine], KeyMap::default());
    assert_eq!(app.ending(), Ending::Quit);
    app.dispatch(load_failed("model path missing.gguf does not exist"));
    let buffer = render(&app.state, &Theme::dark());
    let screen: Vec<String> = (0..24).map(|y| row(&buffer, y)).collect();
    for part in [
        "cannot load model missing.gguf",
        "does not exist.",
        "q quits.",
    ] {
        assert!(
            find(&buffer, part).is_some(),
            "{part}:\n{}",
            screen.join("\n")
        );
    }
    assert!(find(&buffer, "samples appear here").is_none());
    assert_eq!(
        app.ending(),
        Ending::Failed(
            "cannot load model missing.gguf: model path missing.gguf does not exist".into()
        )
    );
}
