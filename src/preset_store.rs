//! User presets: one `<name>.yaml` per preset in a directory the user owns
//! (`<config dir>/presets`), holding only the non-default keys and written atomically. A
//! `<name>.json` the user put there is a preset too; where both exist the `.yaml` is the one a
//! name finds.

use crate::atomic_file;
use crate::config;
use crate::params::{SamplingParams, nearest_name};
use crate::presets::{self, MODEL_PRESET, Preset, PresetError, builtin, load_file};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The extensions of preset files, the one a name finds first when both exist first; saving
/// writes the first.
const EXTENSIONS: [&str; 2] = ["yaml", "json"];
/// Well below the 255 bytes most file systems allow for a file name.
const MAX_NAME_CHARS: usize = 64;

/// A directory of preset files. Tests and the binary's edge say which directory; nothing in
/// here reads the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresetStore {
    pub dir: PathBuf,
}

/// One file of the store as a picker lists it. A broken file is listed with the reason, so the
/// user learns what to fix instead of wondering where their preset went.
#[derive(Debug, Clone, PartialEq)]
pub struct UserPreset {
    pub name: String,
    pub path: PathBuf,
    pub params: Result<SamplingParams, String>,
    /// The file of the same name that the name finds instead (a `.yaml` beside this `.json`).
    pub shadowed_by: Option<PathBuf>,
}

impl UserPreset {
    /// What a listing says beside a shadowed file, so that its values are not taken for the
    /// ones the name loads.
    pub fn note(&self) -> Option<String> {
        let by = self.shadowed_by.as_ref()?.file_name()?.to_string_lossy();
        Some(format!("shadowed by {by}, which the name loads"))
    }
}

/// Why a name cannot be saved under; each says what would be right.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("type a name for the preset")]
    Empty,
    #[error("`{0}` is a built-in preset; choose another name")]
    BuiltIn(String),
    #[error("`model` names the model's own defaults; choose another name")]
    Model,
    #[error("a preset name cannot contain `{0}`: use letters, digits, spaces, `-`, `_` or `.`")]
    BadChar(char),
    #[error("a preset name cannot start with `.` or a space, or end with a space")]
    BadEdge,
    #[error("a preset name has at most {MAX_NAME_CHARS} characters")]
    TooLong,
}

#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    #[error(transparent)]
    Name(#[from] NameError),
    #[error("a preset named `{name}` exists ({})", path.display())]
    Exists { name: String, path: PathBuf },
    // `error`, not `source`: a chained source would be printed twice by `{:#}`.
    #[error("cannot write preset {}: {error}", path.display())]
    Write { path: PathBuf, error: io::Error },
}

/// Checks a name the user typed for a new preset file.
pub fn check_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.starts_with(['.', ' ']) || name.ends_with(' ') {
        return Err(NameError::BadEdge);
    }
    if let Some(c) = name
        .chars()
        .find(|&c| !(c.is_alphanumeric() || matches!(c, ' ' | '-' | '_' | '.')))
    {
        return Err(NameError::BadChar(c));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(NameError::TooLong);
    }
    reserved(name)
}

/// Names that `--preset` and the picker resolve to something else before any user file.
fn reserved(name: &str) -> Result<(), NameError> {
    if name.eq_ignore_ascii_case(MODEL_PRESET) {
        return Err(NameError::Model);
    }
    match presets::builtin(name) {
        Some(builtin) => Err(NameError::BuiltIn(builtin.name)),
        None => Ok(()),
    }
}

impl PresetStore {
    /// The user's presets, in `<config dir>/presets`.
    pub fn user() -> Option<Self> {
        config::config_dir().map(|dir| Self::new(dir.join("presets")))
    }

    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// Where preset `name` is saved.
    pub fn path(&self, name: &str) -> PathBuf {
        self.path_with(name, EXTENSIONS[0])
    }

    fn path_with(&self, name: &str, extension: &str) -> PathBuf {
        self.dir.join(format!("{name}.{extension}"))
    }

    /// Whether `path` is one of this store's files that saving by name writes (and so can be
    /// saved over by name).
    pub fn holds(&self, path: &Path) -> bool {
        path.parent() == Some(self.dir.as_path())
            && path.extension().is_some_and(|e| e == EXTENSIONS[0])
    }

    /// The preset files with their names, sorted by name, a `.yaml` before a `.json` of the
    /// same name; a missing directory has none.
    pub fn files(&self) -> io::Result<Vec<(String, PathBuf)>> {
        config::user_files(&self.dir, &EXTENSIONS)
    }

