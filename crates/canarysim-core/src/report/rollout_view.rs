//! Text renderer for `kubectl argo rollouts get rollout NAME`.
//!
//! A pure port of the output of argo-rollouts'
//! `pkg/kubectl-argo-rollouts/cmd/get/{get.go,get_rollout.go}` and the icon
//! and age helpers of `pkg/kubectl-argo-rollouts/info/*.go`, driven from plain
//! data instead of Kubernetes objects. The caller decides statuses, tags and
//! ages; this module only lays them out the way the plugin does:
//!
//! * the header block uses Go's `%-17s%v` per line;
//! * the tree is aligned like `ansiterm.NewTabWriter(out, 0, 0, 2, ' ', 0)`,
//!   i.e. Go's elastic-tabstop `text/tabwriter` with minwidth 0, padding 2,
//!   space padding, no flags, and ANSI escapes excluded from cell widths;
//! * ages go through [`human_duration`], a port of
//!   `k8s.io/apimachinery/pkg/util/duration.HumanDuration`.
//!
//! Known simplifications: experiments and analysis runs are not modelled,
//! cell width is the number of `char`s (the Go code uses terminal width, which
//! only differs for East-Asian wide or zero-width characters), and the
//! `TERM=dumb` colour override is left to the caller.

pub use crate::go::human_duration;
use std::fmt::Write as _;

pub use crate::rollout_info::{
    ImageView, PodView, ReplicaSetView, RevisionView, RolloutView, ScaleDownDelay,
};

const ICON_WAITING: &str = "◷";
const ICON_PROGRESSING: &str = "◌";
const ICON_WARNING: &str = "⚠";
const ICON_UNKNOWN: &str = "?";
const ICON_OK: &str = "✔";
const ICON_BAD: &str = "✖";
const ICON_PAUSED: &str = "॥";
const ICON_NEUTRAL: &str = "•";

const ICON_ROLLOUT: &str = "⟳";
const ICON_REVISION: &str = "#";
const ICON_REPLICA_SET: &str = "⧉";
const ICON_POD: &str = "□";
const ICON_ANALYSIS_RUN: &str = "α";

const TAG_CANARY: &str = "canary";
const TAG_STABLE: &str = "stable";

/// Width of the left column of the header block (`%-17s`).
const LABEL_WIDTH: usize = 17;
/// Tabwriter padding used by the plugin.
const TAB_PADDING: usize = 2;

/// Icon for a Rollout status (`info.rolloutIcon`).
pub fn rollout_icon(status: &str) -> &'static str {
    match status {
        "Progressing" => ICON_PROGRESSING,
        "Error" | "InvalidSpec" => ICON_WARNING,
        "Paused" => ICON_PAUSED,
        "Healthy" => ICON_OK,
        "Degraded" => ICON_BAD,
        "Unknown" => ICON_UNKNOWN,
        "ScaledDown" => ICON_NEUTRAL,
        _ => " ",
    }
}

/// Icon for a ReplicaSet status (`info.replicaSetIcon`).
pub fn replica_set_icon(status: &str) -> &'static str {
    match status {
        "Progressing" => ICON_PROGRESSING,
        "Healthy" => ICON_OK,
        "ReplicaFailure" => ICON_BAD,
        "ScaledDown" => ICON_NEUTRAL,
        _ => " ",
    }
}

/// Icon for a Pod status (`info.podIcon`). Note that the plugin shows
/// `Pending` as progressing (`◌`), not waiting.
/// The plugin's `analysisIcon`.
pub(crate) fn analysis_icon(status: &str) -> &'static str {
    match status {
        "Successful" => "✔",
        "Inconclusive" => "?",
        "Failed" => "✖",
        "Error" => "⚠",
        "Running" => "◌",
        "Pending" => "◷",
        _ => " ",
    }
}

pub fn pod_icon(status: &str) -> &'static str {
    if status.starts_with("Init:") {
        return ICON_PROGRESSING;
    }
    if status.starts_with("Signal:") || status.starts_with("ExitCode:") {
        return ICON_BAD;
    }
    if status.ends_with("Error") || status.starts_with("Err") {
        return ICON_WARNING;
    }
    match status {
        "Pending" | "Terminating" | "ContainerCreating" => ICON_PROGRESSING,
        "Running" | "Completed" => ICON_OK,
        "Failed" | "InvalidImageName" | "CrashLoopBackOff" => ICON_BAD,
        "ImagePullBackOff" | "RegistryUnavailable" => ICON_WARNING,
        "Unknown" => ICON_UNKNOWN,
        _ => " ",
    }
}

/// Renders the screen as users see it: the plugin's output with trailing
/// spaces removed from every line (as in the docs and in the plugin's own
/// tests, which compare after `strings.TrimRight(line, " ")`).
pub fn render(view: &RolloutView, color: bool) -> String {
    let raw = render_untrimmed(view, color);
    let mut out = String::with_capacity(raw.len());
    for line in raw.split_inclusive('\n') {
        match line.strip_suffix('\n') {
            Some(body) => {
                out.push_str(body.trim_end_matches(' '));
                out.push('\n');
            }
            None => out.push_str(line.trim_end_matches(' ')),
        }
    }
    out
}

