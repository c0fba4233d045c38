//! `waypoint`: a demo agent on the embedded defaults, a thread and store inspector for every
//! backend, and the persistence benchmarks.

mod backend;
mod bench;
mod demo;
mod inspect;
mod logging;
mod secrets;
mod table;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Durable memory for agent runtimes: demo, inspect, benchmark.
#[derive(Parser)]
#[command(name = "waypoint", version, about)]
struct Cli {
    /// Log the libraries' operations on stderr, with durations: -v info, -vv debug, -vvv
    /// trace [default: warnings; RUST_LOG (EnvFilter syntax) replaces the level]
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs a scripted agent: memory across threads, an interrupt, time travel.
    Demo(demo::Args),
    /// Inspects, forks, copies, prunes and deletes threads in any checkpointer.
    #[command(subcommand)]
    Threads(inspect::ThreadsCommand),
    /// Lists and searches the long-term memory store.
    #[command(subcommand)]
    Store(inspect::StoreCommand),
    /// Runs the persistence benchmarks and writes a Markdown report and SVG charts.
    Bench(bench::Args),
}

fn main() -> ExitCode {
    secrets::remember_from_environment();
    hide_secrets_in_panics();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage(&e),
    };
    logging::init(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(&anyhow::Error::new(e).context("cannot start the async runtime")),
    };
    let done = runtime.block_on(async move {
        match cli.command {
            Command::Demo(args) => demo::run(args).await,
            Command::Threads(command) => inspect::threads(command).await,
            Command::Store(command) => inspect::store(command).await,
            Command::Bench(args) => bench::run(args).await,
        }
    });
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// Prints `e` as one line and returns a failing exit code; a closed stdout (`waypoint ... |
/// head`) ends the command quietly instead.
fn fail(e: &anyhow::Error) -> ExitCode {
    let broken_pipe = e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    });
    if broken_pipe {
        return ExitCode::SUCCESS;
    }
    eprintln!("waypoint: error: {}", one_line(e));
    ExitCode::FAILURE
}

/// Prints clap's usage error, help or version as clap would, unless it holds a secret of a
/// URL given (an echoed argument, an environment value): then its scrubbed text, uncoloured.
fn usage(e: &clap::Error) -> ExitCode {
    let text = e.render().to_string();
    let scrubbed = secrets::scrub(&text);
    if scrubbed == text {
        e.exit();
    }
    if e.use_stderr() {
        eprint!("{scrubbed}");
        ExitCode::from(2)
    } else {
        print!("{scrubbed}");
        ExitCode::SUCCESS
    }
}

/// Makes a panic's message (a bug, but it may quote a library's error) pass through
/// [`secrets::scrub`] before the default hook prints it.
fn hide_secrets_in_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied());
        match message {
            Some(message) if secrets::scrub(message) != message => {
                let at = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                eprintln!("waypoint panicked{at}: {}", secrets::scrub(message));
            }
            _ => default(info),
        }
    }));
}

/// `e` and its causes joined by ": ", leaving out a cause whose text the previous one already
/// includes (library errors often print their source inside their own message), with every
/// secret of a URL given taken out.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    secrets::scrub(&line.replace('\n', " "))
}