    /// Every preset file, read and checked, sorted as [`Self::files`]; a `.json` that a `.yaml`
    /// of the same name shadows is listed too, saying so.
    pub fn list(&self) -> io::Result<Vec<UserPreset>> {
        let mut found: Vec<UserPreset> = Vec::new();
        for (name, path) in self.files()? {
            let shadowed_by = found
                .last()
                .filter(|before| before.name == name)
                .map(|before| before.path.clone());
            let params = match reserved(&name) {
                Err(e) => Err(format!("{e}: rename the file to use it")),
                Ok(()) => presets::load_file(&path)
                    .map(|p| p.params)
                    .map_err(|e| match e {
                        PresetError::Invalid { error, .. } => error.to_string(),
                        other => other.to_string(),
                    }),
            };
            found.push(UserPreset {
                name,
                path,
                params,
                shadowed_by,
            });
        }
        Ok(found)
    }

    /// The user preset called `name`, if its file exists: the `.yaml`, else the `.json`.
    pub fn find(&self, name: &str) -> Option<Result<Preset, PresetError>> {
        EXTENSIONS
            .iter()
            .map(|extension| self.path_with(name, extension))
            .find(|path| path.is_file())
            .map(|path| presets::load_file(&path))
    }

    /// Writes `params` (only their non-default keys) as preset `name`. Without `overwrite` an
    /// existing preset is an `Exists` error and keeps its contents.
    pub fn save(
        &self,
        name: &str,
        params: &SamplingParams,
        overwrite: bool,
    ) -> Result<Preset, SaveError> {
        check_name(name)?;
        let path = self.path(name);
        let write_error = |error| SaveError::Write {
            path: path.clone(),
            error,
        };
        std::fs::create_dir_all(&self.dir).map_err(write_error)?;
        atomic_file::sweep_stale(&self.dir, |_| false);
        let params = params.normalized();
        let yaml = params.to_yaml_non_default();
        match atomic_file::write(&path, overwrite, |f| f.write_all(yaml.as_bytes())) {
            Ok(()) => Ok(Preset {
                name: name.to_owned(),
                params,
                source: presets::PresetSource::File(path),
            }),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(SaveError::Exists {
                name: name.to_owned(),
                path,
            }),
            Err(e) => Err(write_error(e)),
        }
    }
}

/// `--preset NAME|FILE`: an existing path wins, then a built-in, then a preset in `user`.
pub fn resolve(name_or_path: &str, user: Option<&PresetStore>) -> Result<Preset, PresetError> {
    let path = Path::new(name_or_path);
    if path.is_file() {
        return load_file(path);
    }
    if let Some(preset) = builtin(name_or_path) {
        return Ok(preset);
    }
    if let Some(found) = user.and_then(|store| store.find(name_or_path)) {
        return found;
    }
    // A path that names no file says so, rather than that no preset has that name.
    let looks_like_a_path = name_or_path.contains(std::path::MAIN_SEPARATOR)
        || name_or_path.contains('/')
        || path
            .extension()
            .is_some_and(|e| ["yaml", "yml", "json"].contains(&e.to_string_lossy().as_ref()));
    if looks_like_a_path {
        return load_file(path);
    }
    // Names only: a broken or huge file must not slow down or break a message about another.
    let saved = user.map(|store| (store, store.files().map(|files| names_of(&files))));
    let saved_names = saved.iter().flat_map(|(_, names)| names.iter().flatten());
    let near = nearest_name(
        &name_or_path.to_lowercase(),
        presets::builtin_names()
            .into_iter()
            .chain(saved_names.map(String::as_str)),
    );
    Err(PresetError::NotFound {
        name: name_or_path.to_owned(),
        hint: near
            .map(|name| format!(" (did you mean `{name}`?)"))
            .unwrap_or_default(),
        user: saved
            .map(|(store, names)| user_presets_hint(store, names))
            .unwrap_or_default(),
    })
}

/// The preset names of a store's files, each once.
fn names_of(files: &[(String, PathBuf)]) -> Vec<String> {
    let mut names: Vec<String> = files.iter().map(|(name, _)| name.clone()).collect();
    names.dedup();
    names
}

