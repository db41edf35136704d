//! ModelScope downloads end to end (`ms://org/name[:file.gguf]`), against the fake ModelScope of
//! `common::fake_modelscope` on 127.0.0.1: a GGUF and a safetensors repository download into a
//! temporary MODELSCOPE_CACHE and load, a second run loads with the server gone, a cut download
//! resumes, and 401, 404 and no network each say what to do. Settings are passed explicitly: no
//! test touches the process environment, the network or the real ~/.cache.

use crate::common::fake_hub::{Behaviour, sha256_hex};
use crate::common::fake_modelscope::FakeModelScope;
use samplab::engine::load::load_model;
use samplab::model::device::DeviceChoice;
use samplab::model::source::discover::in_modelscope_cache;
use samplab::model::source::hub::{HubError, HubSettings, Timeouts, Transfer};
use samplab::model::source::modelscope::{self, ModelScopeError, ModelScopeSettings};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A name with a dot, which older SDKs' folders spell `___`.
const GGUF_REPO: &str = "test/stories.260K-GGUF";
const GGUF_DIR: &str = "models/test--stories.260K-GGUF/snapshots/master";
const GGUF_FILE: &str = "stories260K.gguf";
const HF_REPO: &str = "test/tiny";

/// stories260K's GGUF, or `None` to skip where the shared test model is absent.
fn stories() -> Option<Vec<u8>> {
    crate::common::test_model().map(|path| std::fs::read(path).unwrap())
}

fn server_with(gguf: &[u8]) -> FakeModelScope {
    let server = FakeModelScope::start();
    server.repo(GGUF_REPO, vec![(GGUF_FILE.to_owned(), gguf.to_vec())]);
    server.repo(HF_REPO, crate::common::tiny_safetensors());
    server
}

/// Settings for a ModelScope at `domain` with its cache in `home`, patient enough for a loaded
/// machine; the Hugging Face side points nowhere, so nothing can come from it.
fn settings(domain: &str, home: &Path) -> HubSettings {
    let patient = Duration::from_secs(5);
    HubSettings {
        endpoint: dead_address(),
        timeouts: Timeouts {
            connect: patient,
            metadata: patient,
            read: patient,
        },
        progress_interval: Duration::ZERO,
        modelscope: ModelScopeSettings {
            domain: domain.to_owned(),
            ..ModelScopeSettings::new(home.join("modelscope"))
        },
        ..HubSettings::new(home.join("hub"))
    }
}

/// An address nothing listens on: a port that was free a moment ago.
fn dead_address() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("http://127.0.0.1:{port}")
}

fn fetch(hub: &HubSettings, id: &str, file: &str) -> Result<PathBuf, ModelScopeError> {
    modelscope::fetch(hub, id, file, &mut |_| {})
        .map(|found| found.expect("online, a file or an error"))
}

/// Why loading `spec` fails.
fn load_error(spec: &str, hub: &HubSettings) -> String {
    match load_model(spec, hub, DeviceChoice::Cpu, &mut |_| {}) {
        Ok(_) => panic!("loading {spec} must fail"),
        Err(e) => format!("{e:#}"),
    }
}

/// Every file left under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flat_map(|e| {
            let path = e.unwrap().path();
            if path.is_dir() {
                files_under(&path)
            } else {
                vec![path]
            }
        })
        .collect()
}

#[test]
fn a_gguf_downloads_into_the_modelscope_cache_and_loads_again_with_the_server_gone() {
    let Some(gguf) = stories() else { return };
    let server = server_with(&gguf);
    let home = tempfile::tempdir().unwrap();
    let hub = settings(&server.url, home.path());
    let spec = format!("ms://{GGUF_REPO}:{GGUF_FILE}");
    let mut seen: Vec<Transfer> = Vec::new();
    load_model(&spec, &hub, DeviceChoice::Cpu, &mut |p| {
        seen.extend(p.download)
    })
    .expect("the downloaded GGUF loads");

    // The file lies where the SDK keeps it, whole, and no part is left behind.
    let path = home
        .path()
        .join("modelscope")
        .join(GGUF_DIR)
        .join(GGUF_FILE);
    assert!(
        files_under(&home.path().join("modelscope"))
            .iter()
            .all(|f| !f.to_string_lossy().ends_with(".incomplete"))
    );
    assert_eq!(
        sha256_hex(&std::fs::read(&path).unwrap()),
        sha256_hex(&gguf)
    );
    let last = seen.last().expect("the download was reported");
    assert_eq!(
        (last.done, last.total),
        (gguf.len() as u64, gguf.len() as u64)
    );
    assert!(seen.windows(2).all(|w| w[0].done <= w[1].done), "{seen:?}");
    let paths: Vec<String> = server.log().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths,
        [
            format!("/api/v1/models/{GGUF_REPO}/repo/files?Revision=master&Recursive=True"),
            format!("/api/v1/models/{GGUF_REPO}/repo?Revision=master&FilePath={GGUF_FILE}"),
        ]
    );

    // The model picker offers it by the id it was asked for.
    let offered: Vec<String> = in_modelscope_cache(&hub.modelscope)
        .into_iter()
        .map(|c| c.spec)
        .collect();
    assert_eq!(offered, std::slice::from_ref(&spec));

    let gone = settings(&dead_address(), home.path());
    load_model(&spec, &gone, DeviceChoice::Cpu, &mut |_| {})
        .expect("the cached GGUF loads with no server to ask");
}

