//! Owner authentication: `Authorization: Bearer <JWT>` → [`OwnerId`].
//!
//! Three sources of truth, chosen by configuration ([`OwnerAuth`]):
//! - the local issuer ([`local`]): HS256 with a secret generated in the data dir, minted by
//!   `airq token OWNER`;
//! - a secret shared with an identity provider (HS256);
//! - an identity provider's JWKS document ([`jwks`]): RS256, ES256 or EdDSA, at a configured URL
//!   or at the one the issuer announces ([`discovery`]); fetched over HTTPS trusting the system
//!   store and the bundled roots, or a configured CA ([`idp_client`]).
//!
//! Guarantees: `exp` and `sub` are required; `exp`, and `nbf` when present, are checked against
//! the system clock with an explicit leeway ([`TokenRules::leeway`], `--auth-leeway-secs`, 30 s
//! by default: the clock skew tolerated between the identity provider and us; jsonwebtoken's own
//! default, 60 s, lets an expired token pass for a minute, and it ignores `nbf`); a token is
//! accepted only with the one algorithm its key is for, so `alg: none` and algorithm confusion (an
//! HMAC token "signed" with a public key) are refused, and so is any token whose header
//! names critical extensions (`crit`, [`critical`]); configured `iss` and `aud` are enforced.
//! Tokens are never logged, and only the `Authorization` header is read: credentials in the query
//! string are ignored.

mod critical;
pub mod discovery;
pub mod idp_client;
pub mod jwks;
pub mod key_cache;
pub mod local;

use std::time::Duration;

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use crate::domain::OwnerId;
use crate::tls::Roots;

pub use jwks::{JwksError, JwksKeys};
pub use key_cache::{DeviceAuthError, KeyCache};
pub use local::LocalIssuer;

/// How owner tokens are verified.
#[derive(Debug, Clone)]
pub enum OwnerAuth {
    /// HS256 tokens minted by `airq token` from the data dir's secret.
    Local,
    /// HS256 tokens signed with a secret shared with an identity provider.
    SharedSecret(String),
    /// Asymmetric tokens whose keys come from a JWKS document at this URL.
    Jwks(String),
    /// Asymmetric tokens whose keys come from the JWKS document this issuer announces in its
    /// OpenID provider configuration.
    Discovery(String),
}

/// Why a token was refused (or could not be checked).
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The token failed verification: signature, algorithm, expiry, issuer, audience or shape.
    #[error("token rejected")]
    Rejected(#[from] jsonwebtoken::errors::Error),
    /// No key of the identity provider matches the token's `kid`.
    #[error("no key of the identity provider matches the token")]
    UnknownKey,
    /// The token's header names extensions (`crit`) that must be understood; airq knows none.
    #[error("the token names critical header extensions, none of which is understood")]
    CriticalExtension,
    /// The `sub` claim is empty or too long.
    #[error("the token's subject is not a usable owner id")]
    BadSubject,
    /// The identity provider's keys could not be fetched: our fault, not the client's.
    #[error("identity provider keys unavailable")]
    KeysUnavailable(#[from] JwksError),
}

/// The claims airq reads; the others are checked by `jsonwebtoken` or ignored.
#[derive(Debug, Deserialize)]
struct Claims {
    sub: String,
}

/// What an owner token must satisfy besides its signature.
#[derive(Debug, Clone)]
pub struct TokenRules {
    /// Required `iss` (external identity providers only; local tokens always need `airq-local`).
    pub issuer: Option<String>,
    /// Required `aud` (external identity providers only).
    pub audience: Option<String>,
    /// Clock skew tolerated on `exp` and `nbf`.
    pub leeway: Duration,
}

/// Verifies owner tokens.
#[derive(Debug)]
pub struct Authenticator {
    verifier: Verifier,
}

enum Verifier {
    Hs256 {
        key: DecodingKey,
        validation: Box<Validation>,
    },
    Jwks {
        keys: Box<JwksKeys>,
        rules: TokenRules,
    },
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Hs256 { .. } => f.write_str("Hs256"),
            Self::Jwks { keys, .. } => f.debug_tuple("Jwks").field(keys).finish(),
        }
    }
}

impl Authenticator {
    /// The verifier the configuration asks for. `local` is the data dir's issuer, used when no
    /// external identity provider is configured; `roots` are the CAs trusted for the provider's
    /// HTTPS.
    pub fn new(
        mode: &OwnerAuth,
        local: &LocalIssuer,
        rules: TokenRules,
        roots: &Roots,
    ) -> Result<Self, JwksError> {
        let verifier = match mode {
            OwnerAuth::Local => Verifier::Hs256 {
                key: local.decoding_key(),
                validation: Box::new(validation(
                    Algorithm::HS256,
                    &TokenRules {
                        issuer: Some(LocalIssuer::ISSUER.to_owned()),
                        audience: None,
                        leeway: rules.leeway,
                    },
                )),
            },
            OwnerAuth::SharedSecret(secret) => Verifier::Hs256 {
                key: DecodingKey::from_secret(secret.as_bytes()),
                validation: Box::new(validation(Algorithm::HS256, &rules)),
            },
            OwnerAuth::Jwks(url) => Verifier::Jwks {
                keys: Box::new(JwksKeys::new(url, roots)?),
                rules,
            },
            OwnerAuth::Discovery(issuer) => Verifier::Jwks {
                keys: Box::new(JwksKeys::discovered(issuer, roots)?),
                rules,
            },
        };
        Ok(Self { verifier })
    }

    /// The owner a bearer token speaks for.
    pub async fn authenticate(&self, token: &str) -> Result<OwnerId, AuthError> {
        if critical::names_critical_extensions(token) {
            return Err(AuthError::CriticalExtension);
        }
        let claims = match &self.verifier {
            Verifier::Hs256 { key, validation } => {
                jsonwebtoken::decode::<Claims>(token, key, validation)?.claims
            }
            Verifier::Jwks { keys, rules } => {
                let header = jsonwebtoken::decode_header(token)?;
                let (key, algorithm) = keys.key_for(header.kid.as_deref()).await?;
                let validation = validation(algorithm, rules);
                jsonwebtoken::decode::<Claims>(token, &key, &validation)?.claims
            }
        };
        OwnerId::parse(&claims.sub).ok_or(AuthError::BadSubject)
    }

    /// Fetches the identity provider's keys ahead of the first request (JWKS only).
    pub async fn warm_up(&self) -> Result<(), JwksError> {
        match &self.verifier {
            Verifier::Jwks { keys, .. } => keys.refresh().await,
            Verifier::Hs256 { .. } => Ok(()),
        }
    }
}

/// Rules for one algorithm: `exp` and `sub` required, `nbf` checked when present, `iss`/`aud`
/// when configured, all times with the configured leeway.
fn validation(algorithm: Algorithm, rules: &TokenRules) -> Validation {
    let mut validation = Validation::new(algorithm);
    validation.leeway = rules.leeway.as_secs();
    validation.validate_exp = true;
    validation.validate_nbf = true;
    // jsonwebtoken checks `iss` and `aud` only when the token carries them: a configured one must
    // also be required, or a token without it would pass.
    let mut required = vec!["exp", "sub"];
    match &rules.issuer {
        Some(issuer) => {
            validation.set_issuer(&[issuer]);
            required.push("iss");
        }
        None => validation.iss = None,
    }
    match &rules.audience {
        Some(audience) => {
            validation.set_audience(&[audience]);
            required.push("aud");
        }
        None => validation.validate_aud = false,
    }
    validation.set_required_spec_claims(&required);
    validation
}
