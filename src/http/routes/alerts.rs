//! Alert rules: create, list, show, change, delete, rotate the secret, send a test event, and
//! read each rule's deliveries and per-device states.
//!
//! A rule names one of the owner's devices or none (every device); another owner's rule is a
//! 404, like a rule that does not exist. A webhook target is checked at the edge: a literal
//! address or a name resolving to an internal one is a 422 naming `webhook_url` (delivery checks
//! again). The secret is in the answer of the creation and of a rotation, never otherwise.

use hyper::StatusCode;

use crate::alerts::client::{check_target, SendError};
use crate::domain::alert::{
    AlertEvent, AlertId, AlertRule, Delivery, DeliveryStatus, EventType, RuleSpec, WebhookSecret,
    MAX_RULES_PER_OWNER, REFUSED,
};
use crate::domain::{Code, DeviceUuid, FieldErrors, In, OwnerId};
use crate::http::edge::body;
use crate::http::encodings::alert_views::{DeliveryView, RuleView, StateView};
use crate::http::encodings::respond;
use crate::http::error::ApiError;
use crate::http::guards::authenticate;
use crate::http::state::AppState;
use crate::http::{Request, Response};
use crate::store::alerts::Created;

const NOT_FOUND: &str = "no alert rule with this id";
const NO_DEVICE: &str = "no device with the body's `device_id`";
/// Deliveries listed by `…/deliveries`, newest first.
const DELIVERIES_LISTED: usize = 100;

/// `POST /alerts`: creates a rule and hands out its secret.
pub async fn create(request: Request, state: &AppState) -> Result<Response, ApiError> {
    let owner = authenticate::owner(&request, state).await?;
    let spec = RuleSpec::parse(
        &body::json(request, body::MAX_BODY, state.body_timeout).await?,
        state.alerts.policy,
    )?;
    check(state, &owner, &spec, None).await?;
    let now = state.clock.now();
    let rule = AlertRule {
        id: AlertId::generate(),
        owner,
        device: spec.device,
        condition: spec.condition,
        webhook_url: spec.webhook_url,
        created_at: now,
        updated_at: now,
    };
    let secret = WebhookSecret::generate();
    match state
        .alerts
        .store
        .create(&rule, &secret, MAX_RULES_PER_OWNER)
        .await?
    {
        Created::Stored => {}
        Created::LimitReached => {
            return Err(ApiError::AlertRuleLimit {
                limit: MAX_RULES_PER_OWNER,
            })
        }
    }
    tracing::info!(rule = %rule.id, owner = %rule.owner, "alert rule created");
    respond::json(
        StatusCode::CREATED,
        &respond::Data {
            data: RuleView::with_secret(&rule, &secret),
        },
    )
}

/// `GET /alerts`: the owner's rules, oldest first.
pub async fn list(request: Request, state: &AppState) -> Result<Response, ApiError> {
    let owner = authenticate::owner(&request, state).await?;
    let rules = state.alerts.store.list(&owner).await?;
    respond::data(rules.iter().map(RuleView::new).collect::<Vec<_>>())
}

/// `GET /alerts/{id}`.
pub async fn show(request: Request, state: &AppState, id: &str) -> Result<Response, ApiError> {
    let (_, rule) = owned(&request, state, id).await?;
    respond::data(RuleView::new(&rule))
}

/// `PATCH /alerts/{id}`: changes the fields present; the result is checked as a new rule is.
/// A changed condition or device starts the rule's states afresh.
pub async fn update(request: Request, state: &AppState, id: &str) -> Result<Response, ApiError> {
    let (owner, current) = owned(&request, state, id).await?;
    let spec = RuleSpec::patch(
        &body::json(request, body::MAX_BODY, state.body_timeout).await?,
        &current,
        state.alerts.policy,
    )?;
    check(state, &owner, &spec, Some(&current)).await?;
    let reset = spec.condition != current.condition || spec.device != current.device;
    let rule = AlertRule {
        device: spec.device,
        condition: spec.condition,
        webhook_url: spec.webhook_url,
        updated_at: state.clock.now(),
        ..current
    };
    if !state.alerts.store.update(&rule, reset).await? {
        return Err(ApiError::NotFound(NOT_FOUND));
    }
    respond::data(RuleView::new(&rule))
}

