//! TLS to PostgreSQL: the URL's `sslmode` and `sslrootcert`, honoured with rustls.
//!
//! The names are libpq's; what they mean here is stricter, because this server never talks TLS to
//! a server whose certificate it has not verified:
//!
//! | `sslmode` | TLS | the server's certificate |
//! | --- | --- | --- |
//! | `disable` | never | — |
//! | `prefer` (no `sslmode`) | when the server offers it, else plain | verified as `verify-full` when TLS is used |
//! | `require` | always (a server without TLS is refused) | verified as `verify-full` (libpq checks nothing) |
//! | `verify-ca` | always | signed by a trusted CA; its host name is not checked |
//! | `verify-full` | always | signed by a trusted CA and naming the host connected to |
//!
//! The trusted CAs are those of the PEM file `sslrootcert=PATH`, else (or with
//! `sslrootcert=system`) the system's. `prefer` on a machine with no CA at all connects plain:
//! there is nothing to verify a certificate against.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::StoreError;

/// The URL's `sslmode` (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Result<Self, StoreError> {
        Ok(match text {
            "disable" => Self::Disable,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            // libpq's `allow` tries plain first: a downgrade this server does not offer.
            other => {
                return Err(StoreError::TlsSettings(format!(
                    "sslmode `{}` is not one of disable, prefer, require, verify-ca, verify-full",
                    other.escape_default()
                )))
            }
        })
    }

    /// What tokio-postgres is told: whether to ask for TLS, and whether to insist.
    fn wire(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Prefer => "prefer",
            Self::Require | Self::VerifyCa | Self::VerifyFull => "require",
        }
    }
}

/// How to reach the database: the URL tokio-postgres reads (its `sslmode` one it knows, the
/// parameters it does not know taken out) and the TLS connector, if TLS may be used.
#[derive(Clone)]
pub(super) struct Connector {
    /// The URL as tokio-postgres reads it; may hold a password (never shown).
    pub(super) url: String,
    /// `None`: plain only.
    pub(super) tls: Option<MakeRustlsConnect>,
}

impl Connector {
    /// Reads `url`'s `sslmode` and `sslrootcert` (the CA file is read now, once).
    pub(super) fn from_url(url: &str) -> Result<Self, StoreError> {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut mode = SslMode::Prefer;
        let mut root_cert: Option<String> = None;
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_encoding::percent_decode_str(value)
                .decode_utf8()
                .map_err(|_| {
                    StoreError::TlsSettings(format!("the value of `{key}` is not UTF-8"))
                })?;
            match key {
                "sslmode" => mode = SslMode::parse(&value)?,
                "sslrootcert" => root_cert = Some(value.into_owned()),
                _ => kept.push(pair),
            }
        }
        let tls = match mode {
            SslMode::Disable => None,
            _ => {
                let roots = roots(root_cert.as_deref())?;
                if roots.is_empty() {
                    if mode != SslMode::Prefer {
                        return Err(StoreError::TlsSettings(
                            "no CA certificate to verify the database's with: this system has none; name a PEM file with sslrootcert=PATH".into(),
                        ));
                    }
                    None
                } else {
                    Some(MakeRustlsConnect::new(client_config(roots, mode)?))
                }
            }
        };
        // A `prefer` that cannot verify anything asks for no TLS at all.
        let wire = if tls.is_none() {
            "disable"
        } else {
            mode.wire()
        };
        let sslmode = format!("sslmode={wire}");
        kept.push(&sslmode);
        Ok(Self {
            url: format!("{base}?{}", kept.join("&")),
            tls,
        })
    }
}

/// The CAs trusted: the PEM file `path`, else (or `system`) the system's.
fn roots(path: Option<&str>) -> Result<RootCertStore, StoreError> {
    let certs = match path {
        Some(path) if path != "system" => Some(
            crate::tls::read_ca_file(std::path::Path::new(path), "sslrootcert")
                .map_err(|e| StoreError::TlsSettings(e.to_string()))?,
        ),
        _ => None,
    };
    let label = format!("sslrootcert={}", path.unwrap_or("system"));
    crate::tls::roots(certs.as_deref(), &label).map_err(|e| StoreError::TlsSettings(e.to_string()))
}

fn client_config(roots: RootCertStore, mode: SslMode) -> Result<rustls::ClientConfig, StoreError> {
    let settings = |e: crate::tls::TlsSetupError| StoreError::TlsSettings(e.to_string());
    let provider = crate::tls::provider();
    let verifier = crate::tls::verifier(roots, provider.clone()).map_err(settings)?;
    let verifier: Arc<dyn ServerCertVerifier> = match mode {
        SslMode::VerifyCa => Arc::new(AnyName { inner: verifier }),
        _ => verifier,
    };
    crate::tls::client_config(verifier, provider).map_err(settings)
}

/// `verify-ca`: the chain is verified as usual; a certificate valid but for another name is taken.
#[derive(Debug)]
struct AnyName {
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The name is checked last, after the chain: this error means the chain was good.
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// A connection error as the store reports it: TLS failures typed as such, with rustls's reason.
pub(super) fn connect_error(error: &tokio_postgres::Error) -> StoreError {
    use std::error::Error as _;
    let tls_reason = error.source().and_then(crate::tls::rustls_cause);
    let text = error.to_string();
    match tls_reason {
        Some(reason) => StoreError::Tls(reason),
        // tokio-postgres's own TLS errors (a server without TLS under `require`) are typed by
        // its message only; the reason is their cause.
        None if text.starts_with("error performing TLS handshake") => StoreError::Tls(
            error
                .source()
                .map_or_else(|| text.clone(), ToString::to_string),
        ),
        None => StoreError::Backend(format!("cannot connect to PostgreSQL: {text}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_and_the_rest_kept() {
        let c = Connector::from_url("postgres://u:p@h:5/db?application_name=x&sslmode=disable")
            .unwrap();
        assert_eq!(
            c.url,
            "postgres://u:p@h:5/db?application_name=x&sslmode=disable"
        );
        assert!(c.tls.is_none());
        let c = Connector::from_url("postgres://h/db?sslmode=verify-full&sslrootcert=system");
        // A machine without CAs refuses verify-full with a typed error; with some it connects.
        match c {
            Ok(c) => {
                assert_eq!(c.url, "postgres://h/db?sslmode=require");
                assert!(c.tls.is_some());
            }
            Err(e) => assert!(matches!(e, StoreError::TlsSettings(_)), "{e}"),
        }
    }

    #[test]
    fn an_unknown_sslmode_and_a_missing_ca_file_are_refused_typed() {
        assert!(matches!(
            Connector::from_url("postgres://h/db?sslmode=allow"),
            Err(StoreError::TlsSettings(_))
        ));
        let e =
            Connector::from_url("postgres://h/db?sslmode=require&sslrootcert=/nonexistent/ca.pem")
                .err()
                .unwrap();
        assert!(matches!(e, StoreError::TlsSettings(_)));
        assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
    }
}
