//! Draws the state: the scenario list, the run view (steps, the four weights, the share
//! chart, the rollout as `get rollout` shows it, latency and errors per version, events and
//! verdicts), and the help. Pure drawing into a ratatui frame: no terminal here.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Borders, Chart, Clear, Dataset, GraphType, List, ListItem, ListState, Paragraph,
    Sparkline,
};

use super::snapshot::{Snapshot, StepState, WeightedBy};
use super::state::{App, RunState, Screen};

pub fn render(app: &App, frame: &mut Frame) {
    let area = frame.area();
    match (app.screen, &app.run) {
        (Screen::Run, Some(run)) => run_view(run, &app.status, frame, area),
        _ => list_view(app, frame, area),
    }
    if app.help {
        help(frame, area);
    }
}

fn list_view(app: &App, frame: &mut Frame, area: Rect) {
    let [main, footer] = Layout::vertical([Constraint::Min(3), Constraint::Length(1)]).areas(area);
    let visible = app.visible();
    let items: Vec<ListItem> = visible
        .iter()
        .map(|(_, e)| {
            let last = match e.last {
                Some((true, d)) => Span::styled(
                    format!("✔ {:>5.1}s ", d.as_secs_f64()),
                    Style::default().fg(Color::Green),
                ),
                Some((false, d)) => Span::styled(
                    format!("✖ {:>5.1}s ", d.as_secs_f64()),
                    Style::default().fg(Color::Red),
                ),
                None => Span::raw("  ·      "),
            };
            ListItem::new(Line::from(vec![
                last,
                Span::styled(
                    format!("{:<34} ", truncate(&e.name, 34)),
                    Style::default().add_modifier(Modifier::BOLD),
                ),
                Span::raw(e.description.clone()),
            ]))
        })
        .collect();
    let title = format!(" canarysim — {} scenario(s) ", visible.len());
    let list = List::new(items)
        .block(Block::default().borders(Borders::ALL).title(title))
        .highlight_style(Style::default().add_modifier(Modifier::REVERSED))
        .highlight_symbol("› ");
    let mut state = ListState::default();
    if !visible.is_empty() {
        state.select(Some(app.selected.min(visible.len() - 1)));
    }
    frame.render_stateful_widget(list, main, &mut state);
    let hint = if app.filtering {
        format!("/{}▏  Enter: done  Esc: done", app.filter)
    } else if !app.status.is_empty() {
        app.status.clone()
    } else if app.filter.is_empty() {
        "Enter: run   /: filter   ↑↓: move   ?: help   q: quit".to_string()
    } else {
        format!("filter: {}   Esc: clear   Enter: run   q: quit", app.filter)
    };
    frame.render_widget(Paragraph::new(hint), footer);
}

fn run_view(run: &RunState, status: &str, frame: &mut Frame, area: Rect) {
    let [header, middle, bottom, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Percentage(48),
        Constraint::Min(6),
        Constraint::Length(1),
    ])
    .areas(area);
    let Some(s) = &run.snapshot else {
        frame.render_widget(Paragraph::new("starting…"), header);
        return;
    };
    let state = match s.finished {
        Some(true) => Span::styled("PASSED", Style::default().fg(Color::Green)),
        Some(false) => Span::styled("FAILED", Style::default().fg(Color::Red)),
        None if run.running => Span::raw("▶ running"),
        None => Span::raw("॥ held"),
    };
    let mut head = vec![
        Span::styled(
            format!(" {} ", s.scenario),
            Style::default().add_modifier(Modifier::BOLD),
        ),
        Span::raw(format!(" {}  ", s.time)),
        state,
        Span::raw(format!("  ×{}", run.speed)),
    ];
    if let Some(left) = &s.pause_left {
        head.push(Span::raw(format!("  pause {left} left")));
    }
    if let Some(live) = &s.live {
        head.push(Span::styled(
            format!("  live: {live}"),
            Style::default().fg(Color::Cyan),
        ));
    }
    frame.render_widget(Paragraph::new(Line::from(head)), header);

    let steps_width = (area.width / 3).clamp(24, 44);
    let [steps_area, right] =
        Layout::horizontal([Constraint::Length(steps_width), Constraint::Min(20)]).areas(middle);
    steps(s, frame, steps_area);
    let weights_height = (s.weights.len().max(1) as u16) * 5 + 2;
    let [weights_area, chart_area] = Layout::vertical([
        Constraint::Length(weights_height.min(right.height.saturating_sub(5)).max(6)),
        Constraint::Min(3),
    ])
    .areas(right);
    weights(run, s, frame, weights_area);
    chart(run, frame, chart_area);

    let [tree_area, side] =
        Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(bottom);
    rollout(s, frame, tree_area);
    let [versions_area, log_area] =
        Layout::vertical([Constraint::Length(versions_height(run)), Constraint::Min(3)])
            .areas(side);
    versions(run, s, frame, versions_area);
    log(s, frame, log_area);

    let hint = if status.is_empty() {
        "space run/hold  n next  p promote  P full  a abort  r retry  +/- speed  c no-mesh  s save  ? help  q back"
            .to_string()
    } else {
        status.to_string()
    };
    frame.render_widget(Paragraph::new(hint), footer);
}

