//! Loading is refused, with the figures, when a model would not fit in the free memory.

use crate::common;
use candle_core::Device;
use samplab::model::device::DeviceChoice;
use samplab::model::memory::{self, MemoryEstimate, Place};

use samplab::model::Model;
use std::path::Path;
use std::process::Command;

fn sample_with_budget(model: &str, budget: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args(["sample", "--model", model, "--prompt", "Once"])
        .args(["--set", "max_tokens=4"])
        .env("SAMPLAB_MEMORY_BUDGET", budget)
        .output()
        .expect("the samplab binary runs")
}

#[test]
fn a_model_larger_than_the_memory_budget_is_refused_before_loading() {
    let Some(model) = common::test_model() else {
        return;
    };
    let model = model.to_str().unwrap();
    let file_size = std::fs::metadata(model).unwrap().len();

    let refused = sample_with_budget(model, "64K");
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains("stories260K needs about"), "{message}");
    assert!(message.contains("only 64 KiB is free"), "{message}");
    assert!(message.contains("SAMPLAB_MEMORY_BUDGET"), "{message}");

    let fits = sample_with_budget(model, &format!("{}", file_size * 4));
    assert!(
        fits.status.success(),
        "{}",
        String::from_utf8_lossy(&fits.stderr)
    );

    let typo = sample_with_budget(model, "lots");
    let message = String::from_utf8_lossy(&typo.stderr);
    assert!(!typo.status.success());
    assert!(
        message.contains("SAMPLAB_MEMORY_BUDGET=lots is not a size"),
        "{message}"
    );
}

#[test]
fn the_estimate_counts_the_weights_and_a_kv_cache() {
    let Some(model) = common::test_model() else {
        return;
    };
    let estimate =
        memory::estimate(&model, &Device::Cpu, samplab::model::DEFAULT_REPLAY_BUDGET).unwrap();
    assert_eq!(estimate.weights, std::fs::metadata(&model).unwrap().len());
    assert!(estimate.kv_cache > 0 && estimate.positions > 0);
    assert!(estimate.positions <= memory::KV_POSITIONS);
}

/// Each memory check must see the weights of a model that loaded at the same time, so no two
/// loads may be between their check and their weights at once.
#[test]
fn models_loading_at_the_same_time_take_turns() {
    use samplab::engine::load::load_model;
    use samplab::model::source::HubSettings;
    use std::sync::{Arc, Barrier, Mutex};

    let Some(model) = common::test_model() else {
        return;
    };
    let log = Arc::new(Mutex::new(Vec::new()));
    let start = Arc::new(Barrier::new(3));
    let loads: Vec<_> = (0..3)
        .map(|i| {
            let (model, log, start) = (model.clone(), Arc::clone(&log), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                let mut progress = |step: samplab::model::source::LoadProgress| {
                    log.lock().unwrap().push((i, step.fraction, step.message));
                };
                load_model(
                    model.to_str().unwrap(),
                    &HubSettings::from_env(),
                    DeviceChoice::Cpu,
                    &mut progress,
                )
                .map(|_| ())
            })
        })
        .collect();
    for load in loads {
        load.join().unwrap().unwrap();
    }
    let log = log.lock().unwrap();
    let mut loading = None;
    for (i, fraction, message) in log.iter() {
        if message.starts_with("loading weights") {
            assert_eq!(loading, None, "{i} started while another loaded: {log:?}");
            loading = Some(*i);
        } else if *fraction == 1.0 {
            assert_eq!(loading, Some(*i), "{log:?}");
            loading = None;
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn gpu_free_memory_comes_from_the_driver_and_refuses_what_does_not_fit() {
    let (device, name) = DeviceChoice::Cuda(0).open().unwrap();
    let free = memory::free_on(&device, &name)
        .unwrap()
        .expect("the driver reports the GPU's memory");
    let Place::Gpu {
        device: shown,
        total,
    } = free.place.clone()
    else {
        panic!("host memory reported for a GPU: {free:?}");
    };
    assert_eq!(shown, "cuda:0");
    assert!(free.bytes > 0 && free.bytes <= total, "{free:?}");
    let estimate = MemoryEstimate {
        weights: total + 1,
        kv_cache: 0,
        positions: 1,
    };
    let err = memory::check_fits("huge", estimate, Some(free))
        .unwrap_err()
        .to_string();
    assert!(err.contains("of cuda:0's"), "{err}");
}

/// Gemma 3's fixture with a context of 4096: six of its seven layers see a window of 4, so a
/// long sequence's keys and values are mostly the one global layer's, and the estimate that
/// refuses runs counts them so (a bound on what the run holds, well under every layer's).
#[test]
fn windowed_layers_hold_and_are_counted_as_their_window_not_the_context() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/archs/gemma3/hf");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture.join("model.safetensors"),
        dir.path().join("model.safetensors"),
    )
    .unwrap();
    let config = std::fs::read_to_string(fixture.join("config.json"))
        .unwrap()
        .replace(
            "\"max_position_embeddings\": 64",
            "\"max_position_embeddings\": 4096",
        );
    std::fs::write(dir.path().join("config.json"), config).unwrap();
    let model = Model::load(dir.path(), &Device::Cpu).unwrap();
    let positions = 1500;
    let ids: Vec<u32> = (0..positions as u32).map(|i| 4 + (i * 37) % 265).collect();
    let mut session = model.session();
    session.prefill(&ids[..positions - 40], false).unwrap();
    for &id in &ids[positions - 40..] {
        session.decode_step(&[id]).unwrap();
    }
    let c = model.config();
    let every_layer = (2 * 4 * c.num_layers * c.num_kv_heads * c.head_dim * positions) as u64;
    let held = session.cache_bytes() as u64;
    let estimate = memory::kv_bytes(c, positions, model.snapshots());
    assert!(held <= estimate, "holds {held}, estimated {estimate}");
    assert!(estimate < every_layer / 2, "{estimate} of {every_layer}");
    assert!(held < every_layer / 5, "holds {held} of {every_layer}");
}
