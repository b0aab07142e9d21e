// mimalloc: the simulation makes and frees a few small allocations per pod (100,000 pods at
// scale) and the live router and load generator some per request; glibc's malloc spent a
// fifth of a large run in its own bookkeeping.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    canarysim::cli::main()
}
