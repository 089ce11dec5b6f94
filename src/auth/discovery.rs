//! OpenID Connect discovery: the JWKS URL of an issuer, from its provider configuration.
//!
//! With only `AIRQ_AUTH_ISSUER` set, the keys are found the way every OIDC client finds them
//! (OpenID Connect Discovery 1.0): `GET {issuer}/.well-known/openid-configuration` (a trailing
//! `/` of the issuer removed first, §4), whose `jwks_uri` names the JWKS document. The document's
//! `issuer` must be identical to the configured one (§4.3), character for character, or the
//! discovery is refused: a provider answering for another issuer is a misconfiguration (or an
//! impersonation) that no token should be checked against.

use hyper::Uri;
use serde::Deserialize;

use super::idp_client::{web_url, FetchError, IdpClient};

/// The path appended to the issuer.
pub const WELL_KNOWN: &str = "/.well-known/openid-configuration";

/// Why the JWKS URL could not be discovered.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The configured issuer is not a URL discovery can start from.
    #[error("AIRQ_AUTH_ISSUER {0:?} is not an http or https URL, so its keys cannot be discovered (set AIRQ_AUTH_JWKS_URL)")]
    BadIssuer(String),
    /// The provider configuration could not be fetched.
    #[error("fetching {url}")]
    Fetch {
        /// The configuration's URL.
        url: String,
        /// Why.
        #[source]
        source: FetchError,
    },
    /// The document is not a provider configuration with `issuer` and `jwks_uri`.
    #[error("{url} is not an OpenID provider configuration with `issuer` and `jwks_uri`")]
    Parse {
        /// The configuration's URL.
        url: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The document speaks for another issuer.
    #[error("{url} names the issuer {served:?}, not the configured {configured:?}; they must be identical (OpenID Connect Discovery 4.3)")]
    IssuerMismatch {
        /// The configuration's URL.
        url: String,
        /// `AIRQ_AUTH_ISSUER`.
        configured: String,
        /// The document's `issuer`.
        served: String,
    },
    /// `jwks_uri` is not an http(s) URL.
    #[error("{url} gives a jwks_uri {jwks_uri:?} that is not an http or https URL")]
    BadJwksUri {
        /// The configuration's URL.
        url: String,
        /// The document's `jwks_uri`.
        jwks_uri: String,
    },
}

impl DiscoveryError {
    /// Whether the configuration itself is wrong (so retrying cannot help and the start should
    /// stop), rather than the provider being unreachable for now.
    pub fn is_misconfiguration(&self) -> bool {
        !matches!(self, Self::Fetch { .. })
    }
}

#[derive(Deserialize)]
struct ProviderConfiguration {
    issuer: String,
    jwks_uri: String,
}

/// Where `issuer` publishes its provider configuration.
pub fn configuration_url(issuer: &str) -> Result<Uri, DiscoveryError> {
    let bad = || DiscoveryError::BadIssuer(issuer.to_owned());
    let base = web_url(issuer).ok_or_else(bad)?;
    if base.query().is_some() {
        return Err(bad());
    }
    web_url(&format!("{}{WELL_KNOWN}", issuer.trim_end_matches('/'))).ok_or_else(bad)
}

/// The JWKS URL `issuer` announces, checked to be announced by that issuer.
pub async fn jwks_uri(client: &IdpClient, issuer: &str) -> Result<Uri, DiscoveryError> {
    let url = configuration_url(issuer)?;
    let body = client
        .get(&url)
        .await
        .map_err(|source| DiscoveryError::Fetch {
            url: url.to_string(),
            source,
        })?;
    let document: ProviderConfiguration =
        serde_json::from_slice(&body).map_err(|source| DiscoveryError::Parse {
            url: url.to_string(),
            source,
        })?;
    if document.issuer != issuer {
        return Err(DiscoveryError::IssuerMismatch {
            url: url.to_string(),
            configured: issuer.to_owned(),
            served: document.issuer,
        });
    }
    web_url(&document.jwks_uri).ok_or_else(|| DiscoveryError::BadJwksUri {
        url: url.to_string(),
        jwks_uri: document.jwks_uri,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_lies_under_the_issuer_without_its_trailing_slash() {
        let url = |issuer: &str| configuration_url(issuer).map(|url| url.to_string()).ok();
        assert_eq!(
            url("https://idp.example").as_deref(),
            Some("https://idp.example/.well-known/openid-configuration")
        );
        assert_eq!(
            url("https://idp.example/realms/airq/").as_deref(),
            Some("https://idp.example/realms/airq/.well-known/openid-configuration")
        );
        assert_eq!(url("airq-issuer"), None);
        assert_eq!(url("https://idp.example/?tenant=1"), None);
    }
}
