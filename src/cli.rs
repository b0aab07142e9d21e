//! The command line (clap). Thin: it parses, calls the library, prints, and maps results to
//! exit codes (`run`: 0 passed, 1 an expectation failed, 2 invalid input; `lint`: 0 no
//! errors, 1 errors, 2 a file cannot be read; `load`: 0 the verdict passes or none was
//! asked, 1 it fails, 2 bad arguments or the target cannot be reached).

use crate::apiserver::admission::IstioWeightRules;
use clap::{Parser, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::lint::{self, Diagnostic, Severity};
use crate::model::{Manifest, yaml};
use crate::report;
use crate::scenario::{self, Disk, Files, RunReport};

pub use crate::demo::{DEFAULT_SCENARIO, EMBEDDED};

/// `canarysim --version`: the package version and the commit it was built from
/// (`build.rs`; `unknown` when built outside a git checkout).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("CANARYSIM_COMMIT"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "canarysim",
    version = VERSION,
    about = "Simulate and verify Argo Rollouts + Istio canary traffic splits"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// When to colour the output: `auto` (a terminal, unless NO_COLOR is set), `always`,
    /// `never`.
    #[arg(long, global = true, value_enum, default_value_t = ColorWhen::Auto)]
    pub color: ColorWhen,
}

/// `--color`, as cargo spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorWhen {
    Auto,
    Always,
    Never,
}

