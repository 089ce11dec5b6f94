//! Credentials of a request: the owner's bearer token.
//!
//! Only headers are read. A token in the query string is never looked at, so it cannot end up
//! authenticating anything (and we never encourage putting it in URLs, which land in logs).

use hyper::header::AUTHORIZATION;

use super::error::{ApiError, Credential};
use super::state::AppState;
use super::Request;
use crate::auth::AuthError;
use crate::domain::OwnerId;

/// The owner the request's bearer token speaks for.
pub async fn owner(request: &Request, state: &AppState) -> Result<OwnerId, ApiError> {
    let refuse = |detail: &'static str, cause: Option<AuthError>| ApiError::Unauthorized {
        credential: Credential::Owner,
        detail,
        cause,
    };
    let header = request
        .headers()
        .get(AUTHORIZATION)
        .ok_or_else(|| refuse("an Authorization: Bearer <token> header is required", None))?;
    let token = header
        .to_str()
        .ok()
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|token| !token.is_empty())
        .ok_or_else(|| refuse("the Authorization header must be `Bearer <token>`", None))?;
    state
        .auth
        .authenticate(token)
        .await
        .map_err(|error| match error {
            AuthError::KeysUnavailable(cause) => ApiError::IdentityProvider(cause),
            other => refuse("the bearer token is invalid or expired", Some(other)),
        })
}