/// Renders the exact bytes the plugin writes, including the tabwriter's
/// trailing padding on rows whose last column is empty and the padding of
/// empty header values such as a blank `Step:`.
pub(crate) fn render_untrimmed(view: &RolloutView, color: bool) -> String {
    let c = Colorizer { enabled: color };
    let mut out = String::new();

    let status = format!("{} {}", c.colorize(rollout_icon(&view.status)), view.status);
    push_field(&mut out, "Name:", &view.name);
    push_field(&mut out, "Namespace:", &view.namespace);
    push_field(&mut out, "Status:", &status);
    if !view.message.is_empty() {
        push_field(&mut out, "Message:", &view.message);
    }
    if view.blue_green {
        push_field(&mut out, "Strategy:", "BlueGreen");
    } else {
        push_field(&mut out, "Strategy:", "Canary");
        let step = view
            .step
            .map(|(index, len)| format!("{index}/{len}"))
            .unwrap_or_default();
        push_field(&mut out, "  Step:", &step);
        push_field(&mut out, "  SetWeight:", &view.set_weight.to_string());
        push_field(&mut out, "  ActualWeight:", &view.actual_weight.to_string());
    }

    // The plugin keeps images sorted by name (mergeImageAndTags).
    let mut images: Vec<&ImageView> = view.images.iter().collect();
    images.sort_by(|a, b| a.image.cmp(&b.image));
    for (i, image) in images.iter().enumerate() {
        let label = if i == 0 { "Images:" } else { "" };
        push_field(&mut out, label, &c.format_image(image));
    }

    out.push_str("Replicas:\n");
    push_field(&mut out, "  Desired:", &view.desired.to_string());
    push_field(&mut out, "  Current:", &view.current.to_string());
    push_field(&mut out, "  Updated:", &view.updated.to_string());
    push_field(&mut out, "  Ready:", &view.ready.to_string());
    push_field(&mut out, "  Available:", &view.available.to_string());
    out.push('\n');

    out.push_str(&tabwrite(&tree_rows(view, &c), TAB_PADDING));
    out
}

/// Writes one `%-17s%v\n` header line.
fn push_field(out: &mut String, label: &str, value: &str) {
    // Writing into a String cannot fail.
    let _ = writeln!(out, "{label:<LABEL_WIDTH$}{value}");
}

/// ANSI colouring as done by `GetOptions.colorize`/`ansiFormat`.
struct Colorizer {
    enabled: bool,
}

impl Colorizer {
    /// Colour code for well-known words (`colorMapping`); unknown words get
    /// code 0, which the plugin still wraps in escapes.
    fn code(word: &str) -> u8 {
        match word {
            ICON_WAITING | ICON_UNKNOWN | TAG_CANARY => 33,
            ICON_PROGRESSING | "preview" | "ping" | "pong" | "Pending" | "Running" => 94,
            ICON_WARNING | ICON_BAD => 31,
            ICON_OK | TAG_STABLE | "active" => 32,
            _ => 0,
        }
    }

    fn colorize(&self, s: &str) -> String {
        self.colorize_status(s, s)
    }

    fn colorize_status(&self, s: &str, status: &str) -> String {
        if !self.enabled {
            return s.to_string();
        }
        format!("\x1b[{}m{s}\x1b[0m", Self::code(status))
    }

    fn format_image(&self, image: &ImageView) -> String {
        if image.tags.is_empty() {
            return image.image.clone();
        }
        let tags: Vec<String> = image.tags.iter().map(|t| self.colorize(t)).collect();
        format!("{} ({})", image.image, tags.join(", "))
    }
}

/// Tree-drawing prefixes for a child and for its own children
/// (`getPrefixes`).
fn prefixes(is_last: bool, sub: &str) -> (String, String) {
    if is_last {
        (format!("{sub}└──"), format!("{sub}   "))
    } else {
        (format!("{sub}├──"), format!("{sub}│  "))
    }
}

