//! Credentials of a request: the owner's bearer token, or a device's id and key.
//!
//! Only headers are read. A token in the query string is never looked at, so it cannot end up
//! authenticating anything (and we never encourage putting it in URLs, which land in logs).
//!
//! Who a request was authenticated as goes to its access line, through the request's
//! [`IdentitySlot`] (the server puts one in every request's extensions).

use hyper::header::AUTHORIZATION;

use crate::auth::key_cache::AuthenticatedDevice;
use crate::auth::{AuthError, DeviceAuthError};
use crate::domain::OwnerId;
use crate::http::edge::access_log::{Identity, IdentitySlot};
use crate::http::error::{ApiError, Credential};
use crate::http::state::AppState;
use crate::http::Request;

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
    let owner = state
        .auth
        .authenticate(token)
        .await
        .map_err(|error| match error {
            AuthError::KeysUnavailable(cause) => {
                state.metrics.identity_provider_failed();
                ApiError::IdentityProvider(cause)
            }
            other => refuse("the bearer token is invalid or expired", Some(other)),
        })?;
    remember(request, Identity::Owner(owner.clone()));
    Ok(owner)
}

/// Records the request's identity for its access line.
fn remember(request: &Request, identity: Identity) {
    if let Some(slot) = request.extensions().get::<IdentitySlot>() {
        slot.set(identity);
    }
}

/// The device header holding the public device id.
pub const DEVICE_ID: &str = "x-device-id";
/// The device header holding the secret key.
pub const DEVICE_KEY: &str = "x-device-key";

/// The device whose `X-Device-ID` / `X-Device-Key` the request carries.
pub async fn device(request: &Request, state: &AppState) -> Result<AuthenticatedDevice, ApiError> {
    let refuse = |detail: &'static str| ApiError::Unauthorized {
        credential: Credential::Device,
        detail,
        cause: None,
    };
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
    };
    let (Some(device_id), Some(key)) = (header(DEVICE_ID), header(DEVICE_KEY)) else {
        return Err(refuse(
            "the X-Device-ID and X-Device-Key headers are required",
        ));
    };
    let device = state
        .device_keys
        .authenticate(device_id, key)
        .await
        .map_err(|error| match error {
            DeviceAuthError::Refused => refuse("unknown device or wrong device key"),
            DeviceAuthError::Store(error) => ApiError::Store(error),
        })?;
    remember(request, Identity::Device(device.id));
    Ok(device)
}
