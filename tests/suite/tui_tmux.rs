//! The real playground in a real terminal: the binary runs inside tmux on the stories260K model,
//! keys are sent with `send-keys` and the screen is read with `capture-pane`.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The shell's prompt (`PS1`), as capture-pane shows it: trailing spaces trimmed.
const PROMPT_MARK: &str = "e2e$";

/// A private tmux server running one shell; killed on drop, also when the test fails.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// `None` when tmux is missing outside CI (where `.ci/run` installs it).
    fn start(home: &Path) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            assert!(
                std::env::var("SAMPLAB_REQUIRE_TEST_MODEL").as_deref() != Ok("1"),
                "tmux is not installed; CI must install it (apt-get install tmux)"
            );
            eprintln!("skipping: tmux is not installed");
            return None;
        }
        static SERVERS: AtomicUsize = AtomicUsize::new(0);
        let tmux = Tmux {
            socket: format!(
                "samplab-e2e-{}-{}",
                std::process::id(),
                SERVERS.fetch_add(1, Ordering::Relaxed)
            ),
        };
        let shell = format!(
            "env -i PATH=/usr/bin:/bin TERM=xterm-256color HOME={home} \
             SAMPLAB_CONFIG_DIR={home}/config PS1='{PROMPT_MARK} ' bash --norc --noprofile",
            home = home.display()
        );
        tmux.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            "160",
            "-y",
            "40",
            "-s",
            "e2e",
            &shell,
        ]);
        tmux.wait_for("the shell prompt", |s| s.contains(PROMPT_MARK));
        Some(tmux)
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A pane format variable, such as `#{alternate_on}`.
    fn display(&self, format: &str) -> String {
        self.run(&["display", "-p", "-t", "e2e", format])
            .trim()
            .to_owned()
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "e2e"])
    }

    /// Sends tmux key names (`Down`, `Enter`, `BSpace`) or literal text.
    fn keys(&self, keys: &[&str]) {
        for key in keys {
            self.run(&["send-keys", "-t", "e2e", key]);
        }
    }

    fn type_text(&self, text: &str) {
        self.run(&["send-keys", "-t", "e2e", "-l", text]);
    }

    /// Polls the screen until `done` holds; a minute without it fails with the screen shown.
    fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "waited a minute for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// The value at the end of a params row, e.g. `0.00` from `temperature ▯▯▯   0.00`.
fn param_value(screen: &str, label: &str) -> Option<String> {
    screen.lines().find_map(|line| {
        let (_, rest) = line.split_once(&format!("│{label} "))?;
        let cell = rest.split('│').next()?;
        cell.split_whitespace().last().map(str::to_owned)
    })
}

/// The text of sample column `index`: the rows between its title and its footer, each without
/// the padding that depends on the column's width.
fn column_text(screen: &str, index: usize) -> String {
    let lines: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
    let title: Vec<char> = format!("┌ #{index} seed").chars().collect();
    let Some((top, start)) = lines.iter().enumerate().find_map(|(y, line)| {
        let x = line
            .windows(title.len())
            .position(|w| w == title.as_slice())?;
        Some((y, x))
    }) else {
        return String::new();
    };
    lines[top + 1..]
        .iter()
        .take_while(|line| line.get(start) == Some(&'│'))
        .map(|line| {
            line[start + 1..]
                .iter()
                .take_while(|&&c| c != '│')
                .collect::<String>()
                .trim_end()
                .to_owned()
        })
        .filter(|row| !row.contains('■'))
        .collect::<String>()
        .trim()
        .to_owned()
}

