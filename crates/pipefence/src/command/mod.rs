//! Commands: the recorded vocabulary ([`types`]), validation, the packet encoder and the pure
//! decoder (D2). The encoder is the only writer of the packet format and the decoder its only
//! reader; the engine sees decoded [`Command`]s and never touches bit layouts.
//!
//! Validation owns every rule about a single command (C1-C11); a command that passed validation
//! and was encoded by [`encode`] always decodes. A malformed packet (a corrupted stream) is a
//! [`DecodeError`], never a panic.

pub mod types;

pub use types::*;
