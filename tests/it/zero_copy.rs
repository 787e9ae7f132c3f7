//! Zero-copy proofs.
