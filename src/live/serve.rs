//! `canarysim serve FILE`: the scenario's world up on real sockets until Ctrl-C, its steps
//! played on the wall clock (scaled), or only its initial state with `--hold`. With `--api`
//! the world's API server listens too (Kubernetes' REST paths, for kubectl): a write goes
//! through the simulation as a scenario step would, and the controllers react to it.

use std::cell::RefCell;
use std::io::Write;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{Live, LiveError, Pacer};
use crate::apiserver::http::{Endpoint, kubeconfig};
use crate::scenario::{Plan, Runner};
use crate::sim::World;

/// How `serve` runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub seed: Option<u64>,
    /// Serve the initial state only (no step runs). With the API, time stands still but
    /// for writes: each lets the world run until nothing more is scheduled.
    pub hold: bool,
    /// Virtual seconds per wall second.
    pub time_scale: f64,
    /// Serve the API (None: no API server).
    pub api: Option<ApiOptions>,
}

#[derive(Debug, Clone, Default)]
pub struct ApiOptions {
    /// Where to write the kubeconfig (None: a file in the temporary directory, removed at
    /// exit).
    pub kubeconfig: Option<PathBuf>,
}

/// After a write with `--hold`, the world runs until nothing is scheduled, but at most this
/// much virtual time (a background analysis keeps scheduling measurements forever).
pub const QUIET_CAP: Duration = Duration::from_secs(3600);

/// Watch history kept for watches that resume from a resourceVersion; older ones get 410.
const WATCH_HISTORY: usize = 10_000;

/// And at most this much of it (about, as JSON): a thousand writes of 2.5 MB objects held
/// 2.5 GB under the count bound alone.
const WATCH_HISTORY_BYTES: usize = 256 << 20;

/// How long the loop waits for a request before moving the clock.
const NAP: Duration = Duration::from_millis(20);

type Out<'p> = Rc<RefCell<&'p mut dyn Write>>;

