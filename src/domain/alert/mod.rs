//! Alert rules: what an owner wants to be told about, parsed from request bodies into values that
//! cannot be wrong, and the one rule that decides a device's state under a rule.
//!
//! A rule watches one device or every device of its owner, and is either a *threshold* (a measure
//! above or below a value, averaged over a window, cleared on the safe side of a second value so
//! that it does not flap) or a *silence* (no reading for some minutes). Each (rule, device) pair
//! has a state, `ok` or `firing`; [`Condition::next`] is the only place that moves it, and every
//! move becomes an [`AlertEvent`] (`src/store/` writes both in one transaction).

mod event;
mod webhook;

use std::fmt;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::device::DeviceUuid;
use super::field_errors::{Code, FieldErrors, In};
use super::json_document::JsonDocument;
use super::json_fields::JsonObject;
use super::measure::Measure;
use super::owner::OwnerId;
pub use event::{AlertEvent, EventType};
pub use webhook::{is_internal, Host, TargetPolicy, WebhookUrl, MAX_URL_LEN, REFUSED};

/// The most rules one owner may have.
pub const MAX_RULES_PER_OWNER: usize = 1_000;
/// The longest averaging window, minutes (a day).
pub const MAX_WINDOW_MINUTES: u16 = 1_440;
/// The longest silence, minutes (a week).
pub const MAX_SILENCE_MINUTES: u16 = 10_080;

/// The `id` of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AlertId(Uuid);

impl AlertId {
    /// A fresh random id.
    pub fn generate() -> Self {
        Self(Uuid::new_v4())
    }

    /// The `{id}` path segment; a 422 problem (`in: path`) unless it is a UUID.
    pub fn parse_path(segment: &str) -> Result<Self, FieldErrors> {
        DeviceUuid::parse_path(segment).map(|id| Self(id.as_uuid()))
    }

    /// An id as stored.
    pub fn from_uuid(uuid: Uuid) -> Self {
        Self(uuid)
    }

    /// The UUID.
    pub fn as_uuid(&self) -> Uuid {
        self.0
    }
}

impl fmt::Display for AlertId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

/// Which side of the threshold is the bad one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Fires when the value rises above the threshold.
    Above,
    /// Fires when the value falls below the threshold.
    Below,
}

impl Direction {
    /// The body key of the threshold: `above` or `below`.
    pub fn key(self) -> &'static str {
        match self {
            Self::Above => "above",
            Self::Below => "below",
        }
    }

    /// The direction of a stored key.
    pub fn from_key(key: &str) -> Option<Self> {
        match key {
            "above" => Some(Self::Above),
            "below" => Some(Self::Below),
            _ => None,
        }
    }
}

/// A threshold with its hysteresis: fires past `value`, clears only back past `clear`, which lies
/// on the safe side of `value` (or on it: no hysteresis).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    /// Above or below.
    pub direction: Direction,
    /// Where it fires.
    pub value: f64,
    /// Where it clears.
    pub clear: f64,
}

/// What a rule watches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Condition {
    /// A measured value past a threshold.
    Threshold {
        /// The value.
        measure: Measure,
        /// Where it fires and clears.
        threshold: Threshold,
        /// Minutes averaged over; 0: the latest reading alone.
        window_minutes: u16,
    },
    /// No reading for this many minutes.
    Silence {
        /// Minutes without a reading that fire the rule.
        minutes: u16,
    },
}

