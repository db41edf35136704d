//! Copying through the terminal (OSC 52), which also works over ssh and inside tmux
//! (with `set-clipboard on`), where no local clipboard tool could reach the user's machine.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::io::{self, Write};

/// `ESC ] 52 ; c ; <base64> BEL`: asks the terminal to put `text` on the clipboard.
pub fn osc52(text: &str) -> String {
    format!("\x1b]52;c;{}\x07", STANDARD.encode(text))
}

pub fn copy(out: &mut dyn Write, text: &str) -> io::Result<()> {
    out.write_all(osc52(text).as_bytes())?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_base64_in_the_osc_52_sequence() {
        assert_eq!(osc52(""), "\x1b]52;c;\x07");
        assert_eq!(osc52("hi"), "\x1b]52;c;aGk=\x07");
        assert_eq!(osc52("top_p=0.9\n✓"), "\x1b]52;c;dG9wX3A9MC45CuKckw==\x07");
        let mut out = Vec::new();
        copy(&mut out, "hi").unwrap();
        assert_eq!(out, b"\x1b]52;c;aGk=\x07");
    }
}
