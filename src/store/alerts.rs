//! [`AlertStore`]: alert rules, each device's state under them, and the outbox of their events,
//! kept beside the devices (SQLite, or PostgreSQL shared by every replica).
//!
//! What it guarantees: a state changes only together with the event that tells it, in one
//! transaction ([`AlertStore::observe`]), so an event is never lost nor told twice however many
//! processes evaluate at once; the outbox is the only way out, so an event recorded survives a
//! crash and is sent after it; [`AlertStore::claim`] hands out at most the oldest pending event
//! of each (rule, device) pair, leased to one deliverer at a time, so a pair's events go out in
//! order.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::StoreError;
use crate::domain::alert::{
    AlertEvent, AlertId, AlertRule, Condition, Delivery, DeviceState, Direction, Threshold,
    WebhookSecret, WebhookUrl,
};
use crate::domain::{DeviceUuid, Measure, OwnerId};

/// What became of a rule to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    /// Stored.
    Stored,
    /// The owner has as many rules as allowed already; nothing was stored.
    LimitReached,
}

/// An event claimed for sending, with what sending it takes.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// The event's id.
    pub event: Uuid,
    /// Its rule.
    pub rule: AlertId,
    /// Where it goes (the rule's URL now).
    pub url: WebhookUrl,
    /// What signs it (the rule's secret now).
    pub secret: WebhookSecret,
    /// The body, as rendered when the event was recorded.
    pub body: String,
    /// When it was recorded (retries stop a day after).
    pub created_at: DateTime<Utc>,
    /// Attempts made before this one.
    pub attempts: u32,
}

/// How one attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    /// A 2xx answer, with its status.
    Delivered(u16),
    /// Anything else: the status if one came, why, and when to try again (`None`: give up).
    Failed {
        /// The answer's status, if one came.
        status: Option<u16>,
        /// Why.
        error: String,
        /// The next attempt; `None` once the retries are over.
        retry_at: Option<DateTime<Utc>>,
    },
}

/// Alert rules, states and the outbox. Owner-scoped methods answer `None`/`false` for another
/// owner's rule.
/// What the evaluator saw of one (rule, device) pair.
#[derive(Debug, Clone)]
pub struct Observation {
    /// The rule, as the evaluator read it.
    pub rule: AlertRule,
    /// The device.
    pub device: DeviceUuid,
    /// Its value now (a mean, or minutes without a reading).
    pub value: f64,
}

#[async_trait]
pub trait AlertStore: Send + Sync + std::fmt::Debug {
    /// Stores a new rule with its secret, unless its owner has `limit` rules already.
    async fn create(
        &self,
        rule: &AlertRule,
        secret: &WebhookSecret,
        limit: usize,
    ) -> Result<Created, StoreError>;

    /// The owner's rules, oldest first.
    async fn list(&self, owner: &OwnerId) -> Result<Vec<AlertRule>, StoreError>;

    /// One of the owner's rules.
    async fn get(&self, owner: &OwnerId, id: AlertId) -> Result<Option<AlertRule>, StoreError>;

    /// Replaces one of the owner's rules by `rule` (same id and owner); with `reset`, its
    /// devices' states start afresh (its condition or devices changed). `false`: no such rule.
    async fn update(&self, rule: &AlertRule, reset: bool) -> Result<bool, StoreError>;

    /// Deletes one of the owner's rules, with its states and events. `false`: no such rule.
    async fn delete(&self, owner: &OwnerId, id: AlertId) -> Result<bool, StoreError>;

    /// Replaces the secret of one of the owner's rules; answers the rule.
    async fn rotate_secret(
        &self,
        owner: &OwnerId,
        id: AlertId,
        secret: &WebhookSecret,
        now: DateTime<Utc>,
    ) -> Result<Option<AlertRule>, StoreError>;

    /// The states of a rule's devices (those evaluated so far), by device.
    async fn states(&self, id: AlertId) -> Result<Vec<DeviceState>, StoreError>;

    /// A rule's latest `limit` events and their deliveries, newest first.
    async fn deliveries(&self, id: AlertId, limit: usize) -> Result<Vec<Delivery>, StoreError>;

    /// Puts an event (a test) in the outbox, due at once.
    async fn enqueue(&self, event: &AlertEvent, now: DateTime<Utc>) -> Result<(), StoreError>;

    /// Every rule of every owner (for the evaluator).
    async fn rules(&self) -> Result<Vec<AlertRule>, StoreError>;

