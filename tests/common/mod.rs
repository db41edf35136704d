//! Shared helpers for integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

pub mod tui;

/// The stories260K test model: `$SAMPLAB_TEST_MODEL`, or `../shared/models/stories260K/` beside the
/// repository. `None` skips the test, unless `SAMPLAB_REQUIRE_TEST_MODEL=1` (set by CI), which fails it.
pub fn test_model() -> Option<PathBuf> {
    let path = std::env::var_os("SAMPLAB_TEST_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../shared/models/stories260K/stories260K.gguf")
        });
    if path.is_file() {
        return Some(path);
    }
    if std::env::var("SAMPLAB_REQUIRE_TEST_MODEL").is_ok_and(|v| v == "1") {
        panic!(
            "test model not found at {}; set SAMPLAB_TEST_MODEL to stories260K.gguf",
            path.display()
        );
    }
    eprintln!("skipping: test model not found at {}", path.display());
    None
}

/// llama.cpp's output on the test model (reference.json beside it).
pub fn reference() -> Option<serde_json::Value> {
    let model = test_model()?;
    let text = std::fs::read_to_string(model.with_file_name("reference.json"))
        .expect("reference.json lies beside the test model");
    Some(serde_json::from_str(&text).expect("reference.json is JSON"))
}
