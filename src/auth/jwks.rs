//! Keys of an external identity provider, from its JWKS document.
//!
//! The document's URL is configured (`AIRQ_AUTH_JWKS_URL`) or discovered from the issuer
//! ([`super::discovery`]); a discovery that failed because the provider was unreachable is tried
//! again with the next fetch, and once found the URL is kept. The document is fetched at start and again when a token names a `kid` we do not know (the
//! provider rotated its keys), at most once per [`REFETCH_INTERVAL`], so a flood of tokens with
//! made-up `kid`s cannot turn airq into a load generator against the provider. Only RSA, P-256 and
//! Ed25519 keys are taken, each bound to its one algorithm (RS256, ES256, EdDSA); symmetric keys
//! in a JWKS are ignored, which closes the door on algorithm confusion.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use hyper::Uri;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;
use tokio::sync::OnceCell;

use super::discovery::{self, DiscoveryError};
use super::idp_client::{web_url, FetchError, IdpClient};
use crate::tls::{Roots, TlsError};

/// Refetches triggered by unknown `kid`s happen at most this often.
pub const REFETCH_INTERVAL: Duration = Duration::from_secs(30);

/// Why the JWKS document could not be had.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    /// The configured URL is not an http(s) URL.
    #[error("AIRQ_AUTH_JWKS_URL {0:?} is not an http or https URL")]
    BadUrl(String),
    /// The CAs to trust for the provider could not be loaded.
    #[error("trusting the identity provider's certificate authorities")]
    Tls(#[from] TlsError),
    /// The JWKS URL could not be discovered from the issuer.
    #[error("discovering the JWKS URL")]
    Discovery(#[from] DiscoveryError),
    /// The document could not be fetched.
    #[error("fetching the JWKS document {url}")]
    Fetch {
        /// The document's URL.
        url: String,
        /// Why.
        #[source]
        source: FetchError,
    },
    /// The body is not a JWKS document.
    #[error("the JWKS document does not parse")]
    Parse(#[from] serde_json::Error),
    /// A refetch was wanted, but the last fetch is too recent.
    #[error("keys were fetched less than {REFETCH_INTERVAL:?} ago")]
    TooSoon,
    /// The last fetch failed, and it is too soon to try again.
    #[error("the last fetch of the JWKS document, less than {REFETCH_INTERVAL:?} ago, failed")]
    LastFetchFailed,
}

impl JwksError {
    /// Whether the configuration is wrong (the start should stop), rather than the provider
    /// unreachable for now.
    pub fn is_misconfiguration(&self) -> bool {
        match self {
            Self::BadUrl(_) | Self::Tls(_) => true,
            Self::Discovery(error) => error.is_misconfiguration(),
            Self::Fetch { .. } | Self::Parse(_) | Self::TooSoon | Self::LastFetchFailed => false,
        }
    }
}

/// Where the JWKS document is.
#[derive(Debug)]
enum Location {
    /// Configured.
    Fixed(Uri),
    /// Announced by the issuer's provider configuration; found on the first successful fetch.
    Discovered {
        issuer: String,
        found: OnceCell<Uri>,
    },
}

#[derive(Deserialize)]
struct Document {
    keys: Vec<serde_json::Value>,
}

/// A usable key: what verifies, and the one algorithm it verifies.
#[derive(Clone)]
struct Entry {
    key: DecodingKey,
    algorithm: Algorithm,
}

#[derive(Default)]
struct Keys {
    by_kid: HashMap<String, Entry>,
    /// The document's only key, for tokens without `kid` (single-key providers).
    only: Option<Entry>,
    fetched_at: Option<Instant>,
    /// Whether the last fetch failed (then an unknown `kid` is our problem, not the client's).
    failed: bool,
}

/// The identity provider's keys, cached.
pub struct JwksKeys {
    location: Location,
    client: IdpClient,
    keys: RwLock<Keys>,
    fetching: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for JwksKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwksKeys")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

impl JwksKeys {
    /// Keys from the document at `url`, fetched over HTTPS trusting `roots` (on first use or by
    /// [`JwksKeys::refresh`]).
    pub fn new(url: &str, roots: &Roots) -> Result<Self, JwksError> {
        let url = web_url(url).ok_or_else(|| JwksError::BadUrl(url.to_owned()))?;
        Self::at(Location::Fixed(url), roots)
    }

    /// Keys from the document `issuer` announces in its OpenID provider configuration.
    pub fn discovered(issuer: &str, roots: &Roots) -> Result<Self, JwksError> {
        discovery::configuration_url(issuer)?;
        let location = Location::Discovered {
            issuer: issuer.to_owned(),
            found: OnceCell::new(),
        };
        Self::at(location, roots)
    }

    fn at(location: Location, roots: &Roots) -> Result<Self, JwksError> {
        Ok(Self {
            location,
            client: IdpClient::new(roots)?,
            keys: RwLock::new(Keys::default()),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    /// The document's URL, discovering it first when need be.
    async fn url(&self) -> Result<&Uri, JwksError> {
        match &self.location {
            Location::Fixed(url) => Ok(url),
            Location::Discovered { issuer, found } => Ok(found
                .get_or_try_init(|| discovery::jwks_uri(&self.client, issuer))
                .await?),
        }
    }

    /// The key for a token's `kid`, refetching the document once if it is unknown.
    pub(crate) async fn key_for(
        &self,
        kid: Option<&str>,
    ) -> Result<(DecodingKey, Algorithm), super::AuthError> {
        if let Some(entry) = self.lookup(kid) {
            return Ok((entry.key, entry.algorithm));
        }
        let refreshed = self.refresh().await;
        if let Some(entry) = self.lookup(kid) {
            return Ok((entry.key, entry.algorithm));
        }
        match refreshed {
            Ok(()) => Err(super::AuthError::UnknownKey),
            Err(JwksError::TooSoon) if !self.last_fetch_failed() => {
                Err(super::AuthError::UnknownKey)
            }
            Err(JwksError::TooSoon) => Err(JwksError::LastFetchFailed.into()),
            Err(error) => Err(error.into()),
        }
    }

    fn last_fetch_failed(&self) -> bool {
        self.keys
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .failed
    }

    fn lookup(&self, kid: Option<&str>) -> Option<Entry> {
        let keys = self
            .keys
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match kid {
            Some(kid) => keys.by_kid.get(kid).cloned(),
            None => keys.only.clone(),
        }
    }

    /// Fetches the document unless that happened less than [`REFETCH_INTERVAL`] ago.
    pub async fn refresh(&self) -> Result<(), JwksError> {
        let _one_fetch_at_a_time = self.fetching.lock().await;
        let last = self
            .keys
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .fetched_at;
        if last.is_some_and(|at| at.elapsed() < REFETCH_INTERVAL) {
            return Err(JwksError::TooSoon);
        }
        let fetched = self.fetch().await;
        let mut keys = self
            .keys
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        keys.fetched_at = Some(Instant::now());
        keys.failed = fetched.is_err();
        let entries = fetched?;
        keys.only = match entries.as_slice() {
            [(_, entry)] => Some(entry.clone()),
            _ => None,
        };
        keys.by_kid = entries
            .into_iter()
            .filter_map(|(kid, entry)| kid.map(|kid| (kid, entry)))
            .collect();
        Ok(())
    }

    async fn fetch(&self) -> Result<Vec<(Option<String>, Entry)>, JwksError> {
        let url = self.url().await?;
        let body = self
            .client
            .get(url)
            .await
            .map_err(|source| JwksError::Fetch {
                url: url.to_string(),
                source,
            })?;
        let document: Document = serde_json::from_slice(&body)?;
        Ok(document
            .keys
            .into_iter()
            .filter_map(|value| serde_json::from_value::<Jwk>(value).ok())
            .filter_map(|jwk| usable(&jwk).map(|entry| (jwk.common.key_id.clone(), entry)))
            .collect())
    }
}

/// The entry for a signing key of a supported type, or `None` for any other key.
fn usable(jwk: &Jwk) -> Option<Entry> {
    if matches!(jwk.common.public_key_use, Some(ref used) if *used != PublicKeyUse::Signature) {
        return None;
    }
    let (algorithm, declared) = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => (Algorithm::RS256, KeyAlgorithm::RS256),
        AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => {
            (Algorithm::ES256, KeyAlgorithm::ES256)
        }
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
            (Algorithm::EdDSA, KeyAlgorithm::EdDSA)
        }
        _ => return None,
    };
    if jwk.common.key_algorithm.is_some_and(|alg| alg != declared) {
        return None;
    }
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some(Entry { key, algorithm })
}
