//! The set of tokens seen so far, which vLLM's and transformers' repetition penalty applies to.

/// The token ids of prompt + generated text, each once. A flag per id makes insertion O(1) and
/// the list makes the penalty O(|set|) instead of a pass over the vocabulary.
#[derive(Debug, Clone, Default)]
pub struct SeenTokens {
    flags: Vec<bool>,
    ids: Vec<u32>,
}

impl SeenTokens {
    pub fn new(vocab_size: usize) -> Self {
        Self {
            flags: vec![false; vocab_size],
            ids: Vec::new(),
        }
    }

    /// Adds `id` unless already present; an id beyond the vocabulary grows the flags rather than
    /// panicking (the penalty then ignores it, as no logit exists for it).
    pub fn insert(&mut self, id: u32) {
        let index = id as usize;
        if index >= self.flags.len() {
            self.flags.resize(index + 1, false);
        }
        if !self.flags[index] {
            self.flags[index] = true;
            self.ids.push(id);
        }
    }

    /// The distinct ids in the order they were first seen.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_id_is_listed_once() {
        let mut seen = SeenTokens::new(4);
        for id in [0, 0, 1, 0, 1] {
            seen.insert(id);
        }
        assert_eq!(seen.ids(), [0, 1]);
    }

    #[test]
    fn ids_beyond_the_vocabulary_are_ignored() {
        let mut seen = SeenTokens::new(2);
        seen.insert(9);
        assert_eq!(seen.ids(), [9]);
    }
}
