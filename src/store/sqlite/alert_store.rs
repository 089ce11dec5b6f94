//! [`AlertStore`] on the embedded database. One process owns the data directory, and every write
//! runs on the one writer connection, so each method's transaction is alone: the state a
//! transition is decided on is the stored one, and a claimed event is nobody else's.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{params, OptionalExtension, Row};
use uuid::Uuid;

use super::{from_micros, to_micros, Sqlite};
use crate::domain::alert::{
    AlertEvent, AlertId, AlertRule, Delivery, DeliveryStatus, DeviceState, EventType, StateKind,
    WebhookSecret, WebhookUrl,
};
use crate::domain::{DeviceUuid, OwnerId};
use crate::store::alerts::{
    condition_columns, Attempt, Created, Outgoing, RuleRecord, RULE_COLUMNS,
};
use crate::store::{AlertStore, Observation, StoreError};

/// Alert rules, states and outbox in the embedded database.
#[derive(Debug, Clone)]
pub struct SqliteAlerts {
    db: Arc<Sqlite>,
}

impl SqliteAlerts {
    /// Alerts stored in `db`.
    pub fn new(db: Arc<Sqlite>) -> Self {
        Self { db }
    }
}

fn uuid(text: &str, what: &str) -> Result<Uuid, StoreError> {
    Uuid::try_parse(text).map_err(|_| StoreError::Corrupt(format!("{what} {text:?}")))
}

/// A rule row's raw columns, converted outside rusqlite's error type.
type RawRule = (
    String,
    String,
    Option<String>,
    String,
    Option<String>,
    Option<String>,
    Option<f64>,
    Option<f64>,
    Option<i64>,
    Option<i64>,
    String,
    i64,
    i64,
);

fn read_rule(row: &Row<'_>) -> rusqlite::Result<RawRule> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
        row.get(8)?,
        row.get(9)?,
        row.get(10)?,
        row.get(11)?,
        row.get(12)?,
    ))
}

fn into_rule(raw: RawRule) -> Result<AlertRule, StoreError> {
    RuleRecord {
        id: uuid(&raw.0, "alert rule id")?,
        owner: raw.1,
        device: raw.2.as_deref().map(|d| uuid(d, "device id")).transpose()?,
        kind: raw.3,
        measure: raw.4,
        direction: raw.5,
        threshold: raw.6,
        clear: raw.7,
        window_minutes: raw.8,
        silence_minutes: raw.9,
        webhook_url: raw.10,
        created_at: from_micros(raw.11)?,
        updated_at: from_micros(raw.12)?,
    }
    .into_rule()
}

fn select_rules(
    connection: &rusqlite::Connection,
    filter: &str,
    values: impl rusqlite::Params,
) -> Result<Vec<AlertRule>, StoreError> {
    let mut statement = connection.prepare_cached(&format!(
        "SELECT {RULE_COLUMNS} FROM alert_rules {filter} ORDER BY created_at, id"
    ))?;
    let rows = statement.query_map(values, read_rule)?;
    rows.map(|row| into_rule(row?)).collect()
}

#[async_trait]
impl AlertStore for SqliteAlerts {
    async fn create(
        &self,
        rule: &AlertRule,
        secret: &WebhookSecret,
        limit: usize,
    ) -> Result<Created, StoreError> {
        let rule = rule.clone();
        let secret = secret.expose().to_owned();
        self.db
            .write(move |connection| {
                let transaction = connection.transaction()?;
                let count: i64 = transaction
                    .prepare_cached("SELECT count(*) FROM alert_rules WHERE owner = ?1")?
                    .query_row([rule.owner.as_str()], |row| row.get(0))?;
                if usize::try_from(count).unwrap_or(usize::MAX) >= limit {
                    return Ok(Created::LimitReached);
                }
                let (kind, measure, direction, threshold, clear, window, silence) =
                    condition_columns(&rule.condition);
                transaction
                    .prepare_cached(&format!(
                        "INSERT INTO alert_rules ({RULE_COLUMNS}, secret) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
                    ))?
                    .execute(params![
                        rule.id.to_string(),
                        rule.owner.as_str(),
                        rule.device.map(|d| d.to_string()),
                        kind,
                        measure,
                        direction,
                        threshold,
                        clear,
                        window,
                        silence,
                        rule.webhook_url.as_str(),
                        to_micros(rule.created_at),
                        to_micros(rule.updated_at),
                        secret,
                    ])?;
                transaction.commit()?;
                Ok(Created::Stored)
            })
            .await
    }