impl Condition {
    /// `threshold` or `silence`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Threshold { .. } => "threshold",
            Self::Silence { .. } => "silence",
        }
    }

    /// The state after observing `observed` (the measure's value, or for a silence the minutes
    /// since the device's last reading) in state `current`: the one rule of transitions. A
    /// threshold fires strictly past its value and clears strictly back past its clear value,
    /// so a value between the two keeps the state it has (hysteresis); a silence fires once
    /// its minutes have passed and clears at the first reading within them.
    pub fn next(&self, current: StateKind, observed: f64) -> StateKind {
        match (self, current) {
            (Self::Threshold { threshold, .. }, StateKind::Ok) => {
                let fired = match threshold.direction {
                    Direction::Above => observed > threshold.value,
                    Direction::Below => observed < threshold.value,
                };
                if fired {
                    StateKind::Firing
                } else {
                    StateKind::Ok
                }
            }
            (Self::Threshold { threshold, .. }, StateKind::Firing) => {
                let cleared = match threshold.direction {
                    Direction::Above => observed < threshold.clear,
                    Direction::Below => observed > threshold.clear,
                };
                if cleared {
                    StateKind::Ok
                } else {
                    StateKind::Firing
                }
            }
            (Self::Silence { minutes }, _) => {
                if observed >= f64::from(*minutes) {
                    StateKind::Firing
                } else {
                    StateKind::Ok
                }
            }
        }
    }

    /// The value an event of a move into `to` names as its `threshold`: where a threshold rule
    /// fires (into `firing`) or clears (into `ok`); a silence's minutes.
    pub fn threshold_of(&self, to: StateKind) -> f64 {
        match (self, to) {
            (Self::Threshold { threshold, .. }, StateKind::Firing) => threshold.value,
            (Self::Threshold { threshold, .. }, StateKind::Ok) => threshold.clear,
            (Self::Silence { minutes }, _) => f64::from(*minutes),
        }
    }

    /// The measure a threshold watches.
    pub fn measure(&self) -> Option<Measure> {
        match self {
            Self::Threshold { measure, .. } => Some(*measure),
            Self::Silence { .. } => None,
        }
    }
}

/// A rule, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertRule {
    /// Its id.
    pub id: AlertId,
    /// Whose it is.
    pub owner: OwnerId,
    /// The device it watches; `None`: every device of the owner.
    pub device: Option<DeviceUuid>,
    /// What it watches.
    pub condition: Condition,
    /// Where its events go.
    pub webhook_url: WebhookUrl,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed (its secret included).
    pub updated_at: DateTime<Utc>,
}

/// A rule's per-rule signing secret: `whsec_` and 43 characters of base64url (256 random
/// bits). Shown when the rule is created and when it is rotated, never otherwise.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(String);

impl WebhookSecret {
    /// A fresh random secret.
    pub fn generate() -> Self {
        use base64::Engine as _;
        use rand::RngCore as _;
        let mut bytes = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        Self(format!(
            "whsec_{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
        ))
    }

    /// A secret as stored.
    pub fn from_stored(secret: String) -> Self {
        Self(secret)
    }

    /// The secret; its UTF-8 bytes are the HMAC key.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret(…)")
    }
}

/// A device's state under a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKind {
    /// Nothing to tell.
    Ok,
    /// The condition holds (an `alert.fired` was sent).
    Firing,
}

impl StateKind {
    /// The wire and stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Firing => "firing",
        }
    }

    /// The state of a stored name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "ok" => Some(Self::Ok),
            "firing" => Some(Self::Firing),
            _ => None,
        }
    }
}

/// A device's state under a rule, as `…/states` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceState {
    /// The device.
    pub device: DeviceUuid,
    /// Ok or firing.
    pub state: StateKind,
    /// Since when.
    pub since: DateTime<Utc>,
    /// The value last observed (for a silence, the minutes without a reading).
    pub value: Option<f64>,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryStatus {
    /// Not delivered yet: waiting for its turn or for its next attempt.
    Pending,
    /// A 2xx answer came.
    Delivered,
    /// Every attempt failed for 24 hours; no more are made.
    Failed,
}

impl DeliveryStatus {
    /// The wire and stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
        }
    }

    /// The status of a stored name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "pending" => Some(Self::Pending),
            "delivered" => Some(Self::Delivered),
            "failed" => Some(Self::Failed),
            _ => None,
        }
    }
}