/// Builds the tab-separated rows of the tree (5 cells: NAME, KIND, STATUS,
/// AGE and the unaligned trailing INFO).
fn tree_rows(view: &RolloutView, c: &Colorizer) -> Vec<[String; 5]> {
    let mut rows = vec![["NAME", "KIND", "STATUS", "AGE", "INFO"].map(String::from)];
    rows.push([
        format!("{ICON_ROLLOUT} {}", view.name),
        "Rollout".to_string(),
        format!("{} {}", c.colorize(rollout_icon(&view.status)), view.status),
        human_duration(view.age),
        String::new(),
    ]);

    let mut revisions: Vec<&RevisionView> = view.revisions.iter().collect();
    revisions.sort_by_key(|r| std::cmp::Reverse(r.revision));
    for (i, rev) in revisions.iter().enumerate() {
        let (prefix, subpfx) = prefixes(i + 1 == revisions.len(), "");
        // The plugin prints "%s %s" with two empty strings in STATUS, hence " ".
        rows.push([
            format!("{prefix}{ICON_REVISION} revision:{}", rev.revision),
            String::new(),
            " ".to_string(),
            String::new(),
            String::new(),
        ]);
        let children = rev.replica_sets.len() + rev.analysis_runs.len();
        for (j, rs) in rev.replica_sets.iter().enumerate() {
            let (rs_prefix, rs_subpfx) = prefixes(j + 1 == children, &subpfx);
            push_replica_set(&mut rows, rs, &rs_prefix, &rs_subpfx, c);
        }
        for (k, run) in rev.analysis_runs.iter().enumerate() {
            let last = rev.replica_sets.len() + k + 1 == children;
            let (run_prefix, _) = prefixes(last, &subpfx);
            let info: Vec<String> = [
                ("✔", run.successful),
                ("✖", run.failed),
                ("?", run.inconclusive),
                ("⚠", run.error),
            ]
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(icon, n)| format!("{} {n}", c.colorize(icon)))
            .collect();
            let icon = analysis_icon(&run.status);
            rows.push([
                format!("{run_prefix}{ICON_ANALYSIS_RUN} {}", run.name),
                "AnalysisRun".to_string(),
                format!("{} {}", c.colorize(icon), run.status),
                human_duration(run.age),
                info.join(","),
            ]);
        }
    }
    rows
}

/// Adds a ReplicaSet row and its pod rows (`PrintReplicaSetInfo`).
fn push_replica_set(
    rows: &mut Vec<[String; 5]>,
    rs: &ReplicaSetView,
    prefix: &str,
    subpfx: &str,
    c: &Colorizer,
) {
    let mut info = Vec::new();
    let mut name = rs.name.clone();
    if rs.stable {
        info.push(c.colorize(TAG_STABLE));
        name = c.colorize_status(&name, TAG_STABLE);
    }
    if rs.canary {
        info.push(c.colorize(TAG_CANARY));
        name = c.colorize_status(&name, TAG_CANARY);
    }
    if let Some(tag) = rs.service_tag {
        info.push(c.colorize(tag));
        name = c.colorize_status(&name, tag);
    }
    match rs.scale_down_delay {
        Some(ScaleDownDelay::Remaining(d)) => info.push(format!("delay:{}", human_duration(d))),
        Some(ScaleDownDelay::Passed) => info.push("delay:passed".to_string()),
        None => {}
    }
    rows.push([
        format!("{prefix}{ICON_REPLICA_SET} {name}"),
        "ReplicaSet".to_string(),
        format!("{} {}", c.colorize(replica_set_icon(&rs.status)), rs.status),
        human_duration(rs.age),
        info.join(","),
    ]);
    for (k, pod) in rs.pods.iter().enumerate() {
        let (pod_prefix, _) = prefixes(k + 1 == rs.pods.len(), subpfx);
        let mut pod_info = format!("ready:{}/{}", pod.ready.0, pod.ready.1);
        if pod.restarts > 0 {
            let _ = write!(pod_info, ",restarts:{}", pod.restarts);
        }
        rows.push([
            format!("{pod_prefix}{ICON_POD} {}", pod.name),
            "Pod".to_string(),
            format!("{} {}", c.colorize(pod_icon(&pod.status)), pod.status),
            human_duration(pod.age),
            pod_info,
        ]);
    }
}

