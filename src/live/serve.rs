//! `canarysim serve FILE`: the scenario's world up on real sockets until Ctrl-C, its steps
//! played on the wall clock (scaled), or only its initial state with `--hold`.

use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{Live, LiveError, Pacer};
use crate::scenario::{Plan, Runner};

/// How `serve` runs.
#[derive(Debug, Clone, Copy)]
pub struct ServeOptions {
    pub seed: Option<u64>,
    /// Serve the initial state only (no step runs).
    pub hold: bool,
    /// Virtual seconds per wall second.
    pub time_scale: f64,
}

/// Serves until `stop` is set (the CLI sets it on Ctrl-C or SIGTERM), writing what happens
/// to `out`: the router's address first, then each step as it completes.
pub fn serve(
    plan: &Plan,
    options: ServeOptions,
    stop: Arc<AtomicBool>,
    out: &mut dyn Write,
) -> Result<(), LiveError> {
    let seed = options.seed.unwrap_or(plan.seed);
    let mut runner = Runner::new(plan, options.seed);
    let mut live = Live::start(&plan.backends, &plan.namespace, seed)?;
    let (lb, mode) = plan.data_plane();
    live.set_data_plane(lb, mode);
    live.sync(&runner.world);
    let host = plan
        .steps
        .iter()
        .find_map(|s| match &s.kind {
            crate::scenario::plan::StepKind::Load(w) => Some(w.host.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let _ = writeln!(out, "router listening on http://{}", live.address());
    if !host.is_empty() {
        let _ = writeln!(
            out,
            "try: curl -H 'Host: {host}' http://{}/",
            live.address()
        );
    }
    for (pod, address) in live.pods() {
        let _ = writeln!(out, "pod {pod} on {address}");
    }
    let mut announced = Vec::new();
    announce_l4(&live, &mut announced, out);
    let _ = out.flush();
    // The runner's hook and this function share the live side.
    let live = Rc::new(RefCell::new(live));
    if !options.hold {
        let pacer = Pacer::new(&runner.world, options.time_scale, stop.clone());
        let paced = live.clone();
        runner.on_instant(move |w| pacer.reach(w, &mut paced.borrow_mut()));
        while !stop.load(Ordering::Relaxed) {
            let Some(step) = runner.step() else { break };
            let _ = writeln!(
                out,
                "{} step {} {}: {}",
                step.time,
                step.index,
                step.summary,
                if step.passed { "ok" } else { "FAILED" }
            );
            announce_l4(&live.borrow(), &mut announced, out);
            let _ = out.flush();
        }
        live.borrow_mut().sync(&runner.world);
        drop(runner);
        if !stop.load(Ordering::Relaxed) {
            let _ = writeln!(out, "all steps done; serving the final state until Ctrl-C");
            let _ = out.flush();
        }
    }
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(live);
    let _ = writeln!(out, "stopped; every port closed");
    Ok(())
}

/// Prints each gateway TLS/TCP listener the first time it is open.
fn announce_l4(live: &Live, announced: &mut Vec<(String, u32)>, out: &mut dyn Write) {
    for (gateway, port, address) in live.l4_listeners() {
        if !announced.contains(&(gateway.clone(), port)) {
            let _ = writeln!(
                out,
                "gateway {gateway} port {port} (TLS/TCP routes) on {address}"
            );
            announced.push((gateway, port));
        }
    }
}