    /// Records each observation made at `now` (`device` showed `value` under `rule`): moves its
    /// state as [`Condition::next`] says and, on a move, puts the event in the outbox — all of
    /// them in one transaction that decides on the stored states (locked), never on the
    /// caller's idea of them. An observation made before its state's last move (`now` <
    /// `since`: another replica's pass recorded a later one meanwhile) is stale and changes
    /// nothing. The answers are in the order asked: the state now, `None` where the rule or the
    /// device is gone. One transaction per pass, not per pair: a fleet's rules made a write each
    /// (a lock and a sync) and a pass over 10,000 of them took seconds.
    async fn observe(
        &self,
        observations: &[Observation],
        now: DateTime<Utc>,
    ) -> Result<Vec<Option<DeviceState>>, StoreError>;

    /// Leases up to `max` events due at `now` until `lease_until`: of each (rule, device) pair
    /// only the oldest pending one, and only when no deliverer holds it.
    async fn claim(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        max: usize,
    ) -> Result<Vec<Outgoing>, StoreError>;

    /// Records how an attempt at a claimed event ended, and releases it.
    async fn settle(
        &self,
        event: Uuid,
        attempt: &Attempt,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;
}

/// The columns of a rule, in the order every backend reads them.
pub(crate) const RULE_COLUMNS: &str = "id, owner, device_id, kind, measure, direction, threshold, \
     clear, window_minutes, silence_minutes, webhook_url, created_at, updated_at";

/// The columns of a stored rule (ids and times already decoded by the backend).
#[derive(Debug)]
pub(crate) struct RuleRecord {
    pub(crate) id: Uuid,
    pub(crate) owner: String,
    pub(crate) device: Option<Uuid>,
    pub(crate) kind: String,
    pub(crate) measure: Option<String>,
    pub(crate) direction: Option<String>,
    pub(crate) threshold: Option<f64>,
    pub(crate) clear: Option<f64>,
    pub(crate) window_minutes: Option<i64>,
    pub(crate) silence_minutes: Option<i64>,
    pub(crate) webhook_url: String,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) updated_at: DateTime<Utc>,
}

/// The stored form of a condition: kind, measure, direction, threshold, clear, window, silence.
pub(crate) type ConditionColumns = (
    &'static str,
    Option<&'static str>,
    Option<&'static str>,
    Option<f64>,
    Option<f64>,
    Option<i64>,
    Option<i64>,
);

/// A condition as its columns.
pub(crate) fn condition_columns(condition: &Condition) -> ConditionColumns {
    match condition {
        Condition::Threshold {
            measure,
            threshold,
            window_minutes,
        } => (
            "threshold",
            Some(measure.name()),
            Some(threshold.direction.key()),
            Some(threshold.value),
            Some(threshold.clear),
            Some(i64::from(*window_minutes)),
            None,
        ),
        Condition::Silence { minutes } => (
            "silence",
            None,
            None,
            None,
            None,
            None,
            Some(i64::from(*minutes)),
        ),
    }
}

impl RuleRecord {
    /// The rule, or [`StoreError::Corrupt`] when a stored value no longer parses.
    pub(crate) fn into_rule(self) -> Result<AlertRule, StoreError> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("{what} of alert rule {}", self.id));
        let minutes = |value: Option<i64>| value.and_then(|value| u16::try_from(value).ok());
        let condition = match self.kind.as_str() {
            "threshold" => Condition::Threshold {
                measure: self
                    .measure
                    .as_deref()
                    .and_then(|name| Measure::ALL.into_iter().find(|m| m.name() == name))
                    .ok_or_else(|| corrupt("measure"))?,
                threshold: Threshold {
                    direction: self
                        .direction
                        .as_deref()
                        .and_then(Direction::from_key)
                        .ok_or_else(|| corrupt("direction"))?,
                    value: self.threshold.ok_or_else(|| corrupt("threshold"))?,
                    clear: self.clear.ok_or_else(|| corrupt("clear"))?,
                },
                window_minutes: minutes(self.window_minutes).ok_or_else(|| corrupt("window"))?,
            },
            "silence" => Condition::Silence {
                minutes: minutes(self.silence_minutes).ok_or_else(|| corrupt("silence"))?,
            },
            _ => return Err(corrupt("kind")),
        };
        Ok(AlertRule {
            id: AlertId::from_uuid(self.id),
            owner: OwnerId::parse(&self.owner).ok_or_else(|| corrupt("owner"))?,
            device: self.device.map(DeviceUuid::from_uuid),
            condition,
            webhook_url: WebhookUrl::from_stored(self.webhook_url.clone())
                .ok_or_else(|| corrupt("webhook_url"))?,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}