impl ColorWhen {
    fn choice(self) -> anstream::ColorChoice {
        match self {
            ColorWhen::Auto => anstream::ColorChoice::Auto,
            ColorWhen::Always => anstream::ColorChoice::Always,
            ColorWhen::Never => anstream::ColorChoice::Never,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scenario's rollout with its trafficRouting and again without it (same seed,
    /// same load), and compare, per load step, the set weight with what each delivered.
    Compare {
        /// Scenario file (default: the bundled seed walkthrough).
        path: Option<PathBuf>,
        /// Override the scenario's seed (the same seed gives the same report).
        #[arg(long)]
        seed: Option<u64>,
        /// Instead: send each load through ingress-nginx again through the HTTPRoutes
        /// ingress2gateway would write from the Ingresses of that moment, and say where the
        /// splits differ.
        #[arg(long)]
        ingress2gateway: bool,
        /// Output format: `text` for people, `json` for scripts.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Run a scenario file, or every scenario in a directory (default: the bundled seed
    /// walkthrough).
    Run {
        /// Scenario file or directory.
        path: Option<PathBuf>,
        /// Override the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Live mode: real pod servers and a real router on loopback, the world on the wall
        /// clock, and load steps sent as real requests.
        #[arg(long)]
        live: bool,
        /// Live mode: virtual seconds per wall second (60: a minute's pause lasts a second).
        #[arg(long, default_value_t = 1.0, requires = "live")]
        time_scale: f64,
        /// The most simulated requests a load step may be estimated to send; a step above
        /// it is refused before it starts (default 100000000: seconds of simulation).
        #[arg(long, value_name = "N")]
        request_budget: Option<u64>,
        /// The most instants one step may stop the simulated clock at (something happening:
        /// a pod turning ready, a measurement, a deadline); a busier step fails rather than
        /// running for hours (default 10000: seconds of simulation).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        instant_budget: Option<u64>,
    },
    /// Check manifests without running them: Argo's spec validation, references between
    /// Rollouts, Services, VirtualServices, DestinationRules and Gateways, route validation,
    /// mesh binding and whole-percent weights. Prints `file:line:column: severity: message`;
    /// exits 1 on any error.
    Lint {
        /// Manifest files (checked together: objects may refer to each other across files)
        /// or scenario files (each checked with all the manifests it applies); `-` reads
        /// standard input (`helm template . | canarysim lint -`); a folder is read at every
        /// depth (*.yaml, *.yml, *.json; files that hold no `kind` are passed over, said so
        /// on stderr).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Check a repository's Rollouts without writing a scenario: each canary Rollout of the
    /// manifests is deployed, rolled out to a new image through all its steps (pauses
    /// promoted), and at each pause a load is sent through the router it configures and
    /// without a mesh (a blue-green one: through its active and preview Services, before
    /// and after the switch); prints per Rollout the share each step sent with its verdict,
    /// and the lint findings about its objects. Exits 0 when every step's share is right, 1 when one
    /// is not (or lint finds an error), 2 on unreadable input. `init` writes the scenario
    /// played, to edit and keep.
    Check {
        /// Manifest files or folders (read as `lint` reads them); `-` reads standard input.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Requests sent at each pause.
        #[arg(long, value_name = "N", default_value_t = scenario::init::REQUESTS,
              value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
        requests: u64,
        /// Connections each load opens (the no-mesh share is drawn per connection): 16 by
        /// default, and behind an Ingress with session affinity, where each is a client
        /// pinned by its cookie and one draw, 100,000 with 500,000 requests.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
        connections: Option<u32>,
        /// The seed of every draw (the same seed gives the same report).
        #[arg(long)]
        seed: Option<u64>,
        /// Output format: `text` for people, `json` for scripts
        /// (`schemas/check.schema.json`).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Write the scenario that rolls each Rollout of the manifests out to a new image
    /// through all its steps (blue-green: through the switch), sending traffic at every
    /// pause and judging the share that reaches the new version; edit it and run it with
    /// `run`.
    Init {
        /// Manifest files or folders (read as `lint` reads them); `-` reads standard input,
        /// which the scenario then holds inline.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Where to write the scenario (default: standard output); manifest paths are
        /// written relative to its folder.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Watch scenarios run in the terminal: the steps, the four weights (set,
    /// VirtualService, router, observed), the share over time, the rollout as `get rollout`
    /// shows it, latency and errors per version, events; promote, abort and retry with keys.
    Tui {
        /// A scenario directory or file (default: `scenarios/` when it exists, else the
        /// bundled seed walkthrough).
        path: Option<PathBuf>,
        /// Run each scenario on real loopback sockets (pods, the router; loads as real
        /// requests), as `run --live` does; the router's address is in the header.
        #[arg(long)]
        live: bool,
    },
    /// Bring a scenario's world up on real loopback sockets and keep it up: a real server
    /// per ready pod and a router (its address printed) serving the route table in force,
    /// while the steps play on the wall clock. Stops cleanly on Ctrl-C.
    Serve {
        /// Scenario file (default: the bundled seed walkthrough).
        path: Option<PathBuf>,
        /// Serve the initial state only; no step runs. With --api the clock stands still
        /// but for writes: each lets the world run until nothing more is scheduled (at most
        /// 1 h of virtual time per write).
        #[arg(long)]
        hold: bool,
        /// Virtual seconds per wall second (60: a `pause: {duration: 1m}` lasts a second).
        #[arg(long, default_value_t = 1.0)]
        time_scale: f64,
        /// Override the scenario's seed (the same seed gives the same report).
        #[arg(long)]
        seed: Option<u64>,
        /// Also serve the world's API server (Kubernetes REST, for kubectl) on 127.0.0.1,
        /// and write a kubeconfig for it.
        #[arg(long)]
        api: bool,
        /// Where to write the kubeconfig (default: a file in the temporary directory,
        /// removed at exit). Implies --api.
        #[arg(long, value_name = "PATH")]
        kubeconfig: Option<PathBuf>,
    },
    /// Print the route table in force after a step as an Envoy v3 static bootstrap (JSON,
    /// which Envoy reads as YAML too): a listener per ingress gateway with its routes and
    /// `weighted_clusters`, and the clusters named `outbound|port|subset|host`.
    EnvoyConfig {
        /// Scenario file (default: the bundled seed walkthrough).
        path: Option<PathBuf>,
        /// After this step (1-based, as the report numbers them; 0: the initial state).
        /// Default: after the last.
        #[arg(long)]
        at_step: Option<usize>,
        /// The port the gateway listeners bind on 127.0.0.1.
        #[arg(long, default_value_t = 8080)]
        port: u16,
        /// Override the scenario's seed (the same seed gives the same report).
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Send real HTTP load to a URL (a gateway, an nginx, an Envoy) and judge the split
    /// between the versions that answer. Flags as in oha where they mean the same.
    Load(Box<LoadCommand>),
    /// Follow a real rollout (kubectl's kubeconfig, context and namespace) and verify, at
    /// each step that holds its weight, that the share reaching the canary at the gateway
    /// is the weight its router object (VirtualService, HTTPRoute, NGINX canary Ingress)
    /// sets: one row per step, ending when the rollout completes, aborts or degrades. Read-only: nothing is written
    /// but, with --abort-on-fail, the abort `kubectl argo rollouts abort` sends. Exits as
    /// `load`: 0 every step passed and the rollout completed, 1 a step failed, 3 otherwise.
    Watch(Box<WatchArgs>),
    /// Copy a namespace's rollout from a cluster (kubectl's kubeconfig and context) into
    /// OUT_DIR: its Rollouts, Services, VirtualServices, DestinationRules, Gateways, routes
    /// and AnalysisTemplates as manifests (what the server and Argo wrote taken out), and a
    /// scenario that replays the rollout from where it stands, for `run` or `tui` to
    /// predict the remaining steps' split offline. Reads nothing else (no Secrets).
    Snapshot {
        /// The folder to write `manifests.yaml`, `rollout-update.yaml` and `scenario.yaml`.
        out_dir: PathBuf,
        /// The Rollout to replay (default: the first with an update in progress).
        #[arg(long)]
        rollout: Option<String>,
        /// The namespace (default: the context's).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        /// The kubeconfig context (default: the current one).
        #[arg(long)]
        context: Option<String>,
        /// The kubeconfig (default: KUBECONFIG, ~/.kube/config, then in-cluster).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
    },
    /// How many requests (or connections) a verdict needs to decide: for an expected share,
    /// a tolerance and a confidence, the size at which a right split passes and one off by
    /// twice the tolerance fails with the chance asked for, and each outcome's chance there.
    Plan {
        /// The expected share, e.g. `20%`.
        share: String,
        /// Points either side of the expected share.
        #[arg(long, default_value = "1")]
        within: String,
        /// Confidence of the verdict, e.g. `99.9%`.
        #[arg(long, default_value = "99%")]
        confidence: String,
        /// The chance of deciding right to plan for.
        #[arg(long, default_value = "90%")]
        power: String,
        /// Output format: `text` for people, `json` for scripts.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Serve as a real pod on loopback: every answer carries the version (header
    /// `x-version` and JSON body `{"version", "pod"}`). Stops on Ctrl-C.
    Backend(BackendArgs),
    /// Print a shell completion script: `canarysim completions bash > ~/.local/share/bash-completion/completions/canarysim`
    /// (zsh: a file `_canarysim` on $fpath; fish: ~/.config/fish/completions/canarysim.fish).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `canarysim backend`'s flags.
#[derive(Debug, clap::Args)]
pub struct BackendArgs {
    /// The version this pod reports (`--version NAME`, the older spelling, still works).
    #[arg(long = "name", value_name = "NAME", alias = "version")]
    pub version_name: String,
    /// Port (0: one the system picks; the address is printed).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Address to listen on (loopback by default).
    #[arg(long, default_value = "127.0.0.1")]
    pub address: std::net::IpAddr,
    /// Time before each answer, e.g. `5ms`.
    #[arg(long)]
    pub latency: Option<String>,
    /// Share of answers that are errors (0..1).
    #[arg(long, default_value_t = 0.0)]
    pub error_rate: f64,
    /// The status of an error answer.
    #[arg(long, default_value_t = 500)]
    pub error_status: u16,
    /// The pod name in the body (default `backend-VERSION`).
    #[arg(long)]
    pub pod: Option<String>,
    /// Seed of the error draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// `canarysim load URL …`, or `canarysim load merge FILE…`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct LoadCommand {
    #[command(subcommand)]
    pub action: Option<LoadAction>,
    #[command(flatten)]
    pub load: Option<LoadArgs>,
}

/// What `canarysim load` does besides sending a load.
#[derive(Debug, clap::Subcommand)]
pub enum LoadAction {
    /// Add up the result files of loads sent apart (`load URL --shard I/N --out FILE`, on
    /// several machines) and judge them as one load: every count and latency histogram
    /// added, the connections' evidence kept. First a chi-square test asks whether the
    /// shards saw the same split; if they did not (workers reaching different gateway
    /// replicas), it says so and judges each shard on its own. Exits as `load`
    Merge(MergeArgs),
    /// Gather a load's shards from workers elsewhere (the pods of an Indexed Job, each
    /// running `load URL --shard I/N --coordinator http://THIS:8080`): release them together
    /// once all N are ready, receive their result files over HTTP, and judge them as `load
    /// merge` does. Exits as `load` (0 pass, 1 fail, 3 cannot tell or not every worker
    /// delivered in --timeout), so it serves as an Argo AnalysisTemplate `job` metric
    Coordinate(CoordinateArgs),
    /// Print the manifests that run a load in shards in a cluster: a Service and a Job for
    /// the coordinator (`load coordinate`), and an Indexed Job whose pod I sends shard I/N
    /// to it; or, with --analysis-template, the Service and an Argo Rollouts AnalysisTemplate
    /// whose two `job` metrics are the coordinator and the workers. `load`'s URL and flags
    /// come after `--`
    Job(JobArgs),
}

/// `canarysim load job`'s flags.
#[derive(Debug, clap::Args)]
pub struct JobArgs {
    /// Workers, one pod and one shard each.
    #[arg(long, default_value_t = 3)]
    pub parallelism: u32,
    /// A container image with `canarysim` on its PATH.
    #[arg(long)]
    pub image: String,
    /// The name of the Jobs (NAME-coordinator, NAME-workers), the Service (NAME-coordinator)
    /// and the AnalysisTemplate.
    #[arg(long, default_value = "canarysim-load")]
    pub name: String,
    /// The namespace to write into the manifests (default: none, kubectl's).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// How long the coordinator waits for every worker's result.
    #[arg(long, default_value = "1h")]
    pub timeout: String,
    /// An AnalysisTemplate (for a Rollout's analysis step) instead of the Jobs.
    #[arg(long)]
    pub analysis_template: bool,
    /// `load`'s URL and flags (its verdict flags go to the coordinator).
    #[arg(last = true, required = true, value_name = "URL AND FLAGS")]
    pub load: Vec<String>,
}

/// `canarysim load merge`'s flags.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// Result files written by `load --out` (`-` reads one from stdin).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub verdict: MergeVerdictArgs,
}

/// `canarysim load coordinate`'s flags.
#[derive(Debug, clap::Args)]
pub struct CoordinateArgs {
    /// How many workers (shards) to wait for.
    #[arg(long, value_name = "N")]
    pub expect_workers: u32,
    /// Where to listen (in a pod, every address: 0.0.0.0:8080).
    #[arg(long, default_value = "0.0.0.0:8080", value_name = "ADDR:PORT")]
    pub listen: String,
    /// How long to wait for every worker's result, e.g. `30m`.
    #[arg(long, default_value = "1h")]
    pub timeout: String,
    #[command(flatten)]
    pub verdict: MergeVerdictArgs,
}

/// How `load merge` and `load coordinate` judge the shards.
#[derive(Debug, clap::Args)]
pub struct MergeVerdictArgs {
    /// Expected share of a version, `VALUE=SHARE` (e.g. `yellow=20%`; repeatable).
    #[arg(long)]
    pub expect: Vec<String>,
    /// Points either side of each expected share.
    #[arg(long, default_value = "1")]
    pub within: String,
    /// Confidence of the verdict and of the shards' agreement, e.g. `99.9%`.
    #[arg(long, default_value = "99%")]
    pub confidence: String,
    /// Judge per request or per connection instead of the unit measured.
    #[arg(long, value_enum)]
    pub unit: Option<UnitArg>,
    /// Output format: `text` for people, `json` for scripts.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `canarysim load`'s flags.
#[derive(Debug, clap::Args)]
pub struct LoadArgs {
    /// The URL to load (http:// or https://).
    pub url: String,
    /// Number of requests to send (with -z, whichever ends first).
    #[arg(short = 'n', long)]
    pub requests: Option<u64>,
    /// Duration to send for, e.g. `10s` (with -n, whichever ends first).
    #[arg(short = 'z', long)]
    pub duration: Option<String>,
    /// Concurrent connections.
    #[arg(short = 'c', long, default_value_t = 50)]
    pub connections: u32,
    /// Open loop: requests per second over all connections (latency counted from the
    /// intended send time).
    #[arg(short = 'q', long, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// HTTP/2: h2 over TLS by ALPN, h2c (prior knowledge) on plain HTTP.
    #[arg(long)]
    pub http2: bool,
    /// A new connection for every request.
    #[arg(long)]
    pub disable_keepalive: bool,
    /// Request method.
    #[arg(short = 'm', long, default_value = "GET")]
    pub method: String,
    /// A request header `Name: value` (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// The Host header (default: the URL's host).
    #[arg(long)]
    pub host: Option<String>,
    /// Timeout per request, connecting and the whole body included, e.g. `2s`.
    #[arg(short = 't', long, default_value = "20s")]
    pub timeout: String,
    /// Accept any TLS certificate.
    #[arg(long)]
    pub insecure: bool,
    /// Trust the CA certificates of this PEM file (instead of the system's).
    #[arg(long)]
    pub cacert: Option<PathBuf>,
    /// TLS server name (default: the URL's host).
    #[arg(long)]
    pub sni: Option<String>,
    /// `HOST:PORT:ADDR:PORT`: connect to ADDR:PORT for HOST:PORT, keeping the URL's Host
    /// and SNI (curl's meaning; repeatable).
    #[arg(long)]
    pub connect_to: Vec<String>,
    /// How a response names its version: `header:NAME`, `json:FIELD` or `regex:PATTERN`
    /// (default: header x-version, else JSON field version).
    #[arg(long)]
    pub classify: Option<String>,
    // The verdict's flags, as in `MergeVerdictArgs`: not flattened from it, since clap
    // leaves an `Option` of nested flattened args at None (clap-rs/clap#4697), and
    // `LoadCommand::load` is such an Option.
    /// Expected share of a version, `VALUE=SHARE` (e.g. `yellow=20%`; repeatable).
    #[arg(long)]
    pub expect: Vec<String>,
    /// Points either side of each expected share.
    #[arg(long, default_value = "1")]
    pub within: String,
    /// Confidence of the verdict, e.g. `99.9%`.
    #[arg(long, default_value = "99%")]
    pub confidence: String,
    /// Stop as soon as a sequential test on the first --expect decides.
    #[arg(long)]
    pub until_decided: bool,
    /// Judge per request or per connection instead of the unit measured.
    #[arg(long, value_enum)]
    pub unit: Option<UnitArg>,
    /// Output format: `text` for people, `json` for scripts.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// `I/N`: send shard I (0 to N−1, as a Job's `JOB_COMPLETION_INDEX`) of a load sent
    /// from N places: its part of -n and -q. `load merge` adds the shards' --out files up.
    #[arg(long, value_name = "I/N", value_parser = crate::load::result_file::Shard::parse)]
    pub shard: Option<crate::load::result_file::Shard>,
    /// Also write everything the verdict needs to FILE (counts, connections, latency
    /// histograms), for `load merge`.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// With --shard: wait until the coordinator (`load coordinate`) at URL releases every
    /// worker, then send, and deliver the result to it. Exits 0 once delivered.
    #[arg(long, value_name = "URL", requires = "shard")]
    pub coordinator: Option<String>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// `canarysim watch`'s flags.
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// The Rollout's name.
    pub rollout: String,
    /// The gateway URL the load goes to (http:// or https://).
    #[arg(long)]
    pub url: String,
    /// The Host header (default: the URL's host).
    #[arg(long)]
    pub host: Option<String>,
    /// The Rollout's namespace (default: the context's).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// The kubeconfig context (default: the current one).
    #[arg(long)]
    pub context: Option<String>,
    /// The kubeconfig (default: KUBECONFIG, ~/.kube/config, then in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The most requests sent at each step (each load stops as soon as its sequential
    /// test decides).
    #[arg(long, default_value_t = 100_000)]
    pub requests: u64,
    /// Concurrent connections.
    #[arg(short = 'c', long, default_value_t = 16)]
    pub connections: u32,
    /// Points either side of the router's weight.
    #[arg(long, default_value = "1")]
    pub within: String,
    /// Confidence of each verdict.
    #[arg(long, default_value = "99%")]
    pub confidence: String,
    /// The longest wait for a new weight to reach the data plane, e.g. `30s`.
    #[arg(long, default_value = "30s")]
    pub settle: String,
    /// The version value the canary answers with (default: its image tag).
    #[arg(long)]
    pub canary_version: Option<String>,
    /// How a response names its version (as `load --classify`).
    #[arg(long)]
    pub classify: Option<String>,
    /// A request header `Name: value` (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Accept any TLS certificate of the gateway.
    #[arg(long)]
    pub insecure: bool,
    /// Trust the CA certificates of this PEM file for the gateway.
    #[arg(long)]
    pub cacert: Option<PathBuf>,
    /// `HOST:PORT:ADDR:PORT`, as `load --connect-to` (repeatable).
    #[arg(long)]
    pub connect_to: Vec<String>,
    /// A new connection for every request (a gateway that picks per connection then gives
    /// a draw per request).
    #[arg(long)]
    pub disable_keepalive: bool,
    /// Abort the rollout (as `kubectl argo rollouts abort`) when a step fails.
    #[arg(long)]
    pub abort_on_fail: bool,
    /// Stop following after this long, e.g. `30m` (default: until the rollout ends).
    #[arg(long)]
    pub timeout: Option<String>,
    /// Output format: `text` rows as they are measured, or `json` at the end
    /// (`schemas/watch.schema.json`).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UnitArg {
    Request,
    Connection,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// Entry point used by `main.rs`.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let choice = cli.color.choice();
    let (code, out, err) = execute(cli);
    // Styles are added here, at the edge; anstream strips them when the stream is no
    // terminal, NO_COLOR is set or --color never says so.
    let mut stdout = anstream::AutoStream::new(std::io::stdout(), choice);
    let mut stderr = anstream::AutoStream::new(std::io::stderr(), choice);
    // A closed pipe (`canarysim run | head`) is not an error worth a panic.
    let _ = std::io::Write::write_all(&mut stdout, crate::style::paint(&out).as_bytes());
    let _ = std::io::Write::write_all(&mut stderr, crate::style::paint(&err).as_bytes());
    let _ = std::io::Write::flush(&mut stdout);
    ExitCode::from(code)
}

/// Runs a parsed command; returns (exit code, stdout, stderr). In-process, so tests can call
/// it as the binary would.
pub fn execute(cli: Cli) -> (u8, String, String) {
    match cli.command {
        Command::Run {
            path,
            seed,
            format,
            live,
            time_scale,
            request_budget,
            instant_budget,
        } => {
            let mode = if live {
                RunMode::Live { time_scale }
            } else {
                RunMode::Simulated
            };
            let budgets = Budgets {
                requests: request_budget,
                instants: instant_budget,
            };
            run(path.as_deref(), seed, format, mode, budgets)
        }
        Command::Compare {
            path,
            seed,
            ingress2gateway,
            format,
        } => compare(path.as_deref(), seed, ingress2gateway, format),
        Command::Lint { files } => lint_files(&files),
        Command::Init { paths, output } => init(&paths, output.as_deref()),
        Command::Check {
            paths,
            requests,
            connections,
            seed,
            format,
        } => {
            let settings = scenario::check::Settings {
                requests,
                connections,
                seed,
            };
            check(&paths, &settings, format)
        }
        Command::Load(command) => match (command.action, command.load) {
            (Some(LoadAction::Merge(merge)), _) => merge_command(&merge),
            (Some(LoadAction::Coordinate(c)), _) => coordinate_command(&c),
            (Some(LoadAction::Job(job)), _) => job_command(&job),
            (None, Some(args)) => load_command(&args),
            (None, None) => (
                2,
                String::new(),
                "canarysim load: a URL is required\n".into(),
            ),
        },
        Command::Watch(args) => watch_command(&args),
        Command::Snapshot {
            out_dir,
            rollout,
            namespace,
            context,
            kubeconfig,
        } => snapshot_command(kubeconfig, context, namespace, out_dir, rollout),
        Command::Plan {
            share,
            within,
            confidence,
            power,
            format,
        } => plan_command(&share, &within, &confidence, &power, format),
        Command::EnvoyConfig {
            path,
            at_step,
            port,
            seed,
        } => envoy_config(path.as_deref(), at_step, port, seed),
        Command::Serve {
            path,
            hold,
            time_scale,
            seed,
            api,
            kubeconfig,
        } => {
            let api =
                (api || kubeconfig.is_some()).then_some(crate::live::ApiOptions { kubeconfig });
            serve(path.as_deref(), hold, time_scale, seed, api)
        }
        Command::Tui { path, live } => tui(path.as_deref(), live),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(
                shell,
                &mut <Cli as clap::CommandFactory>::command(),
                "canarysim",
                &mut script,
            );
            (
                0,
                String::from_utf8_lossy(&script).into_owned(),
                String::new(),
            )
        }
        Command::Backend(args) => backend(args),
    }
}

/// `canarysim backend`: one pod server on the address given, until interrupted.
fn backend(args: BackendArgs) -> (u8, String, String) {
    let BackendArgs {
        version_name,
        port,
        address,
        latency,
        error_rate,
        error_status,
        pod,
        seed,
    } = args;
    let latency = match latency.as_deref().map(humantime::parse_duration) {
        None => std::time::Duration::ZERO,
        Some(Ok(d)) => d,
        Some(Err(e)) => {
            return (2, String::new(), format!("--latency: {e} (e.g. 5ms)\n"));
        }
    };
    if !(0.0..=1.0).contains(&error_rate) {
        return (
            2,
            String::new(),
            "--error-rate: a share between 0 and 1\n".into(),
        );
    }
    let mut spec =
        crate::pod_server::PodSpec::new(&version_name).answering(latency, error_rate, error_status);
    spec.seed = seed;
    if let Some(pod) = pod {
        spec.pod = pod;
    }
    match crate::pod_server::serve_until_interrupted(spec, (address, port).into()) {
        Ok(()) => (0, String::new(), String::new()),
        Err(e) => (
            2,
            String::new(),
            format!("cannot serve on {address}:{port}: {e}\n"),
        ),
    }
}

/// The scenario at `path` (default: the bundled walkthrough), loaded and checked; Err: the
/// exit code 2 answer.
fn load_scenario(path: Option<&Path>) -> Result<scenario::Plan, (u8, String, String)> {
    let (files, path): (&dyn Files, PathBuf) = match path {
        None => (&EMBEDDED, PathBuf::from(DEFAULT_SCENARIO)),
        Some(p) => (&Disk, p.to_path_buf()),
    };
    scenario::load(&path, files).map_err(|e| (2, String::new(), format!("{e}\n")))
}

/// `canarysim envoy-config`: the scenario simulated up to the step, its table exported.
/// The pods get placeholder addresses (10.244.0.0/16, their container port), as a cluster
/// would give them; live mode exports the real ones.
fn envoy_config(
    path: Option<&Path>,
    at_step: Option<usize>,
    port: u16,
    seed: Option<u64>,
) -> (u8, String, String) {
    let plan = match load_scenario(path) {
        Ok(plan) => plan,
        Err(answer) => return answer,
    };
    let steps = at_step.unwrap_or(plan.steps.len());
    if steps > plan.steps.len() {
        return (
            2,
            String::new(),
            format!(
                "--at-step {steps}: {} has {} steps\n",
                plan.file,
                plan.steps.len()
            ),
        );
    }
    let mut runner = scenario::Runner::new(&plan, seed);
    for _ in 0..steps {
        runner.step();
    }
    if steps == 0 {
        // The initial state is what the proxies serve once the manifests' routes have
        // reached them (after the push delay), not the instant before.
        let world = &mut runner.world;
        let end = world.now().after(std::time::Duration::from_secs(3600));
        let reached = world.advance_until(end, |w| w.mesh.table_at(w.now()).is_some());
        if let Err(e) = reached {
            return (2, String::new(), format!("{}: {e}\n", plan.file));
        }
    }
    let world = &runner.world;
    let Some(table) = world.mesh.table_at(world.now()) else {
        return (
            2,
            String::new(),
            "no route table has reached the proxies at that step\n".into(),
        );
    };
    let mut addresses = std::collections::BTreeMap::new();
    for (i, pod) in world
        .api
        .list(crate::model::Kind::Pod, None, None)
        .into_iter()
        .enumerate()
    {
        let port = pod.spec()["containers"][0]["ports"][0]["containerPort"]
            .as_u64()
            .unwrap_or(8080) as u16;
        let ip = format!("10.244.{}.{}", i / 250, i % 250 + 1);
        addresses.insert(pod.name().to_string(), (ip, port));
    }
    let lookup = |pod: &str| addresses.get(pod).cloned();
    let options = crate::mesh::envoy::EnvoyOptions {
        listen_address: "127.0.0.1".into(),
        ports: Default::default(),
        default_port: port,
        admin_port: 0,
        // TLS and TCP listeners on the Gateway's own ports (443 needs privileges to bind).
        l4_port: &|_, port| u16::try_from(port).unwrap_or(0),
        pod_address: &lookup,
        lb: crate::mesh::LbPolicy::RoundRobin,
    };
    let (config, omitted) = crate::mesh::envoy::bootstrap(table, &options);
    let err: String = omitted
        .iter()
        .map(|o| format!("warning: not exported: {o}\n"))
        .collect();
    (
        0,
        serde_json::to_string_pretty(&config).unwrap_or_default() + "\n",
        err,
    )
}

/// `canarysim serve`: prints as it goes (the address first), until Ctrl-C or SIGTERM.
/// `canarysim tui`: the scenarios of a directory or a file, or the bundled walkthrough.
fn tui(path: Option<&Path>, live: bool) -> (u8, String, String) {
    static DISK: Disk = Disk;
    let (files, path): (&'static (dyn Files + Sync), PathBuf) = match path {
        Some(p) => (&DISK, p.to_path_buf()),
        None if Path::new("scenarios").is_dir() => (&DISK, PathBuf::from("scenarios")),
        None => (&EMBEDDED, PathBuf::from(DEFAULT_SCENARIO)),
    };
    if files.read(&path).is_err() && !path.is_dir() {
        return (
            2,
            String::new(),
            format!("{}: no such scenario file or directory\n", path.display()),
        );
    }
    let entries = crate::tui::entries(&path, files);
    if entries.is_empty() {
        return (
            2,
            String::new(),
            format!("{}\n", crate::scenario::discover::nothing_to_run(&path, 0)),
        );
    }
    match crate::tui::run(live, entries, files) {
        Ok(()) => (0, String::new(), String::new()),
        Err(e) => (2, String::new(), format!("canarysim tui: {e}\n")),
    }
}

fn serve(
    path: Option<&Path>,
    hold: bool,
    time_scale: f64,
    seed: Option<u64>,
    api: Option<crate::live::ApiOptions>,
) -> (u8, String, String) {
    if !(time_scale.is_finite() && time_scale > 0.0) {
        return (
            2,
            String::new(),
            format!("--time-scale {time_scale}: expected a number above 0\n"),
        );
    }
    let plan = match load_scenario(path) {
        Ok(plan) => plan,
        Err(answer) => return answer,
    };
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    if let Err(e) = stop_on_signal(stop.clone()) {
        return (2, String::new(), format!("cannot watch for Ctrl-C: {e}\n"));
    }
    let options = crate::live::ServeOptions {
        seed,
        hold,
        time_scale,
        api,
    };
    match crate::live::serve(&plan, options, stop, &mut std::io::stdout()) {
        Ok(()) => (0, String::new(), String::new()),
        Err(e) => (2, String::new(), format!("{e}\n")),
    }
}

/// A simulated run, with a spinner on a terminal (the step running, the scenario time).
fn run_simulated(plan: &scenario::Plan, seed: Option<u64>) -> scenario::RunReport {
    let progress = crate::progress::RunProgress::new(&plan.name, plan.steps.len());
    let mut runner = scenario::Runner::new(plan, seed);
    if let Some(show) = progress.clock() {
        runner.on_instant(move |w| show(&w.now()));
    }
    for (i, step) in plan.steps.iter().enumerate() {
        progress.step(i + 1, &step.summary());
        if runner.step().is_none() {
            break;
        }
    }
    progress.finish();
    runner.finish()
}

/// Sets `stop` on Ctrl-C or SIGTERM (watched on a thread of its own).
fn stop_on_signal(stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            runtime.block_on(crate::pod_server::shutdown_signal());
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        })?;
    Ok(())
}

/// A share or confidence as `99%`, `99` or `0.99`, as a fraction.
fn fraction(flag: &str, s: &str) -> Result<f64, String> {
    let number: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("{flag} {s:?}: expected a percentage, e.g. 99%"))?;
    let f = if s.trim().ends_with('%') || number > 1.0 {
        number / 100.0
    } else {
        number
    };
    if (0.0..1.0).contains(&f) && f > 0.0 {
        Ok(f)
    } else {
        Err(format!(
            "{flag} {s:?}: expected a percentage between 0 and 100 %"
        ))
    }
}

/// A `canarysim load` as its flags describe it, checked: the load (with its stop rule) and
/// the verdict asked for. Nothing is sent.
pub struct PlannedLoad {
    pub load: crate::load::http::HttpLoad,
    pub expectations: Option<crate::real_load::Expectations>,
}

/// Reads and checks `canarysim load`'s flags (Err: the message for exit code 2).
pub fn plan_load(a: &LoadArgs) -> Result<PlannedLoad, String> {
    let mut load = http_load(a)?;
    let expectations = expectations(&a.expect, &a.within, &a.confidence)?;
    if a.until_decided {
        let Some(e) = &expectations else {
            return Err("--until-decided needs an --expect to test".into());
        };
        let (key, share) = e.shares[0].clone();
        load.traffic.stop = Some(crate::load::StopRule {
            key,
            share,
            test: crate::load::StopTest::Verdict {
                within: e.within / 100.0,
                confidence: e.confidence,
            },
        });
    }
    Ok(PlannedLoad { load, expectations })
}

fn forced_unit(unit: Option<UnitArg>) -> Option<crate::verify::SplitUnit> {
    unit.map(|u| match u {
        UnitArg::Request => crate::verify::SplitUnit::Request,
        UnitArg::Connection => crate::verify::SplitUnit::Connection,
    })
}

/// `--expect` (none: no verdict), `--within` and `--confidence`.
fn expectations(
    expect: &[String],
    within: &str,
    confidence: &str,
) -> Result<Option<crate::real_load::Expectations>, String> {
    if expect.is_empty() {
        return Ok(None);
    }
    let shares = expect
        .iter()
        .map(|e| crate::real_load::parse_expect(e))
        .collect::<Result<Vec<_>, _>>()?;
    let within = match within.trim().trim_end_matches('%').parse::<f64>() {
        Ok(w) if (0.0..=100.0).contains(&w) => w,
        _ => return Err(format!("--within {within:?}: expected points, e.g. 1")),
    };
    Ok(Some(crate::real_load::Expectations {
        shares,
        within,
        confidence: fraction("--confidence", confidence)?,
    }))
}

/// `canarysim load merge FILE…`.
fn merge_command(a: &MergeArgs) -> (u8, String, String) {
    let mut files = Vec::new();
    for path in &a.files {
        let (name, text) = if path.as_os_str() == "-" {
            let mut text = String::new();
            if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut text) {
                return merge_error(format!("stdin: {e}"));
            }
            ("<stdin>".to_string(), text)
        } else {
            match std::fs::read_to_string(path) {
                Ok(text) => (path.display().to_string(), text),
                Err(e) => return merge_error(format!("{}: {e}", path.display())),
            }
        };
        match crate::load::result_file::ResultFile::parse(&name, &text) {
            Ok(file) => files.push((name, file)),
            Err(e) => return merge_error(e),
        }
    }
    judge_shards(&files, &a.verdict)
}

fn merge_error(e: String) -> (u8, String, String) {
    (2, String::new(), format!("canarysim load merge: {e}\n"))
}

/// The shards' result files judged as one load (`load merge`, `load coordinate`).
fn judge_shards(
    files: &[(String, crate::load::result_file::ResultFile)],
    a: &MergeVerdictArgs,
) -> (u8, String, String) {
    let verdict = fraction("--confidence", &a.confidence).and_then(|confidence| {
        Ok((
            confidence,
            expectations(&a.expect, &a.within, &a.confidence)?,
        ))
    });
    let (confidence, expectations) = match verdict {
        Ok(v) => v,
        Err(e) => return merge_error(e),
    };
    let merged = crate::real_load::merge::merge(
        files,
        expectations.as_ref(),
        confidence,
        forced_unit(a.unit),
    );
    let report = match merged {
        Ok(r) => r,
        Err(e) => return merge_error(e),
    };
    let out = match a.format {
        Format::Text => report::text::load_merge(&report),
        Format::Json => serde_json::to_string_pretty(&report).unwrap_or_default() + "\n",
    };
    (
        crate::real_load::merge::exit_code(&report),
        out,
        String::new(),
    )
}

/// `canarysim load job --image IMAGE -- URL FLAGS…`.
fn job_command(a: &JobArgs) -> (u8, String, String) {
    let bad = |e: String| (2, String::new(), format!("canarysim load job: {e}\n"));
    if a.parallelism == 0 || a.parallelism > 10_000 {
        return bad(format!(
            "--parallelism {}: expected 1 to 10000",
            a.parallelism
        ));
    }
    if let Err(e) = humantime::parse_duration(&a.timeout) {
        return bad(format!("--timeout {:?}: {e} (e.g. 30m)", a.timeout));
    }
    // The workers' flags, read as `load` reads them, with the shard they will be given.
    let parse = |extra: &[String]| {
        let mut argv = vec!["canarysim".to_string(), "load".into()];
        argv.extend(a.load.iter().cloned());
        argv.extend(extra.iter().cloned());
        match Cli::try_parse_from(argv).map(|cli| cli.command) {
            Ok(Command::Load(command)) => command
                .load
                .ok_or_else(|| "after --, a URL and `load`'s flags".to_string()),
            Ok(_) => Err("after --, a URL and `load`'s flags".to_string()),
            Err(e) => Err(format!("after --: {}", e.kind())),
        }
    };
    let args = match parse(&[]) {
        Ok(args) => args,
        Err(e) => return bad(e),
    };
    if args.shard.is_some() || args.coordinator.is_some() || args.out.is_some() {
        return bad("--shard, --coordinator and --out are the job's to set".into());
    }
    // The last shard gets the smallest part of -n.
    let last_shard = [
        "--shard".to_string(),
        format!("{}/{}", a.parallelism - 1, a.parallelism),
    ];
    if let Err(e) = parse(&last_shard).and_then(|args| plan_load(&args).map(|_| ())) {
        return bad(e);
    }
    let mut verdict = Vec::new();
    for e in &args.expect {
        verdict.extend(["--expect".to_string(), e.clone()]);
    }
    verdict.extend(["--within".to_string(), args.within.clone()]);
    verdict.extend(["--confidence".to_string(), args.confidence.clone()]);
    if let Some(unit) = args.unit {
        let unit = match unit {
            UnitArg::Request => "request",
            UnitArg::Connection => "connection",
        };
        verdict.extend(["--unit".to_string(), unit.to_string()]);
    }
    let plan = crate::real_load::job::JobPlan {
        name: &a.name,
        namespace: a.namespace.as_deref(),
        image: &a.image,
        workers: a.parallelism,
        timeout: &a.timeout,
        load: &a.load,
        verdict,
    };
    let (manifests, how) = if a.analysis_template {
        (
            plan.analysis_template(),
            format!(
                "kubectl apply -f this; then in a Rollout's steps: - analysis: {{templates: [{{templateName: {}}}]}}\nThe analysis runs the coordinator and the workers as two job metrics; it passes when the split does.",
                a.name
            ),
        )
    } else {
        (
            plan.manifests(),
            format!(
                "kubectl apply -f this; the verdict: kubectl logs job/{name}-coordinator (the Job fails unless the split passes)\nkubectl delete -f this when done.",
                name = a.name
            ),
        )
    };
    let header = format!(
        "canarysim load job: {} workers send {} in shards to one coordinator.\n{how}",
        a.parallelism, args.url
    );
    (
        0,
        crate::real_load::job::to_yaml(&header, &manifests),
        String::new(),
    )
}

/// `canarysim load coordinate --expect-workers N`.
fn coordinate_command(a: &CoordinateArgs) -> (u8, String, String) {
    let bad = |e: String| {
        (
            2,
            String::new(),
            format!("canarysim load coordinate: {e}\n"),
        )
    };
    if a.expect_workers == 0 || a.expect_workers > 10_000 {
        return bad(format!(
            "--expect-workers {}: expected 1 to 10000",
            a.expect_workers
        ));
    }
    let timeout = match humantime::parse_duration(&a.timeout) {
        Ok(t) if !t.is_zero() && t <= MAX_REAL_LOAD => t,
        _ => {
            return bad(format!(
                "--timeout {:?}: expected a duration above 0 and at most 24h, e.g. 30m",
                a.timeout
            ));
        }
    };
    if let Err(e) = fraction("--confidence", &a.verdict.confidence)
        .and_then(|_| expectations(&a.verdict.expect, &a.verdict.within, &a.verdict.confidence))
    {
        return bad(e);
    }
    let listener = match std::net::TcpListener::bind(&a.listen) {
        Ok(l) => l,
        Err(e) => return bad(format!("--listen {}: {e}", a.listen)),
    };
    if let Ok(address) = listener.local_addr() {
        eprintln!(
            "canarysim load coordinate: listening on http://{address}, waiting for {} workers",
            a.expect_workers
        );
    }
    match crate::real_load::coordinator::coordinate(listener, a.expect_workers, timeout) {
        Ok(files) => judge_shards(&files, &a.verdict),
        Err(e) => (
            INCONCLUSIVE_EXIT,
            String::new(),
            format!("canarysim load coordinate: {e}: no verdict\n"),
        ),
    }
}

/// This shard's part of -n and -q (all of them without --shard).
fn shard_share(a: &LoadArgs) -> Result<(Option<u64>, Option<f64>), String> {
    let Some(shard) = a.shard else {
        return Ok((a.requests, a.rate));
    };
    if a.until_decided {
        return Err("--until-decided stops one load when its own test decides; shards are judged together by `load merge`, so it cannot go with --shard".into());
    }
    let requests = match a.requests {
        Some(n) => match shard.part_of(n) {
            0 => {
                return Err(format!(
                    "-n {n}: fewer requests than the {} shards",
                    shard.count
                ));
            }
            part => Some(part),
        },
        None => None,
    };
    Ok((requests, a.rate.map(|q| q / f64::from(shard.count))))
}

/// `canarysim load URL …`.
fn load_command(a: &LoadArgs) -> (u8, String, String) {
    let bad = |e: String| (2, String::new(), format!("{e}\n"));
    let PlannedLoad { load, expectations } = match plan_load(a) {
        Ok(planned) => planned,
        Err(e) => return bad(e),
    };
    let progress = crate::progress::LoadProgress::new(
        a.quiet || a.format == Format::Json,
        load.extent.requests(),
        load.extent.duration(),
    );
    let shard = a.shard;
    if let (Some(url), Some(shard)) = (&a.coordinator, shard) {
        // Released with the other workers, so that the shards load the gateway together.
        let waited = crate::real_load::coordinator::wait_for_go(url, shard.index, MAX_REAL_LOAD);
        if let Err(e) = waited {
            return bad(format!("canarysim load: {e}"));
        }
    }
    let started = std::time::SystemTime::now();
    let outcome = crate::load::http::send(&load, &|s| progress.update(s));
    progress.finish();
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => return bad(format!("canarysim load: {e}")),
    };
    let shape = crate::real_load::LoadShape::of(&load);
    let file = crate::load::result_file::ResultFile::new(
        &a.url,
        shard,
        (started, std::time::SystemTime::now()),
        &shape,
        &outcome,
    );
    if let Err(e) = keep_result(a, &file) {
        return bad(format!("canarysim load: {e}"));
    }
    let forced = forced_unit(a.unit);
    let report = crate::real_load::judge(&a.url, &shape, &outcome, expectations.as_ref(), forced);
    let out = match a.format {
        Format::Text => report::text::http_load(&report),
        Format::Json => serde_json::to_string_pretty(&report).unwrap_or_default() + "\n",
    };
    let code = match report.verdict.as_ref().map(|v| v.outcome) {
        // A worker's shard is judged with the others, by the coordinator.
        _ if a.coordinator.is_some() => 0,
        Some(crate::verify::Outcome::Fail) => 1,
        Some(crate::verify::Outcome::Inconclusive) => INCONCLUSIVE_EXIT,
        _ => 0,
    };
    (code, out, String::new())
}

/// The load's result where --out and --coordinator say.
fn keep_result(a: &LoadArgs, file: &crate::load::result_file::ResultFile) -> Result<(), String> {
    if let Some(path) = &a.out {
        file.write(path)
            .map_err(|e| format!("--out {}: {e}", path.display()))?;
    }
    match (&a.coordinator, file.shard) {
        (Some(url), Some(shard)) => crate::real_load::coordinator::deliver(url, shard.index, file),
        _ => Ok(()),
    }
}

/// `watch` and `snapshot` in a build without the `cluster` feature (the fuzz targets').
#[cfg(not(feature = "cluster"))]
fn not_built(command: &str) -> (u8, String, String) {
    let message =
        format!("canarysim {command}: built without cluster support (feature `cluster`)\n");
    (2, String::new(), message)
}

#[cfg(not(feature = "cluster"))]
fn watch_command(_: &WatchArgs) -> (u8, String, String) {
    not_built("watch")
}

#[cfg(not(feature = "cluster"))]
fn snapshot_command(
    _: Option<PathBuf>,
    _: Option<String>,
    _: Option<String>,
    _: PathBuf,
    _: Option<String>,
) -> (u8, String, String) {
    not_built("snapshot")
}

/// `canarysim watch ROLLOUT --url URL …`: rows on stdout as they are measured.
#[cfg(feature = "cluster")]
fn watch_command(a: &WatchArgs) -> (u8, String, String) {
    let bad = |e: String| (2, String::new(), format!("{e}\n"));
    let load_args = LoadArgs {
        url: a.url.clone(),
        requests: Some(a.requests),
        shard: None,
        out: None,
        coordinator: None,
        duration: None,
        connections: a.connections,
        rate: None,
        http2: false,
        disable_keepalive: a.disable_keepalive,
        method: "GET".into(),
        headers: a.headers.clone(),
        host: a.host.clone(),
        timeout: "20s".into(),
        insecure: a.insecure,
        cacert: a.cacert.clone(),
        sni: None,
        connect_to: a.connect_to.clone(),
        classify: a.classify.clone(),
        expect: Vec::new(),
        within: a.within.clone(),
        confidence: a.confidence.clone(),
        until_decided: false,
        unit: None,
        format: a.format,
        quiet: true,
    };
    let planned = match plan_load(&load_args) {
        Ok(p) => p,
        Err(e) => return bad(e),
    };
    let within = match a.within.trim().trim_end_matches('%').parse::<f64>() {
        Ok(w) if w > 0.0 && w < 100.0 => w,
        _ => return bad(format!("--within {:?}: expected points, e.g. 1", a.within)),
    };
    let confidence = match fraction("--confidence", &a.confidence) {
        Ok(c) => c,
        Err(e) => return bad(e),
    };
    let duration = |flag: &str, text: &str| {
        humantime::parse_duration(text)
            .map_err(|_| format!("{flag} {text:?}: expected a duration, e.g. 30s"))
    };
    let settle = match duration("--settle", &a.settle) {
        Ok(d) => d,
        Err(e) => return bad(e),
    };
    let timeout = match a
        .timeout
        .as_deref()
        .map(|t| duration("--timeout", t))
        .transpose()
    {
        Ok(t) => t,
        Err(e) => return bad(e),
    };
    let cluster = match crate::cluster::Cluster::connect(&crate::cluster::ClusterOptions {
        kubeconfig: a.kubeconfig.clone(),
        context: a.context.clone(),
        namespace: a.namespace.clone(),
    }) {
        Ok(c) => c,
        Err(e) => return bad(format!("canarysim watch: {e}")),
    };
    let options = crate::cluster::follow::FollowOptions {
        rollout: a.rollout.clone(),
        load: planned.load,
        url: a.url.clone(),
        requests: a.requests,
        within,
        confidence,
        settle,
        canary_version: a.canary_version.clone(),
        abort_on_fail: a.abort_on_fail,
        timeout,
        quiet: a.quiet || a.format == Format::Json,
    };
    follow_and_print(&cluster, &options, a.format)
}

/// `canarysim snapshot OUT_DIR`.
#[cfg(feature = "cluster")]
fn snapshot_command(
    kubeconfig: Option<PathBuf>,
    context: Option<String>,
    namespace: Option<String>,
    out_dir: PathBuf,
    rollout: Option<String>,
) -> (u8, String, String) {
    let failed = |e: String| (2, String::new(), format!("canarysim snapshot: {e}\n"));
    let cluster = crate::cluster::ClusterOptions {
        kubeconfig,
        context,
        namespace,
    };
    let cluster = match crate::cluster::Cluster::connect(&cluster) {
        Ok(c) => c,
        Err(e) => return failed(e.to_string()),
    };
    let options = crate::cluster::snapshot::SnapshotOptions { out_dir, rollout };
    let written = match crate::cluster::snapshot::snapshot(&cluster, &options) {
        Ok(w) => w,
        Err(e) => return failed(e.to_string()),
    };
    let counts: Vec<String> = written
        .objects
        .iter()
        .map(|(kind, n)| format!("{n} {kind}"))
        .collect();
    let out = format!(
        "read {} from {}\nwrote {}\nreplay {}: canarysim run {}\n",
        counts.join(", "),
        cluster.namespace(),
        written.scenario.display(),
        written.rollout,
        written.scenario.display()
    );
    let notes: String = written
        .notes
        .iter()
        .map(|n| format!("note: {n}\n"))
        .collect();
    (0, out, notes)
}

/// Runs `watch`, printing text rows as they come (JSON: the report at the end).
#[cfg(feature = "cluster")]
fn follow_and_print(
    cluster: &crate::cluster::Cluster,
    options: &crate::cluster::follow::FollowOptions,
    format: Format,
) -> (u8, String, String) {
    use crate::cluster::follow;
    let print = |text: &str| {
        use std::io::Write;
        let mut out = std::io::stdout();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    };
    if format == Format::Text {
        print(&follow::text_header(
            &options.rollout,
            cluster.namespace(),
            &options.url,
        ));
    }
    let mut row = |r: &follow::StepRow| {
        if format == Format::Text {
            print(&follow::text_row(r));
        }
    };
    let say = |line: &str| eprintln!("{line}");
    let hooks = follow::Hooks {
        row: &mut row,
        say: &say,
    };
    match follow::follow(cluster, options, hooks) {
        Ok(report) => {
            let out = match format {
                Format::Text => String::new(),
                Format::Json => serde_json::to_string_pretty(&report).unwrap_or_default() + "\n",
            };
            let err = report
                .error
                .as_ref()
                .map(|e| format!("canarysim watch: stopped: {e}\n"))
                .unwrap_or_default();
            (report.exit_code(), out, err)
        }
        Err(e) => (2, String::new(), format!("canarysim watch: {e}\n")),
    }
}

/// `canarysim plan SHARE …`.
fn plan_command(
    share: &str,
    within: &str,
    confidence: &str,
    power: &str,
    format: Format,
) -> (u8, String, String) {
    let bad = |e: String| (2, String::new(), format!("{e}\n"));
    let share = match crate::real_load::parse_expect(&format!("share={share}")) {
        Ok((_, s)) => s,
        Err(_) => return bad(format!("{share:?}: expected a share, e.g. 20%")),
    };
    let within = match within.trim().trim_end_matches('%').parse::<f64>() {
        Ok(w) if w > 0.0 && w < 100.0 => w,
        _ => {
            return bad(format!(
                "--within {within:?}: expected points above 0, e.g. 1"
            ));
        }
    };
    let confidence = match fraction("--confidence", confidence) {
        Ok(c) => c,
        Err(e) => return bad(e),
    };
    let power = match fraction("--power", power) {
        Ok(p) => p,
        Err(e) => return bad(e),
    };
    let plan = crate::verify::plan::plan(share, within / 100.0, confidence, power);
    let out = match format {
        Format::Text => report::text::plan(&plan),
        Format::Json => serde_json::to_string_pretty(&plan).unwrap_or_default() + "\n",
    };
    (0, out, String::new())
}

pub use crate::real_load::INCONCLUSIVE_EXIT;

/// The longest `canarysim load` (beyond it the clock's arithmetic could overflow, and no
/// canary step lasts longer).
const MAX_REAL_LOAD: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
/// The longest timeout per request.
const MAX_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);
/// Open-loop rates, requests per second (below one in 1,000 s the schedule is meaningless).
const MIN_RATE: f64 = 0.001;
const MAX_RATE: f64 = 1_000_000_000.0;

/// The load the flags describe (without its stop rule).
fn http_load(a: &LoadArgs) -> Result<crate::load::http::HttpLoad, String> {
    use crate::load::http::{ConnectTo, HttpLoad};
    let (target, path) = crate::load::http::parse_url(&a.url)?;
    let (requests, rate) = shard_share(a)?;
    let duration = a
        .duration
        .as_deref()
        .map(|d| {
            humantime::parse_duration(d).map_err(|e| format!("-z/--duration {d:?}: {e} (e.g. 10s)"))
        })
        .transpose()?;
    let extent = crate::load::http::Extent::new(requests, duration)?;
    if requests == Some(0) || duration.is_some_and(|d| d.is_zero()) {
        return Err("-n and -z must be above 0".into());
    }
    if let Some(d) = duration.filter(|d| *d > MAX_REAL_LOAD) {
        return Err(format!(
            "-z/--duration {}: a load runs at most 24h",
            humantime::format_duration(d)
        ));
    }
    if a.connections == 0 || a.connections > 100_000 {
        return Err(format!(
            "-c/--connections {}: expected 1 to 100000",
            a.connections
        ));
    }
    if let Some(q) = rate {
        if !(q.is_finite() && (MIN_RATE..=MAX_RATE).contains(&q)) {
            return Err(format!(
                "-q/--rate {q:?}: expected requests per second from {MIN_RATE} to {MAX_RATE:.0}"
            ));
        }
        // An open loop's schedule must end within the longest load.
        if let (Some(n), None) = (requests, duration) {
            let takes = n as f64 / q;
            if takes > MAX_REAL_LOAD.as_secs_f64() {
                return Err(format!(
                    "-n {n} at -q {q} takes {:.0} h; a load runs at most 24h (send fewer or faster, or add -z)",
                    takes / 3600.0
                ));
            }
        }
    }
    let timeout = humantime::parse_duration(&a.timeout)
        .map_err(|e| format!("-t/--timeout {:?}: {e} (e.g. 2s)", a.timeout))?;
    if timeout.is_zero() || timeout > MAX_TIMEOUT {
        return Err(format!(
            "-t/--timeout {:?}: expected above 0 and at most 1h",
            a.timeout
        ));
    }
    let method: hyper::Method = a
        .method
        .parse()
        .map_err(|_| format!("-m/--method {:?}: not an HTTP method", a.method))?;
    let method = method.as_str().to_string();
    let mut headers = Vec::new();
    for h in &a.headers {
        let (name, value) = h
            .split_once(':')
            .ok_or_else(|| format!("-H {h:?}: expected 'Name: value'"))?;
        let (name, value) = (name.trim(), value.trim());
        hyper::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("-H {h:?}: {name:?} is not a header name"))?;
        hyper::header::HeaderValue::from_str(value)
            .map_err(|_| format!("-H {h:?}: the value is not a valid header value"))?;
        headers.push((name.to_string(), value.to_string()));
    }
    if let Some(host) = &a.host {
        hyper::header::HeaderValue::from_str(host)
            .map_err(|_| format!("--host {host:?}: not a valid Host header"))?;
    }
    let connect_to = a
        .connect_to
        .iter()
        .map(|c| c.parse::<ConnectTo>())
        .collect::<Result<Vec<_>, _>>()?;
    let classifier = match &a.classify {
        None => crate::load::classify::Classifier::Default,
        Some(c) => c
            .parse()
            .map_err(|e: crate::load::classify::ClassifyError| e.to_string())?,
    };
    Ok(HttpLoad {
        target,
        extent,
        traffic: crate::load::Traffic {
            arrival: a
                .rate
                .map_or(crate::load::Arrival::Closed, crate::load::Arrival::Constant),
            connections: a.connections,
            keepalive: !a.disable_keepalive,
            http2: a.http2,
            method,
            host: a.host.clone().unwrap_or_default(),
            path,
            headers,
            sni: a.sni.clone(),
            stop: None,
        },
        // `load` sends evenly spaced at a rate: the stream is never drawn from.
        arrivals: crate::random::stream(0, "load/arrivals"),
        timeout,
        // `-z` bounds the load: at its end what is in flight is cut and counted apart.
        cut_in_flight: true,
        insecure: a.insecure,
        cacert: a.cacert.clone(),
        connect_to,
        classifier,
        stop_counts: Vec::new(),
    })
}

/// The namespace of manifest objects that name none (as `kubectl apply` without `-n`).
const LINT_NAMESPACE: &str = "default";

/// How standard input is named in messages (`canarysim lint -`), as kubectl names it.
const STDIN_NAME: &str = "STDIN";

/// The disk, and standard input (read once, up front) under [`STDIN_NAME`].
struct DiskAndStdin {
    stdin: Option<String>,
}

impl Files for DiskAndStdin {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        match &self.stdin {
            Some(text) if path == Path::new(STDIN_NAME) => Ok(text.clone()),
            _ => Disk.read(path),
        }
    }
}

