//! The pane that takes keys: what the playground's state, its actions and its session files
//! all name.

/// Which pane takes keys; a session file names it in lower case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Focus {
    Prompt,
    Params,
    Columns,
}

impl Focus {
    const ORDER: [Focus; 3] = [Focus::Prompt, Focus::Params, Focus::Columns];

    pub fn cycled(self, forward: bool) -> Focus {
        let i = Self::ORDER.iter().position(|&f| f == self).unwrap_or(0);
        let n = Self::ORDER.len();
        Self::ORDER[if forward {
            (i + 1) % n
        } else {
            (i + n - 1) % n
        }]
    }
}
