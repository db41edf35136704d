//! The themes to choose from: the built-ins in `themes/*.yaml` (compiled into the binary), the
//! colourless one NO_COLOR asks for, and the user's `<config dir>/themes/*.yaml`, where a file
//! named like a built-in replaces it.

use super::Theme;
use super::file::{self, ThemeError};
use crate::config;
use std::path::Path;

/// The theme a playground starts with unless told otherwise.
pub const DEFAULT: &str = "dark";
/// The theme without colours, the start when NO_COLOR is set.
pub const NO_COLOR: &str = "no-color";

const BUILTIN_FILES: [(&str, &str); 4] = [
    ("dark", include_str!("../../../themes/dark.yaml")),
    ("light", include_str!("../../../themes/light.yaml")),
    (
        "high-contrast",
        include_str!("../../../themes/high-contrast.yaml"),
    ),
    ("viridis", include_str!("../../../themes/viridis.yaml")),
];

/// A built-in theme by name. The files are complete, so they are read over nothing.
pub fn builtin(name: &str) -> Option<Theme> {
    let (_, text) = BUILTIN_FILES.iter().find(|(n, _)| *n == name)?;
    Some(
        file::parse(text, &format!("built-in {name}"), &Theme::plain())
            .unwrap_or_else(|e| panic!("{e}")),
    )
}

