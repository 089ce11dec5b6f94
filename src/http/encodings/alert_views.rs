//! The JSON shapes of alert rules, their states and their deliveries.

use serde::Serialize;

use super::views::timestamp;
use crate::domain::alert::{AlertRule, Condition, Delivery, DeviceState, WebhookSecret};

/// A rule as its owner sees it; `secret` only right after creation or rotation. Fields of the
/// other kind are left out (a silence has no `measure`).
#[derive(Debug, Serialize)]
pub struct RuleView<'a> {
    id: String,
    device_id: Option<String>,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    measure: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    above: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    below: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    clear: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    window_minutes: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    silence_minutes: Option<u16>,
    webhook_url: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<&'a str>,
    created_at: String,
    updated_at: String,
}

impl<'a> RuleView<'a> {
    /// The view without the secret.
    pub fn new(rule: &'a AlertRule) -> Self {
        let mut view = Self {
            id: rule.id.to_string(),
            device_id: rule.device.map(|device| device.to_string()),
            kind: rule.condition.kind(),
            measure: rule.condition.measure().map(|m| m.name()),
            above: None,
            below: None,
            clear: None,
            window_minutes: None,
            silence_minutes: None,
            webhook_url: rule.webhook_url.as_str(),
            secret: None,
            created_at: timestamp(&rule.created_at),
            updated_at: timestamp(&rule.updated_at),
        };
        match rule.condition {
            Condition::Threshold {
                threshold,
                window_minutes,
                ..
            } => {
                match threshold.direction {
                    crate::domain::alert::Direction::Above => view.above = Some(threshold.value),
                    crate::domain::alert::Direction::Below => view.below = Some(threshold.value),
                }
                view.clear = Some(threshold.clear);
                view.window_minutes = Some(window_minutes);
            }
            Condition::Silence { minutes } => view.silence_minutes = Some(minutes),
        }
        view
    }

    /// The view with the secret just made.
    pub fn with_secret(rule: &'a AlertRule, secret: &'a WebhookSecret) -> Self {
        Self {
            secret: Some(secret.expose()),
            ..Self::new(rule)
        }
    }
}

/// A device's state under a rule.
#[derive(Debug, Serialize)]
pub struct StateView {
    device_id: String,
    state: &'static str,
    since: String,
    value: Option<f64>,
}

impl StateView {
    /// The view of one state.
    pub fn new(state: &DeviceState) -> Self {
        Self {
            device_id: state.device.to_string(),
            state: state.state.as_str(),
            since: timestamp(&state.since),
            value: state.value,
        }
    }
}

/// One event's delivery.
#[derive(Debug, Serialize)]
pub struct DeliveryView {
    event_id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    device_id: Option<String>,
    status: &'static str,
    attempts: u32,
    last_status: Option<u16>,
    last_error: Option<String>,
    created_at: String,
    delivered_at: Option<String>,
    next_attempt_at: Option<String>,
}

impl DeliveryView {
    /// The view of one delivery.
    pub fn new(delivery: &Delivery) -> Self {
        Self {
            event_id: delivery.event.hyphenated().to_string(),
            kind: delivery.kind.as_str(),
            device_id: delivery.device.map(|device| device.to_string()),
            status: delivery.status.as_str(),
            attempts: delivery.attempts,
            last_status: delivery.last_status,
            last_error: delivery.last_error.clone(),
            created_at: timestamp(&delivery.created_at),
            delivered_at: delivery.delivered_at.as_ref().map(timestamp),
            next_attempt_at: delivery.next_attempt_at.as_ref().map(timestamp),
        }
    }
}