/// What `lint` and `init` read: the files named, standard input once (as [`STDIN_NAME`]),
/// and every file found under a folder named; then the files passed over (why, one a line)
/// and the errors.
fn manifest_inputs(paths: &[PathBuf]) -> (Vec<PathBuf>, String, String) {
    let (mut inputs, mut passed_over, mut err) = (Vec::new(), String::new(), String::new());
    for path in paths {
        if path == Path::new("-") {
            let stdin = PathBuf::from(STDIN_NAME);
            if !inputs.contains(&stdin) {
                inputs.push(stdin);
            }
        } else if path.is_dir() {
            match scenario::discover::lint_files_in(path) {
                Err(e) => err.push_str(&format!("{}: cannot read: {e}\n", path.display())),
                Ok(found) => {
                    let before = inputs.len();
                    for (file, what) in found {
                        match what {
                            scenario::discover::Found::PassedOver(why) => passed_over
                                .push_str(&format!("{}: passed over: {why}\n", file.display())),
                            _ => inputs.push(file),
                        }
                    }
                    if inputs.len() == before {
                        err.push_str(&format!(
                            "{}: no Kubernetes manifests or scenarios (*.yaml, *.yml, *.json) in this folder or below\n",
                            path.display()
                        ));
                    }
                }
            }
        } else {
            inputs.push(path.clone());
        }
    }
    (inputs, passed_over, err)
}