/// Opens the preset picker and moves down until the selected preset's summary (the line under
/// the list) reads `summary`, then loads it.
fn pick_preset(tmux: &Tmux, summary: &str) {
    tmux.keys(&["p"]);
    tmux.wait_for("the preset picker", |s| s.contains("┌ presets"));
    let selected = format!("│{summary}");
    for _ in 0..20 {
        if tmux.screen().contains(&selected) {
            tmux.keys(&["Enter"]);
            return;
        }
        tmux.keys(&["Down"]);
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no preset reads {summary:?}:\n{}", tmux.screen());
}

/// The (x, y) cell where `title` starts on the screen, counted in characters from 0.
fn title_cell(screen: &str, title: &str) -> (usize, usize) {
    screen
        .lines()
        .enumerate()
        .find_map(|(y, line)| {
            let byte = line.find(title)?;
            Some((line[..byte].chars().count(), y))
        })
        .unwrap_or_else(|| panic!("{title} is not on the screen:\n{screen}"))
}

fn finished_columns(screen: &str) -> usize {
    screen.matches("■ length").count() + screen.matches("■ stop").count()
}

#[test]
fn the_playground_reruns_on_a_change_and_quits_cleanly() {
    let Some(model) = common::test_model() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let Some(tmux) = Tmux::start(home.path()) else {
        return;
    };
    let preset = home.path().join("start.yaml");
    std::fs::write(
        &preset,
        "num_samples: 3\ntemperature: 0\nseed: 7\nmax_tokens: 40\n",
    )
    .unwrap();
    tmux.type_text(&format!(
        "{} --model {} --prompt 'Once upon a time' --preset {}",
        env!("CARGO_BIN_EXE_samplab"),
        model.display(),
        preset.display()
    ));
    tmux.keys(&["Enter"]);

    let greedy = tmux.wait_for("three greedy samples", |s| finished_columns(s) == 3);
    assert_eq!(param_value(&greedy, "temperature").as_deref(), Some("0.00"));
    let first = column_text(&greedy, 0);
    assert!(!first.is_empty(), "{greedy}");
    for i in 1..3 {
        assert_eq!(
            column_text(&greedy, i),
            first,
            "greedy samples agree:\n{greedy}"
        );
    }

    // The playground opens in the prompt box; Tab goes to the params, temperature selected.
    tmux.keys(&["Tab", "Enter"]);
    tmux.keys(&["BSpace"; 8]);
    tmux.type_text("1.5");
    tmux.keys(&["Enter"]);
    let hot = tmux.wait_for("samples at temperature 1.5", |s| {
        param_value(s, "temperature").as_deref() == Some("1.50")
            && finished_columns(s) == 3
            && column_text(s, 0) != first
    });
    let texts: Vec<String> = (0..3).map(|i| column_text(&hot, i)).collect();
    assert!(
        texts[0] != texts[1] || texts[1] != texts[2],
        "at temperature 1.5 the seeds give different samples:\n{hot}"
    );
    assert!(
        hot.contains("preset start*"),
        "the edit marks the preset:\n{hot}"
    );

    // Saved under a new name, the params become that preset, unmodified, in the config dir.
    tmux.keys(&["s"]);
    tmux.wait_for("the save prompt", |s| s.contains("save preset"));
    tmux.type_text("mine");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the saved preset in the status bar", |s| {
        s.contains("preset mine · saved")
    });
    let saved = std::fs::read_to_string(home.path().join("config/presets/mine.yaml")).unwrap();
    assert_eq!(
        saved,
        "max_tokens: 40\nseed: 7\ntemperature: 1.5\nnum_samples: 3\n"
    );
    tmux.keys(&["t"]);
    tmux.wait_for("the next theme named", |s| s.contains("theme light"));

    // Another preset from the picker, then the saved one back.
    pick_preset(&tmux, "temperature: 0.0");
    tmux.wait_for("greedy loaded", |s| {
        param_value(s, "temperature").as_deref() == Some("0.00") && s.contains("preset greedy")
    });
    pick_preset(
        &tmux,
        "max_tokens: 40, seed: 7, temperature: 1.5, num_samples: 3",
    );
    let back = tmux.wait_for("the saved preset loaded back", |s| {
        param_value(s, "temperature").as_deref() == Some("1.50") && s.contains("preset mine")
    });
    assert!(
        !back.contains("preset mine*"),
        "loaded, not modified:\n{back}"
    );

    // A click on the second column's first token (SGR mouse report, 1-based) inspects it.
    assert_eq!(
        tmux.display("#{mouse_any_flag}"),
        "1",
        "mouse capture is on"
    );
    let settled = tmux.wait_for("three finished samples", |s| finished_columns(s) == 3);
    let (x, y) = title_cell(&settled, "┌ #1 seed");
    let (col, row) = (x + 2, y + 2);
    tmux.type_text(&format!("\x1b[<0;{col};{row}M\x1b[<0;{col};{row}m"));
    let inspected = tmux.wait_for("the inspector", |s| s.contains("inspect #1 · token 1/"));
    assert!(inspected.contains("alternatives"), "{inspected}");
    tmux.keys(&["Escape"]);
    tmux.wait_for("the params again", |s| {
        param_value(s, "temperature").is_some()
    });

    tmux.keys(&["q"]);
    let after = tmux.wait_for("the shell prompt after quitting", |s| {
        s.trim_end().ends_with(PROMPT_MARK)
    });
    assert!(
        !after.contains("┌ prompt"),
        "the playground is gone:\n{after}"
    );
    assert_eq!(
        tmux.display("#{alternate_on}"),
        "0",
        "the alternate screen was left"
    );
    assert_eq!(
        tmux.display("#{mouse_any_flag}"),
        "0",
        "mouse capture is off"
    );
    tmux.type_text(
        "echo \"exit=$?\"; stty -a | tr ' ' '\\n' | grep -x -e icanon -e echo | sort | tr '\\n' +",
    );
    tmux.keys(&["Enter"]);
    let shell = tmux.wait_for("the exit status and the terminal modes", |s| {
        s.lines().any(|l| l.starts_with("exit=")) && s.trim_end().ends_with(PROMPT_MARK)
    });
    assert!(
        shell.lines().any(|l| l == "exit=0"),
        "q quits with status 0:\n{shell}"
    );
    assert!(
        shell.lines().any(|l| l.starts_with("echo+icanon+")),
        "the terminal is back in cooked mode with echo:\n{shell}"
    );
}

