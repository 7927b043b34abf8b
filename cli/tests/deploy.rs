//! What an operator copies from `deploy/` (issue 48) is held to the binary it deploys: the
//! systemd unit, the container recipe and the Kubernetes manifests are parsed (the unit as the
//! INI it is, the manifests with a YAML parser), every `serve` flag they pass is one of
//! `agent-api serve --help`, no secret is on the command line (the token and the store's URL come
//! from files), their ports agree with each other, and their probes are the server's health
//! routes. Then each one's arguments start the real binary (secret paths pointed at temporary
//! files, the store in memory, any port), and its probe paths answer 200 there.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn read(relative: &str) -> String {
    let path = deploy_dir().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The long flags `agent-api serve --help` lists.
fn serve_flags() -> BTreeSet<String> {
    let output = Command::new(env!("CARGO_BIN_EXE_agent-api"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    let flags: BTreeSet<String> = help
        .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']' || c == '=')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.trim_end_matches(['.', ':', ')']).to_string())
        .collect();
    assert!(
        flags.contains("--token-file") && flags.contains("--port"),
        "{help}"
    );
    flags
}

/// The secrets `serve` reads from files: their flags, and the flags that would put them on argv.
const SECRET_FILES: [&str; 2] = ["--token-file", "--store-file"];
const SECRETS_ON_ARGV: [&str; 3] = ["--token", "--store", "--no-token"];

/// The value after `flag` in `args`.
fn value_of<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let at = args.iter().position(|a| a == flag)?;
    args.get(at + 1).map(String::as_str)
}

/// `args` (after the binary) are a `serve` the binary takes, with its secrets from files; returns
/// the port it listens on.
fn check_serve_args(args: &[String], what: &str, flags: &BTreeSet<String>) -> u16 {
    assert_eq!(
        args.first().map(String::as_str),
        Some("serve"),
        "{what}: {args:?}"
    );
    for arg in args.iter().filter(|a| a.starts_with("--")) {
        let flag = arg.split('=').next().unwrap();
        assert!(
            flags.contains(flag),
            "{what}: `agent-api serve` has no {flag}"
        );
        assert!(
            !SECRETS_ON_ARGV.contains(&flag),
            "{what}: {flag} puts a secret on the command line (every local user reads it)"
        );
    }
    for flag in SECRET_FILES {
        assert!(
            value_of(args, flag).is_some(),
            "{what}: the secret comes from a file ({flag})"
        );
    }
    assert_eq!(
        value_of(args, "--host"),
        Some("0.0.0.0"),
        "{what}: reachable from outside"
    );
    value_of(args, "--port")
        .unwrap_or_else(|| panic!("{what}: no --port"))
        .parse()
        .unwrap()
}

/// `GET path` on `address`: its status.
fn get_status(address: &str, path: &str) -> u16 {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// A running `agent-api serve`, killed when dropped.
struct Served(Child, String);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the binary with `args` as a deploy file passes them, but the secret files replaced by
/// files of `dir`, the store in memory and any free port; returns once it listens.
fn start_as_deployed(args: &[String], dir: &Path) -> Served {
    let token = dir.join("token");
    let store = dir.join("store-url");
    for (path, text) in [(&token, "deploy-test-token\n"), (&store, "memory\n")] {
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
    }
    let mut args = args.to_vec();
    for (flag, value) in [
        ("--token-file", token.display().to_string()),
        ("--store-file", store.display().to_string()),
        ("--port", "0".to_string()),
        ("--host", "127.0.0.1".to_string()),
        ("--drain", "0".to_string()),
    ] {
        if let Some(at) = args.iter().position(|a| a == flag) {
            args[at + 1] = value;
        }
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-api"))
        .args(&args)
        .env_remove("AGENT_API_TOKEN")
        .env_remove("AGENT_API_STORE")
        .env("HOME", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut said = Vec::new();
    while Instant::now() < deadline {
        let Some(Ok(line)) = lines.next() else { break };
        if let Some(address) = line.strip_prefix("agent-api: listening on http://") {
            let address = address.to_string();
            std::thread::spawn(move || for _ in lines.by_ref() {});
            return Served(child, address);
        }
        said.push(line);
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("`agent-api {args:?}` did not start: {said:?}");
}

/// The server's health routes, from its OpenAPI document (the route table's own description).
fn health_routes() -> BTreeSet<String> {
    let document = serde_json::to_value(agent_api_server::openapi::document()).unwrap();
    let paths: BTreeSet<String> = document["paths"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|p| p.starts_with("/v1/health"))
        .cloned()
        .collect();
    assert_eq!(
        paths,
        BTreeSet::from(["/v1/health".to_string(), "/v1/health/ready".to_string()])
    );
    paths
}

/// The documents of a YAML file, as JSON values.
fn yaml_documents(relative: &str) -> Vec<Value> {
    let text = read(relative);
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|document| {
            serde::Deserialize::deserialize(document).unwrap_or_else(|e| panic!("{relative}: {e}"))
        })
        .filter(|v: &Value| !v.is_null())
        .collect()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {value}"))
        .iter()
        .map(|v| {
            v.as_str()
                .unwrap_or_else(|| panic!("not a string: {v}"))
                .to_string()
        })
        .collect()
}

/// The systemd unit: its sections and keys (a key given twice keeps every value).
fn unit() -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let mut sections: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let mut section = None;
    for (number, line) in read("systemd/agent-api.service").lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = Some(name.to_string());
            sections.entry(name.to_string()).or_default();
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("unit line {}: not key=value: {line}", number + 1));
        let section = section
            .clone()
            .unwrap_or_else(|| panic!("unit line {}: outside a section", number + 1));
        sections
            .get_mut(&section)
            .unwrap()
            .entry(key.trim().to_string())
            .or_default()
            .push(value.trim().to_string());
    }
    sections
}

