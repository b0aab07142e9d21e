//! The command line as users call it: exit codes, messages, conventions, and every example in
//! README and docs/ (trycmd).
//!
//! One test binary per area (issue 27: one link each, not one per file).

#[path = "../support/mod.rs"]
mod support;

mod check;
mod cli;
mod cli_conventions;
mod doc_examples;
