//! Hub downloads end to end, against the fake Hub of `common::fake_hub` on 127.0.0.1: a GGUF
//! and a safetensors repository download into a temporary HF_HOME and load, a second run asks
//! nothing, cut and cancelled downloads resume into intact files, and every failure says what
//! to do. Settings are passed explicitly: no test touches the process environment, the network
//! or the real ~/.cache.

use crate::common::fake_hub::{Behaviour, COMMIT, FakeHub, sha256_hex};
use samplab::engine::load::load_model;
use samplab::engine::{Engine, Event};
use samplab::model::device::DeviceChoice;
use samplab::model::source::LoadProgress;
use samplab::model::source::discover::discover;
use samplab::model::source::hub::{
    self, HubError, HubSettings, Lookup, RepoCache, Timeouts, Transfer,
};
use samplab::model::source::synthetic::{SyntheticSpec, write_synthetic_gguf};
use std::path::Path;
use std::time::Duration;

const GGUF_REPO: &str = "test/tiny-GGUF";
const GGUF_FILE: &str = "tiny-q8_0.gguf";
const HF_REPO: &str = "test/tiny";

/// Smaller than the shared tiny llama: a Hub download in the tests moves fewer bytes.
const TINY: SyntheticSpec = SyntheticSpec {
    intermediate_size: 96,
    vocab_size: 300,
    context_length: 128,
    ..crate::common::TINY_LLAMA
};

/// A tiny random-weight GGUF, as bytes.
fn tiny_gguf() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(GGUF_FILE);
    write_synthetic_gguf(&path, &TINY, candle_core::quantized::GgmlDType::Q8_0, 3).unwrap();
    std::fs::read(path).unwrap()
}

/// A fake Hub serving both repositories, and the GGUF's bytes.
fn hub_with_models() -> (FakeHub, Vec<u8>) {
    let gguf = tiny_gguf();
    let server = FakeHub::start();
    server.repo(GGUF_REPO, vec![(GGUF_FILE.to_owned(), gguf.clone())]);
    server.repo(HF_REPO, crate::common::tiny_safetensors());
    (server, gguf)
}

/// Settings for `server` with the cache in `home`, patient enough for a loaded machine.
fn settings(server: &FakeHub, home: &Path) -> HubSettings {
    HubSettings {
        endpoint: server.url.clone(),
        timeouts: Timeouts {
            connect: Duration::from_secs(5),
            metadata: Duration::from_secs(5),
            read: Duration::from_secs(5),
        },
        progress_interval: Duration::ZERO,
        ..HubSettings::new(home.join("hub"))
    }
}

fn fetch(hub: &HubSettings, id: &str, file: &str) -> Result<std::path::PathBuf, HubError> {
    hub::fetch(hub, id, file, &mut |_| {}).map(|found| found.expect("online, a file or an error"))
}

/// Why loading `spec` fails.
fn load_error(spec: &str, hub: &HubSettings) -> String {
    match load_model(spec, hub, DeviceChoice::Cpu, &mut |_| {}) {
        Ok(_) => panic!("loading {spec} must fail"),
        Err(e) => format!("{e:#}"),
    }
}