fn say(out: &Out, line: &str) {
    let mut out = out.borrow_mut();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The API server of a served world and its kubeconfig.
struct ApiSide {
    endpoint: Endpoint,
    kubeconfig: PathBuf,
    /// Remove the kubeconfig at exit (canarysim chose its path).
    ours: bool,
}

impl ApiSide {
    fn start(options: &ApiOptions, namespace: &str) -> Result<ApiSide, LiveError> {
        let endpoint = Endpoint::start().map_err(LiveError::Listen)?;
        let (path, ours) = match &options.kubeconfig {
            Some(p) => (p.clone(), false),
            None => (
                std::env::temp_dir().join(format!("canarysim-{}.kubeconfig", std::process::id())),
                true,
            ),
        };
        std::fs::write(&path, kubeconfig(endpoint.address(), namespace))
            .map_err(|e| LiveError::Kubeconfig(path.clone(), e))?;
        Ok(ApiSide {
            endpoint,
            kubeconfig: path,
            ours,
        })
    }

    /// Answers the requests that arrive within `wait`; after writes the controllers
    /// reconcile (and with `hold`, the world runs until quiet). Every change then goes to
    /// the watches.
    /// Answers what comes within `wait`; returns whether any of it wrote.
    fn serve(&mut self, world: &mut World, wait: Duration, hold: bool, out: &Out) -> bool {
        world.api.set_time(world.now());
        let writes = self.endpoint.answer_pending(&mut world.api, wait);
        let wrote = !writes.is_empty();
        if wrote {
            for w in &writes {
                say(out, &format!("{} api: {w}", world.now()));
            }
            let result = if hold {
                run_until_quiet(world, out)
            } else {
                world.settle()
            };
            if let Err(e) = result {
                say(out, &format!("{} simulation error: {e}", world.now()));
            }
        }
        self.forward(world);
        wrote
    }

    fn forward(&mut self, world: &mut World) {
        self.endpoint.forward(&world.api);
        world.api.compact_log(WATCH_HISTORY, WATCH_HISTORY_BYTES);
    }
}

impl Drop for ApiSide {
    fn drop(&mut self) {
        if self.ours {
            let _ = std::fs::remove_file(&self.kubeconfig);
        }
    }
}

/// Runs the world until nothing more is scheduled, at most [`QUIET_CAP`] of virtual time.
fn run_until_quiet(world: &mut World, out: &Out) -> Result<(), crate::sim::SimError> {
    let start = world.now();
    let quiet = world.advance_until(start.after(QUIET_CAP), |w| w.next_wake().is_none())?;
    if world.now() > start {
        let why = if quiet {
            "nothing more is scheduled"
        } else {
            "the 1 h cap per write; something is still scheduled"
        };
        say(out, &format!("{} ran to {} ({why})", start, world.now()));
    }
    Ok(())
}

// Long: the serve loop in its order: the router's address, the steps on the wall clock, the
// shutdown on stop.
/// Serves until `stop` is set (the CLI sets it on Ctrl-C or SIGTERM), writing what happens
/// to `out`: the router's address first, then each step as it completes.
pub fn serve<'p>(
    plan: &'p Plan,
    options: ServeOptions,
    stop: Arc<AtomicBool>,
    out: &'p mut dyn Write,
) -> Result<(), LiveError> {
    let seed = options.seed.unwrap_or(plan.seed);
    // Watches over HTTP read the store's log, from the first write.
    let mut runner = Runner::with_watch_log(plan, options.seed, options.api.is_some());
    let mut live = Live::start(&plan.backends, &plan.namespace, seed)?;
    let (lb, mode) = plan.data_plane();
    live.set_data_plane(lb, mode);
    let out: Out<'p> = Rc::new(RefCell::new(out));
    let api = match &options.api {
        Some(a) => Some(Rc::new(RefCell::new(ApiSide::start(a, &plan.namespace)?))),
        None => None,
    };
    if options.hold && api.is_some() {
        if let Err(e) = run_until_quiet(&mut runner.world, &out) {
            say(&out, &format!("simulation error: {e}"));
        }
    }
    live.sync(&runner.world);
    announce(plan, &live, &out);
    if let Some(api) = &api {
        let api = api.borrow();
        say(
            &out,
            &format!("api server on http://{}", api.endpoint.address()),
        );
        say(&out, &format!("kubeconfig {}", api.kubeconfig.display()));
        say(
            &out,
            &format!(
                "try: KUBECONFIG={} kubectl get rollouts,vs,dr,svc,rs,pods",
                api.kubeconfig.display()
            ),
        );
    }
    let mut announced = Vec::new();
    announce_l4(&live, &mut announced, &out);
    // The runner's hook and this function share the live side and the API.
    let live = Rc::new(RefCell::new(live));
    let pacer = Rc::new(Pacer::new(&runner.world, options.time_scale, stop.clone()));
    if !options.hold {
        let (paced, api_hook) = (live.clone(), api.clone());
        runner.on_instant(move |w| {
            if let Some(api) = &api_hook {
                api.borrow_mut().forward(w);
            }
            paced.borrow_mut().sync(w);
        });
        let (paced, pacer_hook, api_hook, out_hook) =
            (live.clone(), pacer.clone(), api.clone(), out.clone());
        runner.on_wait(move |w| {
            // The world waits for the wall clock to reach its next instant. Until then its
            // clock follows the wall clock (short of that instant), so that a read shows the
            // world as of now and a write lands at the time it arrives; the world moved to
            // the next instant first and served from there, one event ahead of the wall.
            let Some(next) = w.next_instant() else {
                return false;
            };
            while let Some(left) = pacer_hook.wall_left(next) {
                let Some(api) = &api_hook else {
                    std::thread::sleep(left.min(Duration::from_millis(50)));
                    continue;
                };
                if let Err(e) = w.move_clock(pacer_hook.virtual_now()) {
                    say(&out_hook, &format!("{} simulation error: {e}", w.now()));
                }
                if api.borrow_mut().serve(w, left.min(NAP), false, &out_hook) {
                    paced.borrow_mut().sync(w);
                    // A write: the wait's condition is checked before the clock moves on.
                    return true;
                }
            }
            false
        });
        while !stop.load(Ordering::Relaxed) {
            let Some(step) = runner.step() else { break };
            say(
                &out,
                &format!(
                    "{} step {} {}: {}",
                    step.time,
                    step.index,
                    step.summary,
                    if step.passed { "ok" } else { "FAILED" }
                ),
            );
            announce_l4(&live.borrow(), &mut announced, &out);
        }
        live.borrow_mut().sync(&runner.world);
        if !stop.load(Ordering::Relaxed) {
            let next = if api.is_some() {
                "the clock runs on and the API serves"
            } else {
                "the clock runs on"
            };
            say(&out, &format!("all steps done; {next} until Ctrl-C"));
        }
        pacer.rebase(runner.world.now(), options.time_scale);
    }
    // After the steps the clock runs on (unless held): pushes land, pods turn ready, and
    // the router follows every change, whether an API write or a table coming into force.
    let world = &mut runner.world;
    while !stop.load(Ordering::Relaxed) {
        match &api {
            Some(api) => {
                api.borrow_mut().serve(world, NAP, options.hold, &out);
            }
            None => std::thread::sleep(NAP),
        }
        if !options.hold {
            if let Err(e) = world.advance_until(pacer.virtual_now(), |_| false) {
                say(&out, &format!("{} simulation error: {e}", world.now()));
            }
            if let Some(api) = &api {
                api.borrow_mut().forward(world);
            }
        }
        if live.borrow_mut().sync_if_changed(world) {
            announce_l4(&live.borrow(), &mut announced, &out);
        }
    }
    drop(live);
    drop(api);
    say(&out, "stopped; every port closed");
    Ok(())
}

/// The router's address, a curl to try, and each pod's address.
fn announce(plan: &Plan, live: &Live, out: &Out) {
    let host = plan
        .steps
        .iter()
        .find_map(|s| match &s.kind {
            crate::scenario::plan::StepKind::Load(w) => Some(w.traffic.host.clone()),
            _ => None,
        })
        .unwrap_or_default();
    say(
        out,
        &format!("router listening on http://{}", live.address()),
    );
    if !host.is_empty() {
        say(
            out,
            &format!("try: curl -H 'Host: {host}' http://{}/", live.address()),
        );
    }
    for (pod, address) in live.pods() {
        say(out, &format!("pod {pod} on {address}"));
    }
}

/// Prints each gateway TLS/TCP listener the first time it is open.
fn announce_l4(live: &Live, announced: &mut Vec<(String, u32)>, out: &Out) {
    for (gateway, port, address) in live.l4_listeners() {
        if !announced.contains(&(gateway.clone(), port)) {
            say(
                out,
                &format!("gateway {gateway} port {port} (TLS/TCP routes) on {address}"),
            );
            announced.push((gateway, port));
        }
    }
}