#[test]
fn a_safetensors_repository_downloads_and_loads() {
    let server = FakeModelScope::start();
    server.repo(HF_REPO, crate::common::tiny_safetensors());
    let home = tempfile::tempdir().unwrap();
    let hub = settings(&server.url, home.path());
    load_model(
        &format!("ms://{HF_REPO}"),
        &hub,
        DeviceChoice::Cpu,
        &mut |_| {},
    )
    .expect("the downloaded repository loads");
    let dir = home
        .path()
        .join("modelscope/models/test--tiny/snapshots/master");
    for (file, bytes) in crate::common::tiny_safetensors() {
        assert_eq!(std::fs::read(dir.join(&file)).unwrap(), bytes, "{file}");
    }
    // Files the repository lacks are remembered as missing, outside the SDK's folders.
    let marker = home
        .path()
        .join("modelscope/.samplab_no_exist")
        .join(HF_REPO)
        .join("tokenizer_config.json");
    assert!(marker.is_file(), "{marker:?}");
    assert!(!dir.join("tokenizer_config.json").exists());
    let gone = settings(&dead_address(), home.path());
    load_model(
        &format!("ms://{HF_REPO}"),
        &gone,
        DeviceChoice::Cpu,
        &mut |_| {},
    )
    .expect("the cached repository loads with no server to ask");
}