fn incomplete_files(home: &Path) -> Vec<std::path::PathBuf> {
    let blobs = RepoCache::new(&home.join("hub"), GGUF_REPO)
        .dir
        .join("blobs");
    std::fs::read_dir(blobs)
        .map(|dir| {
            dir.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.to_string_lossy().ends_with(".incomplete"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_gguf_repo_downloads_into_hf_home_loads_and_a_second_run_asks_nothing() {
    let (server, gguf) = hub_with_models();
    let home = tempfile::tempdir().unwrap();
    let hub = settings(&server, home.path());
    let spec = format!("{GGUF_REPO}:{GGUF_FILE}");
    let model =
        load_model(&spec, &hub, DeviceChoice::Cpu, &mut |_| {}).expect("the downloaded GGUF loads");
    assert_eq!(model.backend.vocab_size(), 300);

    // The cache is laid out as huggingface_hub lays it out.
    let repo = RepoCache::new(&hub.cache_dir, GGUF_REPO);
    let sha = sha256_hex(&gguf);
    assert_eq!(std::fs::read(repo.blob_path(&sha)).unwrap(), gguf);
    assert_eq!(repo.commit().as_deref(), Some(COMMIT));
    let pointer = repo.snapshot_path(COMMIT, GGUF_FILE);
    #[cfg(unix)]
    assert_eq!(
        std::fs::read_link(&pointer).unwrap(),
        Path::new("../../blobs").join(&sha)
    );
    assert_eq!(repo.lookup(GGUF_FILE), Lookup::Present(pointer));
    assert!(incomplete_files(home.path()).is_empty());
    let log = server.log();
    assert!(
        log.iter()
            .any(|r| r.method == "HEAD"
                && r.path == format!("/{GGUF_REPO}/resolve/main/{GGUF_FILE}")),
        "{log:?}"
    );
    assert!(
        log.iter().any(|r| r.path == format!("/cdn/{sha}")),
        "{log:?}"
    );

    let asked = server.requests();
    load_model(&spec, &hub, DeviceChoice::Cpu, &mut |_| {}).expect("the cached GGUF loads");
    assert_eq!(
        server.requests(),
        asked,
        "the second run asks the Hub nothing"
    );
    let offline = HubSettings {
        offline: true,
        ..hub.clone()
    };
    load_model(&spec, &offline, DeviceChoice::Cpu, &mut |_| {}).expect("and loads offline");
}

#[test]
fn a_safetensors_repo_downloads_and_loads_and_a_second_run_asks_nothing() {
    let (server, _) = hub_with_models();
    let home = tempfile::tempdir().unwrap();
    let hub = settings(&server, home.path());
    let model = load_model(HF_REPO, &hub, DeviceChoice::Cpu, &mut |_| {})
        .expect("the downloaded repo loads");
    assert_eq!(model.name, HF_REPO);
    let repo = RepoCache::new(&hub.cache_dir, HF_REPO);
    for (file, bytes) in crate::common::tiny_safetensors() {
        let Lookup::Present(path) = repo.lookup(&file) else {
            panic!("{file} is in the snapshot");
        };
        assert_eq!(std::fs::read(path).unwrap(), bytes, "{file}");
    }
    // Files the repository lacks are remembered as missing, so that they are not asked again.
    assert_eq!(repo.lookup("tokenizer_config.json"), Lookup::Absent);

    let asked = server.requests();
    load_model(HF_REPO, &hub, DeviceChoice::Cpu, &mut |_| {}).expect("the cached repo loads");
    assert_eq!(
        server.requests(),
        asked,
        "the second run asks the Hub nothing"
    );
}

#[test]
fn the_model_picker_offers_downloaded_models_with_their_sizes() {
    let (server, gguf) = hub_with_models();
    let home = tempfile::tempdir().unwrap();
    let hub = settings(&server, home.path());
    fetch(&hub, GGUF_REPO, GGUF_FILE).unwrap();
    load_model(HF_REPO, &hub, DeviceChoice::Cpu, &mut |_| {}).unwrap();
    let empty = tempfile::tempdir().unwrap();
    let found = discover(empty.path(), &hub.cache_dir);
    let safetensors_size: usize = crate::common::tiny_safetensors()
        .iter()
        .map(|(_, b)| b.len())
        .sum();
    let offered: Vec<(&str, Option<u64>)> =
        found.iter().map(|c| (c.spec.as_str(), c.size)).collect();
    assert_eq!(
        offered,
        [
            (HF_REPO, Some(safetensors_size as u64)),
            (
                &*format!("{GGUF_REPO}:{GGUF_FILE}"),
                Some(gguf.len() as u64)
            ),
        ]
    );
}

#[test]
fn progress_counts_only_grow_and_end_at_the_file_size() {
    let (server, gguf) = hub_with_models();
    let home = tempfile::tempdir().unwrap();
    let hub = settings(&server, home.path());
    let mut seen: Vec<Transfer> = Vec::new();
    hub::fetch(&hub, GGUF_REPO, GGUF_FILE, &mut |t| seen.push(t.clone())).unwrap();
    let size = gguf.len() as u64;
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].done <= w[1].done), "{seen:?}");
    assert!(seen.iter().all(|t| t.total == size && t.file == GGUF_FILE));
    assert_eq!(seen.first().map(|t| t.done), Some(0));
    assert_eq!(seen.last().map(|t| t.done), Some(size));

    // Through a load, the same counts arrive as load progress with their figures.
    let home = tempfile::tempdir().unwrap();
    let hub = settings(&server, home.path());
    let mut steps: Vec<LoadProgress> = Vec::new();
    load_model(
        &format!("{GGUF_REPO}:{GGUF_FILE}"),
        &hub,
        DeviceChoice::Cpu,
        &mut |step| steps.push(step),
    )
    .unwrap();
    let downloads: Vec<&Transfer> = steps.iter().filter_map(|s| s.download.as_ref()).collect();
    assert!(downloads.windows(2).all(|w| w[0].done <= w[1].done));
    assert_eq!(downloads.last().map(|t| t.done), Some(size));
    let last = steps.iter().rfind(|s| s.download.is_some()).unwrap();
    assert_eq!(last.fraction, 1.0);
    assert!(
        last.message
            .starts_with(&format!("downloading {GGUF_FILE}")),
        "{}",
        last.message
    );
}

#[test]
fn a_download_cut_in_the_middle_resumes_with_a_range_request() {
    let (server, gguf) = hub_with_models();
    let home = tempfile::tempdir().unwrap();
    let hub = settings(&server, home.path());
    let half = gguf.len() / 2;
    server.behave(Behaviour {
        cut_after: Some(half),
        ..Behaviour::default()
    });
    let path = fetch(&hub, GGUF_REPO, GGUF_FILE).expect("the retry finishes the file");
    assert_eq!(sha256_hex(&std::fs::read(path).unwrap()), sha256_hex(&gguf));
    let ranges: Vec<Option<String>> = server
        .log()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.starts_with("/cdn/"))
        .map(|r| r.range)
        .collect();
    assert_eq!(ranges, [None, Some(format!("bytes={half}-"))]);
    assert!(incomplete_files(home.path()).is_empty());
}

