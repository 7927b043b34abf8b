//! The server's TLS as a client (to PostgreSQL, to `https://` webhook endpoints): rustls with
//! ring, certificates always verified, against the CAs of a PEM file the operator names or else
//! the system's.
//!
//! One place for what both connections share: which CAs are trusted and how the verifier and the
//! client configuration are built. What each makes of a setting (libpq's `sslmode`, the webhooks'
//! `--webhook-ca`) stays with it.

use std::path::Path;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::RootCertStore;

/// A TLS setting that cannot be used, said as a sentence naming the file or the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsSetupError(pub(crate) String);

impl std::fmt::Display for TlsSetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The crypto provider: ring, not aws-lc-rs, for it builds in a fraction of the time and needs no
/// CMake. rustls marks it deprecated for having no post-quantum key exchange, which neither
/// connection needs to work; aws-lc-rs is the move when it is wanted.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    #[allow(deprecated)]
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificates of the PEM file `path` (`what` names the setting in the error); a file that
/// cannot be read, or holds none, is refused.
pub(crate) fn read_ca_file(
    path: &Path,
    what: &str,
) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            TlsSetupError(format!(
                "cannot read the CA file {what}={}: {e}",
                path.display()
            ))
        })?;
    if certs.is_empty() {
        return Err(TlsSetupError(format!(
            "the CA file {what}={} holds no certificate",
            path.display()
        )));
    }
    Ok(certs)
}

/// The CAs trusted: `certs` (from [`read_ca_file`]) when given, else the system's (its stores
/// that cannot be read are skipped: what was found is used). May be empty.
pub(crate) fn roots(
    certs: Option<&[CertificateDer<'static>]>,
    what: &str,
) -> Result<RootCertStore, TlsSetupError> {
    let mut store = RootCertStore::empty();
    match certs {
        Some(certs) => {
            let (added, _) = store.add_parsable_certificates(certs.iter().cloned());
            if added == 0 {
                return Err(TlsSetupError(format!(
                    "the CA file {what} holds no usable certificate"
                )));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            store.add_parsable_certificates(found.certs);
        }
    }
    Ok(store)
}

/// The standard verifier (chain to one of `roots`, the name connected to, validity dates).
pub(crate) fn verifier(
    roots: RootCertStore,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>, TlsSetupError> {
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| TlsSetupError(format!("the CA certificates: {e}")))
}

/// A client configuration with `verifier`, rustls's safe protocol versions, no client
/// certificate.
pub(crate) fn client_config(
    verifier: Arc<dyn rustls::client::danger::ServerCertVerifier>,
    provider: Arc<CryptoProvider>,
) -> Result<rustls::ClientConfig, TlsSetupError> {
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsSetupError(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

/// The rustls error at the root of `error`'s chain of causes (a handshake refused: an unknown CA,
/// a name that does not match), said as rustls says it.
pub(crate) fn rustls_cause(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = cause {
        if let Some(tls) = current.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        // An I/O error's `source` is its inner error's source, skipping the inner error itself
        // (where a TLS stream puts rustls's): descend into it instead.
        cause = match current.downcast_ref::<std::io::Error>() {
            Some(io) => match io.get_ref() {
                Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
                None => None,
            },
            None => current.source(),
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_empty_ca_file_is_refused_naming_it() {
        let e = read_ca_file(Path::new("/nonexistent/ca.pem"), "--webhook-ca").unwrap_err();
        assert!(e.0.contains("--webhook-ca=/nonexistent/ca.pem"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = read_ca_file(&empty, "sslrootcert").unwrap_err();
        assert!(e.0.contains("holds no certificate"), "{e}");
    }

    #[test]
    fn a_rustls_error_is_found_beneath_nested_io_errors() {
        let refused = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let nested = std::io::Error::other(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            refused.clone(),
        ));
        assert_eq!(rustls_cause(&nested), Some(refused.to_string()));
        assert_eq!(rustls_cause(&std::io::Error::other("refused")), None);
    }
}
