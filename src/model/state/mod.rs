//! What a sequence keeps between forward steps.

pub(crate) mod kv_cache;
