//! Where a loaded model came from, as the provenance of its runs records it: what `--model`
//! must say to load it again, and each file it was read from with its size and sha256.
//!
//! The digests are computed on a thread of their own from the moment the model loads (a
//! cached one, see [`super::sha256_cache`], is there at once), so that hashing a file of
//! several GB never holds back a run's first token; a run that ends before the hash waits for
//! it.

use super::cancel::Cancel;
use super::sha256_cache::file_sha256;
use super::{HF_OPTIONAL, ModelSource, embedded, sha256};
use crate::model::formats::tensors::safetensors_files;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

/// One file a model was read from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileDigest {
    /// The file's name within the model: the GGUF file's, or a name in the model directory.
    pub name: String,
    pub size: u64,
    /// `None` when the file could no longer be read.
    pub sha256: Option<String>,
}

/// A loaded model's origin.
#[derive(Debug, Default)]
pub struct ModelOrigin {
    /// What `--model` says to load the model again: its absolute path, its Hub id, or
    /// samplab-tiny.
    pub source: String,
    digests: Digests,
}

#[derive(Debug, Default)]
enum Digests {
    /// Being computed; `cancel` stops the thread when the model is dropped first.
    Pending {
        thread: JoinHandle<Vec<FileDigest>>,
        cancel: Cancel,
    },
    Done(Vec<FileDigest>),
    /// A model loaded from nothing samplab can name (a test's fake).
    #[default]
    None,
}

impl ModelOrigin {
    /// The origin of the model `spec` resolved to `source`; hashing starts now.
    pub fn start(spec: &str, source: &ModelSource) -> Self {
        let cancel = Cancel::default();
        let (named, files) = if embedded::is_embedded(spec) {
            (embedded::NAME.to_owned(), Files::Embedded)
        } else {
            let (ModelSource::Gguf(path) | ModelSource::HfDir(path)) = source;
            let named = if Path::new(spec).exists() {
                std::fs::canonicalize(path)
                    .unwrap_or_else(|_| path.clone())
                    .to_string_lossy()
                    .into_owned()
            } else {
                spec.to_owned()
            };
            (named, Files::of(source))
        };
        let stop = cancel.clone();
        let thread = std::thread::Builder::new()
            .name("samplab-sha256".into())
            .spawn(move || files.digests(&stop))
            .expect("the OS can start a thread");
        let digests = Digests::Pending { thread, cancel };
        Self {
            source: named,
            digests,
        }
    }

    /// Each file with its digest, waiting for the hash when it is still being computed.
    pub fn files(&mut self) -> &[FileDigest] {
        self.digests = match std::mem::take(&mut self.digests) {
            Digests::Pending { thread, .. } => Digests::Done(thread.join().unwrap_or_default()),
            other => other,
        };
        match &self.digests {
            Digests::Done(files) => files,
            Digests::Pending { .. } | Digests::None => &[],
        }
    }
}

impl Drop for ModelOrigin {
    fn drop(&mut self) {
        if let Digests::Pending { cancel, .. } = &self.digests {
            cancel.cancel();
        }
    }
}

/// The files a model is read from.
enum Files {
    /// samplab-tiny's bytes, built into the binary.
    Embedded,
    /// `(name within the model, path)` of each file on disk.
    OnDisk(Vec<(String, PathBuf)>),
}

impl Files {
    /// A GGUF file alone; of a model directory, the files loading reads.
    fn of(source: &ModelSource) -> Self {
        let paths = match source {
            ModelSource::Gguf(path) => vec![path.clone()],
            ModelSource::HfDir(dir) => {
                let mut paths: Vec<PathBuf> = ["config.json", "tokenizer.json"]
                    .iter()
                    .chain(HF_OPTIONAL.iter())
                    .map(|name| dir.join(name))
                    .filter(|path| path.is_file())
                    .collect();
                paths.extend(safetensors_files(dir).unwrap_or_default());
                paths
            }
        };
        Files::OnDisk(
            paths
                .into_iter()
                .map(|path| {
                    let name = path.file_name().map_or_else(
                        || path.to_string_lossy().into_owned(),
                        |n| n.to_string_lossy().into_owned(),
                    );
                    (name, path)
                })
                .collect(),
        )
    }

    fn digests(&self, cancel: &Cancel) -> Vec<FileDigest> {
        match self {
            Files::Embedded => embedded::FILES
                .iter()
                .map(|(name, bytes)| FileDigest {
                    name: (*name).to_owned(),
                    size: bytes.len() as u64,
                    sha256: Some(sha256::of_bytes(bytes)),
                })
                .collect(),
            Files::OnDisk(files) => files
                .iter()
                .map(|(name, path)| FileDigest {
                    name: name.clone(),
                    size: std::fs::metadata(path).map_or(0, |m| m.len()),
                    sha256: file_sha256(path, cancel).ok(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gguf_file_is_named_by_its_full_path_and_hashed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.gguf");
        std::fs::write(&file, b"abc").unwrap();
        let mut origin =
            ModelOrigin::start(file.to_str().unwrap(), &ModelSource::Gguf(file.clone()));
        let full = std::fs::canonicalize(&file).unwrap();
        assert_eq!(origin.source, full.to_string_lossy());
        assert_eq!(
            origin.files(),
            [FileDigest {
                name: "m.gguf".into(),
                size: 3,
                sha256: Some(sha256::of_bytes(b"abc")),
            }]
        );
    }

    #[test]
    fn a_model_directory_lists_what_loading_reads() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "config.json",
            "tokenizer.json",
            "chat_template.jinja",
            "b.safetensors",
            "a.safetensors",
            "README.md",
        ] {
            std::fs::write(dir.path().join(name), name).unwrap();
        }
        let source = ModelSource::HfDir(dir.path().to_owned());
        let mut origin = ModelOrigin::start("org/name", &source);
        assert_eq!(origin.source, "org/name", "a Hub id stays as typed");
        let names: Vec<&str> = origin.files().iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "config.json",
                "tokenizer.json",
                "chat_template.jinja",
                "a.safetensors",
                "b.safetensors"
            ]
        );
    }

    #[test]
    fn the_built_in_model_is_named_and_its_bytes_hashed() {
        let source = ModelSource::HfDir(PathBuf::from("/nowhere"));
        let mut origin = ModelOrigin::start(embedded::NAME, &source);
        assert_eq!(origin.source, embedded::NAME);
        let files = origin.files();
        assert_eq!(files.len(), embedded::FILES.len());
        assert!(files.iter().all(|f| f.sha256.is_some() && f.size > 0));
    }
}
