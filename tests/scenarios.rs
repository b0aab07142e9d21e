//! Every scenario file in scenarios/ is a test of its own, named after the file
//! (`cargo test --test scenarios seed_004`), through `canarysim::testing` — the same harness
//! users put in their own `cargo test`.

fn main() -> std::process::ExitCode {
    canarysim::testing::run_suites(&["scenarios"])
}
