//! The local token issuer of the embedded deployment.
//!
//! Its HS256 secret is 32 random bytes in `<data dir>/owner-token.secret`, created on first use
//! with mode 0600. `airq token` and `airq serve` on the same data dir therefore agree without any
//! setup. Tokens carry `iss = "airq-local"`, `sub`, `iat` and `exp`.

use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{DecodingKey, EncodingKey, Header};
use rand::RngCore;
use serde::Serialize;

/// Why the local issuer could not be opened or could not sign.
#[derive(Debug, thiserror::Error)]
pub enum LocalIssuerError {
    /// The secret file could not be created or read.
    #[error("token secret {path}")]
    Secret {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The secret file exists but does not hold a secret.
    #[error("token secret {0} is not 32 bytes long; delete it to create a new one")]
    Corrupt(PathBuf),
    /// Signing failed.
    #[error("signing the token")]
    Sign(#[from] jsonwebtoken::errors::Error),
}

/// The data dir's HS256 issuer.
pub struct LocalIssuer {
    secret: [u8; 32],
}

impl std::fmt::Debug for LocalIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalIssuer(<secret>)")
    }
}

#[derive(Serialize)]
struct Claims<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    iss: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    aud: Option<&'a str>,
    sub: &'a str,
    iat: u64,
    exp: u64,
}

/// HS256 tokens signed with a secret shared with the servers (`--auth-hs256-secret`), for
/// deployments without an identity provider: `airq token` mints them so every replica accepts
/// them, with the `iss` and `aud` the servers require.
pub struct SharedSecretIssuer {
    key: EncodingKey,
    issuer: Option<String>,
    audience: Option<String>,
}

impl std::fmt::Debug for SharedSecretIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSecretIssuer")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

impl SharedSecretIssuer {
    /// Signs with `secret`, naming `issuer` and `audience` when given.
    pub fn new(secret: &str, issuer: Option<String>, audience: Option<String>) -> Self {
        Self {
            key: EncodingKey::from_secret(secret.as_bytes()),
            issuer,
            audience,
        }
    }

    /// A token for `owner`, valid for `ttl` from now.
    pub fn mint(&self, owner: &str, ttl: Duration) -> Result<String, LocalIssuerError> {
        sign(
            &self.key,
            self.issuer.as_deref(),
            self.audience.as_deref(),
            owner,
            ttl,
        )
    }
}

/// A token for `owner` valid for `ttl` from now (system time, as the verifier uses), signed
/// with `key`.
fn sign(
    key: &EncodingKey,
    iss: Option<&str>,
    aud: Option<&str>,
    owner: &str,
    ttl: Duration,
) -> Result<String, LocalIssuerError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let claims = Claims {
        iss,
        aud,
        sub: owner,
        iat: now,
        exp: now.saturating_add(ttl.as_secs()),
    };
    Ok(jsonwebtoken::encode(&Header::default(), &claims, key)?)
}

impl LocalIssuer {
    /// The `iss` of local tokens.
    pub const ISSUER: &'static str = "airq-local";
    /// The secret's file name in the data dir.
    pub const FILE: &'static str = "owner-token.secret";

    /// Opens the issuer of `data_dir`, creating the directory and the secret when missing.
    pub fn open(data_dir: &Path) -> Result<Self, LocalIssuerError> {
        let path = data_dir.join(Self::FILE);
        let io_error = |source| LocalIssuerError::Secret {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(data_dir).map_err(io_error)?;
        let read = || -> Result<Self, LocalIssuerError> {
            let mut bytes = Vec::with_capacity(32);
            std::fs::File::open(&path)
                .and_then(|mut file| file.read_to_end(&mut bytes))
                .map_err(io_error)?;
            let secret = bytes
                .try_into()
                .map_err(|_| LocalIssuerError::Corrupt(path.clone()))?;
            Ok(Self { secret })
        };
        // An existing secret is read without writing anything, so a start on a full disk (after
        // a crash there) still serves what the data directory holds.
        if path.exists() {
            return read();
        }
        match create_secret(&path) {
            Ok(secret) => Ok(Self { secret }),
            Err(error) if error.kind() == ErrorKind::AlreadyExists => read(),
            Err(error) => Err(io_error(error)),
        }
    }

    /// A token for `owner`, valid for `ttl` from now (system time, as the verifier uses).
    pub fn mint(&self, owner: &str, ttl: Duration) -> Result<String, LocalIssuerError> {
        sign(
            &EncodingKey::from_secret(&self.secret),
            Some(Self::ISSUER),
            None,
            owner,
            ttl,
        )
    }

    /// The key that verifies this issuer's tokens.
    pub fn decoding_key(&self) -> DecodingKey {
        DecodingKey::from_secret(&self.secret)
    }
}

/// Creates the secret file atomically: written in full under a temporary name, then linked into
/// place, which fails if another process got there first, so concurrent starts agree on one
/// secret and nobody reads a half-written one.
fn create_secret(path: &Path) -> std::io::Result<[u8; 32]> {
    let mut secret = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut secret);
    let temporary = path.with_extension(format!("{}.tmp", rand::random::<u64>()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&temporary).and_then(|mut file| {
        file.write_all(&secret)?;
        file.sync_all()
    });
    let linked = written.and_then(|()| std::fs::hard_link(&temporary, path));
    let _ = std::fs::remove_file(&temporary);
    linked.map(|()| secret)
}
