//! [`ProbeError`]: what a readiness probe of the store ([`super::Store::probe`]) found wrong.

/// Why a store is not ready to take writes. Its `Display` names the cause without the store's
/// address or credentials: a readiness answer is served without a token.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// The database cannot be reached, or failed the probe.
    #[error("the store cannot be reached: {0}")]
    Unreachable(String),
    /// The database answers but refuses writes (a read-only replica, `default_transaction_read_only`,
    /// a read-only file).
    #[error("the store refuses writes: {0}")]
    ReadOnly(String),
    /// The database's schema is not the one this server writes.
    #[error("the store has {applied} migrations applied, this server needs {known}")]
    Migrations {
        /// The migrations the database has had.
        applied: u64,
        /// The migrations this server knows.
        known: u64,
    },
}

impl ProbeError {
    /// A short, fixed name of the cause: `unreachable`, `read_only` or `migrations`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unreachable(_) => "unreachable",
            Self::ReadOnly(_) => "read_only",
            Self::Migrations { .. } => "migrations",
        }
    }
}
