//! Plan mode offline from the command line (issue 53 item 4): `agent-api capabilities scripted`
//! lists `plan`, and `agent-api run --agent scripted --mode plan` runs no tool and ends with the
//! exit-plan question (declined aloud without a terminal).

use piped::agent_api_fed;

mod piped;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_scripted_agent_plans_from_the_command_line() {
    let listed = agent_api_fed(&["capabilities", "--agent", "scripted"], "");
    let stdout = text(&listed.stdout);
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    assert!(
        stdout.contains("modes (--mode M): default, and:"),
        "{stdout}"
    );
    assert!(stdout.contains("plan"), "{stdout}");

    let planned = agent_api_fed(
        &[
            "run",
            "--agent",
            "scripted",
            "--mode",
            "plan",
            "--format",
            "pretty",
            "--option",
            "backend.scripted.scenario=permission",
            "--option",
            "backend.scripted.delay_ms=0",
            "tidy",
        ],
        "",
    );
    let (stdout, stderr) = (text(&planned.stdout), text(&planned.stderr));
    assert!(planned.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("Plan mode: I would run `echo hi`"),
        "{stdout}"
    );
    assert!(
        stderr.contains("no terminal to ask; declining the question"),
        "the exit-plan question is asked (and declined aloud): {stderr}"
    );
    assert!(
        !stderr.contains("no terminal to ask; denying"),
        "no tool asks for permission in plan mode: {stderr}"
    );
    assert!(stdout.contains("Staying in plan mode."), "{stdout}");
}
