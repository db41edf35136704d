//! `samplab render FILE --html OUT.html`: a results file as a page to share.

use clap::Args;
use samplab::render;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub struct RenderArgs {
    /// A results file: the JSON `samplab sample --json` prints (one run, or an array of them
    /// with several --model) or the playground's `w` writes; `-` reads standard input.
    #[arg(value_name = "FILE")]
    input: PathBuf,
    /// Write one self-contained HTML page here (replaced if it exists); `-` writes it to
    /// standard output.
    #[arg(long, value_name = "OUT.html")]
    html: PathBuf,
    /// A theme name (dark, light, high-contrast, viridis, no-color, or one of yours) or a theme
    /// file, for the heatmap and the page's colours.
    #[arg(long, value_name = "NAME|FILE")]
    theme: Option<String>,
}

pub fn run(args: RenderArgs) -> anyhow::Result<ExitCode> {
    let theme = render::theme(args.theme.as_deref())?;
    let runs = render::read_results(&args.input)?;
    let page = render::html::page(&runs, &theme)?;
    if args.html == Path::new("-") {
        std::io::stdout()
            .lock()
            .write_all(page.as_bytes())
            .map_err(|e| anyhow::anyhow!("cannot write the page to standard output: {e}"))?;
    } else {
        samplab::atomic_file::write(&args.html, true, |file| file.write_all(page.as_bytes()))
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", args.html.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
