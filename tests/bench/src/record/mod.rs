//! The recorder: runs a real CLI on the bench and writes a fixture in the formats of the shared fixtures
//! README (`<scenario>.stdout.jsonl` for one-way interfaces, `<scenario>.session.jsonl` for two-way ones,
//! and `<scenario>.meta.json`), with machine paths replaced by neutral ones (`/home/dev`,
//! `/home/dev/work/<scenario>`, port 8080).

pub mod acp;
pub mod claude_control;
pub mod codex_app_server;
pub mod compare;
pub mod duplex;
pub mod neutral;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::interface::prompt_for;
use crate::{clis, process, scenario, BenchError, Interface, ModelServer, Sandbox};
use duplex::Duplex;
use neutral::Neutralizer;

/// What one recording wrote.
#[derive(Debug, Clone)]
pub struct Recording {
    /// The transcript: `<scenario>.stdout.jsonl` or `<scenario>.session.jsonl`.
    pub transcript: PathBuf,
    /// `<scenario>.meta.json`.
    pub meta: PathBuf,
    /// The CLI's exit code (`-N` for signal N).
    pub exit_code: i32,
    /// The sandbox the CLI ran in (kept alive so callers can inspect the working directory).
    pub sandbox: Sandbox,
}

/// The folder recordings of `interface` go to by default: `tests/bench/recorded/<cli>/<interface>`.
pub fn default_out_dir(interface: Interface) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("recorded")
        .join(interface.cli().name())
        .join(interface.name())
}

/// Runs `interface` with `scenario` against `server` and writes the fixture files into `out_dir`.
pub async fn record(
    server: &ModelServer,
    interface: Interface,
    scenario: &str,
    out_dir: &Path,
    timeout: Duration,
) -> Result<Recording, BenchError> {
    let described = scenario::find(scenario).ok_or_else(|| BenchError::Unknown {
        kind: "scenario",
        name: scenario.to_string(),
        known: scenario::names(),
    })?;
    let sandbox = Sandbox::new(interface.cli(), server, scenario)?;
    let neutral = Neutralizer::for_sandbox(&sandbox, &format!("http://{}", server.addr()));
    let prompt = prompt_for(scenario);
    let args = interface.args(prompt);
    let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let cmd = sandbox.command(&arg_refs);
    let what = format!("{interface} ({scenario})");
    std::fs::create_dir_all(out_dir)
        .map_err(|e| BenchError::io(format!("creating {}", out_dir.display()), e))?;

    let target = Target {
        out_dir,
        scenario,
        neutral: &neutral,
    };
    let mut meta = Map::new();
    let (transcript, exit_code) = if interface.is_one_way() {
        record_one_way(cmd, &what, timeout, &target, &mut meta).await?
    } else {
        record_two_way(interface, cmd, &what, &sandbox, timeout, &target, &mut meta).await?
    };
    let mut head = meta_head(interface, scenario, &sandbox, &args, &neutral);
    head.extend(meta);
    if interface.cli() == crate::Cli::Gemini {
        head.insert(
            "config_files".into(),
            json!({ format!("{}/.gemini/settings.json", neutral::HOME): crate::sandbox::gemini_settings() }),
        );
    }
    head.insert("scenario_description".into(), json!(described.description));
    let meta_path = out_dir.join(format!("{scenario}.meta.json"));
    write(&meta_path, &ordered_json(head, META_ORDER)?)?;
    Ok(Recording {
        transcript,
        meta: meta_path,
        exit_code,
        sandbox,
    })
}

/// Where a recording goes and how its machine paths are neutralized.
struct Target<'a> {
    out_dir: &'a Path,
    scenario: &'a str,
    neutral: &'a Neutralizer,
}

/// Runs a one-way interface to its end and writes `<scenario>.stdout.jsonl`; its timings go to `meta`.
async fn record_one_way(
    cmd: tokio::process::Command,
    what: &str,
    timeout: Duration,
    target: &Target<'_>,
    meta: &mut Map<String, Value>,
) -> Result<(PathBuf, i32), BenchError> {
    let out = process::run(cmd, what, timeout).await?;
    let path = target
        .out_dir
        .join(format!("{}.stdout.jsonl", target.scenario));
    let text: String = out
        .stdout
        .iter()
        .map(|(_, l)| format!("{}\n", target.neutral.apply(l)))
        .collect();
    write(&path, &text)?;
    let times: Vec<f64> = out.stdout.iter().map(|(t, _)| round3(*t)).collect();
    meta.insert("exit_code".into(), json!(out.exit_code()));
    meta.insert("wall_s".into(), json!(round3(out.wall_s)));
    meta.insert("t_first_stdout_s".into(), json!(times.first()));
    meta.insert("stdout_times_s".into(), json!(times));
    insert_stderr(meta, &target.neutral.apply(&out.stderr));
    Ok((path, out.exit_code()))
}

