//! `agent_bench`: the bench's command line.
//!
//! ```text
//! agent_bench serve [--port N] [--log FILE]          run the scripted model server; prints its address
//! agent_bench record --cli C --interface I --scenario S [--out DIR] [--timeout SECS] [--log FILE]
//! agent_bench scenarios                              list the scripted scenarios
//! agent_bench clis                                   where the pinned CLIs are and their versions
//! ```

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use agent_bench::{clis, record, scenario, BenchError, Cli, Interface, ModelServer};

const USAGE: &str = "usage:
  agent_bench serve [--port N] [--log FILE]
  agent_bench record --cli <claude_code|codex|opencode|gemini|qwen> --interface <name> --scenario <name>
                     [--out DIR] [--timeout SECS] [--log FILE]
  agent_bench scenarios
  agent_bench clis";

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("agent_bench: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `--key value` pairs after the subcommand.
fn options(args: &[String]) -> Result<HashMap<&str, &str>, BenchError> {
    let mut map = HashMap::new();
    let mut it = args.iter();
    while let Some(key) = it.next() {
        let name = key.strip_prefix("--").ok_or_else(|| usage_error(key))?;
        let value = it.next().ok_or_else(|| usage_error(key))?;
        map.insert(name, value.as_str());
    }
    Ok(map)
}

fn usage_error(arg: &str) -> BenchError {
    BenchError::Unknown {
        kind: "argument",
        name: arg.to_string(),
        known: USAGE.to_string(),
    }
}

async fn run(args: &[String]) -> Result<(), BenchError> {
    let (command, rest) = args.split_first().ok_or_else(|| usage_error(""))?;
    let opts = options(rest)?;
    let log = opts.get("log").map(PathBuf::from);
    match command.as_str() {
        "serve" => {
            let port = match opts.get("port") {
                Some(p) => p.parse().map_err(|_| usage_error(p))?,
                None => 0,
            };
            let server = ModelServer::start_on(port, log).await?;
            println!("http://{}", server.addr());
            std::io::stdout()
                .flush()
                .map_err(|e| BenchError::io("writing the address", e))?;
            tokio::signal::ctrl_c()
                .await
                .map_err(|e| BenchError::io("waiting for Ctrl-C", e))?;
            Ok(())
        }
        "record" => {
            let need = |k: &str| {
                opts.get(k)
                    .copied()
                    .ok_or_else(|| usage_error(&format!("--{k} (missing)")))
            };
            let cli: Cli = need("cli")?.parse()?;
            let interface = Interface::find(cli, need("interface")?)?;
            let scenario = need("scenario")?;
            let out = opts
                .get("out")
                .map_or_else(|| record::default_out_dir(interface), PathBuf::from);
            let timeout = match opts.get("timeout") {
                Some(t) => Duration::from_secs(t.parse().map_err(|_| usage_error(t))?),
                None => Duration::from_secs(180),
            };
            let server = ModelServer::start(log).await?;
            let rec = record::record(&server, interface, scenario, &out, timeout).await?;
            println!("{}", rec.transcript.display());
            println!("{}", rec.meta.display());
            println!("exit code {}", rec.exit_code);
            Ok(())
        }
        "scenarios" => {
            for s in scenario::SCENARIOS {
                println!("{:<14} {}", s.name, s.description);
            }
            Ok(())
        }
        "clis" => {
            match clis::cli_dir() {
                Some(dir) => println!("installed in {}", dir.display()),
                None => println!("not installed: run `bash tests/bench/install-clis.sh`"),
            }
            for cli in Cli::ALL {
                let pinned = clis::pinned_version(cli).unwrap_or_else(|| "?".into());
                let installed = clis::cli_version(cli).unwrap_or_else(|| "not installed".into());
                println!(
                    "{:<12} pinned {pinned:<10} installed {installed}",
                    cli.name()
                );
            }
            Ok(())
        }
        other => Err(usage_error(other)),
    }
}