/// One event's delivery, as `…/deliveries` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// The event's id.
    pub event: Uuid,
    /// `alert.fired`, `alert.cleared` or `alert.test`.
    pub kind: EventType,
    /// The device it is about (none for a test).
    pub device: Option<DeviceUuid>,
    /// Where it stands.
    pub status: DeliveryStatus,
    /// Attempts made.
    pub attempts: u32,
    /// The HTTP status of the last answer, if one came.
    pub last_status: Option<u16>,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    /// When the event happened.
    pub created_at: DateTime<Utc>,
    /// When it was delivered.
    pub delivered_at: Option<DateTime<Utc>>,
    /// When the next attempt is due (pending only).
    pub next_attempt_at: Option<DateTime<Utc>>,
}

/// The parsed body of `POST /alerts`, or of a `PATCH` laid over the rule it changes.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleSpec {
    /// One device, or every device of the owner.
    pub device: Option<DeviceUuid>,
    /// What it watches.
    pub condition: Condition,
    /// Where its events go.
    pub webhook_url: WebhookUrl,
}

impl RuleSpec {
    /// Parses a `POST /alerts` body, listing every problem.
    pub fn parse(body: &JsonDocument, policy: TargetPolicy) -> Result<Self, FieldErrors> {
        Self::parse_over(body, None, policy)
    }

    /// Parses a `PATCH /alerts/{id}` body laid over `base`: a field the body leaves out keeps the
    /// rule's value (`device_id: null` means every device; `above` replaces `below` and back), and
    /// the result is checked as a whole, as a new rule is.
    pub fn patch(
        body: &JsonDocument,
        base: &AlertRule,
        policy: TargetPolicy,
    ) -> Result<Self, FieldErrors> {
        Self::parse_over(body, Some(base), policy)
    }

    fn parse_over(
        body: &JsonDocument,
        base: Option<&AlertRule>,
        policy: TargetPolicy,
    ) -> Result<Self, FieldErrors> {
        let mut errors = FieldErrors::new();
        let Some(object) = JsonObject::root(body, &mut errors) else {
            return Err(errors);
        };
        // `"device_id": null` is sent to mean every device, so the key counts even when null.
        let device = if object.mentions("device_id") {
            match object.optional_str("device_id", &mut errors) {
                None => None,
                Some(raw) => match uuid::Uuid::try_parse(raw) {
                    Ok(uuid) => Some(DeviceUuid::from_uuid(uuid)),
                    Err(_) => {
                        errors.push(
                            In::Body,
                            "device_id",
                            Code::Format,
                            format!("`device_id` must be a device's id (a UUID), not `{raw}`"),
                        );
                        None
                    }
                },
            }
        } else {
            base.and_then(|rule| rule.device)
        };
        let webhook_url = match (object.optional_str("webhook_url", &mut errors), base) {
            (Some(raw), _) => WebhookUrl::parse(raw, policy)
                .map_err(|(code, detail)| errors.push(In::Body, "webhook_url", code, detail))
                .ok(),
            (None, Some(rule)) if !object.has("webhook_url") => Some(rule.webhook_url.clone()),
            (None, _) => {
                if !errors.as_slice().iter().any(|e| e.name == "webhook_url") {
                    errors.push(
                        In::Body,
                        "webhook_url",
                        Code::Required,
                        "`webhook_url` is required",
                    );
                }
                None
            }
        };
        let kind = match object.optional_str("kind", &mut errors) {
            Some(kind) => Some(kind),
            None if object.has("kind") => None,
            None => match base {
                Some(rule) => Some(rule.condition.kind()),
                None => {
                    errors.push(In::Body, "kind", Code::Required, "`kind` is required");
                    None
                }
            },
        };
        // The base's fields count only while the kind stays.
        let base = base.filter(|rule| Some(rule.condition.kind()) == kind);
        let condition = match kind {
            Some("threshold") => {
                unused_silence(&object, &mut errors);
                threshold(&object, base, &mut errors)
            }
            Some("silence") => {
                unused_threshold(&object, &mut errors);
                silence(&object, base, &mut errors)
            }
            Some(other) => {
                errors.push(
                    In::Body,
                    "kind",
                    Code::Enum,
                    format!("`kind` must be `threshold` or `silence`, not `{other}`"),
                );
                None
            }
            None => None,
        };
        match (condition, webhook_url) {
            (Some(condition), Some(webhook_url)) if errors.is_empty() => Ok(Self {
                device,
                condition,
                webhook_url,
            }),
            _ => Err(errors),
        }
    }
}