/// Standard input, read once up front when `paths` name it.
fn stdin_if_named(paths: &[PathBuf]) -> Result<DiskAndStdin, String> {
    if !paths.iter().any(|p| p == Path::new("-")) {
        return Ok(DiskAndStdin { stdin: None });
    }
    yaml::read_bounded(std::io::stdin().lock())
        .map(|text| DiskAndStdin { stdin: Some(text) })
        .map_err(|e| format!("{STDIN_NAME}: cannot read: {e}\n"))
}

/// Each manifest input with the objects it holds.
type Sources = Vec<(scenario::init::ManifestSource, Vec<Manifest>)>;

/// The manifests `init` and `check` read: each input with the objects it holds, named as
/// the scenario will name it (`relative_to`: paths relative to that folder; else as given);
/// the files passed over. Err: the exit code 2 answer.
fn manifest_sources(
    paths: &[PathBuf],
    files: &DiskAndStdin,
    relative_to: Option<&Path>,
) -> Result<(Sources, String), (u8, String, String)> {
    let (inputs, passed_over, mut err) = manifest_inputs(paths);
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let mut sources = Vec::new();
    for path in &inputs {
        let name = path.display().to_string();
        let text = match files.read(path) {
            Ok(text) => text,
            Err(e) => {
                err.push_str(&format!("{name}: cannot read: {e}\n"));
                continue;
            }
        };
        if scenario::discover::kind_of_text(&name, &text) == scenario::discover::FileKind::Scenario
        {
            err.push_str(&format!(
                "{name}: a scenario; this command reads manifests\n"
            ));
            continue;
        }
        let manifests = match yaml::load_str(&name, &text, LINT_NAMESPACE) {
            Ok(m) => m,
            Err(e) => {
                err.push_str(&format!("{e}\n"));
                continue;
            }
        };
        let source = match relative_to {
            _ if name == STDIN_NAME => scenario::init::ManifestSource::Inline(text),
            Some(base) => {
                let relative = pathdiff::diff_paths(absolute(path), absolute(base))
                    .unwrap_or_else(|| absolute(path));
                scenario::init::ManifestSource::File(relative.display().to_string())
            }
            None => scenario::init::ManifestSource::File(name),
        };
        sources.push((source, manifests));
    }
    if err.is_empty() {
        Ok((sources, passed_over))
    } else {
        Err((2, String::new(), passed_over + &err))
    }
}