impl Theme {
    /// The default theme, `themes/dark.yaml`.
    pub fn dark() -> Self {
        builtin(DEFAULT).expect("the built-in themes are checked by their tests")
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct NamedTheme {
    pub name: String,
    pub theme: Theme,
}

/// One theme file, read over the default theme; its name is the file stem.
pub fn load_file(path: &Path) -> Result<NamedTheme, ThemeError> {
    let origin = path.display().to_string();
    let text = crate::regular_file::read_to_string(path).map_err(|e| ThemeError {
        origin: origin.clone(),
        key: String::new(),
        message: format!("cannot read: {e}"),
    })?;
    Ok(NamedTheme {
        name: path
            .file_stem()
            .map_or_else(|| origin.clone(), |s| s.to_string_lossy().into_owned()),
        theme: file::parse(&text, &origin, &Theme::dark())?,
    })
}

/// Every `*.yaml` in `dir`, sorted by name, and the errors of those that could not be read.
pub fn user_themes(dir: &Path) -> (Vec<NamedTheme>, Vec<ThemeError>) {
    let files = match config::user_files(dir, &["yaml"]) {
        Ok(files) => files,
        Err(e) => {
            let error = ThemeError {
                origin: dir.display().to_string(),
                key: String::new(),
                message: format!("cannot list the theme directory: {e}"),
            };
            return (Vec::new(), vec![error]);
        }
    };
    let mut themes = Vec::new();
    let mut errors = Vec::new();
    for (_, path) in files {
        match load_file(&path) {
            Ok(theme) => themes.push(theme),
            Err(e) => errors.push(e),
        }
    }
    (themes, errors)
}

/// The themes `t` cycles through, in order, and the one in use.
#[derive(Debug, Clone, PartialEq)]
pub struct ThemeCatalog {
    pub themes: Vec<NamedTheme>,
    /// User theme files that could not be read: `t` stops on each to say why (keeping the
    /// colours), as the preset picker lists a broken preset, rather than skip it in silence.
    pub broken: Vec<ThemeError>,
    pub current: usize,
    /// Where `t` is in the cycle: a theme's index, or past them one of `broken`.
    position: usize,
}

/// Where `t` stopped: the name of the theme now in use, or a file that cannot be used.
pub enum Cycled {
    Theme(String),
    Broken(ThemeError),
}

impl Default for ThemeCatalog {
    /// The built-ins and no-color, starting on the default.
    fn default() -> Self {
        let mut themes: Vec<NamedTheme> = BUILTIN_FILES
            .iter()
            .filter_map(|(name, _)| {
                builtin(name).map(|theme| NamedTheme {
                    name: (*name).to_owned(),
                    theme,
                })
            })
            .collect();
        themes.push(NamedTheme {
            name: NO_COLOR.to_owned(),
            theme: Theme::plain(),
        });
        Self {
            themes,
            broken: Vec::new(),
            current: 0,
            position: 0,
        }
    }
}

impl ThemeCatalog {
    pub fn current(&self) -> &NamedTheme {
        &self.themes[self.current.min(self.themes.len() - 1)]
    }

    /// Moves to the next theme, or the next broken file, after the last back to the first.
    pub fn cycle(&mut self) -> Cycled {
        let stops = self.themes.len() + self.broken.len();
        self.position = (self.position + 1) % stops;
        match self.position.checked_sub(self.themes.len()) {
            Some(i) => Cycled::Broken(self.broken[i].clone()),
            None => {
                self.current = self.position;
                Cycled::Theme(self.current().name.clone())
            }
        }
    }

    /// Puts theme `index` in use, and the cycle there.
    fn start_on(&mut self, index: usize) {
        self.current = index;
        self.position = index;
    }

    fn names(&self) -> Vec<&str> {
        self.themes.iter().map(|t| t.name.as_str()).collect()
    }

    /// Adds `theme`, or replaces the one of the same name in its place; returns its index.
    fn insert(&mut self, theme: NamedTheme) -> usize {
        match self.themes.iter().position(|t| t.name == theme.name) {
            Some(i) => {
                self.themes[i] = theme;
                i
            }
            None => {
                self.themes.push(theme);
                self.themes.len() - 1
            }
        }
    }

    /// What the playground starts with: the built-ins plus the user's themes in `user_dir`,
    /// on `choice` (`--theme NAME|FILE`; an existing path wins) or else on no-color when
    /// `no_color`, else on the default. An explicit choice beats NO_COLOR, as no-color.org asks.
    /// A broken user theme is returned among the errors to show, unless it is the choice:
    /// then it is the error.
    pub fn load(
        choice: Option<&str>,
        user_dir: Option<&Path>,
        no_color: bool,
    ) -> Result<(Self, Vec<ThemeError>), ThemeError> {
        let mut catalog = Self::default();
        let (user, mut errors) = user_dir.map(user_themes).unwrap_or_default();
        for theme in user {
            catalog.insert(theme);
        }
        let wanted = match choice {
            Some(choice) if Path::new(choice).is_file() => {
                let index = catalog.insert(load_file(Path::new(choice))?);
                catalog.start_on(index);
                catalog.broken = errors.clone();
                return Ok((catalog, errors));
            }
            Some(choice) => choice,
            None if no_color => NO_COLOR,
            None => DEFAULT,
        };
        if let Some(i) = catalog.themes.iter().position(|t| t.name == wanted) {
            catalog.start_on(i);
            catalog.broken = errors.clone();
            return Ok((catalog, errors));
        }
        let broken = errors.iter().position(|e| {
            Path::new(&e.origin)
                .file_stem()
                .is_some_and(|stem| stem == wanted)
        });
        if let Some(i) = broken {
            return Err(errors.swap_remove(i));
        }
        let mut message = format!(
            "no theme of that name: choose one of {}",
            catalog.names().join(", ")
        );
        if let Some(dir) = user_dir {
            message.push_str(&format!(" (user themes live in {})", dir.display()));
        }
        message.push_str(", or give a path to a .yaml file");
        Err(ThemeError {
            origin: wanted.to_owned(),
            key: String::new(),
            message,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::style::Color;

    #[test]
    fn every_built_in_parses_and_names_every_key() {
        for (name, text) in BUILTIN_FILES {
            assert!(builtin(name).is_some(), "{name}");
            let map: serde_yaml_ng::Mapping = serde_yaml_ng::from_str(text).unwrap();
            for key in file::KEYS {
                assert!(map.contains_key(key), "{name} lacks {key}");
            }
        }
        assert_eq!(builtin("nope"), None);
    }

    #[test]
    fn the_dark_file_keeps_the_colours_the_playground_started_with() {
        let dark = Theme::dark();
        assert_eq!(dark.border_focused.fg, Some(Color::Cyan));
        assert_eq!(dark.selected.bg, Some(Color::Rgb(45, 50, 70)));
        assert_eq!(dark.status.bg, Some(Color::Rgb(30, 30, 40)));
        assert_eq!(dark.token_style(0.0).bg, Some(Color::Rgb(150, 30, 45)));
        assert_eq!(dark.token_style(1.0).bg, Some(Color::Rgb(35, 60, 85)));
        assert!(!dark.token_contrast);
    }

    #[test]
    fn choice_no_color_and_default_pick_the_start() {
        let names = |c: &ThemeCatalog| c.names().join(" ");
        let (c, errors) = ThemeCatalog::load(None, None, false).unwrap();
        assert_eq!(names(&c), "dark light high-contrast viridis no-color");
        assert_eq!(c.current().name, "dark");
        assert!(errors.is_empty());
        let (c, _) = ThemeCatalog::load(None, None, true).unwrap();
        assert_eq!(c.current().theme, Theme::plain());
        let (c, _) = ThemeCatalog::load(Some("viridis"), None, true).unwrap();
        assert_eq!(
            c.current().name,
            "viridis",
            "an explicit choice beats NO_COLOR"
        );
        let e = ThemeCatalog::load(Some("neon"), None, false).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("theme neon: no theme of that name")
                && e.to_string().contains("viridis"),
            "{e}"
        );
    }

    #[test]
    fn user_themes_join_the_cycle_replace_built_ins_and_report_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("mine.yaml"), "border: red").unwrap();
        std::fs::write(dir.path().join("light.yaml"), "border: green").unwrap();
        std::fs::write(dir.path().join("broken.yaml"), "border: blu").unwrap();
        std::fs::write(dir.path().join(".mine.yaml"), "border: [").unwrap();
        let (mut c, errors) = ThemeCatalog::load(Some("mine"), Some(dir.path()), false).unwrap();
        assert_eq!(
            c.names().join(" "),
            "dark light high-contrast viridis no-color mine"
        );
        assert_eq!(c.current().theme.border.fg, Some(Color::Red));
        assert_eq!(
            c.current().theme.border_focused,
            Theme::dark().border_focused,
            "unnamed keys come from the default"
        );
        assert_eq!(c.themes[1].theme.border.fg, Some(Color::Green));
        assert_eq!(
            errors.len(),
            1,
            "an editor's hidden file is no theme: {errors:?}"
        );
        assert!(errors[0].to_string().contains("broken.yaml: `border`"));
        match c.cycle() {
            Cycled::Broken(e) => assert_eq!(e, errors[0]),
            Cycled::Theme(name) => panic!("the broken file is a stop of the cycle, not {name}"),
        }
        assert_eq!(c.current().name, "mine", "its colours stay");
        assert!(
            matches!(c.cycle(), Cycled::Theme(name) if name == "dark"),
            "the cycle wraps around"
        );

        let e = ThemeCatalog::load(Some("broken"), Some(dir.path()), false).unwrap_err();
        assert_eq!(e.key, "border");
        let path = dir.path().join("mine.yaml");
        let (c, _) = ThemeCatalog::load(Some(path.to_str().unwrap()), None, false).unwrap();
        assert_eq!(c.current().name, "mine");
        let missing = ThemeCatalog::load(None, Some(&dir.path().join("none")), false);
        assert!(missing.unwrap().1.is_empty());
    }
}