/// `; user presets in DIR are a, b` for a not-found message.
fn user_presets_hint(store: &PresetStore, names: io::Result<Vec<String>>) -> String {
    let names = match names {
        Ok(names) if names.is_empty() => "none yet".to_owned(),
        Ok(names) => names.join(", "),
        Err(e) => format!("unreadable ({e})"),
    };
    format!("; user presets in {} are {names}", store.dir.display())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::PresetSource;

    #[test]
    fn names_must_be_plain_and_not_taken_by_built_ins() {
        assert_eq!(check_name("my preset-2.b_c"), Ok(()));
        assert_eq!(check_name("café"), Ok(()));
        assert_eq!(check_name(""), Err(NameError::Empty));
        assert_eq!(check_name("a/b"), Err(NameError::BadChar('/')));
        assert_eq!(check_name("a\\b"), Err(NameError::BadChar('\\')));
        assert_eq!(check_name("a\nb"), Err(NameError::BadChar('\n')));
        assert_eq!(check_name(".."), Err(NameError::BadEdge));
        assert_eq!(check_name(" x"), Err(NameError::BadEdge));
        assert_eq!(
            check_name("Creative"),
            Err(NameError::BuiltIn("creative".into()))
        );
        assert_eq!(
            check_name("divine intellect"),
            Err(NameError::BuiltIn("divine-intellect".into()))
        );
        assert_eq!(check_name("MODEL"), Err(NameError::Model));
        assert_eq!(check_name(&"x".repeat(65)), Err(NameError::TooLong));
        let message = check_name("a/b").unwrap_err().to_string();
        assert!(
            message.contains("`/`") && message.contains("letters"),
            "{message}"
        );
    }

    #[test]
    fn lists_good_and_bad_files_sorted_and_skips_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let store = PresetStore::new(dir.path());
        std::fs::write(dir.path().join("zed.yaml"), "temperature: 0.5\n").unwrap();
        std::fs::write(dir.path().join("bad.yaml"), "top_p: 2\n").unwrap();
        std::fs::write(dir.path().join("greedy.yaml"), "{}\n").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a preset").unwrap();
        std::fs::write(dir.path().join(".hidden.yaml"), "{}").unwrap();
        std::fs::create_dir(dir.path().join("sub.yaml")).unwrap();
        let listed = store.list().unwrap();
        let names: Vec<&str> = listed.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["bad", "greedy", "zed"]);
        assert!(
            listed[0]
                .params
                .as_ref()
                .unwrap_err()
                .contains("`top_p` = 2")
        );
        assert!(
            listed[1]
                .params
                .as_ref()
                .unwrap_err()
                .contains("rename the file")
        );
        assert_eq!(listed[2].params.as_ref().unwrap().temperature, 0.5);
        assert_eq!(listed[2].path, dir.path().join("zed.yaml"));

        let missing = PresetStore::new(dir.path().join("none"));
        assert_eq!(missing.list().unwrap(), []);
    }

    #[test]
    fn json_presets_are_listed_and_found_after_a_yaml_of_the_same_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = PresetStore::new(dir.path());
        std::fs::write(dir.path().join("pasted.json"), r#"{"top_p": 0.5}"#).unwrap();
        std::fs::write(dir.path().join("mine.json"), r#"{"top_k": 9}"#).unwrap();
        std::fs::write(dir.path().join("mine.yaml"), "top_k: 7\n").unwrap();
        let listed = store.list().unwrap();
        let files: Vec<String> = listed
            .iter()
            .map(|p| p.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(files, ["mine.yaml", "mine.json", "pasted.json"]);
        assert_eq!(listed[0].note(), None);
        assert_eq!(
            listed[1].note().as_deref(),
            Some("shadowed by mine.yaml, which the name loads")
        );
        assert_eq!(listed[1].params.as_ref().unwrap().top_k, 9);
        assert_eq!(listed[2].note(), None);
        assert_eq!(store.find("mine").unwrap().unwrap().params.top_k, 7);
        assert_eq!(store.find("pasted").unwrap().unwrap().params.top_p, 0.5);
    }

    #[test]
    fn save_writes_only_non_default_keys_and_loads_back_equal() {
        let dir = tempfile::tempdir().unwrap();
        let store = PresetStore::new(dir.path().join("presets"));
        let params =
            SamplingParams::from_yaml("temperature: 0.7\nseed: 42\ntop_k: 0\nstop: []").unwrap();
        let saved = store.save("mine", &params, false).unwrap();
        let text = std::fs::read_to_string(store.path("mine")).unwrap();
        assert_eq!(text, "seed: 42\ntemperature: 0.7\n");
        assert_eq!(saved.params, params.normalized());
        assert_eq!(store.find("mine").unwrap().unwrap().params, saved.params);
        assert!(store.find("other").is_none());
        assert!(store.holds(&store.path("mine")));
        assert!(!store.holds(&dir.path().join("mine.yaml")));
    }

    #[test]
    fn save_refuses_to_overwrite_unless_asked_and_checks_the_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = PresetStore::new(dir.path());
        let hot = SamplingParams::from_yaml("temperature: 1.5").unwrap();
        store.save("mine", &hot, false).unwrap();
        let cold = SamplingParams::from_yaml("temperature: 0.2").unwrap();
        let err = store.save("mine", &cold, false).unwrap_err();
        assert!(matches!(err, SaveError::Exists { ref name, .. } if name == "mine"));
        assert_eq!(store.find("mine").unwrap().unwrap().params, hot);
        store.save("mine", &cold, true).unwrap();
        assert_eq!(store.find("mine").unwrap().unwrap().params, cold);
        let err = store.save("creative", &cold, true).unwrap_err();
        assert!(matches!(err, SaveError::Name(NameError::BuiltIn(_))));
    }

    #[test]
    fn resolve_reports_unknown_names_and_bad_files() {
        let message = resolve("no-such-preset", None).unwrap_err().to_string();
        assert!(
            message.contains("no-such-preset") && message.contains("balanced"),
            "{message}"
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mine.yaml");
        std::fs::write(&path, "top_p: 2\n").unwrap();
        let message = resolve(path.to_str().unwrap(), None)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("mine.yaml") && message.contains("`top_p`"),
            "{message}"
        );

        std::fs::write(&path, "top_p: 0.5\n").unwrap();
        let preset = resolve(path.to_str().unwrap(), None).unwrap();
        assert_eq!(preset.name, "mine");
        assert_eq!(preset.params.top_p, 0.5);
    }

    #[test]
    fn resolve_finds_user_presets_by_name_after_built_ins() {
        let dir = tempfile::tempdir().unwrap();
        let store = PresetStore::new(dir.path());
        let message = resolve("mine", Some(&store)).unwrap_err().to_string();
        assert!(
            message.contains("user presets in") && message.contains("none yet"),
            "{message}"
        );

        std::fs::write(dir.path().join("mine.yaml"), "min_p: 0.1\n").unwrap();
        std::fs::write(dir.path().join("greedy.yaml"), "temperature: 2\n").unwrap();
        let mine = resolve("mine", Some(&store)).unwrap();
        assert_eq!(mine.params.min_p, 0.1);
        assert_eq!(
            mine.source,
            PresetSource::File(dir.path().join("mine.yaml"))
        );
        assert!(resolve("greedy", Some(&store)).unwrap().params.is_greedy());
        assert!(
            resolve("mine", None).is_err(),
            "without a store there are no user presets"
        );
        let message = resolve("nope", Some(&store)).unwrap_err().to_string();
        assert!(message.contains("are greedy, mine"), "{message}");
        // A path to no file says that, not that no preset has that name.
        for missing in ["/missing/p.yaml", "mine.yaml", "sub/mine"] {
            let message = resolve(missing, Some(&store)).unwrap_err().to_string();
            assert!(
                message.contains("cannot read preset") && message.contains(missing),
                "{message}"
            );
        }
    }

    #[test]
    fn a_deep_or_tagged_user_preset_is_refused_and_still_named_in_hints() {
        let dir = tempfile::tempdir().unwrap();
        let store = PresetStore::new(dir.path());
        let deep = format!("stop: {}{}", "[".repeat(100_000), "]".repeat(100_000));
        std::fs::write(dir.path().join("deep.yaml"), deep).unwrap();
        std::fs::write(dir.path().join("tagged.yaml"), "temperature: !custom 5").unwrap();
        let start = std::time::Instant::now();
        let message = resolve("typo", Some(&store)).unwrap_err().to_string();
        assert!(message.contains("are deep, tagged"), "{message}");
        let deep = resolve("deep", Some(&store)).unwrap_err().to_string();
        assert!(
            deep.contains("deep.yaml") && deep.contains("nested deeper"),
            "{deep}"
        );
        let tagged = resolve("tagged", Some(&store)).unwrap_err().to_string();
        assert!(tagged.contains("`!custom` tags a value"), "{tagged}");
        let guard = std::time::Duration::from_secs(10);
        assert!(start.elapsed() < guard, "{:?}", start.elapsed());
    }
}
