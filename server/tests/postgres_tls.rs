//! TLS to PostgreSQL (`sslmode`, `sslrootcert`), on the real clusters `tests/postgres/setup.sh`
//! starts: one with TLS on (its own CA, a certificate for `localhost` and `127.0.0.1`) and the
//! plain one. Whether a connection really is TLS is asked of the server (`pg_stat_ssl`).
//!
//! The URLs and CA files come from `AGENT_API_TEST_POSTGRES_TLS_URL`,
//! `AGENT_API_TEST_POSTGRES_TLS_CA`, `AGENT_API_TEST_POSTGRES_OTHER_CA` and
//! `AGENT_API_TEST_POSTGRES_URL`, else from the file the setup script writes. Without them these
//! tests fail, saying why; `AGENT_API_POSTGRES=skip` makes them print a loud SKIPPED line instead.

mod common;

use agent_api_server::{StoreError, StoreUrl};
use common::unique;

/// The setup script's settings: the TLS cluster's URL, its CA, a CA that signed nothing, and the
/// plain cluster's URL.
struct Clusters {
    tls_url: String,
    ca: String,
    other_ca: String,
    plain_url: String,
}

fn clusters() -> Option<Clusters> {
    if std::env::var("AGENT_API_POSTGRES").as_deref() == Ok("skip") {
        eprintln!("SKIPPED: AGENT_API_POSTGRES=skip: the PostgreSQL TLS tests did not run");
        return None;
    }
    let env_file = common::postgres_env_file();
    let file = std::fs::read_to_string(&env_file).unwrap_or_default();
    let setting = |name: &str| {
        if let Ok(value) = std::env::var(name) {
            return value;
        }
        for line in file.lines() {
            if let Some(reason) = line
                .strip_prefix("NOT_SET_UP=")
                .or_else(|| line.strip_prefix("TLS_NOT_SET_UP="))
            {
                panic!("no PostgreSQL for the TLS tests: tests/postgres/setup.sh could not set it up: {reason}");
            }
            if let Some(value) = line.strip_prefix(&format!("{name}=")) {
                return value.to_string();
            }
        }
        panic!(
            "{name} is not set and {} names none: run `bash tests/postgres/setup.sh` (tests/run.sh does)",
            env_file.display()
        )
    };
    Some(Clusters {
        tls_url: setting("AGENT_API_TEST_POSTGRES_TLS_URL"),
        ca: setting("AGENT_API_TEST_POSTGRES_TLS_CA"),
        other_ca: setting("AGENT_API_TEST_POSTGRES_OTHER_CA"),
        plain_url: setting("AGENT_API_TEST_POSTGRES_URL"),
    })
}

/// `url` with the query `query` added.
fn with(url: &str, query: &str) -> String {
    format!("{url}{}{query}", if url.contains('?') { '&' } else { '?' })
}

/// Whether the connection named `application` uses TLS, as the server sees it (asked over a
/// plain connection of the test's own).
async fn uses_tls(url: &str, application: &str) -> bool {
    let (client, connection) =
        tokio_postgres::connect(&with(url, "sslmode=disable"), tokio_postgres::NoTls)
            .await
            .expect("a plain connection to the TLS cluster");
    tokio::spawn(connection);
    let rows = client
        .query(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = $1",
            &[&application],
        )
        .await
        .unwrap();
    // The store's connections: its client, and (issue 48) the one that listens for the fleet's
    // notifications; each must be as the URL asks.
    assert!(
        !rows.is_empty(),
        "the store's connection `{application}` is not on the server"
    );
    let tls: Vec<bool> = rows.iter().map(|row| row.get(0)).collect();
    assert!(
        tls.iter().all(|t| *t == tls[0]),
        "the store's connections `{application}` differ: {tls:?}"
    );
    tls[0]
}

async fn open(url: &str) -> Result<std::sync::Arc<dyn agent_api_server::Store>, StoreError> {
    StoreUrl::parse(url)?.open().await
}

