//! Commands: the recorded vocabulary ([`types`]), validation, the packet encoder and the pure
//! decoder (D2). The encoder is the only writer of the packet format and the decoder its only
//! reader; the engine sees decoded [`Command`]s and never touches bit layouts.
//!
//! Validation owns every rule about a single command (C1-C11); a command that passed validation
//! and was encoded by [`encode()`] always decodes. A malformed packet (a corrupted stream) is a
//! [`DecodeError`], never a panic.

pub mod decode;
pub mod encode;
pub mod opcode;
pub mod types;
pub mod validate;

pub use decode::{decode, decode_all, DecodeError, DecodeErrorKind};
pub use encode::{encode, encode_into};
pub use types::*;
pub use validate::validate;