    async fn list(&self, owner: &OwnerId) -> Result<Vec<AlertRule>, StoreError> {
        let owner = owner.as_str().to_owned();
        self.db
            .read(move |connection| select_rules(connection, "WHERE owner = ?1", [owner]))
            .await
    }

    async fn get(&self, owner: &OwnerId, id: AlertId) -> Result<Option<AlertRule>, StoreError> {
        let owner = owner.as_str().to_owned();
        self.db
            .read(move |connection| {
                let rules = select_rules(
                    connection,
                    "WHERE id = ?1 AND owner = ?2",
                    [id.to_string(), owner],
                )?;
                Ok(rules.into_iter().next())
            })
            .await
    }

    async fn update(&self, rule: &AlertRule, reset: bool) -> Result<bool, StoreError> {
        let rule = rule.clone();
        self.db
            .write(move |connection| {
                let transaction = connection.transaction()?;
                let (kind, measure, direction, threshold, clear, window, silence) =
                    condition_columns(&rule.condition);
                let changed = transaction
                    .prepare_cached(
                        "UPDATE alert_rules SET device_id = ?3, kind = ?4, measure = ?5, \
                         direction = ?6, threshold = ?7, clear = ?8, window_minutes = ?9, \
                         silence_minutes = ?10, webhook_url = ?11, updated_at = ?12 \
                         WHERE id = ?1 AND owner = ?2",
                    )?
                    .execute(params![
                        rule.id.to_string(),
                        rule.owner.as_str(),
                        rule.device.map(|d| d.to_string()),
                        kind,
                        measure,
                        direction,
                        threshold,
                        clear,
                        window,
                        silence,
                        rule.webhook_url.as_str(),
                        to_micros(rule.updated_at),
                    ])?;
                if changed > 0 && reset {
                    transaction
                        .prepare_cached("DELETE FROM alert_states WHERE rule_id = ?1")?
                        .execute([rule.id.to_string()])?;
                }
                transaction.commit()?;
                Ok(changed > 0)
            })
            .await
    }

    async fn delete(&self, owner: &OwnerId, id: AlertId) -> Result<bool, StoreError> {
        let owner = owner.as_str().to_owned();
        self.db
            .write(move |connection| {
                // States and events leave with the rule (ON DELETE CASCADE).
                let deleted = connection
                    .prepare_cached("DELETE FROM alert_rules WHERE id = ?1 AND owner = ?2")?
                    .execute(params![id.to_string(), owner])?;
                Ok(deleted > 0)
            })
            .await
    }

    async fn rotate_secret(
        &self,
        owner: &OwnerId,
        id: AlertId,
        secret: &WebhookSecret,
        now: DateTime<Utc>,
    ) -> Result<Option<AlertRule>, StoreError> {
        let owner = owner.as_str().to_owned();
        let secret = secret.expose().to_owned();
        self.db
            .write(move |connection| {
                let transaction = connection.transaction()?;
                transaction
                    .prepare_cached(
                        "UPDATE alert_rules SET secret = ?3, updated_at = ?4 \
                         WHERE id = ?1 AND owner = ?2",
                    )?
                    .execute(params![id.to_string(), owner, secret, to_micros(now)])?;
                let rule = select_rules(
                    &transaction,
                    "WHERE id = ?1 AND owner = ?2",
                    [id.to_string(), owner],
                )?;
                transaction.commit()?;
                Ok(rule.into_iter().next())
            })
            .await
    }

