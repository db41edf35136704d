//! `samplab render`: a results file turned into something to share. `results` reads the file;
//! `html` makes the page.

pub mod html;
pub mod results;

use crate::config;
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

/// The runs in the results file at `path`, or standard input for `-`.
pub fn read_results(path: &Path) -> anyhow::Result<Vec<results::Run>> {
    let text = if path == Path::new("-") {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| anyhow::anyhow!("cannot read the results from standard input: {e}"))?
    } else {
        crate::regular_file::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?
    };
    results::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}
