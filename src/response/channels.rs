//! gpt-oss's harmony format writes each part of a reply in a channel:
//! `<|channel|>analysis<|message|>…<|end|><|start|>assistant<|channel|>final<|message|>…`.
//! The reasoning (`analysis`) is not the answer (`final`), so each generated token is told
//! which one it belongs to, from the tokens' raw pieces (special tokens included, which the
//! sample's text leaves out) and, inside a header, their text (a header may come byte by byte).

use serde::{Deserialize, Serialize};

/// The channel a token's text is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    /// Reasoning, not meant for the user.
    Analysis,
    /// Tool calls and their preambles.
    Commentary,
    /// The answer.
    Final,
}

impl Channel {
    /// The channel a header names: its first word (`commentary to=functions.f` is commentary).
    fn named(header: &str) -> Option<Self> {
        match header.split_whitespace().next()? {
            "analysis" => Some(Self::Analysis),
            "commentary" => Some(Self::Commentary),
            "final" => Some(Self::Final),
            _ => None,
        }
    }
}

/// Follows a reply token by token: the header between `<|channel|>` and `<|message|>` names
/// the channel of the message after it, which ends at `<|end|>`, `<|return|>`, `<|call|>` or
/// the next `<|start|>`.
#[derive(Debug, Clone, Default)]
pub struct ChannelTracker {
    /// The channel name read so far, inside a header.
    header: Option<String>,
    current: Option<Channel>,
}

impl ChannelTracker {
    /// The channel of the token whose raw piece is `piece` and whose decoded text is `text`
    /// (`a` for the byte-fallback piece `<0x61>`); `None` for the format's own tokens and
    /// headers, and for text outside any message.
    pub fn push(&mut self, piece: &str, text: &str) -> Option<Channel> {
        match piece {
            "<|channel|>" => {
                self.header = Some(String::new());
                self.current = None;
            }
            "<|message|>" => {
                if let Some(header) = self.header.take() {
                    self.current = Channel::named(&header);
                }
            }
            "<|end|>" | "<|return|>" | "<|call|>" | "<|start|>" => {
                self.header = None;
                self.current = None;
            }
            _ => match &mut self.header {
                Some(header) => header.push_str(text),
                None => return self.current,
            },
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces that are their own text.
    fn channels(pieces: &[&str]) -> Vec<Option<Channel>> {
        let mut tracker = ChannelTracker::default();
        pieces.iter().map(|p| tracker.push(p, p)).collect()
    }

    #[test]
    fn reasoning_and_answer_are_told_apart_and_the_markup_is_neither() {
        use Channel::{Analysis, Final};
        let got = channels(&[
            "<|channel|>",
            "analysis",
            "<|message|>",
            "Think",
            " hard",
            "<|end|>",
            "<|start|>",
            "assistant",
            "<|channel|>",
            "final",
            "<|message|>",
            "Yes",
            ".",
            "<|return|>",
        ]);
        let want = [
            None,
            None,
            None,
            Some(Analysis),
            Some(Analysis),
            None,
            None,
            None,
            None,
            None,
            None,
            Some(Final),
            Some(Final),
            None,
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn a_tool_call_header_is_commentary_and_unknown_channels_and_plain_text_are_none() {
        let got = channels(&[
            "<|channel|>",
            "comment",
            "ary to",
            "=functions.f",
            "<|message|>",
            "{}",
            "<|call|>",
            "<|channel|>",
            "poetry",
            "<|message|>",
            "roses",
        ]);
        assert_eq!(got[5], Some(Channel::Commentary));
        assert_eq!(got[10], None);
        assert_eq!(channels(&["Once", " upon"]), [None, None]);
    }

    #[test]
    fn a_header_spelled_in_byte_pieces_is_read_from_their_text() {
        let mut tracker = ChannelTracker::default();
        let mut push = |piece: &str, text: &str| tracker.push(piece, text);
        push("<|channel|>", "");
        for byte in "final".bytes() {
            assert_eq!(
                push(&format!("<0x{byte:02X}>"), &(byte as char).to_string()),
                None
            );
        }
        push("<|message|>", "");
        assert_eq!(push("<0x48>", "H"), Some(Channel::Final));
        assert_eq!(push("\u{2581}i", " i"), Some(Channel::Final));
    }
}
