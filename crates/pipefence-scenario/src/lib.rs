//! # pipefence-scenario
//!
//! The scenario language (KDL v2, see `docs/scenario-language.md`): [`parse()`] turns a file
//! into a validated [`plan::Scenario`] or a list of [`plan::Diagnostic`]s (every mistake in the
//! file, each with its line and column); [`run::run`] executes a scenario on a
//! `pipefence::Device` and returns an [`run::Outcome`] that serializes to the `--json` shape of
//! `docs/run.schema.json`.
//!
//! The crate is a thin layer over the library's public API: everything a scenario does, a Rust
//! program can do with `pipefence` directly. It prints nothing (the binary does).
//!
//! [`check`] samples seeds, on one thread or many, whole or in shards; [`exhaustive`] explores
//! every schedule; [`merge`] combines the shards' JSON reports into the report of the whole
//! check.

pub mod check;
pub mod diagnostic;
pub mod exhaustive;
pub mod merge;
pub mod parse;
pub mod plan;
pub mod run;

pub use parse::{parse, render_diagnostics, render_diagnostics_styled};