/// `DELETE /alerts/{id}`: the rule, its states and its pending events are gone.
pub async fn delete(request: Request, state: &AppState, id: &str) -> Result<Response, ApiError> {
    let owner = authenticate::owner(&request, state).await?;
    let id = AlertId::parse_path(id)?;
    if !state.alerts.store.delete(&owner, id).await? {
        return Err(ApiError::NotFound(NOT_FOUND));
    }
    tracing::info!(rule = %id, "alert rule deleted");
    Ok(respond::empty(StatusCode::NO_CONTENT))
}

/// `POST /alerts/{id}/rotate-secret`: a new secret; events sent from now on are signed with it.
pub async fn rotate_secret(
    request: Request,
    state: &AppState,
    id: &str,
) -> Result<Response, ApiError> {
    let owner = authenticate::owner(&request, state).await?;
    let id = AlertId::parse_path(id)?;
    let secret = WebhookSecret::generate();
    let rule = state
        .alerts
        .store
        .rotate_secret(&owner, id, &secret, state.clock.now())
        .await?
        .ok_or(ApiError::NotFound(NOT_FOUND))?;
    tracing::info!(rule = %rule.id, "alert rule secret rotated");
    respond::data(RuleView::with_secret(&rule, &secret))
}

/// `POST /alerts/{id}/test`: puts an `alert.test` event in the outbox; 202 with its delivery.
pub async fn test(request: Request, state: &AppState, id: &str) -> Result<Response, ApiError> {
    let (_, rule) = owned(&request, state, id).await?;
    let now = state.clock.now();
    let event = AlertEvent::test(&rule, now);
    state.alerts.store.enqueue(&event, now).await?;
    state.alerts.wake.notify_one();
    let delivery = Delivery {
        event: event.id,
        kind: EventType::Test,
        device: rule.device,
        status: DeliveryStatus::Pending,
        attempts: 0,
        last_status: None,
        last_error: None,
        created_at: now,
        delivered_at: None,
        next_attempt_at: Some(now),
    };
    respond::json(
        StatusCode::ACCEPTED,
        &respond::Data {
            data: DeliveryView::new(&delivery),
        },
    )
}

/// `GET /alerts/{id}/deliveries`: the rule's latest events and their deliveries, newest first.
pub async fn deliveries(
    request: Request,
    state: &AppState,
    id: &str,
) -> Result<Response, ApiError> {
    let (_, rule) = owned(&request, state, id).await?;
    let deliveries = state
        .alerts
        .store
        .deliveries(rule.id, DELIVERIES_LISTED)
        .await?;
    respond::data(deliveries.iter().map(DeliveryView::new).collect::<Vec<_>>())
}

/// `GET /alerts/{id}/states`: the state of each device the rule has evaluated.
pub async fn states(request: Request, state: &AppState, id: &str) -> Result<Response, ApiError> {
    let (_, rule) = owned(&request, state, id).await?;
    let states = state.alerts.store.states(rule.id).await?;
    respond::data(states.iter().map(StateView::new).collect::<Vec<_>>())
}

/// The caller and their rule `id`; 404 for another owner's.
async fn owned(
    request: &Request,
    state: &AppState,
    id: &str,
) -> Result<(OwnerId, AlertRule), ApiError> {
    let owner = authenticate::owner(request, state).await?;
    let id = AlertId::parse_path(id)?;
    let rule = state
        .alerts
        .store
        .get(&owner, id)
        .await?
        .ok_or(ApiError::NotFound(NOT_FOUND))?;
    Ok((owner, rule))
}

/// What parsing cannot see: the device is the owner's (else 404, as for the device's own routes:
/// another owner's device is not told apart from none), and the target's name does not resolve
/// to an internal address (else 422 naming `webhook_url`). Unchanged fields of `current` are not
/// checked again.
async fn check(
    state: &AppState,
    owner: &OwnerId,
    spec: &RuleSpec,
    current: Option<&AlertRule>,
) -> Result<(), ApiError> {
    if let Some(device) = spec
        .device
        .filter(|_| current.is_none_or(|rule| rule.device != spec.device))
    {
        if !owns(state, owner, device).await? {
            return Err(ApiError::NotFound(NO_DEVICE));
        }
    }
    if current.is_none_or(|rule| rule.webhook_url != spec.webhook_url) {
        if let Err(SendError::Refused) = check_target(&spec.webhook_url, state.alerts.policy).await
        {
            return Err(FieldErrors::single(In::Body, "webhook_url", Code::Format, REFUSED).into());
        }
    }
    Ok(())
}

async fn owns(state: &AppState, owner: &OwnerId, device: DeviceUuid) -> Result<bool, ApiError> {
    Ok(state.devices.get(owner, device).await?.is_some())
}
