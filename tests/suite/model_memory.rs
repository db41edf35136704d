//! Loading is refused, with the figures, when a model would not fit in the free memory.

use crate::common;
use candle_core::Device;
use samplab::model::device::DeviceChoice;
use samplab::model::memory::{self, MemoryEstimate, Place};

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
    let estimate = memory::estimate(&model, &Device::Cpu).unwrap();
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