/// Drives a two-way interface through its turn and writes `<scenario>.session.jsonl`; its timings go to `meta`.
async fn record_two_way(
    interface: Interface,
    cmd: tokio::process::Command,
    what: &str,
    sandbox: &Sandbox,
    timeout: Duration,
    target: &Target<'_>,
    meta: &mut Map<String, Value>,
) -> Result<(PathBuf, i32), BenchError> {
    let prompt = prompt_for(target.scenario);
    let deadline = Instant::now() + timeout;
    let mut session = Duplex::spawn(cmd, what)?;
    let driven = match interface {
        Interface::ClaudeControl | Interface::QwenControl => {
            claude_control::drive(&mut session, prompt, deadline).await
        }
        Interface::CodexAppServer => {
            codex_app_server::drive(&mut session, &sandbox.cwd, prompt, deadline).await
        }
        Interface::QwenAcp => acp::drive(&mut session, &sandbox.cwd, prompt, deadline).await,
        other => Err(BenchError::Protocol(format!(
            "no two-way driver for {other}"
        ))),
    };
    let finished = session
        .finish(deadline.max(Instant::now() + Duration::from_secs(10)))
        .await;
    driven?;
    let (status, wall) = finished?;
    let path = target
        .out_dir
        .join(format!("{}.session.jsonl", target.scenario));
    let text: String = session
        .log
        .iter()
        .map(|e| format!("{}\n", target.neutral.apply(&e.to_line())))
        .collect();
    write(&path, &text)?;
    let code = exit_code(status);
    meta.insert("exit_code".into(), json!(code));
    meta.insert("wall_s".into(), json!(round3(wall)));
    meta.insert(
        "t_first_stdout_s".into(),
        json!(session.first_stdout.map(round3)),
    );
    insert_stderr(meta, &target.neutral.apply(&session.stderr));
    Ok((path, code))
}

/// The head of the meta file: the CLI, its version, the interface, the argv, env and cwd as run.
fn meta_head(
    interface: Interface,
    scenario: &str,
    sandbox: &Sandbox,
    args: &[String],
    neutral: &Neutralizer,
) -> Map<String, Value> {
    let cli = interface.cli();
    let mut head = Map::new();
    head.insert("cli".into(), json!(cli.name()));
    head.insert("cli_version".into(), json!(clis::cli_version(cli)));
    head.insert("interface".into(), json!(interface.name()));
    head.insert("scenario".into(), json!(scenario));
    let argv: Vec<String> = std::iter::once(cli.executable().to_string())
        .chain(
            sandbox
                .base_args
                .iter()
                .chain(args.iter())
                .map(|a| neutral.apply(a)),
        )
        .collect();
    head.insert("argv".into(), json!(argv));
    let env: Map<String, Value> = sandbox
        .env
        .iter()
        .map(|(k, v)| {
            let v = if k == "PATH" {
                "/usr/local/bin:/usr/bin:/bin".to_string()
            } else {
                neutral.apply(v)
            };
            (k.clone(), json!(v))
        })
        .collect();
    head.insert("env".into(), Value::Object(env));
    head.insert(
        "cwd".into(),
        json!(neutral.apply(&sandbox.cwd.display().to_string())),
    );
    head.insert("signals_sent".into(), json!([]));
    head
}

/// The order of meta keys in the shared fixtures.
const META_ORDER: &[&str] = &[
    "cli",
    "cli_version",
    "interface",
    "scenario",
    "argv",
    "env",
    "cwd",
    "exit_code",
    "signals_sent",
    "wall_s",
    "t_first_stdout_s",
    "stdout_times_s",
    "config_files",
    "stderr",
    "stderr_truncated",
    "stderr_total_chars",
    "scenario_description",
];

/// A pretty JSON object with its top-level keys in `order` (others after them).
fn ordered_json(mut map: Map<String, Value>, order: &[&str]) -> Result<String, BenchError> {
    let mut keys: Vec<String> = order
        .iter()
        .map(|k| k.to_string())
        .filter(|k| map.contains_key(k))
        .collect();
    keys.extend(
        map.keys()
            .filter(|k| !order.contains(&k.as_str()))
            .cloned()
            .collect::<Vec<_>>(),
    );
    let mut out = String::from("{\n");
    for (i, key) in keys.iter().enumerate() {
        let value = map.remove(key).unwrap_or(Value::Null);
        let text = serde_json::to_string_pretty(&value)
            .map_err(|e| BenchError::json("serializing meta", e))?;
        let sep = if i + 1 == keys.len() { "" } else { "," };
        out += &format!(
            "  {}: {}{sep}\n",
            Value::from(key.as_str()),
            text.replace('\n', "\n  ")
        );
    }
    out += "}\n";
    Ok(out)
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .unwrap_or_else(|| -status.signal().unwrap_or(0))
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn insert_stderr(meta: &mut Map<String, Value>, stderr: &str) {
    const LIMIT: usize = 4000;
    let total = stderr.chars().count();
    meta.insert(
        "stderr".into(),
        json!(stderr.chars().take(LIMIT).collect::<String>()),
    );
    if total > LIMIT {
        meta.insert("stderr_truncated".into(), json!(true));
        meta.insert("stderr_total_chars".into(), json!(total));
    }
}

fn write(path: &Path, text: &str) -> Result<(), BenchError> {
    std::fs::write(path, text).map_err(|e| BenchError::io(format!("writing {}", path.display()), e))
}
