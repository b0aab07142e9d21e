//! The TUI end to end in a real terminal: the release binary inside tmux (installed by
//! `.ci/run`), driven by keys sent with `send-keys`, read back with `capture-pane`. Checks
//! that Enter starts the walkthrough, space runs it, the steps and the weights advance, p
//! promotes, and that after q the terminal is restored (the shell's screen is back, the
//! alternate screen gone). Ignored in the hermetic `cargo test`; run with
//! `cargo test --release --test real_tools -- --ignored tui_tmux::`.

use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server of its own (its own socket), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux on the PATH (.ci/run installs it)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "tui"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    fn pane(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "tui"])
    }

    /// Waits (bounded) until the pane shows what `until` looks for.
    fn wait_for(&self, what: &str, until: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let pane = self.pane();
            if until(&pane) {
                return pane;
            }
            assert!(Instant::now() < deadline, "no {what} within 30 s:\n{pane}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// The set weight shown on the weights panel's `set` bar.
fn set_weight(pane: &str) -> Option<f64> {
    let line = pane.lines().find(|l| l.contains("│set "))?;
    let figure = line.split('%').next()?.split_whitespace().last()?;
    figure.parse().ok()
}

#[test]
#[ignore = "needs tmux (the real-programs suite: .ci/run)"]
fn keys_drive_the_walkthrough_and_q_restores_the_terminal() {
    let binary = env!("CARGO_BIN_EXE_canarysim");
    let root = env!("CARGO_MANIFEST_DIR");
    let tmux = Tmux {
        socket: format!("canarysim-tui-{}", std::process::id()),
    };
    // A shell first, so that what is left after the TUI quits can be seen.
    tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "tui",
        "-x",
        "100",
        "-y",
        "32",
        "-c",
        root,
        "sh",
    ]);
    tmux.keys(&["clear; echo shell-before-tui", "Enter"]);
    tmux.wait_for("the shell", |p| p.contains("shell-before-tui"));
    tmux.keys(&[
        &format!("{binary} tui scenarios/seed-004-walkthrough.yaml; echo tui-exit=$?"),
        "Enter",
    ]);
    tmux.wait_for("the scenario list", |p| {
        p.contains("seed-004-istio-walkthrough")
    });
    tmux.keys(&["Enter"]);
    let held = tmux.wait_for("the run view", |p| {
        p.contains("॥ held") && p.contains("steps")
    });
    assert_eq!(set_weight(&held), Some(100.0), "{held}");
    // Space: the steps run until the first pause at 20 %. SetWeight 20 shows from t+5s, the
    // pause from t+10s, once the canary's pod is ready: the rollout's status line says when
    // (the steps panel's `wait until Paused` says nothing of it).
    tmux.keys(&["Space"]);
    let paused = tmux.wait_for("the 20 % pause", |p| {
        set_weight(p) == Some(20.0) && p.contains("॥ Paused")
    });
    assert!(paused.contains("✔"), "steps done are marked:\n{paused}");
    // Hold, then p: promoted to the next step's 40 %.
    tmux.keys(&["Space"]);
    tmux.wait_for("the hold", |p| p.contains("॥ held"));
    tmux.keys(&["p"]);
    tmux.wait_for("40 % after p", |p| set_weight(p) == Some(40.0));
    // q back to the list, q again to quit: the shell's screen is back.
    tmux.keys(&["q"]);
    tmux.wait_for("the list again", |p| p.contains("Enter: run"));
    tmux.keys(&["q"]);
    let after = tmux.wait_for("the shell after q", |p| p.contains("tui-exit=0"));
    assert!(
        after.contains("shell-before-tui"),
        "the main screen is back:\n{after}"
    );
    assert!(
        !after.contains("┌ steps"),
        "no TUI left on the screen:\n{after}"
    );
    // The terminal is out of raw mode: a typed command echoes and runs.
    tmux.keys(&["echo cooked-$((1+1))", "Enter"]);
    tmux.wait_for("a cooked terminal", |p| p.contains("cooked-2"));
}
