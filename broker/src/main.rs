//! The `kafluss` binary: `serve` runs the broker; `sql` and `scan` talk to a running one.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cli::scan::ScanArgs;
use kafluss_broker::config::ServerConfig;

mod cli;

/// jemalloc keeps freed pages for reuse (its dirty pages decay over seconds) where glibc's malloc
/// hands every buffer of a request's size (the frame, the Arrow builders, the IPC body, the write
/// buffer: each a new allocation of 0.1-4 MiB) back to the kernel and faults fresh pages in for
/// the next request. Measured in docs/benchmarks.md ("The allocator: fresh pages per request").
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Debug, Parser)]
#[command(
    name = "kafluss",
    version,
    about = "Kafka producers writing Fluss log tables as Arrow"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server (prints `kafluss ready: ...` once every core serves).
    Serve {
        /// server.yaml (flat `key: value` lines); without it the embedded default is used.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Set a config key, overriding the file: `-D key=value` (repeatable).
        #[arg(short = 'D', value_name = "KEY=VALUE")]
        define: Vec<String>,
    },
    /// Run SQL (DDL, SHOW, DESCRIBE, CALL sys.*) on a running server: from -e, -f, or else
    /// standard input.
    Sql {
        /// The server's Fluss listener, HOST:PORT.
        #[arg(long, default_value = cli::sql::DEFAULT_SERVER)]
        server: String,
        #[command(flatten)]
        credentials: cli::Credentials,
        /// The SQL text (`;`-separated statements).
        #[arg(short = 'e', long = "execute", conflicts_with = "file")]
        execute: Option<String>,
        /// A file of SQL statements.
        #[arg(short = 'f', long = "file")]
        file: Option<PathBuf>,
    },
    /// Read rows of a table back.
    Scan(ScanArgs),
}

/// Logs go to stderr at `info` unless `RUST_LOG` says otherwise; colour codes only when stderr
/// is a terminal (a file, pipe or journald gets plain text).
fn init_tracing() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve { config, define } => {
            init_tracing();
            let config = match ServerConfig::load(config.as_deref(), &define) {
                Ok(config) => config,
                Err(e) => {
                    eprintln!("kafluss: {e}");
                    return ExitCode::from(2);
                }
            };
            match kafluss_broker::runtime::server::run(config) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("kafluss: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Sql {
            server,
            credentials,
            execute,
            file,
        } => {
            use cli::sql::SqlSource;
            let source = match (execute, file) {
                (Some(text), _) => SqlSource::Text(text),
                (None, Some(path)) => SqlSource::File(path),
                (None, None) => SqlSource::Stdin,
            };
            exit_code(cli::sql::run(&server, &credentials, source))
        }
        Command::Scan(args) => exit_code(cli::scan::run(args)),
    }
}