/// A silence's field sent with a threshold: unused, but held to its type and bounds all the same
/// (a client that sent it meant something; a wrong value is its mistake, named).
fn unused_silence(object: &JsonObject<'_>, errors: &mut FieldErrors) {
    bounded(
        object,
        "silence_minutes",
        1,
        MAX_SILENCE_MINUTES,
        Some(1),
        errors,
    );
}

/// A threshold's fields sent with a silence: unused, held to their types and bounds.
fn unused_threshold(object: &JsonObject<'_>, errors: &mut FieldErrors) {
    if let Some(name) = object.optional_str("measure", errors) {
        measure_named(name, errors);
    }
    for key in ["above", "below", "clear"] {
        let _: Option<f64> = object.optional(key, errors);
    }
    bounded(
        object,
        "window_minutes",
        0,
        MAX_WINDOW_MINUTES,
        Some(0),
        errors,
    );
}

/// The measure called `name`, or an `enum` problem.
fn measure_named(name: &str, errors: &mut FieldErrors) -> Option<Measure> {
    let found = Measure::ALL.into_iter().find(|m| m.name() == name);
    if found.is_none() {
        let names: Vec<_> = Measure::ALL.iter().map(|m| m.name()).collect();
        errors.push(
            In::Body,
            "measure",
            Code::Enum,
            format!("`measure` must be one of {}", names.join(", ")),
        );
    }
    found
}

/// A threshold's fields (`measure`, `above` | `below`, `clear`, `window_minutes`).
fn threshold(
    object: &JsonObject<'_>,
    base: Option<&AlertRule>,
    errors: &mut FieldErrors,
) -> Option<Condition> {
    let (base_measure, base_threshold, base_window) = match base.map(|rule| rule.condition) {
        Some(Condition::Threshold {
            measure,
            threshold,
            window_minutes,
        }) => (Some(measure), Some(threshold), Some(window_minutes)),
        _ => (None, None, None),
    };
    let measure = match object.optional_str("measure", errors) {
        Some(name) => measure_named(name, errors),
        None if object.has("measure") => None,
        None => {
            if base_measure.is_none() {
                errors.push(
                    In::Body,
                    "measure",
                    Code::Required,
                    "`measure` is required for a threshold",
                );
            }
            base_measure
        }
    };
    let above: Option<f64> = object.optional("above", errors);
    let below: Option<f64> = object.optional("below", errors);
    let sent = object.has("above") || object.has("below");
    let side = match (above, below) {
        (Some(_), Some(_)) => {
            errors.push(
                In::Body,
                "below",
                Code::Range,
                "give one of `above` and `below`, not both",
            );
            None
        }
        (Some(value), None) => Some((Direction::Above, value)),
        (None, Some(value)) => Some((Direction::Below, value)),
        (None, None) if sent => None,
        (None, None) => match base_threshold {
            Some(threshold) => Some((threshold.direction, threshold.value)),
            None => {
                errors.push(
                    In::Body,
                    "above",
                    Code::Required,
                    "a threshold needs `above` or `below`",
                );
                None
            }
        },
    };
    let clear: Option<f64> = object.optional("clear", errors);
    // A new side without a new clear value starts without hysteresis rather than inherit a
    // clear value meant for the old side.
    let clear = match (clear, side, base_threshold) {
        (Some(clear), _, _) => Some(clear),
        (None, _, _) if object.has("clear") => None,
        (None, Some((direction, value)), Some(old))
            if old.direction == direction && old.value == value =>
        {
            Some(old.clear)
        }
        (None, Some((_, value)), _) => Some(value),
        (None, None, _) => None,
    };
    let window_minutes = bounded(
        object,
        "window_minutes",
        0,
        MAX_WINDOW_MINUTES,
        base_window.or(Some(0)),
        errors,
    );
    let (direction, value) = side?;
    let clear = clear?;
    let safe = match direction {
        Direction::Above => clear <= value,
        Direction::Below => clear >= value,
    };
    if !safe {
        let side = match direction {
            Direction::Above => "at or below `above`",
            Direction::Below => "at or above `below`",
        };
        errors.push(
            In::Body,
            "clear",
            Code::Range,
            format!("`clear` must lie on the safe side of the threshold: {side}"),
        );
        return None;
    }
    Some(Condition::Threshold {
        measure: measure?,
        threshold: Threshold {
            direction,
            value,
            clear,
        },
        window_minutes: window_minutes?,
    })
}