/// Display width of a cell: chars, with ANSI CSI sequences excluded (the
/// plugin's tabwriter strips them with vtclean before measuring).
fn cell_width(s: &str) -> usize {
    let mut width = 0;
    let mut chars = s.chars();
    while let Some(ch) = chars.next() {
        if ch == '\x1b' {
            // Skip "ESC [ params final" where final is in 0x40..=0x7e.
            if chars.clone().next() == Some('[') {
                chars.next();
                for c in chars.by_ref() {
                    if ('\x40'..='\x7e').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        width += 1;
    }
    width
}

/// Go `text/tabwriter` formatting (elastic tabstops, minwidth 0, space
/// padding, no flags) of complete lines whose cells are all tab-terminated
/// except the last one, which is never padded.
fn tabwrite<const N: usize>(rows: &[[String; N]], padding: usize) -> String {
    let lines: Vec<Vec<(&str, usize)>> = rows
        .iter()
        .map(|r| r.iter().map(|s| (s.as_str(), cell_width(s))).collect())
        .collect();
    let mut out = String::new();
    let mut widths = Vec::new();
    format_block(&lines, &mut widths, 0, lines.len(), padding, &mut out);
    out
}

/// Recursive column-block pass of Go's `Writer.format`: a column block is a
/// run of consecutive lines that all have a tab-terminated cell in column
/// `widths.len()`; its width is the widest such cell plus padding.
fn format_block(
    lines: &[Vec<(&str, usize)>],
    widths: &mut Vec<usize>,
    line0: usize,
    line1: usize,
    padding: usize,
    out: &mut String,
) {
    let column = widths.len();
    // Column `column` exists in a line if it is not that line's trailing cell.
    let has_column = |i: usize| column + 1 < lines[i].len();
    let mut start = line0;
    let mut this = line0;
    while this < line1 {
        if !has_column(this) {
            this += 1;
            continue;
        }
        write_lines(lines, widths, start, this, out);
        start = this;
        let mut width = 0;
        while this < line1 && has_column(this) {
            width = width.max(lines[this][column].1 + padding);
            this += 1;
        }
        widths.push(width);
        format_block(lines, widths, start, this, padding, out);
        widths.pop();
        start = this;
    }
    write_lines(lines, widths, start, line1, out);
}

/// Emits lines `line0..line1`, padding every cell that has a known column
/// width (Go's `Writer.writeLines` for left alignment).
fn write_lines(
    lines: &[Vec<(&str, usize)>],
    widths: &[usize],
    line0: usize,
    line1: usize,
    out: &mut String,
) {
    for line in &lines[line0..line1] {
        for (j, (text, width)) in line.iter().enumerate() {
            out.push_str(text);
            if let Some(&cell) = widths.get(j) {
                out.extend(std::iter::repeat_n(' ', cell.saturating_sub(*width)));
            }
        }
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Copied verbatim from the seed document.
    const SEED_INITIAL: &str = r#"Name:            rollouts-demo
Namespace:       my-demo
Status:          ✔ Healthy
Strategy:        Canary
  Step:          9/9
  SetWeight:     100
  ActualWeight:  100
Images:          argoproj/rollouts-demo:blue (stable)
Replicas:
  Desired:       4
  Current:       4
  Updated:       4
  Ready:         4
  Available:     4

NAME                                      KIND        STATUS     AGE    INFO
⟳ rollouts-demo                           Rollout     ✔ Healthy  5m32s
└──# revision:1
   └──⧉ rollouts-demo-76c569d8b           ReplicaSet  ✔ Healthy  36s    stable
      ├──□ rollouts-demo-76c569d8b-24gls  Pod         ✔ Running  25s    ready:2/2
      ├──□ rollouts-demo-76c569d8b-ck4rq  Pod         ✔ Running  25s    ready:2/2
      ├──□ rollouts-demo-76c569d8b-kxb56  Pod         ✔ Running  25s    ready:2/2
      └──□ rollouts-demo-76c569d8b-wmgnm  Pod         ✔ Running  25s    ready:2/2
"#;

    /// Copied verbatim from the seed document.
    const SEED_STEP1: &str = r#"Name:            rollouts-demo
Namespace:       my-demo
Status:          ॥ Paused
Message:         CanaryPauseStep
Strategy:        Canary
  Step:          1/9
  SetWeight:     20
  ActualWeight:  20
Images:          argoproj/rollouts-demo:blue (stable)
                 argoproj/rollouts-demo:yellow (canary)
Replicas:
  Desired:       4
  Current:       5
  Updated:       1
  Ready:         5
  Available:     5

NAME                                       KIND        STATUS     AGE    INFO
⟳ rollouts-demo                            Rollout     ॥ Paused   38m
├──# revision:2
│  └──⧉ rollouts-demo-5cf4fb69f8           ReplicaSet  ✔ Healthy  3m13s  canary
│     └──□ rollouts-demo-5cf4fb69f8-5hlv9  Pod         ✔ Running  3m13s  ready:2/2
└──# revision:1
   └──⧉ rollouts-demo-76c569d8b            ReplicaSet  ✔ Healthy  33m    stable
      ├──□ rollouts-demo-76c569d8b-24gls   Pod         ✔ Running  33m    ready:2/2
      ├──□ rollouts-demo-76c569d8b-ck4rq   Pod         ✔ Running  33m    ready:2/2
      ├──□ rollouts-demo-76c569d8b-kxb56   Pod         ✔ Running  33m    ready:2/2
      └──□ rollouts-demo-76c569d8b-wmgnm   Pod         ✔ Running  33m    ready:2/2
"#;

    /// Copied verbatim from the seed document.
    const SEED_STEP3: &str = r#"Name:            rollouts-demo
Namespace:       my-demo
Status:          ॥ Paused
Message:         CanaryPauseStep
Strategy:        Canary
  Step:          3/9
  SetWeight:     40
  ActualWeight:  40
Images:          argoproj/rollouts-demo:blue (stable)
                 argoproj/rollouts-demo:yellow (canary)
Replicas:
  Desired:       4
  Current:       6
  Updated:       2
  Ready:         6
  Available:     6

NAME                                       KIND        STATUS     AGE  INFO
⟳ rollouts-demo                            Rollout     ॥ Paused   49m
├──# revision:2
│  └──⧉ rollouts-demo-5cf4fb69f8           ReplicaSet  ✔ Healthy  12m  canary
│     ├──□ rollouts-demo-5cf4fb69f8-pc986  Pod         ✔ Running  12m  ready:2/2
│     └──□ rollouts-demo-5cf4fb69f8-f895m  Pod         ✔ Running  27s  ready:2/2
└──# revision:1
   └──⧉ rollouts-demo-76c569d8b            ReplicaSet  ✔ Healthy  49m  stable
      ├──□ rollouts-demo-76c569d8b-4qkd7   Pod         ✔ Running  49m  ready:2/2
      ├──□ rollouts-demo-76c569d8b-8c4j7   Pod         ✔ Running  49m  ready:2/2
      ├──□ rollouts-demo-76c569d8b-dx4df   Pod         ✔ Running  49m  ready:2/2
      └──□ rollouts-demo-76c569d8b-hfxzs   Pod         ✔ Running  49m  ready:2/2
"#;

    /// Copied verbatim from the seed document.
    const SEED_BEFORE_COMPLETION: &str = r#"Name:            rollouts-demo
Namespace:       my-demo
Status:          ✔ Healthy
Strategy:        Canary
  Step:          9/9
  SetWeight:     100
  ActualWeight:  100
Images:          argoproj/rollouts-demo:blue
                 argoproj/rollouts-demo:yellow (stable)
Replicas:
  Desired:       4
  Current:       8
  Updated:       4
  Ready:         8
  Available:     8

NAME                                       KIND        STATUS     AGE    INFO
⟳ rollouts-demo                            Rollout     ✔ Healthy  53m
├──# revision:2
│  └──⧉ rollouts-demo-5cf4fb69f8           ReplicaSet  ✔ Healthy  16m    stable
│     ├──□ rollouts-demo-5cf4fb69f8-pc986  Pod         ✔ Running  16m    ready:2/2
│     ├──□ rollouts-demo-5cf4fb69f8-f895m  Pod         ✔ Running  4m15s  ready:2/2
│     ├──□ rollouts-demo-5cf4fb69f8-fp5h8  Pod         ✔ Running  2m51s  ready:2/2
│     └──□ rollouts-demo-5cf4fb69f8-x7v4s  Pod         ✔ Running  93s    ready:2/2
└──# revision:1
   └──⧉ rollouts-demo-76c569d8b            ReplicaSet  ✔ Healthy  53m    delay:7s
      ├──□ rollouts-demo-76c569d8b-4qkd7   Pod         ✔ Running  53m    ready:2/2
      ├──□ rollouts-demo-76c569d8b-8c4j7   Pod         ✔ Running  53m    ready:2/2
      ├──□ rollouts-demo-76c569d8b-dx4df   Pod         ✔ Running  53m    ready:2/2
      └──□ rollouts-demo-76c569d8b-hfxzs   Pod         ✔ Running  53m    ready:2/2
"#;

    /// Copied verbatim from the seed document.
    const SEED_COMPLETED: &str = r#"Name:            rollouts-demo
Namespace:       my-demo
Status:          ✔ Healthy
Strategy:        Canary
  Step:          9/9
  SetWeight:     100
  ActualWeight:  100
Images:          argoproj/rollouts-demo:yellow (stable)
Replicas:
  Desired:       4
  Current:       4
  Updated:       4
  Ready:         4
  Available:     4

NAME                                       KIND        STATUS        AGE    INFO
⟳ rollouts-demo                            Rollout     ✔ Healthy     53m
├──# revision:2
│  └──⧉ rollouts-demo-5cf4fb69f8           ReplicaSet  ✔ Healthy     16m    stable
│     ├──□ rollouts-demo-5cf4fb69f8-pc986  Pod         ✔ Running     16m    ready:2/2
│     ├──□ rollouts-demo-5cf4fb69f8-f895m  Pod         ✔ Running     4m44s  ready:2/2
│     ├──□ rollouts-demo-5cf4fb69f8-fp5h8  Pod         ✔ Running     3m20s  ready:2/2
│     └──□ rollouts-demo-5cf4fb69f8-x7v4s  Pod         ✔ Running     2m2s   ready:2/2
└──# revision:1
   └──⧉ rollouts-demo-76c569d8b            ReplicaSet  • ScaledDown  53m
"#;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn mins(m: u64, s: u64) -> Duration {
        Duration::from_secs(m * 60 + s)
    }

    fn image(image: &str, tags: &[&str]) -> ImageView {
        ImageView {
            image: image.to_string(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
        }
    }

    /// A running pod with the app container plus the Istio sidecar ready.
    fn pod(name: &str, age: Duration) -> PodView {
        PodView {
            name: name.to_string(),
            status: "Running".to_string(),
            age,
            ready: (2, 2),
            restarts: 0,
        }
    }

    fn pods(rs: &str, suffixes: &[&str], age: Duration) -> Vec<PodView> {
        suffixes
            .iter()
            .map(|s| pod(&format!("{rs}-{s}"), age))
            .collect()
    }

    fn rs(name: &str, status: &str, age: Duration, pods: Vec<PodView>) -> ReplicaSetView {
        ReplicaSetView {
            name: name.to_string(),
            status: status.to_string(),
            age,
            pods,
            ..Default::default()
        }
    }

    fn revision(revision: i64, rs: ReplicaSetView) -> RevisionView {
        RevisionView {
            revision,
            replica_sets: vec![rs],
            analysis_runs: Vec::new(),
        }
    }

    const BLUE: &str = "argoproj/rollouts-demo:blue";
    const YELLOW: &str = "argoproj/rollouts-demo:yellow";
    const RS1: &str = "rollouts-demo-76c569d8b";
    const RS2: &str = "rollouts-demo-5cf4fb69f8";

    #[allow(clippy::too_many_arguments)]
    fn rollout(
        status: &str,
        message: &str,
        step: (u32, u32),
        weight: i32,
        images: Vec<ImageView>,
        replicas: [i32; 5],
        age: Duration,
        revisions: Vec<RevisionView>,
    ) -> RolloutView {
        let [desired, current, updated, ready, available] = replicas;
        RolloutView {
            name: "rollouts-demo".to_string(),
            namespace: "my-demo".to_string(),
            status: status.to_string(),
            message: message.to_string(),
            blue_green: false,
            step: Some(step),
            set_weight: weight,
            actual_weight: weight,
            images,
            desired,
            current,
            updated,
            ready,
            available,
            age,
            revisions,
        }
    }

    fn initial_view() -> RolloutView {
        let rs1 = ReplicaSetView {
            stable: true,
            ..rs(
                RS1,
                "Healthy",
                secs(36),
                pods(RS1, &["24gls", "ck4rq", "kxb56", "wmgnm"], secs(25)),
            )
        };
        rollout(
            "Healthy",
            "",
            (9, 9),
            100,
            vec![image(BLUE, &["stable"])],
            [4, 4, 4, 4, 4],
            mins(5, 32),
            vec![revision(1, rs1)],
        )
    }

    fn step1_view() -> RolloutView {
        let rs2 = ReplicaSetView {
            canary: true,
            ..rs(
                RS2,
                "Healthy",
                mins(3, 13),
                pods(RS2, &["5hlv9"], mins(3, 13)),
            )
        };
        let rs1 = ReplicaSetView {
            stable: true,
            ..rs(
                RS1,
                "Healthy",
                mins(33, 0),
                pods(RS1, &["24gls", "ck4rq", "kxb56", "wmgnm"], mins(33, 0)),
            )
        };
        rollout(
            "Paused",
            "CanaryPauseStep",
            (1, 9),
            20,
            // Deliberately unsorted: the renderer sorts by image name.
            vec![image(YELLOW, &["canary"]), image(BLUE, &["stable"])],
            [4, 5, 1, 5, 5],
            mins(38, 0),
            // Deliberately oldest first: the renderer sorts newest first.
            vec![revision(1, rs1), revision(2, rs2)],
        )
    }

    fn step3_view() -> RolloutView {
        let mut rs2_pods = pods(RS2, &["pc986"], mins(12, 0));
        rs2_pods.push(pod(&format!("{RS2}-f895m"), secs(27)));
        let rs2 = ReplicaSetView {
            canary: true,
            ..rs(RS2, "Healthy", mins(12, 0), rs2_pods)
        };
        let rs1 = ReplicaSetView {
            stable: true,
            ..rs(
                RS1,
                "Healthy",
                mins(49, 0),
                pods(RS1, &["4qkd7", "8c4j7", "dx4df", "hfxzs"], mins(49, 0)),
            )
        };
        rollout(
            "Paused",
            "CanaryPauseStep",
            (3, 9),
            40,
            vec![image(BLUE, &["stable"]), image(YELLOW, &["canary"])],
            [4, 6, 2, 6, 6],
            mins(49, 0),
            vec![revision(2, rs2), revision(1, rs1)],
        )
    }

    fn rs2_final_pods(ages: [Duration; 4]) -> Vec<PodView> {
        ["pc986", "f895m", "fp5h8", "x7v4s"]
            .iter()
            .zip(ages)
            .map(|(s, age)| pod(&format!("{RS2}-{s}"), age))
            .collect()
    }

    fn before_completion_view() -> RolloutView {
        let rs2 = ReplicaSetView {
            stable: true,
            ..rs(
                RS2,
                "Healthy",
                mins(16, 0),
                rs2_final_pods([mins(16, 0), mins(4, 15), mins(2, 51), secs(93)]),
            )
        };
        let rs1 = ReplicaSetView {
            scale_down_delay: Some(ScaleDownDelay::Remaining(secs(7))),
            ..rs(
                RS1,
                "Healthy",
                mins(53, 0),
                pods(RS1, &["4qkd7", "8c4j7", "dx4df", "hfxzs"], mins(53, 0)),
            )
        };
        rollout(
            "Healthy",
            "",
            (9, 9),
            100,
            vec![image(BLUE, &[]), image(YELLOW, &["stable"])],
            [4, 8, 4, 8, 8],
            mins(53, 0),
            vec![revision(2, rs2), revision(1, rs1)],
        )
    }

    fn completed_view() -> RolloutView {
        let rs2 = ReplicaSetView {
            stable: true,
            ..rs(
                RS2,
                "Healthy",
                mins(16, 0),
                rs2_final_pods([mins(16, 0), mins(4, 44), mins(3, 20), mins(2, 2)]),
            )
        };
        let rs1 = rs(RS1, "ScaledDown", mins(53, 0), Vec::new());
        rollout(
            "Healthy",
            "",
            (9, 9),
            100,
            vec![image(YELLOW, &["stable"])],
            [4, 4, 4, 4, 4],
            mins(53, 0),
            vec![revision(2, rs2), revision(1, rs1)],
        )
    }

    fn all_cases() -> Vec<(&'static str, RolloutView, &'static str)> {
        vec![
            ("initial", initial_view(), SEED_INITIAL),
            ("step1", step1_view(), SEED_STEP1),
            ("step3", step3_view(), SEED_STEP3),
            ("before", before_completion_view(), SEED_BEFORE_COMPLETION),
            ("completed", completed_view(), SEED_COMPLETED),
        ]
    }

    #[test]
    fn seed_outputs_byte_for_byte() {
        for (name, view, expected) in all_cases() {
            assert_eq!(render(&view, false), expected, "case {name}");
        }
    }

    /// Removes ANSI CSI sequences.
    fn strip_ansi(s: &str) -> String {
        let mut out = String::new();
        let mut chars = s.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\x1b' && chars.peek() == Some(&'[') {
                for c2 in chars.by_ref() {
                    if c2 == 'm' {
                        break;
                    }
                }
                continue;
            }
            out.push(c);
        }
        out
    }

    #[test]
    fn colour_does_not_change_alignment() {
        for (name, view, expected) in all_cases() {
            let colored = render(&view, true);
            assert_ne!(colored, expected, "case {name} should contain escapes");
            assert_eq!(strip_ansi(&colored), expected, "case {name}");
        }
    }

    #[test]
    fn coloured_lines() {
        let out = render(&step1_view(), true);
        let lines: Vec<&str> = out.lines().collect();
        // Paused has no colour mapping: the plugin still wraps it with code 0.
        assert_eq!(lines[2], "Status:          \x1b[0m॥\x1b[0m Paused");
        assert_eq!(
            lines[8],
            "Images:          argoproj/rollouts-demo:blue (\x1b[32mstable\x1b[0m)"
        );
        assert_eq!(
            lines[9],
            "                 argoproj/rollouts-demo:yellow (\x1b[33mcanary\x1b[0m)"
        );
        assert_eq!(
            lines[20],
            "│  └──⧉ \x1b[33mrollouts-demo-5cf4fb69f8\x1b[0m           ReplicaSet  \
             \x1b[32m✔\x1b[0m Healthy  3m13s  \x1b[33mcanary\x1b[0m"
        );
        assert_eq!(
            lines[21],
            "│     └──□ rollouts-demo-5cf4fb69f8-5hlv9  Pod         \
             \x1b[32m✔\x1b[0m Running  3m13s  ready:2/2"
        );
    }

    #[test]
    fn untrimmed_keeps_go_padding() {
        let view = completed_view();
        let raw = render_untrimmed(&view, false);
        let lines: Vec<&str> = raw.lines().collect();
        // Every tab-terminated cell is padded, even when empty.
        assert_eq!(
            lines[16],
            "⟳ rollouts-demo                            Rollout     ✔ Healthy     53m    "
        );
        assert_eq!(
            lines[17],
            format!("├──# revision:2{}", " ".repeat(28 + 12 + 14 + 7))
        );
        assert_eq!(
            lines[24],
            "   └──⧉ rollouts-demo-76c569d8b            ReplicaSet  • ScaledDown  53m    "
        );
        assert_eq!(render(&view, false), SEED_COMPLETED);

        // A missing step index leaves the Step value blank.
        let no_step = RolloutView { step: None, ..view };
        assert!(render_untrimmed(&no_step, false).contains("\n  Step:          \n"));
        assert!(render(&no_step, false).contains("\n  Step:\n"));
    }

    #[test]
    fn info_column_variants() {
        let mut p = pod("p-1", secs(5));
        p.status = "CrashLoopBackOff".to_string();
        p.ready = (1, 2);
        p.restarts = 3;
        let mut pending = pod("p-2", secs(1));
        pending.status = "Pending".to_string();
        pending.ready = (0, 2);
        let r = ReplicaSetView {
            canary: true,
            scale_down_delay: Some(ScaleDownDelay::Passed),
            ..rs("p", "Progressing", secs(5), vec![p, pending])
        };
        let view = RolloutView {
            name: "x".to_string(),
            namespace: "ns".to_string(),
            status: "Degraded".to_string(),
            revisions: vec![revision(3, r)],
            ..Default::default()
        };
        let out = render(&view, false);
        let tree: Vec<&str> = out.lines().skip_while(|l| !l.is_empty()).collect();
        assert_eq!(
            tree,
            [
                "",
                "NAME             KIND        STATUS              AGE  INFO",
                "⟳ x              Rollout     ✖ Degraded          0s",
                "└──# revision:3",
                "   └──⧉ p        ReplicaSet  ◌ Progressing       5s   canary,delay:passed",
                "      ├──□ p-1   Pod         ✖ CrashLoopBackOff  5s   ready:1/2,restarts:3",
                "      └──□ p-2   Pod         ◌ Pending           1s   ready:0/2",
            ]
        );
    }

    #[test]
    fn analysis_runs_follow_their_revisions_replica_sets() {
        // The plugin's golden output (get_test.go, rollout-background-analysis), rows
        // compared with their column padding collapsed.
        let day = Duration::from_secs(7 * 86_400);
        let canary = ReplicaSetView {
            canary: true,
            ..rs(
                "rollout-background-analysis-db976bc44",
                "ScaledDown",
                day,
                Vec::new(),
            )
        };
        let view = RolloutView {
            name: "rollout-background-analysis".to_string(),
            namespace: "ns".to_string(),
            status: "Degraded".to_string(),
            age: day,
            revisions: vec![RevisionView {
                revision: 2,
                replica_sets: vec![canary],
                analysis_runs: vec![crate::rollout_info::AnalysisRunView {
                    name: "rollout-background-analysis-db976bc44-2".to_string(),
                    status: "Failed".to_string(),
                    age: day,
                    failed: 1,
                    ..Default::default()
                }],
            }],
            ..Default::default()
        };
        let out = render(&view, false);
        let collapse = |l: &str| l.split_whitespace().collect::<Vec<_>>().join(" ");
        let tree: Vec<String> = out
            .lines()
            .skip_while(|l| !l.starts_with("NAME"))
            .skip(1)
            .map(collapse)
            .collect();
        assert_eq!(
            tree,
            [
                "⟳ rollout-background-analysis Rollout ✖ Degraded 7d",
                "└──# revision:2",
                "├──⧉ rollout-background-analysis-db976bc44 ReplicaSet • ScaledDown 7d canary",
                "└──α rollout-background-analysis-db976bc44-2 AnalysisRun ✖ Failed 7d ✖ 1",
            ]
        );
        assert_eq!(analysis_icon("Inconclusive"), "?");
        assert_eq!(analysis_icon("Error"), "⚠");
        assert_eq!(analysis_icon(""), " ");
    }

    #[test]
    fn icons() {
        assert_eq!(rollout_icon("Progressing"), "◌");
        assert_eq!(rollout_icon("Healthy"), "✔");
        assert_eq!(rollout_icon("Degraded"), "✖");
        assert_eq!(rollout_icon("Paused"), "॥");
        assert_eq!(rollout_icon("ScaledDown"), "•");
        assert_eq!(rollout_icon("Error"), "⚠");
        assert_eq!(rollout_icon("Unknown"), "?");
        assert_eq!(rollout_icon("Whatever"), " ");
        assert_eq!(replica_set_icon("ScaledDown"), "•");
        assert_eq!(replica_set_icon("ReplicaFailure"), "✖");
        assert_eq!(pod_icon("Running"), "✔");
        assert_eq!(pod_icon("Pending"), "◌");
        assert_eq!(pod_icon("Init:0/1"), "◌");
        assert_eq!(pod_icon("ExitCode:1"), "✖");
        assert_eq!(pod_icon("ErrImagePull"), "⚠");
        assert_eq!(pod_icon("CreateContainerConfigError"), "⚠");
        assert_eq!(pod_icon("ImagePullBackOff"), "⚠");
        assert_eq!(pod_icon("Unknown"), "?");
    }

    #[test]
    fn human_duration_matches_go() {
        const M: u64 = 60;
        const H: u64 = 3600;
        const D: u64 = 24 * H;
        let cases: &[(u64, &str)] = &[
            (0, "0s"),
            (1, "1s"),
            (59, "59s"),
            (70, "70s"),
            (119, "119s"),
            (120, "2m"),
            (190, "3m10s"),
            (3 * M + 13, "3m13s"),
            (9 * M + 59, "9m59s"),
            (10 * M, "10m"),
            (10 * M + 59, "10m"),
            (49 * M, "49m"),
            (70 * M, "70m"),
            (179 * M + 59, "179m"),
            (3 * H, "3h"),
            (3 * H + 59 * M, "3h59m"),
            (7 * H + 59 * M + 59, "7h59m"),
            (8 * H, "8h"),
            (47 * H, "47h"),
            (2 * D, "2d"),
            (49 * H, "2d1h"),
            (7 * D, "7d"),
            (7 * D + 23 * H, "7d23h"),
            (8 * D + 2 * H, "8d"),
            (367 * D, "367d"),
            (2 * 365 * D, "2y"),
            (2 * 365 * D + 25 * H, "2y1d"),
            (8 * 365 * D + 2 * H, "8y"),
        ];
        for &(s, want) in cases {
            assert_eq!(human_duration(Duration::from_secs(s)), want, "{s}s");
        }
        // Sub-second parts are truncated like Go's int(d.Seconds()).
        assert_eq!(human_duration(Duration::from_millis(1999)), "1s");
    }
}