    async fn states(&self, id: AlertId) -> Result<Vec<DeviceState>, StoreError> {
        self.db
            .read(move |connection| {
                let mut statement = connection.prepare_cached(
                    "SELECT device_id, state, since, value FROM alert_states \
                     WHERE rule_id = ?1 ORDER BY device_id",
                )?;
                let rows = statement.query_map([id.to_string()], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, i64>(2)?,
                        row.get::<_, Option<f64>>(3)?,
                    ))
                })?;
                rows.map(|row| {
                    let (device, state, since, value) = row?;
                    Ok(DeviceState {
                        device: DeviceUuid::from_uuid(uuid(&device, "device id")?),
                        state: StateKind::from_name(&state)
                            .ok_or_else(|| StoreError::Corrupt(format!("alert state {state:?}")))?,
                        since: from_micros(since)?,
                        value,
                    })
                })
                .collect()
            })
            .await
    }

    async fn deliveries(&self, id: AlertId, limit: usize) -> Result<Vec<Delivery>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.db
            .read(move |connection| {
                let mut statement = connection.prepare_cached(
                    "SELECT id, type, device_id, status, attempts, last_status, last_error, \
                     created_at, delivered_at, next_attempt_at \
                     FROM alert_events WHERE rule_id = ?1 ORDER BY seq DESC LIMIT ?2",
                )?;
                let rows = statement.query_map(params![id.to_string(), limit], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, Option<String>>(2)?,
                        row.get::<_, String>(3)?,
                        row.get::<_, i64>(4)?,
                        row.get::<_, Option<i64>>(5)?,
                        row.get::<_, Option<String>>(6)?,
                        row.get::<_, i64>(7)?,
                        row.get::<_, Option<i64>>(8)?,
                        row.get::<_, i64>(9)?,
                    ))
                })?;
                rows.map(|row| {
                    let row = row?;
                    let status = DeliveryStatus::from_name(&row.3).ok_or_else(|| {
                        StoreError::Corrupt(format!("delivery status {:?}", row.3))
                    })?;
                    Ok(Delivery {
                        event: uuid(&row.0, "event id")?,
                        kind: EventType::from_name(&row.1).ok_or_else(|| {
                            StoreError::Corrupt(format!("event type {:?}", row.1))
                        })?,
                        device: row
                            .2
                            .as_deref()
                            .map(|d| uuid(d, "device id").map(DeviceUuid::from_uuid))
                            .transpose()?,
                        status,
                        attempts: u32::try_from(row.4).unwrap_or(u32::MAX),
                        last_status: row.5.and_then(|s| u16::try_from(s).ok()),
                        last_error: row.6,
                        created_at: from_micros(row.7)?,
                        delivered_at: row.8.map(from_micros).transpose()?,
                        next_attempt_at: match status {
                            DeliveryStatus::Pending => Some(from_micros(row.9)?),
                            _ => None,
                        },
                    })
                })
                .collect()
            })
            .await
    }

    async fn enqueue(&self, event: &AlertEvent, now: DateTime<Utc>) -> Result<(), StoreError> {
        let event = event.clone();
        self.db
            .write(move |connection| insert_event(connection, &event, now))
            .await
    }

    async fn rules(&self) -> Result<Vec<AlertRule>, StoreError> {
        self.db
            .read(move |connection| select_rules(connection, "", []))
            .await
    }

    async fn observe(
        &self,
        observations: &[Observation],
        now: DateTime<Utc>,
    ) -> Result<Vec<Option<DeviceState>>, StoreError> {
        let observations = observations.to_vec();
        self.db
            .write(move |connection| {
                let transaction = connection.transaction()?;
                let states = observations
                    .iter()
                    .map(|observation| observe_one(&transaction, observation, now))
                    .collect::<Result<Vec<_>, _>>()?;
                transaction.commit()?;
                Ok(states)
            })
            .await
    }

    async fn claim(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        max: usize,
    ) -> Result<Vec<Outgoing>, StoreError> {
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        self.db
            .write(move |connection| {
                let transaction = connection.transaction()?;
                let claimed = {
                    let mut statement = transaction.prepare_cached(
                        "SELECT e.seq, e.id, e.rule_id, e.body, e.created_at, e.attempts, \
                         r.webhook_url, r.secret \
                         FROM alert_events e JOIN alert_rules r ON r.id = e.rule_id \
                         WHERE e.status = 'pending' AND e.next_attempt_at <= ?1 \
                         AND (e.lease_until IS NULL OR e.lease_until <= ?1) \
                         AND NOT EXISTS (SELECT 1 FROM alert_events p \
                             WHERE p.rule_id = e.rule_id AND p.device_id IS e.device_id \
                             AND p.status = 'pending' AND p.seq < e.seq) \
                         ORDER BY e.seq LIMIT ?2",
                    )?;
                    let rows = statement.query_map(params![to_micros(now), max], |row| {
                        Ok((
                            row.get::<_, i64>(0)?,
                            row.get::<_, String>(1)?,
                            row.get::<_, String>(2)?,
                            row.get::<_, String>(3)?,
                            row.get::<_, i64>(4)?,
                            row.get::<_, i64>(5)?,
                            row.get::<_, String>(6)?,
                            row.get::<_, String>(7)?,
                        ))
                    })?;
                    rows.collect::<Result<Vec<_>, _>>()?
                };
                let mut outgoing = Vec::with_capacity(claimed.len());
                for (seq, id, rule, body, created_at, attempts, url, secret) in claimed {
                    transaction
                        .prepare_cached("UPDATE alert_events SET lease_until = ?2 WHERE seq = ?1")?
                        .execute(params![seq, to_micros(lease_until)])?;
                    outgoing.push(Outgoing {
                        event: uuid(&id, "event id")?,
                        rule: AlertId::from_uuid(uuid(&rule, "alert rule id")?),
                        url: WebhookUrl::from_stored(url)
                            .ok_or_else(|| StoreError::Corrupt(format!("webhook_url of {rule}")))?,
                        secret: WebhookSecret::from_stored(secret),
                        body,
                        created_at: from_micros(created_at)?,
                        attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
                    });
                }
                transaction.commit()?;
                Ok(outgoing)
            })
            .await
    }

    async fn settle(
        &self,
        event: Uuid,
        attempt: &Attempt,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let attempt = attempt.clone();
        self.db
            .write(move |connection| {
                let id = event.hyphenated().to_string();
                match attempt {
                    Attempt::Delivered(status) => connection
                        .prepare_cached(
                            "UPDATE alert_events SET status = 'delivered', \
                             attempts = attempts + 1, last_status = ?2, last_error = NULL, \
                             delivered_at = ?3, lease_until = NULL WHERE id = ?1",
                        )?
                        .execute(params![id, status, to_micros(now)])?,
                    Attempt::Failed {
                        status,
                        error,
                        retry_at,
                    } => connection
                        .prepare_cached(
                            "UPDATE alert_events SET status = ?2, attempts = attempts + 1, \
                             last_status = ?3, last_error = ?4, next_attempt_at = ?5, \
                             lease_until = NULL WHERE id = ?1",
                        )?
                        .execute(params![
                            id,
                            if retry_at.is_some() {
                                DeliveryStatus::Pending
                            } else {
                                DeliveryStatus::Failed
                            }
                            .as_str(),
                            status,
                            error,
                            to_micros(retry_at.unwrap_or(now)),
                        ])?,
                };
                Ok(())
            })
            .await
    }
}

