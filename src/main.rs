fn main() -> std::process::ExitCode {
    canarysim::cli::main()
}