#[tokio::test]
async fn verify_full_with_the_clusters_ca_connects_over_tls_and_the_store_works() {
    let Some(c) = clusters() else { return };
    let app = unique("tls-full");
    let url = with(
        &c.tls_url,
        &format!(
            "sslmode=verify-full&sslrootcert={}&application_name={app}",
            c.ca
        ),
    );
    let store = open(&url).await.unwrap_or_else(|e| panic!("{e}"));
    let id = unique("tls-session");
    store
        .create_session(common::record(&id, Some("the-tls-test")))
        .await
        .unwrap();
    store
        .append(&id, (1..=3).map(common::event).collect())
        .await
        .unwrap();
    assert_eq!(store.events(&id, 0, 10).await.unwrap().len(), 3);
    assert!(uses_tls(&c.tls_url, &app).await, "verify-full went plain");

    // No sslmode (prefer) with the CA named: TLS, verified.
    let app = unique("tls-prefer");
    let store = open(&with(
        &c.tls_url,
        &format!("sslrootcert={}&application_name={app}", c.ca),
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    store.probe().await.unwrap();
    assert!(
        uses_tls(&c.tls_url, &app).await,
        "prefer did not use the TLS offered"
    );

    // disable: plain, on a cluster that offers TLS (plain connections stay allowed on it).
    let app = unique("tls-disable");
    let store = open(&with(
        &c.tls_url,
        &format!("sslmode=disable&application_name={app}"),
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    store.probe().await.unwrap();
    assert!(
        !uses_tls(&c.tls_url, &app).await,
        "sslmode=disable used TLS"
    );
}

#[tokio::test]
async fn a_certificate_no_trusted_ca_signed_is_refused_typed_whatever_the_sslmode() {
    let Some(c) = clusters() else { return };
    for mode in ["verify-full", "verify-ca", "require", "prefer"] {
        let url = with(
            &c.tls_url,
            &format!("sslmode={mode}&sslrootcert={}", c.other_ca),
        );
        match open(&url).await {
            Err(StoreError::Tls(reason)) => {
                assert!(
                    reason.contains("UnknownIssuer") || reason.contains("issuer"),
                    "{mode}: {reason}"
                )
            }
            Err(other) => panic!("{mode}: not a TLS error: {other}"),
            Ok(_) => panic!("{mode}: a certificate signed by an untrusted CA was accepted"),
        }
    }
    // Verification is on by default: the system's CAs did not sign the test cluster's certificate.
    match open(&with(&c.tls_url, "sslmode=require")).await {
        Err(StoreError::Tls(_)) => {}
        Err(other) => panic!("require with the system's CAs: not a TLS error: {other}"),
        Ok(_) => panic!("require accepted a certificate no system CA signed"),
    }
}

#[tokio::test]
async fn verify_full_refuses_a_certificate_for_another_host_name_and_verify_ca_takes_it() {
    let Some(c) = clusters() else { return };
    // The certificate names localhost and 127.0.0.1; the URL names another host, reached at
    // 127.0.0.1 (`hostaddr`): the name checked is the URL's host.
    let port = c
        .tls_url
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next())
        .unwrap()
        .to_string();
    let other = format!("postgres://agent_api@db.invalid:{port}/postgres?hostaddr=127.0.0.1");
    match open(&with(
        &other,
        &format!("sslmode=verify-full&sslrootcert={}", c.ca),
    ))
    .await
    {
        Err(StoreError::Tls(reason)) => assert!(reason.to_lowercase().contains("name"), "{reason}"),
        Err(other) => panic!("not a TLS error: {other}"),
        Ok(_) => panic!("verify-full accepted a certificate for another host name"),
    }
    let app = unique("tls-ca");
    let _store = open(&with(
        &other,
        &format!(
            "sslmode=verify-ca&sslrootcert={}&application_name={app}",
            c.ca
        ),
    ))
    .await
    .unwrap_or_else(|e| panic!("verify-ca: {e}"));
    assert!(uses_tls(&c.tls_url, &app).await, "verify-ca went plain");
}

#[tokio::test]
async fn require_against_a_server_without_tls_is_refused_typed() {
    let Some(c) = clusters() else { return };
    for mode in ["require", "verify-ca", "verify-full"] {
        let url = with(
            &c.plain_url,
            &format!("sslmode={mode}&sslrootcert={}", c.ca),
        );
        match open(&url).await {
            Err(StoreError::Tls(reason)) => {
                assert!(reason.contains("does not support TLS"), "{mode}: {reason}")
            }
            Err(other) => panic!("{mode}: not a TLS error: {other}"),
            Ok(_) => panic!("{mode}: connected without TLS"),
        }
    }
    // prefer (the default) goes on plain there: the store the other tests use.
    open(&with(&c.plain_url, &format!("sslrootcert={}", c.ca)))
        .await
        .unwrap_or_else(|e| panic!("prefer on the plain cluster: {e}"));
}

#[tokio::test]
async fn tls_settings_that_cannot_be_honoured_are_refused_before_connecting() {
    let Some(c) = clusters() else { return };
    for (query, says) in [
        ("sslmode=allow", "allow"),
        (
            "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
            "/nonexistent/ca.pem",
        ),
    ] {
        match open(&with(&c.tls_url, query)).await {
            Err(e @ StoreError::TlsSettings(_)) => assert!(e.to_string().contains(says), "{e}"),
            Err(other) => panic!("{query}: not a settings error: {other}"),
            Ok(_) => panic!("{query}: connected"),
        }
    }
}