fn steps(s: &Snapshot, frame: &mut Frame, area: Rect) {
    let current = s
        .steps
        .iter()
        .position(|l| l.state == StepState::Current)
        .unwrap_or(s.steps.len());
    // Keep the current step in view.
    let rows = area.height.saturating_sub(2) as usize;
    let first = current
        .saturating_sub(rows / 2)
        .min(s.steps.len().saturating_sub(rows));
    let items: Vec<ListItem> = s
        .steps
        .iter()
        .skip(first)
        .take(rows)
        .map(|l| {
            let (mark, style) = match l.state {
                StepState::Done { passed: true } => ("✔", Style::default().fg(Color::Green)),
                StepState::Done { passed: false } => ("✖", Style::default().fg(Color::Red)),
                StepState::Current => ("▶", Style::default().add_modifier(Modifier::BOLD)),
                StepState::Next => ("·", Style::default().fg(Color::DarkGray)),
            };
            ListItem::new(Line::from(Span::styled(
                format!("{mark}{:>3} {}", l.index, l.summary),
                style,
            )))
        })
        .collect();
    frame.render_widget(
        List::new(items).block(Block::default().borders(Borders::ALL).title(" steps ")),
        area,
    );
}

/// A bar of `percent` in `width` cells, with the figure.
fn bar(label: &str, percent: Option<f64>, width: usize, extra: &str) -> Line<'static> {
    // `label █…░ 100.0 %extra`: the bar takes what the words leave.
    let cells = width
        .saturating_sub(label.len() + 10 + extra.chars().count())
        .max(4);
    match percent {
        Some(p) => {
            let filled = ((p.clamp(0.0, 100.0) / 100.0) * cells as f64).round() as usize;
            Line::from(vec![
                Span::raw(format!("{label} ")),
                Span::styled("█".repeat(filled), Style::default().fg(Color::Yellow)),
                Span::styled(
                    "░".repeat(cells - filled),
                    Style::default().fg(Color::DarkGray),
                ),
                Span::raw(format!(" {p:5.1} %{extra}")),
            ])
        }
        None => Line::from(format!("{label} {}", "—")),
    }
}

fn weights(run: &RunState, s: &Snapshot, frame: &mut Frame, area: Rect) {
    let width = area.width.saturating_sub(2) as usize;
    let mut lines = Vec::new();
    for w in &s.weights {
        lines.push(Line::from(Span::styled(
            w.route.clone(),
            Style::default().add_modifier(Modifier::BOLD),
        )));
        lines.push(bar("set    ", Some(w.set), width, ""));
        match w.virtual_service {
            Some(vs) => {
                let object = match w.object {
                    WeightedBy::GatewayApiRoute => "route  ",
                    WeightedBy::CanaryIngress => "ingress",
                    _ => "vs     ",
                };
                lines.push(bar(object, Some(vs), width, ""));
                lines.push(bar("router ", w.router, width, ""));
            }
            // A Service: kube-proxy splits by its ready endpoints.
            None => lines.push(bar("pods   ", w.router, width, " (ready)")),
        }
    }
    let observed = s.observed.map(|(share, lo, hi)| {
        let of = if s.observed_per_connection {
            " of conns"
        } else {
            ""
        };
        (share, format!(" [{lo:.1}, {hi:.1}]{of}"))
    });
    lines.push(bar(
        "seen   ",
        observed.as_ref().map(|o| o.0),
        width,
        observed.as_ref().map_or("", |o| o.1.as_str()),
    ));
    if run.no_mesh {
        lines.push(bar("no mesh", s.no_mesh, width, " (ready pods)"));
    }
    frame.render_widget(
        Paragraph::new(lines).block(
            Block::default().borders(Borders::ALL).title(
                if s.rollout.as_ref().is_some_and(|v| v.blue_green) {
                    " new ReplicaSet's share: set · Service endpoints · observed "
                } else if s
                    .weights
                    .iter()
                    .any(|w| w.object == WeightedBy::GatewayApiRoute)
                {
                    " canary weight: set · Gateway API route · router · observed "
                } else if s
                    .weights
                    .iter()
                    .any(|w| w.object == WeightedBy::CanaryIngress)
                {
                    " canary weight: set · canary Ingress · router · observed "
                } else {
                    " canary weight: set · VirtualService · router · observed "
                },
            ),
        ),
        area,
    );
}

