//! `agent-api`: run a coding agent and stream its events, replay a recorded native log, read the
//! agents' own stored sessions, list capabilities, and check which agent CLIs are installed.

mod agents;
mod capabilities;
mod chat;
mod doctor;
mod fleet;
mod history;
mod output;
mod portable;
mod prompt;
mod render;
mod replay;
mod run;
mod serve;
mod signals;
mod token;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "agent-api",
    version,
    about = "Drive coding-agent CLIs through one bounded event stream"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// How events are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Text as it streams, tool calls with their status, prompts for permissions.
    Pretty,
    /// One JSON event a line.
    Jsonl,
}

/// Which view of the run is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum View {
    /// Bounded wrapper events.
    Wrapper,
    /// The universal transcript.
    Universal,
}

/// What happens at a permission request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Approve {
    /// Ask y/n on the terminal (without a terminal: deny); with `serve`, wait for the client's
    /// reply over HTTP.
    Ask,
    /// Approve everything.
    All,
    /// Deny everything.
    None,
}

/// How events are shown: the flags of `run`, `chat`, `replay` and `history`.
#[derive(Args, Clone, Copy)]
struct OutputFlags {
    /// How events are printed: `pretty` for a person, `jsonl` for a program. Default: `pretty`
    /// when stdout is a terminal, else `jsonl` (as ripgrep and gh choose).
    #[arg(long, value_enum)]
    format: Option<Format>,
    #[arg(long, value_enum, default_value_t = View::Wrapper)]
    view: View,
    /// Fill `raw` in universal events with the native payloads.
    #[arg(long)]
    include_raw: bool,
}

impl Format {
    /// `chosen`, else what suits stdout: `pretty` on a terminal, `jsonl` into a pipe or a file.
    fn or_for_stdout(chosen: Option<Format>) -> Format {
        use std::io::IsTerminal;
        chosen.unwrap_or(if std::io::stdout().is_terminal() {
            Format::Pretty
        } else {
            Format::Jsonl
        })
    }
}

impl OutputFlags {
    /// Options that only show events of `agent` (no request: a replay or a stored session).
    fn viewing(self, agent: String) -> run::RunOptions {
        let request = RequestFlags {
            cwd: None,
            model: None,
            approve: Approve::None,
            timeout: None,
            via: None,
        };
        let flags = AgentFlags {
            agent: Some(agent),
            output: self,
            request,
            acp_command: None,
            options: Vec::new(),
            variant: None,
            mode: None,
            fleet: Default::default(),
        };
        run::RunOptions {
            answers: false,
            ..flags.into_options(String::new())
        }
    }
}

/// The request flags `run`, `chat` and `serve` share: where the agent works, its model, what
/// happens at a permission request, how long it may take, and where it runs.
#[derive(Args, Clone)]
pub(crate) struct RequestFlags {
    /// Working directory of the agent.
    #[arg(long)]
    pub(crate) cwd: Option<PathBuf>,
    /// Model name.
    #[arg(long)]
    pub(crate) model: Option<String>,
    #[arg(long, value_enum, default_value_t = Approve::Ask)]
    pub(crate) approve: Approve,
    /// Stop the run (with `chat` and `serve`: each turn) after this many seconds.
    #[arg(long)]
    pub(crate) timeout: Option<u64>,
    /// Where the agent runs: local, bwrap, docker:NAME, podman:NAME, docker-image:IMAGE,
    /// podman-image:IMAGE, ssh:[user@]host[:port] or prefix:JSON_ARGV (spec/launchers.md).
    #[arg(long, value_name = "LAUNCHER")]
    pub(crate) via: Option<agent_api::request::Launcher>,
}

/// The flags `run` and `chat` share: which agent, how to show its events, and the request.
#[derive(Args)]
struct AgentFlags {
    /// Agent kind; default: the first supported CLI installed, else the built-in agent that needs
    /// none.
    #[arg(long)]
    agent: Option<String>,
    #[command(flatten)]
    output: OutputFlags,
    #[command(flatten)]
    request: RequestFlags,
    /// The ACP agent's command line for `--agent acp` (the default agent when given), e.g.
    /// "goose acp": split into arguments as a POSIX shell would, but never run by one.
    #[arg(long, value_name = "COMMAND", value_parser = run::parse_argv)]
    acp_command: Option<run::Argv>,
    /// One of the agent's own options (repeatable): `backend.<kind>.<field>=VALUE`, or just
    /// `<field>=VALUE`, typed by the backend's options struct (`agent-api capabilities --agent
    /// KIND` lists the keys).
    #[arg(long = "option", value_name = "KEY=VALUE", value_parser = run::parse_option)]
    options: Vec<(String, String)>,
    /// The model variant, such as a reasoning effort (`agent-api capabilities --agent KIND`
    /// lists the agent's, per model where they differ).
    #[arg(long, value_name = "V")]
    variant: Option<String>,
    /// The agent's mode: `plan` (read-only planning), `default`, or one of the agent's own
    /// (`agent-api capabilities --agent KIND` lists them); in `chat`, `/mode M` switches it.
    #[arg(long, value_name = "M")]
    mode: Option<String>,
    #[command(flatten)]
    fleet: fleet::FleetFlags,
}