/// A silence's field (`silence_minutes`).
fn silence(
    object: &JsonObject<'_>,
    base: Option<&AlertRule>,
    errors: &mut FieldErrors,
) -> Option<Condition> {
    let base_minutes = match base.map(|rule| rule.condition) {
        Some(Condition::Silence { minutes }) => Some(minutes),
        _ => None,
    };
    bounded(
        object,
        "silence_minutes",
        1,
        MAX_SILENCE_MINUTES,
        base_minutes,
        errors,
    )
    .map(|minutes| Condition::Silence { minutes })
}

/// An integer field within `[min, max]`; `default` when absent (required when that is `None`).
fn bounded(
    object: &JsonObject<'_>,
    key: &str,
    min: u16,
    max: u16,
    default: Option<u16>,
    errors: &mut FieldErrors,
) -> Option<u16> {
    let Some(raw) = object.optional::<i64>(key, errors) else {
        if !object.has(key) && default.is_none() {
            errors.push(
                In::Body,
                key,
                Code::Required,
                format!("`{key}` is required"),
            );
        }
        return if object.has(key) { None } else { default };
    };
    if raw < i64::from(min) {
        errors.push(
            In::Body,
            key,
            Code::Minimum,
            format!("`{key}` must be at least {min}"),
        );
        None
    } else if raw > i64::from(max) {
        errors.push(
            In::Body,
            key,
            Code::Maximum,
            format!("`{key}` must be at most {max}"),
        );
        None
    } else {
        u16::try_from(raw).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn above(value: f64, clear: f64) -> Condition {
        Condition::Threshold {
            measure: Measure::Pm2_5,
            threshold: Threshold {
                direction: Direction::Above,
                value,
                clear,
            },
            window_minutes: 0,
        }
    }

    #[test]
    fn a_threshold_fires_past_its_value_and_clears_only_past_its_clear_value() {
        let rule = above(35.0, 25.0);
        assert_eq!(rule.next(StateKind::Ok, 35.0), StateKind::Ok);
        assert_eq!(rule.next(StateKind::Ok, 35.1), StateKind::Firing);
        assert_eq!(rule.next(StateKind::Firing, 30.0), StateKind::Firing);
        assert_eq!(rule.next(StateKind::Firing, 25.0), StateKind::Firing);
        assert_eq!(rule.next(StateKind::Firing, 24.9), StateKind::Ok);
        assert_eq!(rule.next(StateKind::Ok, 30.0), StateKind::Ok);
    }

    #[test]
    fn a_silence_fires_once_its_minutes_passed() {
        let rule = Condition::Silence { minutes: 20 };
        assert_eq!(rule.next(StateKind::Ok, 19.9), StateKind::Ok);
        assert_eq!(rule.next(StateKind::Ok, 20.0), StateKind::Firing);
        assert_eq!(rule.next(StateKind::Firing, 0.5), StateKind::Ok);
    }

    #[test]
    fn secrets_are_long_random_and_not_debug_printed() {
        let a = WebhookSecret::generate();
        let b = WebhookSecret::generate();
        assert_ne!(a, b);
        assert_eq!(a.expose().len(), "whsec_".len() + 43);
        assert!(!format!("{a:?}").contains(a.expose()));
    }
}