fn chart(run: &RunState, frame: &mut Frame, area: Rect) {
    let set: Vec<(f64, f64)> = run.chart.iter().map(|p| (p.t, p.set)).collect();
    let router: Vec<(f64, f64)> = run
        .chart
        .iter()
        .filter_map(|p| Some((p.t, p.router?)))
        .collect();
    let observed: Vec<(f64, f64)> = run
        .chart
        .iter()
        .filter_map(|p| Some((p.t, p.observed?)))
        .collect();
    let end = run.chart.last().map_or(1.0, |p| p.t.max(1.0));
    let datasets = vec![
        Dataset::default()
            .name("set")
            .marker(symbols::Marker::Braille)
            .graph_type(GraphType::Line)
            .style(Style::default().fg(Color::Cyan))
            .data(&set),
        Dataset::default()
            .name("router")
            .marker(symbols::Marker::Braille)
            .graph_type(GraphType::Line)
            .style(Style::default().fg(Color::Magenta))
            .data(&router),
        Dataset::default()
            .name("observed")
            .marker(symbols::Marker::Dot)
            .graph_type(GraphType::Scatter)
            .style(Style::default().fg(Color::Yellow))
            .data(&observed),
    ];
    let chart = Chart::new(datasets)
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(" canary share over time "),
        )
        .x_axis(
            Axis::default()
                .bounds([0.0, end])
                .labels(vec![Span::raw("0s"), Span::raw(format!("{end:.0}s"))]),
        )
        .y_axis(
            Axis::default()
                .bounds([0.0, 100.0])
                .labels(vec![Span::raw("0"), Span::raw("100")]),
        );
    frame.render_widget(chart, area);
}

fn rollout(s: &Snapshot, frame: &mut Frame, area: Rect) {
    let text = match &s.rollout {
        Some(view) => crate::report::rollout_view::render(view, false),
        None => "no rollout".to_string(),
    };
    frame.render_widget(
        Paragraph::new(text).block(Block::default().borders(Borders::ALL).title(" rollout ")),
        area,
    );
}

fn versions_height(run: &RunState) -> u16 {
    (run.latency.len() as u16 * 2 + 2).clamp(3, 8)
}

fn versions(run: &RunState, s: &Snapshot, frame: &mut Frame, area: Rect) {
    let block = Block::default()
        .borders(Borders::ALL)
        .title(" p99 latency per load ");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if run.latency.is_empty() {
        frame.render_widget(Paragraph::new("no load yet"), inner);
        return;
    }
    let rows = Layout::vertical(vec![Constraint::Length(2); run.latency.len()]).split(inner);
    for ((key, p99), row) in run.latency.iter().zip(rows.iter()) {
        let last = s
            .versions
            .iter()
            .find(|v| format!("{} {}", v.role, v.version) == *key);
        let label = match last {
            Some(v) => format!(
                "{key}: p50 {:.1} ms  p99 {:.1} ms  errors {:.2} %",
                v.p50_ms, v.p99_ms, v.error_rate
            ),
            None => key.clone(),
        };
        let [label_area, spark_area] =
            Layout::vertical([Constraint::Length(1), Constraint::Length(1)]).areas(*row);
        frame.render_widget(Paragraph::new(label), label_area);
        let data: Vec<u64> = p99.iter().map(|v| (v * 1000.0) as u64).collect();
        frame.render_widget(Sparkline::default().data(&data), spark_area);
    }
}

fn log(s: &Snapshot, frame: &mut Frame, area: Rect) {
    let rows = area.height.saturating_sub(2) as usize;
    // Violations stay on top; below them, the newest events (verdicts among them).
    let mut lines: Vec<Line> = s
        .violations
        .iter()
        .take(rows / 2)
        .map(|v| {
            Line::from(Span::styled(
                format!("! {v}"),
                Style::default().fg(Color::Red),
            ))
        })
        .collect();
    let room = rows.saturating_sub(lines.len());
    let skip = s.events.len().saturating_sub(room);
    lines.extend(s.events.iter().skip(skip).map(|e| Line::from(e.clone())));
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" events ")),
        area,
    );
}

fn help(frame: &mut Frame, area: Rect) {
    let text = "\
Scenario list
  Enter  run the selected scenario      /  filter      ↑↓ or j/k  move
Run view
  space  run / hold the steps            n  next step (then hold)
  p      promote                         P  promote --full
  a      abort                           r  retry
  + / -  faster / slower (scenario time per second)
  c      show the split without a mesh (ready-pod ratio)
  s      save what was done as a scenario file that replays it
  q/Esc  back to the list (q on the list: quit)
  ?      close this help";
    let width = 74.min(area.width);
    let height = 14.min(area.height);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(text).block(Block::default().borders(Borders::ALL).title(" keys ")),
        popup,
    );
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let cut: String = s.chars().take(n.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}