impl AgentFlags {
    fn into_options(self, prompt: impl Into<agent_api::Prompt>) -> run::RunOptions {
        let AgentFlags {
            agent,
            output:
                OutputFlags {
                    format,
                    view,
                    include_raw,
                },
            request,
            acp_command,
            options,
            variant,
            mode,
            fleet,
        } = self;
        let RequestFlags {
            cwd,
            model,
            approve,
            timeout,
            via,
        } = request;
        let portable = Default::default();
        run::RunOptions {
            agent,
            format: Format::or_for_stdout(format),
            view,
            include_raw,
            cwd,
            model,
            approve,
            timeout,
            acp_command,
            via,
            options,
            variant,
            mode: mode.as_deref().map(agent_api::request::AgentMode::parse),
            fleet,
            prompt: prompt.into(),
            answers: true,
            one_shot: false,
            portable,
        }
    }
}

/// What `run` takes: the agent, the request's options and the prompt.
#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    flags: AgentFlags,
    #[command(flatten)]
    portable: portable::PortableFlags,
    /// An image for the agent to see with the prompt: PNG, JPEG, GIF or WebP (repeatable).
    #[arg(long, value_name = "FILE")]
    image: Vec<PathBuf>,
    /// A file given to the agent with the prompt, as a link it reads (repeatable).
    #[arg(long, value_name = "FILE")]
    attach: Vec<PathBuf>,
    /// The prompt.
    prompt: String,
}

#[derive(Subcommand)]
enum Command {
    /// Run a prompt and stream the events.
    Run(Box<RunArgs>),
    /// Hold a conversation on one warm session: one turn per line (typed at the terminal, or
    /// read from stdin), each turn's events streamed as `run` streams a run's.
    Chat {
        #[command(flatten)]
        flags: Box<AgentFlags>,
    },
    /// Turn a saved native log (stdout lines or a two-way session recording) into events.
    Replay {
        /// Agent kind whose protocol the log speaks.
        #[arg(long)]
        agent: String,
        #[command(flatten)]
        output: OutputFlags,
        /// The recording, or `-` for stdin.
        file: PathBuf,
    },
    /// List an agent's own stored sessions, or print one (SESSION) as events.
    History {
        /// Agent kind whose session store is read.
        #[arg(long)]
        agent: String,
        /// Only sessions that ran in this directory.
        #[arg(long)]
        cwd: Option<PathBuf>,
        #[command(flatten)]
        output: OutputFlags,
        /// The session id to print; without it, the sessions are listed.
        session: Option<String>,
    },
    /// List backends' capabilities.
    Capabilities {
        #[arg(long)]
        agent: Option<String>,
        #[arg(long, value_enum, default_value_t = CapabilityFormat::Table)]
        format: CapabilityFormat,
    },
    /// Which supported agent CLIs are installed, their versions, and whether they are supported.
    Doctor,
    /// Serve the universal session API over HTTP and SSE (spec/http-api.md).
    Serve(Box<serve::ServeArgs>),
    /// Make, list and revoke the scoped tokens of a server's store (spec/http-api.md, Auth).
    #[command(subcommand)]
    Token(token::TokenCommand),
    /// Started by `serve`: waits until its stdin closes (the server is gone, even killed with
    /// SIGKILL), then stops the agents that server left running.
    #[command(name = "__watchdog", hide = true)]
    Watchdog {
        /// The server's owner token (`AGENT_API_OWNER`).
        owner: String,
    },
}

/// How capabilities are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CapabilityFormat {
    /// One line per capability.
    Table,
    /// JSON.
    Json,
    /// The coverage matrix as Markdown (what `spec/coverage-matrix.md` holds).
    Matrix,
    /// The portable options' native forms per backend as Markdown (what `spec/options.md` holds).
    Options,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => match args.portable.into_options() {
            Ok(portable) => {
                let RunArgs {
                    flags,
                    image,
                    attach,
                    prompt,
                    ..
                } = *args;
                let mut prompt = agent_api::Prompt::from(prompt);
                prompt.images = image;
                prompt.attachments = attach;
                run::run(run::RunOptions {
                    portable,
                    one_shot: true,
                    ..flags.into_options(prompt)
                })
                .await
            }
            Err(message) => Err(message),
        },
        Command::Chat { flags } => chat::chat((*flags).into_options(String::new())).await,
        Command::Replay {
            agent,
            output,
            file,
        } => replay::replay(output.viewing(agent), &file).await,
        Command::History {
            agent,
            cwd,
            output,
            session,
        } => history::history(output.viewing(agent), cwd, session).await,
        Command::Capabilities { agent, format } => capabilities::print(agent.as_deref(), format),
        Command::Doctor => doctor::doctor().await,
        Command::Serve(args) => serve::serve(*args).await,
        Command::Token(command) => token::token(command).await,
        Command::Watchdog { owner } => Ok(serve::watchdog(&owner)),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("agent-api: {}", agent_api::display::line(&message, 2048));
            ExitCode::from(2)
        }
    }
}
