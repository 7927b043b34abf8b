//! Hostile arguments and environment values cross the container and ssh launchers unchanged, and the
//! secret among them never shows on a command line on either side. The far program is `sh`, which
//! writes the argv it got (NUL-separated) and one variable to files in a folder the far side shares
//! with this machine (the bench sandbox folder, mounted in the containers; the ssh host is this machine).
//!
//! Needs `tests/launchers/setup.sh` (run by `tests/run.sh`); without it every test fails saying so.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::time::Duration;

use agent_api::kit::process::spawn;
use agent_api::kit::CommandSpec;
use agent_api::request::{Container, Engine, Launcher, Ssh};
use agent_api_conformance::launchers::{local_processes_carrying, tag, Infra};

const HOSTILE: &[&str] = &[
    "two words",
    "it's",
    "\"double\"",
    "$(touch /tmp/agent-api-pwned)",
    "`id`",
    "line\nbreak",
    "trailing\n",
    "$HOME ~ * ? [a] ; | & > <",
    "-e",
    "",
    "back\\slash\\n",
];

fn launchers() -> Vec<(Launcher, bool)> {
    let infra = Infra::load().unwrap_or_else(|e| panic!("{e}"));
    let docker = infra.docker().unwrap_or_else(|e| panic!("{e}"));
    let ssh = infra.ssh().unwrap_or_else(|e| panic!("{e}"));
    let sandboxes = infra.sandboxes();
    let mut ssh_settings = Ssh::new(ssh.host);
    ssh_settings.options = vec!["-F".into(), ssh.config.into_os_string()];
    let image = Container::image(Engine::Docker, docker.image.clone())
        .with_mount(&sandboxes, &sandboxes, false);
    // Docker's API carries argv as JSON strings: only ssh passes non-UTF-8 bytes unchanged.
    vec![
        (
            Launcher::Container(Container::exec(
                Engine::Docker,
                docker.containers[2].clone(),
            )),
            false,
        ),
        (Launcher::Container(image), false),
        (Launcher::Ssh(ssh_settings), true),
    ]
}

async fn round_trip(launcher: Launcher, non_utf8: bool) {
    let sandboxes = Infra::load().unwrap().sandboxes();
    let dir = tempfile::tempdir_in(&sandboxes).unwrap();
    let out: PathBuf = dir.path().join("argv");
    let mut args: Vec<OsString> = HOSTILE.iter().map(OsString::from).collect();
    if non_utf8 {
        args.push(OsString::from_vec(b"caf\xe9 \xff".to_vec()));
    }
    let (tag_name, tag_value) = tag();
    let secret = format!("sk-sentinel-{tag_value}\n'$(x)\\");
    let script = "printf '%s\\0' \"$@\" > argv; printf '%s' \"$SECRET_KEY\" > secret; sleep 2";
    let spec = CommandSpec::new("sh")
        .args(
            [OsString::from("-c"), script.into(), "agent".into()]
                .into_iter()
                .chain(args.iter().cloned()),
        )
        .env("SECRET_KEY", &secret)
        .env(&tag_name, &tag_value)
        .env("PATH", "/usr/bin:/bin")
        .cwd(dir.path())
        .with_launcher(launcher.clone());
    let mut child = spawn(&spec).unwrap_or_else(|e| panic!("{launcher}: {e}"));
    // While it sleeps: the secret is in the far process's environment, on no command line.
    let entry = format!("{tag_name}={tag_value}");
    let mut seen = false;
    for _ in 0..100 {
        if !local_processes_carrying(&entry).is_empty() {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen, "{launcher}: the far process never appeared");
    let ps = std::process::Command::new("ps")
        .args(["-eo", "args="])
        .output()
        .unwrap()
        .stdout;
    assert!(
        !String::from_utf8_lossy(&ps).contains("sk-sentinel-"),
        "{launcher}: the secret shows in ps"
    );
    let status = tokio::time::timeout(Duration::from_secs(60), child.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{launcher}: {status}");
    let written = std::fs::read(&out).unwrap_or_else(|e| panic!("{launcher}: {e}"));
    let expected: Vec<u8> = args
        .iter()
        .flat_map(|a| a.clone().into_vec().into_iter().chain([0]))
        .collect();
    assert_eq!(written, expected, "{launcher}: argv changed on the way");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("secret")).unwrap(),
        secret,
        "{launcher}: env changed on the way"
    );
    assert!(!std::path::Path::new("/tmp/agent-api-pwned").exists());
    drop(child);
    for _ in 0..100 {
        if local_processes_carrying(&entry).is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{launcher}: left {:?}", local_processes_carrying(&entry));
}

#[tokio::test]
async fn hostile_arguments_and_values_cross_every_remote_launcher_unchanged() {
    for (launcher, non_utf8) in launchers() {
        round_trip(launcher, non_utf8).await;
    }
}
