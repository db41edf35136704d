//! `samplab render`: a results file turned into something to share; `html` makes the page.

pub mod html;

use crate::config;
use crate::response::SampleResponse;
use crate::response::results_file::{self, ResultsError};
use crate::tui::{Theme, ThemeCatalog};
use std::path::Path;

/// The theme a page is coloured in: a theme's name (a built-in or one of the user's) or a
/// theme file, else the default. NO_COLOR speaks to terminals and leaves a page alone;
/// `no-color` asks for a page without colours.
pub fn theme(choice: Option<&str>) -> anyhow::Result<Theme> {
    let themes_dir = config::config_dir().map(|dir| config::themes_dir(&dir));
    // Broken theme files other than the chosen one are the playground's to report.
    let (catalog, _) = ThemeCatalog::load(choice, themes_dir.as_deref(), false)?;
    Ok(catalog.current().theme.clone())
}

/// The runs in the results file at `path`, or on standard input for `-`.
pub fn read_results(path: &Path) -> Result<Vec<SampleResponse>, ResultsError> {
    if path != Path::new("-") {
        return results_file::read(path);
    }
    let file = "standard input";
    let text = std::io::read_to_string(std::io::stdin()).map_err(|reason| ResultsError::Read {
        file: file.to_owned(),
        reason,
    })?;
    results_file::parse(&text, file)
}
