//! Drivers: who steps the engines, and when.
//!
//! The threaded driver (the default) runs one OS thread per queue engine plus a pool of shader
//! workers shared by all engines, in real time. A blocked engine sleeps on the condition it waits
//! for (D8). The engine state machine itself is in [`crate::engine`]; drivers only decide who
//! steps when.

pub(crate) mod deterministic;
pub(crate) mod threaded;

pub use deterministic::{Strategy, COPY_NS_PER_KIB};

pub(crate) use crate::sync::EngineWaker;
