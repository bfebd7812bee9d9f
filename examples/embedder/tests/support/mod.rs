//! What the tests share: the registry suite's source for the JSON registry.

pub(crate) mod json_source;