#[test]
fn two_models_run_side_by_side_and_score_each_other() {
    let Some(model) = common::test_model() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let Some(tmux) = Tmux::start(home.path()) else {
        return;
    };
    let preset = home.path().join("short.yaml");
    std::fs::write(&preset, "max_tokens: 24\nseed: 3\n").unwrap();
    start_playground(
        &tmux,
        &format!(
            "--model {} --model samplab-tiny --prompt 'Once upon a time' --preset {}",
            model.display(),
            preset.display()
        ),
    );
    // One sample per model (from the four it opens with), so the footers have room for scores.
    tmux.keys(&["Tab"]);
    tmux.keys(&["Down"; 5]);
    tmux.keys(&["Left"; 3]);
    // The four-sample run's scores can show first (its narrow footers keep their marks): the
    // one-sample run's are the ones waited for.
    let screen = tmux.wait_for("both models' samples scored by the other", |s| {
        s.contains("⇄samplab-tiny")
            && s.contains("⇄stories260K")
            && !s.contains(" stale")
            && finished_columns(s) == 2
    });
    for header in ["stories260K · cpu", "samplab-tiny · cpu"] {
        assert!(screen.contains(header), "{header}:\n{screen}");
    }
    assert!(
        screen.contains("model stories260K (cpu)") && screen.contains("model samplab-tiny (cpu)"),
        "{screen}"
    );
    tmux.keys(&["q"]);
    tmux.wait_for("the shell prompt after quitting", |s| {
        s.trim_end().ends_with(PROMPT_MARK)
    });
}

/// Types `samplab ARGS; echo "exit=$?"` at the shell and waits for the playground's prompt box.
fn start_playground(tmux: &Tmux, args: &str) {
    tmux.type_text(&format!(
        "{} {args}; echo \"exit=$?\"",
        env!("CARGO_BIN_EXE_samplab")
    ));
    tmux.keys(&["Enter"]);
    tmux.wait_for("the playground", |s| s.contains("┌ prompt"));
}