/// `canarysim check PATH…`.
fn check(
    paths: &[PathBuf],
    settings: &scenario::check::Settings,
    format: Format,
) -> (u8, String, String) {
    let files = match stdin_if_named(paths) {
        Ok(files) => files,
        Err(e) => return (2, String::new(), e),
    };
    let (sources, passed_over) = match manifest_sources(paths, &files, None) {
        Ok(read) => read,
        Err(answer) => return answer,
    };
    let all: Vec<Manifest> = sources
        .iter()
        .flat_map(|(_, m)| m.iter().cloned())
        .collect();
    let mut findings = lint::check(&all, IstioWeightRules::default());
    findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    findings.dedup_by(|a, b| a.sort_key() == b.sort_key());
    let report = match scenario::check::check(&sources, &files, &findings, settings) {
        Ok(report) => report,
        Err(e) => return (2, String::new(), format!("{passed_over}{e}\n")),
    };
    let out = match format {
        Format::Text => report::text::check(&report),
        Format::Json => serde_json::to_string_pretty(&report).unwrap_or_default() + "\n",
    };
    (u8::from(!report.passed), out, passed_over)
}

/// `canarysim init PATH… [-o FILE]`.
fn init(paths: &[PathBuf], output: Option<&Path>) -> (u8, String, String) {
    let files = match stdin_if_named(paths) {
        Ok(files) => files,
        Err(e) => return (2, String::new(), e),
    };
    // Paths in the scenario are relative to the folder it is written to.
    let base = match output.and_then(Path::parent) {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let (sources, passed_over) = match manifest_sources(paths, &files, Some(&base)) {
        Ok(read) => read,
        Err(answer) => return answer,
    };
    let written = match scenario::init::scenario(&sources) {
        Ok(w) => w,
        Err(e) => return (2, String::new(), format!("{passed_over}{e}\n")),
    };
    let mut notes = passed_over;
    for n in &written.notes {
        notes.push_str(&format!("note: {n}\n"));
    }
    match output {
        None => (0, written.text, notes),
        Some(file) => match std::fs::write(file, &written.text) {
            Ok(()) => {
                notes.push_str(&format!(
                    "wrote {}; run it with `canarysim run {}`\n",
                    file.display(),
                    file.display()
                ));
                (0, String::new(), notes)
            }
            Err(e) => (
                2,
                String::new(),
                format!("{notes}{}: cannot write: {e}\n", file.display()),
            ),
        },
    }
}

/// `canarysim lint FILE…`; `-` is standard input (`helm template . | canarysim lint -`).
fn lint_files(paths: &[PathBuf]) -> (u8, String, String) {
    // Plain manifest files form one set; a scenario is its own world, so its manifests are
    // checked apart from everything else (two scenarios may define the same objects).
    let mut pooled: Vec<Manifest> = Vec::new();
    // Each set with the istiod that checks its VirtualServices (a scenario's `istio_version`).
    let mut sets: Vec<(Vec<Manifest>, IstioWeightRules)> = Vec::new();
    let files = match stdin_if_named(paths) {
        Ok(files) => files,
        Err(e) => return (2, String::new(), e),
    };
    let (inputs, passed_over, mut err) = manifest_inputs(paths);
    for path in &inputs {
        let name = path.display().to_string();
        let loaded = files
            .read(path)
            .map_err(|e| format!("{name}: cannot read: {e}"))
            .and_then(|text| {
                if scenario::discover::kind_of_text(&name, &text)
                    == scenario::discover::FileKind::Scenario
                {
                    scenario::parse(path, &files)
                        .map(|plan| sets.push((plan.all_manifests(), plan.istio_weight_rules)))
                        .map_err(|e| e.to_string())
                } else {
                    yaml::load_str(&name, &text, LINT_NAMESPACE)
                        .map(|m| pooled.extend(m))
                        .map_err(|e| e.to_string())
                }
            });
        if let Err(e) = loaded {
            err.push_str(&e);
            err.push('\n');
        }
    }
    // Checking the rest while a file is unreadable would report its objects as missing.
    if !err.is_empty() {
        return (2, String::new(), passed_over + &err);
    }
    sets.push((pooled, IstioWeightRules::default()));
    let mut diagnostics: Vec<Diagnostic> = sets
        .iter()
        .flat_map(|(manifests, istio)| lint::check(manifests, *istio))
        .collect();
    diagnostics.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    diagnostics.dedup_by(|a, b| a.sort_key() == b.sort_key());
    let errors = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let warnings = diagnostics.len() - errors;
    let mut out = String::new();
    for d in &diagnostics {
        out.push_str(&format!("{d}\n"));
    }
    out.push_str(&format!(
        "{}, {}\n",
        report::text::count(errors, "error"),
        report::text::count(warnings, "warning")
    ));
    (u8::from(errors > 0), out, passed_over)
}

fn compare(
    path: Option<&Path>,
    seed: Option<u64>,
    ingress2gateway: bool,
    format: Format,
) -> (u8, String, String) {
    let (files, path): (&dyn Files, PathBuf) = match path {
        None => (&EMBEDDED, PathBuf::from(DEFAULT_SCENARIO)),
        Some(p) => (&Disk, p.to_path_buf()),
    };
    let plan = match scenario::load_runnable(&path, files) {
        Ok(plan) => plan,
        Err(e) => return (2, String::new(), format!("{e}\n")),
    };
    if ingress2gateway {
        let report = scenario::migration::migration_check(&plan, seed);
        let out = match format {
            Format::Text => report::text::migration(&report),
            Format::Json => serde_json::to_string_pretty(&report).unwrap_or_default() + "\n",
        };
        return (u8::from(!report.failures.is_empty()), out, String::new());
    }
    let report = scenario::compare::compare(&plan, seed);
    let out = match format {
        Format::Text => report::text::compare(&report),
        Format::Json => serde_json::to_string_pretty(&report).unwrap_or_default() + "\n",
    };
    (u8::from(!report.failures.is_empty()), out, String::new())
}

/// Simulated (the default) or on real sockets.
#[derive(Debug, Clone, Copy, PartialEq)]
enum RunMode {
    Simulated,
    Live { time_scale: f64 },
}

/// `run`'s bounds on a step's work, where the command line set them.
struct Budgets {
    requests: Option<u64>,
    instants: Option<u64>,
}

fn run(
    path: Option<&Path>,
    seed: Option<u64>,
    format: Format,
    mode: RunMode,
    budgets: Budgets,
) -> (u8, String, String) {
    if let RunMode::Live { time_scale } = mode {
        if !(time_scale.is_finite() && time_scale > 0.0) {
            return (
                2,
                String::new(),
                format!("--time-scale {time_scale}: expected a number above 0\n"),
            );
        }
    }
    let files: (&dyn Files, PathBuf) = match path {
        None => (&EMBEDDED, PathBuf::from(DEFAULT_SCENARIO)),
        Some(p) => (&Disk, p.to_path_buf()),
    };
    let mut err = String::new();
    let scenario_paths = if files.1.is_dir() {
        match scenario::discover::scenarios_in(&files.1, false) {
            Ok((run, skipped)) if run.is_empty() => {
                let why = scenario::discover::nothing_to_run(&files.1, skipped.len());
                return (2, String::new(), format!("{why}\n"));
            }
            Ok((run, skipped)) => {
                for m in skipped {
                    err.push_str(&format!(
                        "{}: a Kubernetes manifest, not a scenario: skipped\n",
                        m.display()
                    ));
                }
                run
            }
            Err(e) => return (2, String::new(), format!("{}: {e}\n", files.1.display())),
        }
    } else {
        vec![files.1.clone()]
    };
    let mut reports: Vec<RunReport> = Vec::new();
    // Files that did not load, for the summary: a folder's run lists every file it read.
    let mut invalid_files: Vec<String> = Vec::new();
    for p in &scenario_paths {
        match scenario::load_runnable(p, files.0).map(|mut plan| {
            if let Some(budget) = budgets.requests {
                plan.request_budget = budget;
            }
            if let Some(budget) = budgets.instants {
                plan.instant_budget = budget;
            }
            plan
        }) {
            Ok(plan) => match mode {
                RunMode::Simulated => reports.push(run_simulated(&plan, seed)),
                RunMode::Live { time_scale } => {
                    match crate::live::run_live(&plan, seed, time_scale) {
                        Ok(r) => reports.push(r),
                        Err(e) => {
                            err.push_str(&format!("{e}\n"));
                            invalid_files.push(p.display().to_string());
                        }
                    }
                }
            },
            Err(e) => {
                err.push_str(&format!("{e}\n"));
                invalid_files.push(p.display().to_string());
            }
        }
    }
    let mut out = String::new();
    match format {
        Format::Json if scenario_paths.len() == 1 => {
            if let Some(r) = reports.first() {
                out.push_str(&report::json(r));
                out.push('\n');
            }
        }
        Format::Json => {
            out.push_str(&report::json_many(&reports));
            out.push('\n');
        }
        Format::Text => {
            for r in &reports {
                out.push_str(&report::text::render(r));
                out.push('\n');
            }
            if scenario_paths.len() > 1 {
                out.push_str(&report::text::summary(&reports, &invalid_files));
            }
        }
    }
    let code = if !invalid_files.is_empty() {
        2
    } else if reports.iter().all(|r| r.passed) {
        0
    } else {
        1
    };
    (code, out, err)
}