fn one<'a>(
    unit: &'a BTreeMap<String, BTreeMap<String, Vec<String>>>,
    section: &str,
    key: &str,
) -> &'a str {
    let values = unit
        .get(section)
        .and_then(|s| s.get(key))
        .unwrap_or_else(|| panic!("the unit has no [{section}] {key}"));
    assert_eq!(values.len(), 1, "[{section}] {key} once");
    &values[0]
}

#[test]
fn the_systemd_unit_starts_the_binary_with_its_secrets_from_credentials_and_stops_it_by_sigterm() {
    let flags = serve_flags();
    let unit = unit();
    for section in ["Unit", "Service", "Install"] {
        assert!(unit.contains_key(section), "[{section}]");
    }
    let exec = shlex::split(one(&unit, "Service", "ExecStart")).expect("ExecStart splits");
    assert_eq!(exec[0], "/usr/local/bin/agent-api");
    let args = &exec[1..];
    let port = check_serve_args(args, "the unit", &flags);
    assert_eq!(port, 2468, "the port the other deploy files use");
    // The secret files are the service's credentials, each loaded from a file of root's.
    let credentials: BTreeMap<String, String> = unit["Service"]["LoadCredential"]
        .iter()
        .map(|c| {
            let (name, path) = c.split_once(':').unwrap();
            (name.to_string(), path.to_string())
        })
        .collect();
    for flag in SECRET_FILES {
        let file = value_of(args, flag).unwrap();
        let name = file
            .strip_prefix("${CREDENTIALS_DIRECTORY}/")
            .unwrap_or_else(|| panic!("{flag} reads a credential: {file}"));
        assert!(
            credentials.contains_key(name),
            "LoadCredential={name}:… for {flag}"
        );
    }
    assert!(
        !unit["Service"].contains_key("Environment")
            || unit["Service"]["Environment"]
                .iter()
                .all(|e| !e.contains("AGENT_API_TOKEN") && !e.contains("AGENT_API_STORE")),
        "no secret in the unit itself"
    );
    // SIGTERM to the server alone (it stops its agents), for longer than it drains.
    assert_eq!(one(&unit, "Service", "KillSignal"), "SIGTERM");
    assert_eq!(one(&unit, "Service", "KillMode"), "mixed");
    let drain: u64 = value_of(args, "--drain").unwrap().parse().unwrap();
    let stop: u64 = one(&unit, "Service", "TimeoutStopSec").parse().unwrap();
    assert!(
        stop > drain,
        "TimeoutStopSec {stop} outlasts --drain {drain}"
    );

    let dir = tempfile::tempdir().unwrap();
    let args: Vec<String> = args
        .iter()
        .map(|a| {
            a.replace(
                "${CREDENTIALS_DIRECTORY}",
                &dir.path().display().to_string(),
            )
        })
        .collect();
    let served = start_as_deployed(&args, dir.path());
    for path in health_routes() {
        assert_eq!(get_status(&served.1, &path), 200, "{path}");
    }
}

/// The Containerfile's instructions: each keyword with its arguments (JSON arrays parsed).
fn containerfile() -> Vec<(String, String)> {
    read("container/Containerfile")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (keyword, rest) = l.split_once(' ').unwrap_or((l, ""));
            (keyword.to_ascii_uppercase(), rest.trim().to_string())
        })
        .collect()
}