/// The shell prompt after the playground ended, with the exit status it printed.
fn exit_status(tmux: &Tmux) -> String {
    let screen = tmux.wait_for("the exit status", |s| {
        s.lines().any(|l| l.starts_with("exit=")) && s.trim_end().ends_with(PROMPT_MARK)
    });
    let status = screen
        .lines()
        .find(|l| l.starts_with("exit="))
        .unwrap_or("");
    status.trim_start_matches("exit=").to_owned()
}

#[test]
fn a_model_that_cannot_load_says_why_and_quitting_exits_non_zero() {
    let home = tempfile::tempdir().unwrap();
    let Some(tmux) = Tmux::start(home.path()) else {
        return;
    };
    start_playground(&tmux, "--model missing.gguf");
    let screen = tmux.wait_for("the load error in the sample area", |s| {
        s.contains("│cannot load model missing.gguf")
    });
    assert!(screen.contains("a picks another model"), "{screen}");
    tmux.keys(&["Tab", "q"]);
    assert_eq!(exit_status(&tmux), "1");
    let after = tmux.screen();
    assert!(
        after.contains("samplab: cannot load model missing.gguf"),
        "the error is printed after the terminal is restored:\n{after}"
    );
}

/// The process id of the program the pane's shell runs in the foreground.
fn foreground_pid(tmux: &Tmux) -> String {
    let shell = tmux.display("#{pane_pid}");
    let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
        .unwrap_or_else(|e| panic!("the shell's children: {e}"));
    children
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn signals_that_end_the_playground_restore_the_terminal() {
    let Some(model) = common::test_model() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let Some(tmux) = Tmux::start(home.path()) else {
        return;
    };
    for (signal, number) in [("TERM", 15), ("HUP", 1), ("QUIT", 3)] {
        tmux.type_text("clear");
        tmux.keys(&["Enter"]);
        start_playground(&tmux, &format!("--model {}", model.display()));
        assert_eq!(tmux.display("#{alternate_on}"), "1");
        let pid = foreground_pid(&tmux);
        let killed = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .unwrap();
        assert!(killed.success(), "kill -{signal} {pid}");
        assert_eq!(
            exit_status(&tmux),
            (128 + number).to_string(),
            "SIG{signal}"
        );
        for (flag, restored) in [
            ("#{alternate_on}", "0"),
            ("#{mouse_any_flag}", "0"),
            ("#{cursor_flag}", "1"),
        ] {
            assert_eq!(tmux.display(flag), restored, "{flag} after SIG{signal}");
        }
    }
}

#[test]
fn a_large_unbracketed_paste_is_taken_whole() {
    let Some(model) = common::test_model() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let Some(tmux) = Tmux::start(home.path()) else {
        return;
    };
    // The prompt box has the focus from the start.
    start_playground(&tmux, &format!("--model {}", model.display()));
    // 3,000 characters typed at once, as a terminal without bracketed paste sends a paste:
    // numbered words, so the screen tells how far it got.
    let text: String = (0..600).map(|i| format!("{:04} ", i * 5)).collect();
    tmux.type_text(&text);
    let screen = tmux.wait_for("the end of the paste in the prompt box", |s| {
        s.contains("2990 2995")
    });
    assert!(screen.contains("2985"), "{screen}");
    tmux.keys(&["C-c"]);
    // The paste is longer than stories260K's context: whether its run had failed before
    // Ctrl+C (exit 1, as after any failed run) depends on the debounce, not on the paste.
    let status = exit_status(&tmux);
    assert!(status == "0" || status == "1", "exit status {status}");
    assert_eq!(
        tmux.display("#{alternate_on}"),
        "0",
        "the terminal is restored"
    );
}

#[test]
fn the_playground_opens_with_four_samples_and_saves_no_seed_it_drew() {
    let Some(model) = common::test_model() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let Some(tmux) = Tmux::start(home.path()) else {
        return;
    };
    start_playground(&tmux, &format!("--model {}", model.display()));
    let screen = tmux.wait_for("four columns", |s| s.contains("┌ #3 seed"));
    assert!(!screen.contains("┌ #4 seed"), "{screen}");
    assert_eq!(param_value(&screen, "samples").as_deref(), Some("4"));

    // The seed drawn for the session is not the user's: a saved preset leaves it out.
    tmux.keys(&["Tab", "s"]);
    tmux.wait_for("the save prompt", |s| s.contains("save preset"));
    tmux.type_text("mine");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the saved preset", |s| s.contains("preset mine · saved"));
    let saved = std::fs::read_to_string(home.path().join("config/presets/mine.yaml")).unwrap();
    assert_eq!(saved, "max_tokens: 128\nnum_samples: 4\n");
    tmux.keys(&["q"]);
    assert_eq!(exit_status(&tmux), "0");
}

/// Issue 34: `--set` reaches the playground as a change over the preset (`*`), on both sides
/// of an A/B.
#[test]
fn set_changes_the_presets_values_and_is_shown_as_a_change() {
    let Some(model) = common::test_model() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let Some(tmux) = Tmux::start(home.path()) else {
        return;
    };
    start_playground(
        &tmux,
        &format!(
            "--model {} --preset default --preset balanced --set temperature=0.25",
            model.display()
        ),
    );
    let screen = tmux.wait_for("side A, changed", |s| s.contains("params A · default*"));
    assert_eq!(
        param_value(&screen, "temperature").as_deref(),
        Some("0.25"),
        "{screen}"
    );
    tmux.keys(&["Tab", "b"]);
    let screen = tmux.wait_for("side B, changed", |s| s.contains("params B · balanced*"));
    assert_eq!(param_value(&screen, "temperature").as_deref(), Some("0.25"));
    tmux.keys(&["q"]);
    assert_eq!(exit_status(&tmux), "0");
}

#[test]
fn the_export_dialog_names_the_built_in_model_by_its_files() {
    let home = tempfile::tempdir().unwrap();
    let Some(tmux) = Tmux::start(home.path()) else {
        return;
    };
    start_playground(&tmux, "");
    tmux.keys(&["Tab", "e"]);
    let screen = tmux.wait_for("the export dialog", |s| s.contains("LLM(model="));
    let cache = home.path().join(".cache/samplab/models/samplab-tiny-");
    assert!(
        screen.contains(&format!("LLM(model=\"{}", cache.display())),
        "{screen}"
    );
    tmux.keys(&["Escape"]);
    // Sent at once, Esc and q would read as Alt+q.
    tmux.wait_for("the dialog closed", |s| !s.contains("┌ export"));
    tmux.keys(&["q"]);
    assert_eq!(exit_status(&tmux), "0");
}

#[test]
fn a_panicking_run_shows_its_error_and_the_playground_still_quits_cleanly() {
    let Some(model) = common::test_model() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let Some(tmux) = Tmux::start(home.path()) else {
        return;
    };
    tmux.type_text(&format!(
        "SAMPLAB_PANIC_FOR_TESTS=run {} --model {} --prompt 'Once upon a time'",
        env!("CARGO_BIN_EXE_samplab"),
        model.display(),
    ));
    tmux.keys(&["Enter"]);
    let failed = tmux.wait_for("the run's error", |s| s.contains("a panic: injected"));
    assert!(
        failed.contains("┌ prompt"),
        "the playground is still drawn:\n{failed}"
    );
    assert_eq!(
        tmux.display("#{alternate_on}"),
        "1",
        "the panic hook left the terminal alone"
    );
    tmux.keys(&["Tab", "q"]);
    tmux.wait_for("the shell prompt after quitting", |s| {
        s.trim_end().ends_with(PROMPT_MARK)
    });
    assert_eq!(tmux.display("#{alternate_on}"), "0");
    tmux.type_text("echo \"exit=$?\"");
    tmux.keys(&["Enter"]);
    let shell = tmux.wait_for("the exit status", |s| {
        s.lines().any(|l| l.starts_with("exit="))
    });
    // Quitting with the failed run on screen reports the failure (issue 14).
    assert!(shell.lines().any(|l| l == "exit=1"), "{shell}");
}

/// Issue 14: branching from an alternative and stepping, in the real playground; the results
/// file then holds the branches with their parents.
#[test]
fn a_branch_from_an_alternative_and_three_steps_end_up_in_the_results_file() {
    let Some(model) = common::test_model() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let Some(tmux) = Tmux::start(home.path()) else {
        return;
    };
    tmux.type_text(&format!("cd {}", home.path().display()));
    tmux.keys(&["Enter"]);
    start_playground(&tmux, &format!("--model {}", model.display()));
    tmux.wait_for("four finished columns", |s| finished_columns(s) == 4);

    // The columns (back from the prompt): the cursor on #0's second token, its second
    // alternative, Enter.
    tmux.keys(&["BTab", "Home", "Right", "]"]);
    tmux.wait_for("the highlight", |s| s.contains("Enter: branch from it"));
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the branch", |s| {
        s.contains("┌ #4 ←#0@2 seed") && finished_columns(s) == 5
    });
    assert!(screen.contains("inspect #4 · token 2/"), "{screen}");

    // Step mode from the branch's second token: its third is proposed; three steps take three.
    tmux.keys(&["z"]);
    tmux.wait_for("step mode", |s| {
        s.contains("┌ #5 ←#4@3 step")
            && s.contains("Space: ▶ · Enter: pick")
            && s.contains("token 3/3")
    });
    for taken in 4..=6 {
        tmux.keys(&["Space"]);
        tmux.wait_for("the next proposal", |s| {
            s.contains(&format!("token {taken}/{taken}")) && s.contains("Space: ▶ · Enter: pick")
        });
    }

    tmux.keys(&["e", "w"]);
    tmux.wait_for("the results prompt", |s| s.contains("./"));
    tmux.keys(&["Enter"]);
    tmux.wait_for("the written file", |s| s.contains("wrote"));
    let written = std::fs::read_dir(home.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .expect("a results file");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(written).unwrap()).unwrap();
    let trajectories = json["trajectories"].as_array().unwrap();
    assert_eq!(trajectories.len(), 6, "four samples and two branches");
    assert_eq!(
        trajectories[4]["branch"],
        serde_json::json!({"parent": 0, "at": 1})
    );
    assert_eq!(
        trajectories[5]["branch"],
        serde_json::json!({"parent": 4, "at": 2})
    );
    assert_eq!(trajectories[5]["token_ids"].as_array().unwrap().len(), 6);
    let parent = trajectories[0]["token_ids"].as_array().unwrap();
    let branch = trajectories[4]["token_ids"].as_array().unwrap();
    assert_eq!(
        parent[0], branch[0],
        "the branch shares the token before its pick"
    );
    assert_ne!(parent[1], branch[1], "and takes another there");
    // Escape and q sent back to back can reach the terminal as one Alt+q: the overlay is seen
    // closed before q is sent.
    tmux.keys(&["Escape"]);
    tmux.wait_for("the export overlay to close", |s| !s.contains("┌ export"));
    tmux.keys(&["q"]);
    assert_eq!(exit_status(&tmux), "0");
}

