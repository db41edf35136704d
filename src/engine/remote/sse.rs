//! Server-sent events as the OpenAI-compatible servers stream them: `data: {json}` lines, events
//! parted by a blank line, `data: [DONE]` at the end; comments (`: ping`) and other fields are
//! skipped.

use std::io::BufRead;

/// One event's data, or the end of the stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Sse {
    Data(String),
    Done,
}

/// Reads events from `reader` one at a time.
pub struct Events<R> {
    reader: R,
    line: String,
}

impl<R: BufRead> Events<R> {
    pub fn new(reader: R) -> Self {
        Self {
            reader,
            line: String::new(),
        }
    }

    /// The next event; `None` when the stream ended without `[DONE]` (the caller decides
    /// whether that was a cut).
    pub fn next_event(&mut self) -> std::io::Result<Option<Sse>> {
        let mut data: Option<String> = None;
        loop {
            self.line.clear();
            if self.reader.read_line(&mut self.line)? == 0 {
                return Ok(data.map(Sse::Data));
            }
            let line = self.line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                match data.take() {
                    Some(data) if data.trim() == "[DONE]" => return Ok(Some(Sse::Done)),
                    Some(data) => return Ok(Some(Sse::Data(data))),
                    None => continue,
                }
            }
            let Some(value) = line.strip_prefix("data:") else {
                // `event:`, `id:`, `retry:` and `: comments` carry nothing we read.
                continue;
            };
            let value = value.strip_prefix(' ').unwrap_or(value);
            match &mut data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => data = Some(value.to_owned()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Vec<Sse> {
        let mut events = Events::new(text.as_bytes());
        let mut out = Vec::new();
        while let Some(event) = events.next_event().unwrap() {
            out.push(event);
        }
        out
    }

    #[test]
    fn events_are_data_lines_parted_by_blank_lines() {
        let stream = ": ping\r\n\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata:{\"b\":\ndata: 2}\n\ndata: [DONE]\n\n";
        assert_eq!(
            all(stream),
            [
                Sse::Data("{\"a\":1}".into()),
                Sse::Data("{\"b\":\n2}".into()),
                Sse::Done
            ]
        );
        assert_eq!(
            all("data: {}"),
            [Sse::Data("{}".into())],
            "cut before the blank line"
        );
        assert!(all("").is_empty());
    }
}