#[test]
fn a_cut_download_is_never_shown_as_complete_and_the_next_run_resumes_it() {
    let (server, gguf) = hub_with_models();
    let home = tempfile::tempdir().unwrap();
    let hub = HubSettings {
        retries: 0,
        ..settings(&server, home.path())
    };
    let half = gguf.len() / 2;
    server.behave(Behaviour {
        cut_after: Some(half),
        ..Behaviour::default()
    });
    let err = fetch(&hub, GGUF_REPO, GGUF_FILE).unwrap_err();
    assert!(matches!(err, HubError::Interrupted { .. }), "{err}");
    assert!(err.to_string().contains("resumes"), "{err}");
    // The part that arrived waits beside the blob; the snapshot shows nothing.
    let repo = RepoCache::new(&hub.cache_dir, GGUF_REPO);
    assert_eq!(repo.lookup(GGUF_FILE), Lookup::Unknown);
    let partial = repo.incomplete_path(&sha256_hex(&gguf));
    assert_eq!(std::fs::metadata(&partial).unwrap().len(), half as u64);
    assert!(discover(home.path(), &hub.cache_dir).is_empty());

    let path = fetch(&hub, GGUF_REPO, GGUF_FILE).expect("the next run resumes");
    assert_eq!(std::fs::read(path).unwrap(), gguf);
    let last_get = server
        .log()
        .into_iter()
        .rfind(|r| r.method == "GET")
        .unwrap();
    assert_eq!(last_get.range, Some(format!("bytes={half}-")));
    assert!(!partial.exists());
}

#[test]
fn a_mirror_that_redirects_within_itself_serves_the_file() {
    let (server, gguf) = hub_with_models();
    server.behave(Behaviour {
        relative_redirects: true,
        ..Behaviour::default()
    });
    let home = tempfile::tempdir().unwrap();
    let hub = settings(&server, home.path());
    let path = fetch(&hub, GGUF_REPO, GGUF_FILE).expect("the redirect is followed");
    assert_eq!(std::fs::read(path).unwrap(), gguf);
    let heads: Vec<String> = server
        .log()
        .into_iter()
        .filter(|r| r.method == "HEAD")
        .map(|r| r.path)
        .collect();
    let sha = sha256_hex(&gguf);
    assert_eq!(
        heads,
        [
            format!("/{GGUF_REPO}/resolve/main/{GGUF_FILE}"),
            format!("/cdn/{sha}")
        ]
    );
    // The blob is named by the redirect's X-Linked-Etag, the file's sha256.
    assert!(
        RepoCache::new(&hub.cache_dir, GGUF_REPO)
            .blob_path(&sha)
            .is_file()
    );
}