/// Issue 34: edit and continue in the real playground: the sample's text edited in place, the
/// model tokenizes the edit, and a branch samples on after it.
#[test]
fn an_edited_sample_goes_on_from_the_edit() {
    let Some(model) = common::test_model() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let Some(tmux) = Tmux::start(home.path()) else {
        return;
    };
    start_playground(
        &tmux,
        &format!(
            "--model {} --prompt 'Once upon a time' --set max_tokens=32 --set num_samples=2",
            model.display()
        ),
    );
    tmux.wait_for("two finished columns", |s| finished_columns(s) == 2);
    tmux.keys(&["BTab", "E"]);
    tmux.wait_for("the sample editor", |s| s.contains("┌ edit #0"));
    // Ctrl+U clears the text; what is typed instead is the sample's new start.
    tmux.keys(&["C-u"]);
    tmux.type_text(" there was a big red dragon");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the edited branch", |s| {
        s.contains("┌ #2 ←#0@") && finished_columns(s) == 3
    });
    assert!(screen.contains("typed token(s) forced"), "{screen}");
    assert!(screen.contains("there was a big red dragon"), "{screen}");
    tmux.keys(&["q"]);
    assert_eq!(exit_status(&tmux), "0");
}

/// Issue 34: the chat loop in the real playground on SmolLM2's chat template: a swiped reply is
/// accepted as the assistant's turn and the next user turn runs after it.
#[test]
fn a_reply_is_accepted_and_the_conversation_goes_on() {
    let Some(model) = common::real_model() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let Some(tmux) = Tmux::start(home.path()) else {
        return;
    };
    start_playground(
        &tmux,
        &format!(
            "--model {} --chat --prompt 'Hi' --set max_tokens=12 --set num_samples=2",
            model.display()
        ),
    );
    tmux.wait_for("two finished replies", |s| finished_columns(s) == 2);
    tmux.keys(&["BTab", ">"]);
    tmux.wait_for("the swiped reply", |s| {
        s.contains("reply #1 (reply 2 of 2)")
    });
    tmux.keys(&["A"]);
    tmux.wait_for("the accepted turn", |s| {
        s.contains("#1 is the assistant's turn (2 turns)") && s.contains("2 earlier")
    });
    tmux.type_text("Tell me more");
    tmux.wait_for("replies to the next turn", |s| {
        finished_columns(s) == 2 && !s.contains("stale") && s.contains("Tell me more")
    });
    // Escape and c sent back to back can reach the terminal as one Alt+c: the prompt is seen
    // left (the status bar offers q to quit, which typing would not) before c is sent.
    tmux.keys(&["Escape"]);
    tmux.wait_for("the prompt left", |s| s.contains(" q quit"));
    tmux.keys(&["c"]);
    let dialog = tmux.wait_for("the conversation", |s| s.contains("┌ conversation"));
    assert!(dialog.contains("assistant"), "{dialog}");
    tmux.keys(&["Escape"]);
    tmux.wait_for("the dialog to close", |s| !s.contains("┌ conversation"));
    tmux.keys(&["q"]);
    assert_eq!(exit_status(&tmux), "0");
}

