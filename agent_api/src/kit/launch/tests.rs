use std::ffi::OsString;

use super::*;
use crate::kit::command::CommandSpec;
use crate::vocabulary::error::AgentError;
use crate::vocabulary::launcher::{Engine, ViaError};
use agent_api_capabilities as caps;

#[test]
fn via_forms_parse_into_typed_launchers() {
    assert_eq!("local".parse::<Launcher>().unwrap(), Launcher::Local);
    assert_eq!(
        "bwrap".parse::<Launcher>().unwrap(),
        Launcher::Sandbox(Bwrap::new())
    );
    assert_eq!(
        "docker:box".parse::<Launcher>().unwrap(),
        Launcher::Container(Container::exec(Engine::Docker, "box"))
    );
    assert_eq!(
        "podman:box".parse::<Launcher>().unwrap(),
        Launcher::Container(Container::exec(Engine::Podman, "box"))
    );
    assert_eq!(
        "docker-image:img:1".parse::<Launcher>().unwrap(),
        Launcher::Container(Container::image(Engine::Docker, "img:1"))
    );
    let Launcher::Ssh(ssh) = "ssh:h.example".parse::<Launcher>().unwrap() else {
        panic!("not ssh")
    };
    assert_eq!(
        (ssh.user, ssh.host.as_str(), ssh.port),
        (None, "h.example", None)
    );
    assert_eq!(
        r#"prefix:["setsid","-w"]"#.parse::<Launcher>().unwrap(),
        Launcher::Prefix(vec![OsString::from("setsid"), OsString::from("-w")])
    );
    let Launcher::Ssh(v6) = "ssh:me@[::1]:2222".parse::<Launcher>().unwrap() else {
        panic!("not ssh")
    };
    assert_eq!(
        (v6.user.as_deref(), v6.host.as_str(), v6.port),
        (Some("me"), "::1", Some(2222))
    );
    for bad in ["ssh:[::1", "ssh:[::1]x", "ssh:-oProxyCommand=x"] {
        assert!(bad.parse::<Launcher>().is_err(), "{bad} parsed");
    }
    for bad in [
        "",
        "docker:",
        "docker:-it",
        "ssh:",
        "ssh:h:port",
        "ssh:@h",
        "prefix:[]",
        "prefix:nope",
        "lxc:x",
    ] {
        assert!(bad.parse::<Launcher>().is_err(), "{bad} parsed");
    }
    assert_eq!(
        "lxc:x".parse::<Launcher>(),
        Err(ViaError::Unknown("lxc:x".into()))
    );
}

#[test]
fn each_launcher_has_its_capability_and_a_display_without_arguments() {
    let prefix = Launcher::Prefix(vec!["kubectl".into(), "--token=s3cret".into()]);
    assert_eq!(prefix.capability(), caps::LAUNCHER_PREFIX);
    assert_eq!(prefix.to_string(), "prefix:kubectl");
    assert_eq!(Launcher::Local.capability(), caps::LAUNCHER_LOCAL);
    assert_eq!(
        "ssh:u@h:22".parse::<Launcher>().unwrap().to_string(),
        "ssh:h"
    );
    for id in [
        caps::LAUNCHER_LOCAL,
        caps::LAUNCHER_BWRAP,
        caps::LAUNCHER_CONTAINER,
        caps::LAUNCHER_SSH,
        caps::LAUNCHER_PREFIX,
    ] {
        assert!(caps::is_standard(id));
    }
}

#[test]
fn a_missing_launcher_program_is_a_typed_error() {
    let missing = Launcher::Sandbox(Bwrap {
        program: "/nonexistent/bwrap".into(),
        ..Bwrap::new()
    });
    match missing.check_available() {
        Err(AgentError::LauncherUnavailable { launcher, program }) => {
            assert_eq!(launcher, "bwrap");
            assert_eq!(program, std::path::Path::new("/nonexistent/bwrap"));
        }
        other => panic!("expected LauncherUnavailable, got {other:?}"),
    }
    assert!(matches!(
        Launcher::Prefix(Vec::new()).check_available(),
        Err(AgentError::InvalidRequest { .. })
    ));
    assert!(Launcher::Prefix(vec!["sh".into()])
        .check_available()
        .is_ok());
}

#[test]
fn a_sandbox_binds_the_runs_own_files_read_only_and_a_far_side_refuses_them() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let spec = CommandSpec::new("agent").local_file(file.path());
    let args = bwrap::args(
        &Bwrap::new(),
        std::path::Path::new("/"),
        &Default::default(),
        &spec,
        std::path::Path::new("/usr/bin/agent"),
    );
    let bound = args.windows(3).any(|w| {
        w[0] == "--ro-bind" && w[1] == file.path().as_os_str() && w[2] == file.path().as_os_str()
    });
    assert!(bound, "{args:?}");
    for far in [
        Launcher::Ssh(Ssh::new("host")),
        Launcher::Container(Container::exec(Engine::Docker, "box")),
    ] {
        let error = plan::plan(&spec.clone().with_launcher(far), "agent".into(), "r1")
            .err()
            .expect("a far side cannot read the file");
        assert!(
            matches!(&error, AgentError::InvalidRequest { reason } if reason.contains("cannot carry")),
            "{error}"
        );
    }
}