#[test]
fn a_cut_download_resumes_with_a_range_request_now_or_on_the_next_run() {
    let Some(gguf) = stories() else { return };
    let server = server_with(&gguf);
    let home = tempfile::tempdir().unwrap();
    let half = gguf.len() / 2;
    let cut = Behaviour {
        cut_after: Some(half),
        ..Behaviour::default()
    };
    let bytes_ranges = |server: &FakeModelScope| -> Vec<Option<String>> {
        server
            .log()
            .into_iter()
            .filter(|r| r.path.contains("FilePath="))
            .map(|r| r.range)
            .collect()
    };

    // Within one run: the retry picks up where the cut left off.
    server.behave(cut.clone());
    let hub = settings(&server.url, home.path());
    let path = fetch(&hub, GGUF_REPO, GGUF_FILE).expect("the retry finishes the file");
    assert_eq!(
        sha256_hex(&std::fs::read(&path).unwrap()),
        sha256_hex(&gguf)
    );
    assert_eq!(
        bytes_ranges(&server),
        [None, Some(format!("bytes={half}-"))]
    );

    // Without retries: the part waits under another name beside the file and the next run resumes it.
    let other = tempfile::tempdir().unwrap();
    let server = server_with(&gguf);
    server.behave(cut);
    let hub = HubSettings {
        retries: 0,
        ..settings(&server.url, other.path())
    };
    let err = fetch(&hub, GGUF_REPO, GGUF_FILE).unwrap_err();
    assert!(
        matches!(err, ModelScopeError::Download(HubError::Interrupted { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("resumes"), "{err}");
    let cache = other.path().join("modelscope");
    let partial = cache.join(GGUF_DIR).join(format!("{GGUF_FILE}.incomplete"));
    assert_eq!(files_under(&cache), std::slice::from_ref(&partial));
    assert_eq!(std::fs::metadata(&partial).unwrap().len(), half as u64);
    let path = fetch(&hub, GGUF_REPO, GGUF_FILE).expect("the next run resumes");
    assert_eq!(std::fs::read(path).unwrap(), gguf);
    assert_eq!(
        bytes_ranges(&server),
        [None, Some(format!("bytes={half}-"))]
    );
    assert!(!partial.exists());
}

#[test]
fn a_cancelled_download_keeps_its_part_and_the_next_run_resumes_it() {
    let Some(gguf) = stories() else { return };
    let server = server_with(&gguf);
    let home = tempfile::tempdir().unwrap();
    let hub = settings(&server.url, home.path());
    let cancel = hub.cancel.clone();
    let err = modelscope::fetch(&hub, GGUF_REPO, GGUF_FILE, &mut |t| {
        if t.done > 0 {
            cancel.cancel();
        }
    })
    .unwrap_err();
    assert!(
        matches!(err, ModelScopeError::Download(HubError::Cancelled { .. })),
        "{err}"
    );
    let target = home
        .path()
        .join("modelscope")
        .join(GGUF_DIR)
        .join(GGUF_FILE);
    assert!(!target.exists(), "a cancelled file is never shown whole");
    let mut partial = target.clone().into_os_string();
    partial.push(".incomplete");
    let kept = std::fs::metadata(&partial).unwrap().len();
    assert!(kept > 0 && kept < gguf.len() as u64, "{kept}");

    let again = settings(&server.url, home.path());
    let path = fetch(&again, GGUF_REPO, GGUF_FILE).expect("the next run resumes");
    assert_eq!(std::fs::read(path).unwrap(), gguf);
    let last = server.log().pop().unwrap();
    assert_eq!(last.range, Some(format!("bytes={kept}-")));
}

#[test]
fn a_private_repository_says_to_set_modelscope_api_token_and_never_prints_it() {
    let server = FakeModelScope::start();
    server.repo(HF_REPO, crate::common::tiny_safetensors());
    server.behave(Behaviour {
        token: Some("ms-right".into()),
        ..Behaviour::default()
    });
    let home = tempfile::tempdir().unwrap();
    let hub = settings(&server.url, home.path());
    let message = load_error(&format!("ms://{HF_REPO}"), &hub);
    assert!(
        message.contains("MODELSCOPE_API_TOKEN")
            && message.contains("401")
            && message.contains(&format!("`ms://{HF_REPO}`")),
        "{message}"
    );

    let mut wrong = hub.clone();
    wrong.modelscope.token = Some("ms-wrong-secret".into());
    let message = load_error(&format!("ms://{HF_REPO}"), &wrong);
    assert!(
        message.contains("MODELSCOPE_API_TOKEN") && message.contains("403"),
        "{message}"
    );
    assert!(!message.contains("ms-wrong-secret"), "{message}");
    assert!(!format!("{wrong:?}").contains("ms-wrong-secret"));

    let mut right = hub;
    right.modelscope.token = Some("ms-right".into());
    load_model(
        &format!("ms://{HF_REPO}"),
        &right,
        DeviceChoice::Cpu,
        &mut |_| {},
    )
    .expect("the right token opens it");
    let log = server.log();
    assert!(
        log.iter()
            .rev()
            .take_while(|r| r.authorization.is_some())
            .count()
            >= 2,
        "the listing and the bytes both carry the token: {log:?}"
    );
    assert_eq!(
        log.last().unwrap().authorization.as_deref(),
        Some("Bearer ms-right")
    );
}

#[test]
fn a_missing_repository_or_file_is_named() {
    let server = FakeModelScope::start();
    server.repo(HF_REPO, crate::common::tiny_safetensors());
    server.repo(
        "test/only-gguf",
        vec![("m.gguf".to_owned(), b"GGUF".to_vec())],
    );
    let home = tempfile::tempdir().unwrap();
    let hub = settings(&server.url, home.path());
    let message = load_error("ms://nobody/nothing", &hub);
    assert!(
        message.contains("no repository `ms://nobody/nothing`") && message.contains("404"),
        "{message}"
    );
    let message = load_error(&format!("ms://{HF_REPO}:missing.gguf"), &hub);
    assert!(
        message.contains("no file `missing.gguf`") && message.contains(&format!("ms://{HF_REPO}")),
        "{message}"
    );
    // A GGUF repository asked for as a transformers model says how to name its file.
    let message = load_error("ms://test/only-gguf", &hub);
    assert!(
        message.contains("config.json") && message.contains("`ms://test/only-gguf:file.gguf`"),
        "{message}"
    );
}

#[test]
fn without_a_network_the_message_names_the_domain() {
    let home = tempfile::tempdir().unwrap();
    let domain = dead_address();
    let hub = settings(&domain, home.path());
    let message = load_error(&format!("ms://{HF_REPO}"), &hub);
    assert!(
        message.contains(&format!("cannot reach {domain}"))
            && message.contains("MODELSCOPE_ENDPOINT"),
        "{message}"
    );

    let offline = HubSettings {
        offline: true,
        ..hub
    };
    let message = load_error(&format!("ms://{HF_REPO}"), &offline);
    assert!(
        message.contains("not in the ModelScope cache") && message.contains("HF_HUB_OFFLINE"),
        "{message}"
    );
}

#[test]
fn an_ms_id_that_is_not_org_and_name_says_what_one_looks_like() {
    let home = tempfile::tempdir().unwrap();
    let hub = settings(&dead_address(), home.path());
    for spec in ["ms://justaname", "ms://org/name:weights.bin", "ms://a/b/c"] {
        let message = load_error(spec, &hub);
        assert!(
            message.contains(&format!("`{spec}` is not a ModelScope id"))
                && message.contains("ms://org/name:file.gguf"),
            "{message}"
        );
    }
}

#[test]
fn samplab_sample_downloads_through_modelscope_domain_and_cache_variables() {
    let server = FakeModelScope::start();
    server.repo(HF_REPO, crate::common::tiny_safetensors());
    let home = tempfile::tempdir().unwrap();
    let cache = home.path().join("ms-cache");
    let host = server.url.trim_start_matches("http://");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args([
            "sample",
            "--model",
            &format!("ms://{HF_REPO}"),
            "--prompt",
            "Once upon a time",
            "--set",
            "max_tokens=4",
            "--set",
            "seed=1",
        ])
        .env("MODELSCOPE_DOMAIN", format!("http://{host}/"))
        .env("MODELSCOPE_CACHE", &cache)
        .env("MODELSCOPE_API_TOKEN", "ms-token")
        .env("HF_HOME", home.path())
        .env("XDG_CACHE_HOME", home.path())
        .env_remove("HF_HUB_OFFLINE")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("Once upon a time"));
    assert!(
        cache
            .join("models/test--tiny/snapshots/master/config.json")
            .is_file()
    );
    let log = server.log();
    assert!(
        log.iter()
            .all(|r| r.authorization.as_deref() == Some("Bearer ms-token")),
        "{log:?}"
    );
}

/// The Python with ModelScope's SDK (`pip install modelscope`), named by
/// `$SAMPLAB_MODELSCOPE_PYTHON`; `None` (said) skips the test. CI installs it (see `.ci/run`).
fn modelscope_python() -> Option<std::ffi::OsString> {
    const VAR: &str = "SAMPLAB_MODELSCOPE_PYTHON";
    let python = std::env::var_os(VAR);
    if python.is_none() {
        eprintln!("skipping: {VAR} is not set (a Python with the modelscope package)");
    }
    python
}

/// ModelScope's own `model_file_download` of `file` of `id` from `domain` into `cache`: the
/// path it returns.
fn python_download(
    python: &std::ffi::OsStr,
    domain: &str,
    cache: &Path,
    id: &str,
    file: &str,
) -> PathBuf {
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "import sys; from modelscope import model_file_download as d; \
             print(d(sys.argv[1], sys.argv[2]))",
            id,
            file,
        ])
        .env("MODELSCOPE_ENDPOINT", domain)
        .env("MODELSCOPE_CACHE", cache)
        .env("HOME", cache)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(stdout.lines().last().unwrap_or_default().trim())
}