#[test]
fn a_server_that_ignores_ranges_restarts_the_file_cleanly() {
    let (server, gguf) = hub_with_models();
    let home = tempfile::tempdir().unwrap();
    let hub = settings(&server, home.path());
    server.behave(Behaviour {
        cut_after: Some(gguf.len() / 3),
        ignore_range: true,
        ..Behaviour::default()
    });
    let path = fetch(&hub, GGUF_REPO, GGUF_FILE).expect("the restart finishes the file");
    assert_eq!(sha256_hex(&std::fs::read(path).unwrap()), sha256_hex(&gguf));
}

#[test]
fn a_damaged_partial_file_is_caught_by_its_hash_and_fetched_again() {
    let (server, gguf) = hub_with_models();
    let home = tempfile::tempdir().unwrap();
    let hub = settings(&server, home.path());
    let repo = RepoCache::new(&hub.cache_dir, GGUF_REPO);
    let partial = repo.incomplete_path(&sha256_hex(&gguf));
    std::fs::create_dir_all(partial.parent().unwrap()).unwrap();
    std::fs::write(&partial, vec![0xAB; gguf.len() / 2]).unwrap();
    let path = fetch(&hub, GGUF_REPO, GGUF_FILE).expect("fetched again whole");
    assert_eq!(std::fs::read(path).unwrap(), gguf);
    let gets: Vec<Option<String>> = server
        .log()
        .into_iter()
        .filter(|r| r.method == "GET")
        .map(|r| r.range)
        .collect();
    assert_eq!(gets, [Some(format!("bytes={}-", gguf.len() / 2)), None]);
}

#[test]
fn a_cancelled_download_leaves_nothing_in_the_snapshot_and_resumes_later() {
    let (server, gguf) = hub_with_models();
    let home = tempfile::tempdir().unwrap();
    let hub = settings(&server, home.path());
    // Slow enough to be cancelled in the middle: the server falls silent after a third.
    server.behave(Behaviour {
        stall_body_after: Some(gguf.len() / 3),
        ..Behaviour::default()
    });
    let cancel = hub.cancel.clone();
    let err = hub::fetch(&hub, GGUF_REPO, GGUF_FILE, &mut |t| {
        if t.done > 0 {
            cancel.cancel();
        }
    })
    .unwrap_err();
    assert!(matches!(err, HubError::Cancelled { .. }), "{err}");
    let repo = RepoCache::new(&hub.cache_dir, GGUF_REPO);
    assert_eq!(repo.lookup(GGUF_FILE), Lookup::Unknown);
    assert!(!repo.blob_path(&sha256_hex(&gguf)).exists());

    server.behave(Behaviour::default());
    let hub = settings(&server, home.path());
    let path = fetch(&hub, GGUF_REPO, GGUF_FILE).expect("a new try resumes");
    assert_eq!(std::fs::read(path).unwrap(), gguf);
    let last_get = server
        .log()
        .into_iter()
        .rfind(|r| r.method == "GET")
        .unwrap();
    assert!(last_get.range.is_some(), "{last_get:?}");
}

