//! The command line fits the ecosystem: help for every flag, `--version` with the commit, shell
//! completions, a man page kept in `man/`, and `--color` / `NO_COLOR` as cargo honours them.
//!
//! `CANARYSIM_WRITE_MAN=1 cargo test --test command_line -- cli_conventions::` writes the man pages
//! anew after a change to the command line.

use canarysim::cli::Cli;
use clap::CommandFactory;
use std::path::Path;
use std::process::Command;

fn canarysim(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_canarysim"));
    command
        .args(args)
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE");
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().expect("the binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn every_flag_and_argument_of_every_command_has_help() {
    let cli = Cli::command();
    let mut missing = Vec::new();
    for command in std::iter::once(&cli).chain(cli.get_subcommands()) {
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version") {
                continue;
            }
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                missing.push(format!("{} {id}", command.get_name()));
            }
        }
    }
    assert!(missing.is_empty(), "without help: {missing:?}");
}

#[test]
fn version_names_the_commit() {
    let (code, out) = canarysim(&["--version"], &[]);
    assert_eq!(code, 0);
    // `canarysim 0.1.0 (0123456789ab)`, or `(unknown)` outside a git checkout.
    let commit = out
        .trim()
        .strip_prefix(&format!("canarysim {} (", env!("CARGO_PKG_VERSION")))
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{out:?}"));
    assert!(
        commit == "unknown"
            || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{out:?}"
    );
}

#[test]
fn completions_for_bash_zsh_and_fish_know_the_commands_and_their_flags() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let (code, script) = canarysim(&["completions", shell], &[]);
        assert_eq!(code, 0, "{shell}");
        for word in ["run", "load", "expect", "until-decided", "completions"] {
            assert!(script.contains(word), "{shell}: {word} missing");
        }
    }
    let (code, _) = canarysim(&["completions", "tcsh"], &[]);
    assert_eq!(code, 2, "an unknown shell is a usage error");
}

#[test]
fn the_man_pages_in_man_are_the_ones_the_command_line_generates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("man");
    // The page names the package version, not the commit: it is committed with the code.
    let cli = Cli::command().version(env!("CARGO_PKG_VERSION"));
    let mut pages = vec![("canarysim.1".to_string(), render(cli.clone()))];
    // A page per command, and per command's command (`canarysim-load-merge.1`).
    let mut commands: Vec<(String, clap::Command)> = cli
        .get_subcommands()
        .map(|sub| (format!("canarysim-{}", sub.get_name()), sub.clone()))
        .collect();
    let nested: Vec<(String, clap::Command)> = commands
        .iter()
        .flat_map(|(name, sub)| {
            sub.get_subcommands()
                .map(move |s| (format!("{name}-{}", s.get_name()), s.clone()))
        })
        .collect();
    commands.extend(nested);
    for (name, sub) in commands {
        // clap names are 'static; a test's few leaked names are no matter.
        let page = render(sub.name(&*Box::leak(name.clone().into_boxed_str())));
        pages.push((format!("{name}.1"), page));
    }
    if std::env::var_os("CANARYSIM_WRITE_MAN").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (file, page) in &pages {
            std::fs::write(dir.join(file), page).unwrap();
        }
    }
    for (file, page) in &pages {
        let committed = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        assert!(
            &committed == page,
            "man/{file} differs from the command line; \
             `CANARYSIM_WRITE_MAN=1 cargo test --test command_line -- cli_conventions::` writes it anew"
        );
    }
    let top = &pages[0].1;
    assert!(top.contains(".TH canarysim 1"), "{top}");
    assert!(
        top.contains("canarysim\\-load(1)"),
        "the page lists its commands: {top}"
    );
}

fn render(command: clap::Command) -> String {
    let mut page = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut page)
        .expect("rendering to memory");
    String::from_utf8(page).expect("roff is text")
}

#[test]
fn color_always_styles_the_marks_and_never_or_no_color_leave_plain_text() {
    let (code, plain) = canarysim(&["run"], &[]);
    assert_eq!(code, 0);
    assert!(
        !plain.contains('\u{1b}'),
        "a pipe gets no styles by default"
    );

    let (_, always) = canarysim(&["--color", "always", "run"], &[]);
    assert!(always.contains("\u{1b}[32m✔\u{1b}[0m"), "{always}");
    assert!(always.contains("PASSED"), "{always}");

    let (_, never) = canarysim(&["run", "--color", "never"], &[("CLICOLOR_FORCE", "1")]);
    assert_eq!(never, plain, "--color never wins over CLICOLOR_FORCE");

    let (_, forced) = canarysim(&["run"], &[("CLICOLOR_FORCE", "1")]);
    assert!(forced.contains('\u{1b}'), "CLICOLOR_FORCE styles a pipe");
    let (_, no_color) = canarysim(&["run"], &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]);
    assert_eq!(no_color, plain, "NO_COLOR wins over CLICOLOR_FORCE");

    let (_, json) = canarysim(&["--color", "always", "run", "--format", "json"], &[]);
    assert!(!json.contains('\u{1b}'), "JSON is never styled");
}