/// Puts `event` in the outbox, due at `now`.
fn insert_event(
    connection: &rusqlite::Connection,
    event: &AlertEvent,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let body = serde_json::to_string(event)
        .map_err(|error| StoreError::Corrupt(format!("an event that does not render: {error}")))?;
    connection
        .prepare_cached(
            "INSERT INTO alert_events (id, rule_id, device_id, type, body, created_at, status, \
             attempts, next_attempt_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', 0, ?6)",
        )?
        .execute(params![
            event.id.hyphenated().to_string(),
            event.rule_id.hyphenated().to_string(),
            event.device_id.map(|d| d.hyphenated().to_string()),
            event.kind.as_str(),
            body,
            to_micros(now),
        ])?;
    Ok(())
}

/// One observation of [`AlertStore::observe`], in its transaction.
fn observe_one(
    transaction: &rusqlite::Transaction<'_>,
    observation: &Observation,
    now: DateTime<Utc>,
) -> Result<Option<DeviceState>, StoreError> {
    let (rule, device, value) = (&observation.rule, observation.device, observation.value);
    let rule_id = rule.id.to_string();
    let device_id = device.to_string();
    let alive: bool = transaction
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM alert_rules WHERE id = ?1) \
             AND EXISTS (SELECT 1 FROM devices WHERE id = ?2)",
        )?
        .query_row([&rule_id, &device_id], |row| row.get(0))?;
    if !alive {
        return Ok(None);
    }
    let stored = transaction
        .prepare_cached(
            "SELECT state, since, value FROM alert_states \
             WHERE rule_id = ?1 AND device_id = ?2",
        )?
        .query_row([&rule_id, &device_id], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, Option<f64>>(2)?,
            ))
        })
        .optional()?;
    let (current, since) = match stored {
        Some((state, since, stored_value)) => {
            let current = StateKind::from_name(&state)
                .ok_or_else(|| StoreError::Corrupt(format!("alert state {state:?}")))?;
            let since = from_micros(since)?;
            // An observation older than the last move is stale: it is not applied.
            if now < since {
                return Ok(Some(DeviceState {
                    device,
                    state: current,
                    since,
                    value: stored_value,
                }));
            }
            (current, since)
        }
        None => (StateKind::Ok, now),
    };
    let next = rule.condition.next(current, value);
    let since = if next == current {
        since
    } else {
        insert_event(
            transaction,
            &AlertEvent::transition(rule, device, next, value, now),
            now,
        )?;
        now
    };
    transaction
        .prepare_cached(
            "INSERT INTO alert_states (rule_id, device_id, state, since, value) \
             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (rule_id, device_id) \
             DO UPDATE SET state = excluded.state, since = excluded.since, \
             value = excluded.value",
        )?
        .execute(params![
            rule_id,
            device_id,
            next.as_str(),
            to_micros(since),
            value
        ])?;
    Ok(Some(DeviceState {
        device,
        state: next,
        since,
        value: Some(value),
    }))
}
