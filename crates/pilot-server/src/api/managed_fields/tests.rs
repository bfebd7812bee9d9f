//! Field ownership, on documents.
