//! The flags for running many agents side by side (issue 24): separate timeouts, per-run homes,
//! limits.

use std::time::Duration;

use agent_api::request::{Home, HomeSeed, SessionRef};
use agent_api::{RunRequest, SessionSelector};
use clap::{Args, ValueEnum};

/// Where the agent keeps its config and state (`--home`).
#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum HomeFlag {
    /// The user's own directories.
    #[default]
    Inherit,
    /// Directories of the run's own, with copies of the user's credentials.
    Isolated,
    /// A fresh home with the user's credentials only: no user settings, hooks, MCP or memory.
    Hermetic,
}

/// `run`'s start-up timeout when none is given: an agent that has said nothing after two
/// minutes (no network, a login prompt it cannot show) is not going to.
pub(crate) const DEFAULT_STARTUP_SECS: u64 = 120;
/// `run`'s idle timeout when none is given: ten minutes without a line from the agent (an agent
/// retrying for ever without saying so). Time spent waiting for an answer at the terminal does not count.
pub(crate) const DEFAULT_IDLE_SECS: u64 = 600;

/// A timeout flag: seconds, or `off` (also `0`) for none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timeout(Option<u64>);

fn parse_timeout(text: &str) -> Result<Timeout, String> {
    match text.trim() {
        "off" | "none" | "0" => Ok(Timeout(None)),
        secs => secs
            .parse()
            .map(|s| Timeout(Some(s)))
            .map_err(|_| format!("expected seconds or `off`, not `{secs}`")),
    }
}

/// Timeouts beside `--timeout`, homes and limits: what every run or session turn gets (the
/// defaults of `serve`'s sessions too). Each timeout ends the run with a timeout error that names it.
#[derive(Args, Clone, Debug, Default)]
pub(crate) struct RunLimits {
    /// Stop the run if the agent has not sent its first message after this many seconds (`off`
    /// for never; `run` waits 120 s by default).
    #[arg(long, value_name = "SECONDS|off", value_parser = parse_timeout)]
    startup_timeout: Option<Timeout>,
    /// Stop the run after this many seconds without output from the agent, not counting time
    /// spent waiting for your answer (`off` for never; `run` waits 600 s by default).
    #[arg(long, value_name = "SECONDS|off", value_parser = parse_timeout)]
    idle_timeout: Option<Timeout>,
    /// Stop each turn (a run is one turn) after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    turn_timeout: Option<u64>,
    /// Where the agent keeps its config and state.
    #[arg(long, value_enum, default_value_t = HomeFlag::Inherit)]
    home: HomeFlag,
    /// End the run (limit reached) after this many model turns.
    #[arg(long, value_name = "TURNS")]
    max_turns: Option<u32>,
    /// End the run (limit reached) past this many input plus output tokens.
    #[arg(long, value_name = "TOKENS")]
    max_tokens: Option<u64>,
    /// End the run (limit reached) past this cost in US dollars, where the agent reports cost.
    #[arg(long, value_name = "USD")]
    max_cost: Option<f64>,
}

/// The flags for runs side by side: [`RunLimits`], and which session a run continues.
#[derive(Args, Clone, Debug, Default)]
pub(crate) struct FleetFlags {
    #[command(flatten)]
    pub(crate) limits: RunLimits,
    /// Continue this session, in its own working directory: the `session:` line a run printed
    /// (JSON), or a bare native session id.
    #[arg(long, value_name = "SESSION", value_parser = parse_session, conflicts_with = "fork")]
    resume: Option<SessionRef>,
    /// Start a new session as a copy of this one (a `session:` line or a bare id).
    #[arg(long, value_name = "SESSION", value_parser = parse_session)]
    fork: Option<SessionRef>,
}

fn parse_session(text: &str) -> Result<SessionRef, String> {
    SessionRef::parse(text).map_err(|e| e.to_string())
}

impl FleetFlags {
    /// The agent of the session to resume or fork, when its handle names one.
    pub(crate) fn session_agent(&self) -> Option<String> {
        self.resume
            .as_ref()
            .or(self.fork.as_ref())
            .and_then(|s| s.agent.as_ref())
            .map(ToString::to_string)
    }

    /// Flags with `limits` and no session to continue.
    pub(crate) fn with_limits(limits: RunLimits) -> Self {
        Self {
            limits,
            resume: None,
            fork: None,
        }
    }

    /// `request` with what these flags set; `one_shot` (`run`, not `chat` or `serve`) gives the
    /// start-up and idle timeouts their defaults when the flags are absent.
    pub(crate) fn apply(&self, mut request: RunRequest, one_shot: bool) -> RunRequest {
        if let Some(session) = &self.resume {
            request = request.with_session(SessionSelector::Resume(session.clone()));
        } else if let Some(session) = &self.fork {
            request = request.with_session(SessionSelector::Fork(session.clone()));
        }
        self.limits.apply(request, one_shot)
    }
}

impl RunLimits {
    /// `request` with these timeouts, home and limits; `one_shot`: see [`FleetFlags::apply`].
    pub(crate) fn apply(&self, mut request: RunRequest, one_shot: bool) -> RunRequest {
        let defaults = |secs| Timeout(one_shot.then_some(secs));
        if let Timeout(Some(secs)) = self
            .startup_timeout
            .unwrap_or(defaults(DEFAULT_STARTUP_SECS))
        {
            request = request.with_startup_timeout(Duration::from_secs(secs));
        }
        if let Timeout(Some(secs)) = self.idle_timeout.unwrap_or(defaults(DEFAULT_IDLE_SECS)) {
            request = request.with_idle_timeout(Duration::from_secs(secs));
        }
        if let Some(secs) = self.turn_timeout {
            request = request.with_turn_timeout(Duration::from_secs(secs));
        }
        if let Some(turns) = self.max_turns {
            request = request.with_max_turns(turns);
        }
        if let Some(tokens) = self.max_tokens {
            request = request.with_max_total_tokens(tokens);
        }
        if let Some(usd) = self.max_cost {
            request = request.with_max_cost_usd(usd);
        }
        request.with_home(match self.home {
            HomeFlag::Inherit => Home::Inherit,
            HomeFlag::Isolated => Home::Isolated {
                seed: HomeSeed::Credentials,
            },
            HomeFlag::Hermetic => Home::Hermetic,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(args: &[&str]) -> FleetFlags {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            fleet: FleetFlags,
        }
        <Cli as clap::Parser>::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
            .unwrap()
            .fleet
    }

    #[test]
    fn a_one_shot_run_gets_the_default_startup_and_idle_timeouts_unless_told_otherwise() {
        let request = flags(&[]).apply(RunRequest::new("hi"), true);
        assert_eq!(
            request.startup_timeout,
            Some(Duration::from_secs(DEFAULT_STARTUP_SECS))
        );
        assert_eq!(
            request.idle_timeout,
            Some(Duration::from_secs(DEFAULT_IDLE_SECS))
        );
        let request = flags(&["--startup-timeout", "5", "--idle-timeout", "off"])
            .apply(RunRequest::new("hi"), true);
        assert_eq!(
            (request.startup_timeout, request.idle_timeout),
            (Some(Duration::from_secs(5)), None)
        );
        let request = flags(&["--startup-timeout", "0"]).apply(RunRequest::new("hi"), true);
        assert_eq!(request.startup_timeout, None, "0 is off too");
        let chat = flags(&[]).apply(RunRequest::new("hi"), false);
        assert_eq!(
            (chat.startup_timeout, chat.idle_timeout),
            (None, None),
            "a chat waits for its person"
        );
    }
}