/// Issue 34: `S` saves the session and `samplab --session` opens it again in the real binary:
/// the same samples on the same seeds, and the branch made before run again.
#[test]
fn a_saved_session_opens_again_with_its_branch() {
    let Some(model) = common::test_model() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let Some(tmux) = Tmux::start(home.path()) else {
        return;
    };
    start_playground(&tmux, &format!("--model {}", model.display()));
    tmux.wait_for("four finished columns", |s| finished_columns(s) == 4);
    tmux.keys(&["BTab", "Home", "Right", "]"]);
    tmux.wait_for("the highlight", |s| s.contains("Enter: branch from it"));
    tmux.keys(&["Enter"]);
    let before = tmux.wait_for("the branch", |s| {
        s.contains("┌ #4 ←#0@2 seed") && finished_columns(s) == 5
    });
    let path = home.path().join("story.yaml");
    tmux.keys(&["S"]);
    tmux.wait_for("the session dialog", |s| s.contains("save session"));
    tmux.type_text(&path.display().to_string());
    tmux.keys(&["Enter"]);
    tmux.wait_for("the saved session", |s| s.contains("saved the session"));
    tmux.keys(&["q"]);
    assert_eq!(exit_status(&tmux), "0");
    tmux.keys(&["C-l"]);

    start_playground(&tmux, &format!("--session {}", path.display()));
    let after = tmux.wait_for("the branch again", |s| {
        s.contains("┌ #4 ←#0@2 seed") && finished_columns(s) == 5
    });
    for sample in 0..4 {
        assert_eq!(
            column_text(&after, sample),
            column_text(&before, sample),
            "sample {sample}"
        );
    }
    tmux.keys(&["q"]);
    assert_eq!(exit_status(&tmux), "0");
}