#[test]
fn the_container_recipe_builds_from_nothing_and_runs_the_binary_as_deployed() {
    let flags = serve_flags();
    let file = containerfile();
    let get = |keyword: &str| -> Vec<&str> {
        file.iter()
            .filter(|(k, _)| k == keyword)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    assert_eq!(
        get("FROM"),
        vec!["scratch"],
        "no base image from a registry"
    );
    let entrypoint: Vec<String> = serde_json::from_str(get("ENTRYPOINT")[0]).unwrap();
    let cmd: Vec<String> = serde_json::from_str(get("CMD")[0]).unwrap();
    assert_eq!(entrypoint, vec!["/usr/local/bin/agent-api"]);
    let build = read("container/build.sh");
    assert!(
        build.contains("\"$root/usr/local/bin/agent-api\""),
        "build.sh puts the binary where the entrypoint runs it"
    );
    let port = check_serve_args(&cmd, "the Containerfile", &flags);
    assert_eq!(get("EXPOSE"), vec![port.to_string().as_str()]);
    assert_eq!(port, 2468);
    let user = get("USER");
    assert!(
        user.len() == 1 && !user[0].starts_with("0") && !user[0].starts_with("root"),
        "not root: {user:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let served = start_as_deployed(&cmd, dir.path());
    for path in health_routes() {
        assert_eq!(get_status(&served.1, &path), 200, "{path}");
    }
}

#[test]
fn the_kubernetes_manifests_hold_the_servers_flags_ports_probes_and_secrets_to_the_binarys() {
    let flags = serve_flags();
    let kustomization = &yaml_documents("kubernetes/kustomization.yaml")[0];
    let mut all = Vec::new();
    for resource in strings(&kustomization["resources"]) {
        all.extend(yaml_documents(&format!("kubernetes/{resource}")));
    }
    let of_kind =
        |kind: &str| -> Vec<&Value> { all.iter().filter(|d| d["kind"] == kind).collect() };
    let deployment = of_kind("Deployment")[0];
    let pod = &deployment["spec"]["template"];
    let labels = &pod["metadata"]["labels"];
    assert_eq!(&deployment["spec"]["selector"]["matchLabels"], labels);
    assert!(
        deployment["spec"]["replicas"].as_u64().unwrap() >= 2,
        "a fleet"
    );
    let container = &pod["spec"]["containers"][0];
    let args = strings(&container["args"]);
    let port = check_serve_args(&args, "the Deployment", &flags);
    assert!(
        container.get("command").is_none(),
        "the image's entrypoint runs"
    );
    let ports = container["ports"].as_array().unwrap();
    let named = |name: &str| -> u64 {
        ports
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no container port {name}"))["containerPort"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(named("http"), u64::from(port));
    // Probes: readiness on the readiness route, liveness on the liveness one, both on the port.
    let routes = health_routes();
    for (probe, path) in [
        ("readinessProbe", "/v1/health/ready"),
        ("livenessProbe", "/v1/health"),
    ] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert!(routes.contains(path));
        let probe_port = match &get["port"] {
            Value::String(name) => named(name),
            other => other.as_u64().unwrap(),
        };
        assert_eq!(probe_port, u64::from(port), "{probe} port");
    }
    // Secrets: the files the flags read are the mounted Secret's keys; no secret in env.
    let mounts = container["volumeMounts"].as_array().unwrap();
    let volumes = pod["spec"]["volumes"].as_array().unwrap();
    let secret_example = &yaml_documents("kubernetes/secret.example.yaml")[0];
    for flag in SECRET_FILES {
        let file = Path::new(value_of(&args, flag).unwrap());
        let mount = mounts
            .iter()
            .find(|m| Path::new(m["mountPath"].as_str().unwrap()) == file.parent().unwrap())
            .unwrap_or_else(|| panic!("{flag}: no volume mounted at its folder"));
        let volume = volumes.iter().find(|v| v["name"] == mount["name"]).unwrap();
        assert_eq!(
            volume["secret"]["secretName"], secret_example["metadata"]["name"],
            "{flag} reads the Secret"
        );
        let key = file.file_name().unwrap().to_str().unwrap();
        assert!(
            secret_example["stringData"].get(key).is_some(),
            "the Secret has the key {key}"
        );
    }
    for env in container["env"].as_array().into_iter().flatten() {
        let name = env["name"].as_str().unwrap();
        assert!(
            !name.starts_with("AGENT_API_") || env.get("value").is_none(),
            "{name}: no secret written in the manifest"
        );
    }
    // SIGTERM drain: the pod's grace outlasts the server's drain.
    let drain = value_of(&args, "--drain").unwrap().parse::<u64>().unwrap();
    let grace = pod["spec"]["terminationGracePeriodSeconds"]
        .as_u64()
        .unwrap();
    assert!(grace > drain, "grace {grace} > drain {drain}");
    // The Service sends to the pods' named port; the PodDisruptionBudget covers the same pods.
    let service = of_kind("Service")[0];
    assert_eq!(&service["spec"]["selector"], labels);
    let target = &service["spec"]["ports"][0]["targetPort"];
    assert_eq!(named(target.as_str().unwrap()), u64::from(port));
    let budget = of_kind("PodDisruptionBudget")[0];
    assert_eq!(&budget["spec"]["selector"]["matchLabels"], labels);
    assert!(
        budget["spec"].get("maxUnavailable").is_some()
            || budget["spec"].get("minAvailable").is_some()
    );
    // The names the Service is reached by are allowed hosts (DNS rebinding is refused).
    let name = service["metadata"]["name"].as_str().unwrap();
    let allowed: Vec<&str> = args
        .windows(2)
        .filter(|w| w[0] == "--allowed-host")
        .map(|w| w[1].as_str())
        .collect();
    assert!(allowed.contains(&name), "{allowed:?}");
    // The image is this version's, as build.sh tags it.
    assert_eq!(
        container["image"],
        format!("agent-api:{}", env!("CARGO_PKG_VERSION"))
    );
    // The optional PostgreSQL: a StatefulSet whose Service the example store URL names.
    let postgres = yaml_documents("kubernetes/postgres.yaml");
    let statefulset = postgres
        .iter()
        .find(|d| d["kind"] == "StatefulSet")
        .unwrap();
    let service_name = statefulset["spec"]["serviceName"].as_str().unwrap();
    assert!(secret_example["stringData"]["store-url"]
        .as_str()
        .unwrap()
        .contains(&format!("@{service_name}:5432/")));

    // The Deployment's arguments start the real binary, whose probes answer.
    let dir = tempfile::tempdir().unwrap();
    let args: Vec<String> = args
        .iter()
        .map(|a| a.replace("$(POD_NAME)", "agent-api-0"))
        .collect();
    let served = start_as_deployed(&args, dir.path());
    for path in routes {
        assert_eq!(get_status(&served.1, &path), 200, "{path}");
    }
}

/// Runs `docker` with `args`; its stdout, or a panic with what it said.
fn docker(args: &[&str]) -> String {
    let output = Command::new("docker")
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("docker is needed to build the image (tests/launchers/setup.sh starts it): {e}")
        });
    assert!(
        output.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Removes the test's image and container, whatever happened.
struct Image(String);

impl Drop for Image {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rm", "-f", &self.0]).output();
        let _ = Command::new("docker").args(["rmi", "-f", &self.0]).output();
    }
}

/// The recipe for real: `build.sh` makes the image from this binary with no base image, and the
/// image runs it as its unprivileged user, reading the secrets from the mounted files; its health
/// routes answer and SIGTERM (`docker stop`) ends it at once (no drain asked). The daemon here has
/// no bridge network, so the container shares the host's, on a free port.
#[test]
fn the_container_image_builds_without_a_base_image_and_serves() {
    let tag = format!("agent-api-deploy-test:{}", std::process::id());
    let _image = Image(tag.clone());
    let build = Command::new("bash")
        .arg(deploy_dir().join("container/build.sh"))
        .args([env!("CARGO_BIN_EXE_agent-api"), &tag])
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "build.sh: {}{}",
        String::from_utf8_lossy(&build.stdout),
        String::from_utf8_lossy(&build.stderr)
    );
    let history = docker(&["history", "--format", "{{.CreatedBy}}", &tag]);
    assert!(
        !history.to_ascii_lowercase().contains("from "),
        "no layer of a base image: {history}"
    );
    let secrets = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        secrets.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    for (name, text) in [("token", "deploy-test-token\n"), ("store-url", "memory\n")] {
        let path = secrets.path().join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
    }
    let mount = format!("{}:/run/secrets/agent-api:ro", secrets.path().display());
    let container = format!("agent-api-deploy-test-{}", std::process::id());
    let _container = Image(container.clone());
    docker(&[
        "run",
        "-d",
        "--name",
        &container,
        "--network",
        "host",
        "-v",
        &mount,
        &tag,
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--token-file",
        "/run/secrets/agent-api/token",
        "--store-file",
        "/run/secrets/agent-api/store-url",
    ]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let address = loop {
        let logs = Command::new("docker")
            .args(["logs", &container])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&logs.stderr).into_owned();
        if let Some(at) = said.find("listening on http://") {
            let rest = &said[at + "listening on http://".len()..];
            break rest.split_whitespace().next().unwrap().to_string();
        }
        assert!(
            Instant::now() < deadline,
            "the container did not start: {said}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    for path in health_routes() {
        assert_eq!(get_status(&address, &path), 200, "{path}");
    }
    let user = docker(&["inspect", "--format", "{{.Config.User}}", &container]);
    assert_eq!(user.trim(), "65532:65532");
    // Ended by its SIGTERM (exit 0), not by docker's SIGKILL after the grace (137).
    docker(&["stop", "--time", "30", &container]);
    let exit = docker(&["inspect", "--format", "{{.State.ExitCode}}", &container]);
    assert_eq!(exit.trim(), "0", "SIGTERM ends the server cleanly");
}