#[test]
fn the_engine_stops_its_download_when_asked_even_while_the_server_is_silent() {
    let (server, gguf) = hub_with_models();
    server.behave(Behaviour {
        stall_body_after: Some(gguf.len() / 3),
        ..Behaviour::default()
    });
    let home = tempfile::tempdir().unwrap();
    let hub = HubSettings {
        timeouts: Timeouts {
            connect: Duration::from_secs(5),
            metadata: Duration::from_secs(5),
            read: Duration::from_secs(60),
        },
        ..settings(&server, home.path())
    };
    let cancel = hub.cancel.clone();
    let (events, inbox) = std::sync::mpsc::channel();
    let spec = format!("{GGUF_REPO}:{GGUF_FILE}");
    let engine = Engine::spawn(
        move |progress| load_model(&spec, &hub, DeviceChoice::Cpu, progress),
        move |event| {
            let _ = events.send(event);
        },
    )
    .with_load_cancel(cancel);
    let next = || {
        inbox
            .recv_timeout(Duration::from_secs(60))
            .expect("the engine reports")
    };
    loop {
        match next() {
            Event::Loading {
                download: Some(transfer),
                ..
            } if transfer.done > 0 => break,
            Event::LoadFailed { message } => panic!("{message}"),
            _ => {}
        }
    }
    engine.cancel_load();
    let message = loop {
        match next() {
            Event::LoadFailed { message } => break message,
            Event::Loaded { .. } => panic!("the load was cancelled"),
            _ => {}
        }
    };
    assert!(
        message.contains("cancelled") && message.contains(GGUF_FILE),
        "{message}"
    );
    let repo = RepoCache::new(&home.path().join("hub"), GGUF_REPO);
    assert_eq!(repo.lookup(GGUF_FILE), Lookup::Unknown);
}