#[test]
fn the_modelscope_sdk_and_samplab_reuse_each_others_downloads() {
    let Some(python) = modelscope_python() else {
        return;
    };
    let Some(gguf) = stories() else { return };
    let server = server_with(&gguf);
    server.repo(
        "test/other-GGUF",
        vec![(GGUF_FILE.to_owned(), gguf.clone())],
    );
    let home = tempfile::tempdir().unwrap();
    let hub = settings(&server.url, home.path());
    let cache = &hub.modelscope.cache_dir;

    // samplab's download is the SDK's cache hit: it asks for no bytes.
    let ours = fetch(&hub, GGUF_REPO, GGUF_FILE).unwrap();
    let asked = server.log().len();
    let theirs = python_download(&python, &server.url, cache, GGUF_REPO, GGUF_FILE);
    assert_eq!(theirs, ours);
    let later = &server.log()[asked..];
    assert!(
        later.iter().all(|r| !r.path.contains("FilePath=")),
        "{later:?}"
    );

    // The SDK's download loads in samplab with the server gone.
    let theirs = python_download(&python, &server.url, cache, "test/other-GGUF", GGUF_FILE);
    let gone = settings(&dead_address(), home.path());
    assert_eq!(fetch(&gone, "test/other-GGUF", GGUF_FILE).unwrap(), theirs);
}
