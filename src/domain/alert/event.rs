//! The event a webhook receives: one JSON object per transition (or test), with a stable id a
//! receiver drops repeats by. Its body is rendered once, when the event is recorded, and sent as
//! those same bytes at every attempt, so a retry is byte for byte the first try.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use uuid::Uuid;

use super::{AlertRule, StateKind};
use crate::domain::DeviceUuid;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum EventType {
    /// A device's state moved to `firing`.
    #[serde(rename = "alert.fired")]
    Fired,
    /// A device's state moved back to `ok`.
    #[serde(rename = "alert.cleared")]
    Cleared,
    /// Sent by `POST /alerts/{id}/test`.
    #[serde(rename = "alert.test")]
    Test,
}

impl EventType {
    /// The wire and stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fired => "alert.fired",
            Self::Cleared => "alert.cleared",
            Self::Test => "alert.test",
        }
    }

    /// The type of a stored name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "alert.fired" => Some(Self::Fired),
            "alert.cleared" => Some(Self::Cleared),
            "alert.test" => Some(Self::Test),
            _ => None,
        }
    }

    /// The event of a move into `state`.
    pub fn into_state(state: StateKind) -> Self {
        match state {
            StateKind::Firing => Self::Fired,
            StateKind::Ok => Self::Cleared,
        }
    }
}

/// The JSON body POSTed to a rule's URL.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlertEvent {
    /// Stable across retries.
    pub id: Uuid,
    /// What happened.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// The rule.
    pub rule_id: Uuid,
    /// The device (`null` for a test).
    pub device_id: Option<Uuid>,
    /// The measure of a threshold rule (`null` for a silence).
    pub measure: Option<&'static str>,
    /// The value observed: the measure's (averaged over the window), or for a silence the minutes
    /// since the last reading; `null` for a test.
    pub value: Option<f64>,
    /// Where it fired (a fired event) or cleared (a cleared one), or a silence's minutes.
    pub threshold: Option<f64>,
    /// When the transition was observed, RFC 3339 UTC.
    pub at: String,
}

impl AlertEvent {
    /// The event of `device` moving into `to` under `rule` on observing `value` at `at`.
    pub fn transition(
        rule: &AlertRule,
        device: DeviceUuid,
        to: StateKind,
        value: f64,
        at: DateTime<Utc>,
    ) -> Self {
        Self {
            id: Uuid::new_v4(),
            kind: EventType::into_state(to),
            rule_id: rule.id.as_uuid(),
            device_id: Some(device.as_uuid()),
            measure: rule.condition.measure().map(|m| m.name()),
            value: Some(value),
            threshold: Some(rule.condition.threshold_of(to)),
            at: at.to_rfc3339_opts(SecondsFormat::Millis, true),
        }
    }

    /// A test event of `rule`, sent at `at`.
    pub fn test(rule: &AlertRule, at: DateTime<Utc>) -> Self {
        Self {
            id: Uuid::new_v4(),
            kind: EventType::Test,
            rule_id: rule.id.as_uuid(),
            device_id: rule.device.map(|device| device.as_uuid()),
            measure: rule.condition.measure().map(|m| m.name()),
            value: None,
            threshold: None,
            at: at.to_rfc3339_opts(SecondsFormat::Millis, true),
        }
    }
}