#[test]
fn gated_repositories_say_to_set_hf_token_and_never_print_it() {
    let (server, _) = hub_with_models();
    server.behave(Behaviour {
        token: Some("hf_right".into()),
        ..Behaviour::default()
    });
    let home = tempfile::tempdir().unwrap();
    let hub = settings(&server, home.path());
    let err = fetch(&hub, GGUF_REPO, GGUF_FILE).unwrap_err();
    assert!(matches!(err, HubError::NeedsToken { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("HF_TOKEN") && message.contains(GGUF_REPO),
        "{message}"
    );

    let wrong = HubSettings {
        token: Some("hf_wrong_secret".into()),
        ..hub.clone()
    };
    let message = load_error(HF_REPO, &wrong);
    assert!(
        message.contains("HF_TOKEN") && message.contains("403"),
        "{message}"
    );
    assert!(!message.contains("hf_wrong_secret"), "{message}");
    assert!(!format!("{wrong:?}").contains("hf_wrong_secret"));

    let right = HubSettings {
        token: Some("hf_right".into()),
        ..hub
    };
    fetch(&right, GGUF_REPO, GGUF_FILE).expect("the right token opens it");
    let sent = server
        .log()
        .into_iter()
        .rfind(|r| r.method == "HEAD")
        .unwrap();
    assert_eq!(sent.authorization.as_deref(), Some("Bearer hf_right"));
    assert!(
        server
            .log()
            .iter()
            .filter(|r| r.path.starts_with("/cdn/"))
            .all(|r| r.authorization.is_none()),
        "the token does not travel to another host's URL"
    );
}

#[test]
fn a_missing_repository_or_file_is_named() {
    let (server, _) = hub_with_models();
    let home = tempfile::tempdir().unwrap();
    let hub = settings(&server, home.path());
    let message = load_error("nobody/nothing", &hub);
    assert!(
        message.contains("no repository `nobody/nothing`") && message.contains("404"),
        "{message}"
    );
    let message = load_error(&format!("{GGUF_REPO}:missing.gguf"), &hub);
    assert!(
        message.contains("`missing.gguf`") && message.contains(GGUF_REPO),
        "{message}"
    );
    // A GGUF repository asked for as a transformers model says how to name its file.
    let message = load_error(GGUF_REPO, &hub);
    assert!(
        message.contains("config.json") && message.contains(&format!("`{GGUF_REPO}:file.gguf`")),
        "{message}"
    );
}

#[test]
fn a_stalled_server_times_out_with_a_message() {
    let (server, gguf) = hub_with_models();
    let home = tempfile::tempdir().unwrap();
    let quick = Timeouts {
        connect: Duration::from_secs(5),
        metadata: Duration::from_millis(300),
        read: Duration::from_millis(300),
    };
    let hub = HubSettings {
        timeouts: quick,
        ..settings(&server, home.path())
    };
    server.behave(Behaviour {
        stall: true,
        ..Behaviour::default()
    });
    let err = fetch(&hub, GGUF_REPO, GGUF_FILE).unwrap_err();
    assert!(matches!(err, HubError::Stalled { .. }), "{err}");
    assert!(err.to_string().contains("stopped answering"), "{err}");

    // Falling silent in the middle of the bytes is a stall too, and the part is kept.
    server.behave(Behaviour {
        stall_body_after: Some(gguf.len() / 2),
        ..Behaviour::default()
    });
    let err = fetch(&hub, GGUF_REPO, GGUF_FILE).unwrap_err();
    assert!(matches!(err, HubError::Stalled { .. }), "{err}");
    let partial = RepoCache::new(&hub.cache_dir, GGUF_REPO).incomplete_path(&sha256_hex(&gguf));
    assert_eq!(
        std::fs::metadata(partial).unwrap().len(),
        gguf.len() as u64 / 2
    );
}

#[test]
fn without_a_network_the_message_says_so_and_suggests_offline_mode() {
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let home = tempfile::tempdir().unwrap();
    let hub = HubSettings {
        endpoint: format!("http://127.0.0.1:{port}"),
        ..HubSettings::new(home.path().join("hub"))
    };
    let message = load_error(HF_REPO, &hub);
    assert!(
        message.contains("cannot reach") && message.contains("HF_HUB_OFFLINE=1"),
        "{message}"
    );
}

#[test]
fn settings_are_read_from_the_variables_huggingface_hub_reads() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("token"), "hf_from_file\n").unwrap();
    let home_text = home.path().to_str().unwrap().to_owned();
    let vars = |pairs: Vec<(&'static str, String)>| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.clone())
        }
    };
    let hub = HubSettings::from_vars(vars(vec![
        ("HF_HOME", home_text.clone()),
        ("HF_ENDPOINT", "https://mirror.example/".into()),
        ("HF_HUB_OFFLINE", "True".into()),
        ("HF_HUB_DOWNLOAD_TIMEOUT", "2.5".into()),
    ]));
    assert_eq!(hub.endpoint, "https://mirror.example");
    assert_eq!(hub.cache_dir, home.path().join("hub"));
    assert!(hub.offline);
    assert_eq!(hub.token.as_deref(), Some("hf_from_file"));
    assert_eq!(hub.timeouts.read, Duration::from_millis(2500));
    assert!(!format!("{hub:?}").contains("hf_from_file"));

    let hub = HubSettings::from_vars(vars(vec![
        ("HF_HOME", home_text),
        ("HF_HUB_CACHE", "/elsewhere/hub".into()),
        ("HF_TOKEN", "hf_env".into()),
        ("HF_HUB_OFFLINE", "0".into()),
        ("HF_HUB_DOWNLOAD_TIMEOUT", "soon".into()),
        ("HF_HUB_ETAG_TIMEOUT", "1e300".into()),
    ]));
    assert_eq!(hub.endpoint, hub::DEFAULT_ENDPOINT);
    assert_eq!(hub.cache_dir, Path::new("/elsewhere/hub"));
    assert!(!hub.offline);
    assert_eq!(hub.token.as_deref(), Some("hf_env"));
    assert_eq!(hub.timeouts.read, Timeouts::default().read);
    assert_eq!(hub.timeouts.metadata, Timeouts::default().metadata);
}

#[test]
fn samplab_sample_downloads_through_hf_endpoint_without_drawing_into_a_pipe() {
    let (server, _) = hub_with_models();
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args([
            "sample",
            "--model",
            HF_REPO,
            "--prompt",
            "Once upon a time",
            "--set",
            "max_tokens=4",
            "--set",
            "seed=1",
        ])
        .env("HF_HOME", home.path())
        .env("HF_ENDPOINT", &server.url)
        .env("XDG_CACHE_HOME", home.path())
        .env_remove("HF_HUB_OFFLINE")
        .env_remove("HF_HUB_CACHE")
        .env_remove("HF_TOKEN")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("Once upon a time"));
    assert!(
        !stderr.contains('\r') && !stderr.contains("downloading"),
        "{stderr}"
    );
    assert!(
        RepoCache::new(&home.path().join("hub"), HF_REPO)
            .commit()
            .is_some()
    );
}
