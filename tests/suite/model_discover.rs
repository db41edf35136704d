//! The model picker's candidates, from a folder and fake Hugging Face and ModelScope caches.

use samplab::model::source::discover::{Candidate, discover, in_modelscope_cache};
use samplab::model::source::modelscope::ModelScopeSettings;
use std::fs;

#[test]
fn local_files_and_cached_repositories_are_offered_as_model_specs() {
    let root = tempfile::tempdir().unwrap();
    let folder = root.path().join("work");
    let cache = root.path().join("hub");
    fs::create_dir_all(folder.join("my-llama")).unwrap();
    fs::write(folder.join("my-llama/config.json"), "{}").unwrap();
    fs::create_dir_all(folder.join("notes")).unwrap();
    fs::write(folder.join("small.gguf"), "GGUF").unwrap();
    fs::write(folder.join("readme.txt"), "").unwrap();

    let snapshot = cache.join("models--HuggingFaceTB--SmolLM2-135M/snapshots/abc123");
    fs::create_dir_all(&snapshot).unwrap();
    fs::write(snapshot.join("config.json"), "{}").unwrap();
    fs::write(snapshot.join("model.safetensors"), "weights").unwrap();
    let gguf_repo = cache.join("models--Qwen--Qwen2.5-0.5B-Instruct-GGUF/snapshots/def456");
    fs::create_dir_all(&gguf_repo).unwrap();
    fs::write(gguf_repo.join("qwen2.5-0.5b-instruct-q8_0.gguf"), "GGUF").unwrap();
    fs::create_dir_all(cache.join("datasets--someone--data/snapshots/1")).unwrap();

    let found = discover(&folder, &cache);
    let specs: Vec<&str> = found.iter().map(|c| c.spec.as_str()).collect();
    assert_eq!(
        specs,
        [
            folder.join("my-llama").to_str().unwrap(),
            folder.join("small.gguf").to_str().unwrap(),
            "HuggingFaceTB/SmolLM2-135M",
            "Qwen/Qwen2.5-0.5B-Instruct-GGUF:qwen2.5-0.5b-instruct-q8_0.gguf",
        ]
    );
    assert_eq!(
        found[2],
        Candidate {
            spec: "HuggingFaceTB/SmolLM2-135M".into(),
            label: "HuggingFaceTB/SmolLM2-135M (HF cache)".into(),
            size: Some(9),
        }
    );
    assert_eq!(found[1].label, "small.gguf (local)");
}

#[test]
fn missing_folders_offer_nothing_and_do_not_fail() {
    let root = tempfile::tempdir().unwrap();
    assert!(discover(&root.path().join("none"), &root.path().join("no-cache")).is_empty());
}

#[test]
fn the_modelscope_cache_is_offered_as_ms_ids_from_the_folder_each_model_is_read_from() {
    let root = tempfile::tempdir().unwrap();
    let settings = ModelScopeSettings::new(root.path().join("modelscope"));
    let cache = &settings.cache_dir;
    let snapshot = cache.join("models/Qwen--Qwen3.5-0.8B/snapshots/master");
    fs::create_dir_all(&snapshot).unwrap();
    fs::write(snapshot.join("config.json"), "{}").unwrap();
    fs::write(snapshot.join("model.safetensors"), "weights").unwrap();
    fs::write(snapshot.join("extra.gguf.incomplete"), "GG").unwrap();
    // An older SDK's folder, its dots written `___`, with the SDK's own bookkeeping file.
    let older = cache.join("hub/models/unsloth/Qwen3___5-4B-GGUF");
    fs::create_dir_all(&older).unwrap();
    fs::write(older.join("Qwen3.5-4B-Q4_K_M.gguf"), "GGUF").unwrap();
    fs::write(older.join(".mdl"), "").unwrap();

    let found = in_modelscope_cache(&settings);
    assert_eq!(
        found,
        [
            Candidate {
                spec: "ms://Qwen/Qwen3.5-0.8B".into(),
                label: "ms://Qwen/Qwen3.5-0.8B (ModelScope cache)".into(),
                size: Some(9),
            },
            Candidate {
                spec: "ms://unsloth/Qwen3.5-4B-GGUF:Qwen3.5-4B-Q4_K_M.gguf".into(),
                label: "ms://unsloth/Qwen3.5-4B-GGUF:Qwen3.5-4B-Q4_K_M.gguf (ModelScope cache)"
                    .into(),
                size: Some(4),
            },
        ]
    );
    let missing = ModelScopeSettings::new(root.path().join("none"));
    assert!(in_modelscope_cache(&missing).is_empty());
}
