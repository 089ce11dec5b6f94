//! [`AlertStore`] on PostgreSQL, shared by every replica.
//!
//! Several replicas evaluate the same rules and deliver from the same outbox, so:
//! - a transition is decided under the state row's lock (`SELECT … FOR UPDATE`, the row made
//!   first if missing): a second replica observing the same move finds it made and records no
//!   event of its own — one event per transition, not one per replica;
//! - an event is claimed by a lease (`lease_until`), taken by a conditional `UPDATE` over rows
//!   locked `FOR UPDATE SKIP LOCKED`, and only the oldest pending event of a (rule, device) pair
//!   is claimable: two replicas never send one event at once, nor a pair's events out of order.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use uuid::Uuid;

use super::bounded::BoundedPool;
use crate::domain::alert::{
    AlertEvent, AlertId, AlertRule, Delivery, DeliveryStatus, DeviceState, EventType, StateKind,
    WebhookSecret, WebhookUrl,
};
use crate::domain::{DeviceUuid, OwnerId};
use crate::store::alerts::{
    condition_columns, Attempt, Created, Outgoing, RuleRecord, RULE_COLUMNS,
};
use crate::store::{AlertStore, Observation, StoreError};

/// Alert rules, states and outbox in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PostgresAlerts {
    bounded: BoundedPool,
}

impl PostgresAlerts {
    /// Alerts in the database behind `pool` (schema already applied by [`super::connect`]).
    pub fn new(bounded: BoundedPool) -> Self {
        Self { bounded }
    }
}

fn rule(row: &Row) -> Result<AlertRule, StoreError> {
    RuleRecord {
        id: row.try_get(0)?,
        owner: row.try_get(1)?,
        device: row.try_get(2)?,
        kind: row.try_get(3)?,
        measure: row.try_get(4)?,
        direction: row.try_get(5)?,
        threshold: row.try_get(6)?,
        clear: row.try_get(7)?,
        window_minutes: row.try_get::<_, Option<i32>>(8)?.map(i64::from),
        silence_minutes: row.try_get::<_, Option<i32>>(9)?.map(i64::from),
        webhook_url: row.try_get(10)?,
        created_at: row.try_get(11)?,
        updated_at: row.try_get(12)?,
    }
    .into_rule()
}

async fn select_rules(
    client: &impl GenericClient,
    filter: &str,
    values: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<Vec<AlertRule>, StoreError> {
    let statement = client
        .prepare_cached(&format!(
            "SELECT {RULE_COLUMNS} FROM alert_rules {filter} ORDER BY created_at, id"
        ))
        .await?;
    client
        .query(&statement, values)
        .await?
        .iter()
        .map(rule)
        .collect()
}

/// `i64` columns of the condition as PostgreSQL's `integer`.
fn int(value: Option<i64>) -> Option<i32> {
    value.and_then(|value| i32::try_from(value).ok())
}

#[async_trait]
impl AlertStore for PostgresAlerts {
    async fn create(
        &self,
        rule: &AlertRule,
        secret: &WebhookSecret,
        limit: usize,
    ) -> Result<Created, StoreError> {
        self.bounded
            .run(async |client| {
                let transaction = client.transaction().await?;
                // Serialises creations of one owner across replicas, so the count holds.
                transaction
                    .execute(
                        "SELECT pg_advisory_xact_lock(hashtext('airq_alert_rules:' || $1))",
                        &[&rule.owner.as_str()],
                    )
                    .await?;
                let count: i64 = transaction
                    .query_one(
                        "SELECT count(*) FROM alert_rules WHERE owner = $1",
                        &[&rule.owner.as_str()],
                    )
                    .await?
                    .try_get(0)?;
                if usize::try_from(count).unwrap_or(usize::MAX) >= limit {
                    return Ok(Created::LimitReached);
                }
                let (kind, measure, direction, threshold, clear, window, silence) =
                    condition_columns(&rule.condition);
                let statement = transaction
                    .prepare_cached(&format!(
                        "INSERT INTO alert_rules ({RULE_COLUMNS}, secret) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
                    ))
                    .await?;
                transaction
                    .execute(
                        &statement,
                        &[
                            &rule.id.as_uuid(),
                            &rule.owner.as_str(),
                            &rule.device.map(|d| d.as_uuid()),
                            &kind,
                            &measure,
                            &direction,
                            &threshold,
                            &clear,
                            &int(window),
                            &int(silence),
                            &rule.webhook_url.as_str(),
                            &rule.created_at,
                            &rule.updated_at,
                            &secret.expose(),
                        ],
                    )
                    .await?;
                transaction.commit().await?;
                Ok(Created::Stored)
            })
            .await
    }

    async fn list(&self, owner: &OwnerId) -> Result<Vec<AlertRule>, StoreError> {
        self.bounded
            .run(async |client| {
                select_rules(&*client, "WHERE owner = $1", &[&owner.as_str()]).await
            })
            .await
    }

    async fn get(&self, owner: &OwnerId, id: AlertId) -> Result<Option<AlertRule>, StoreError> {
        self.bounded
            .run(async |client| {
                let rules = select_rules(
                    &*client,
                    "WHERE id = $1 AND owner = $2",
                    &[&id.as_uuid(), &owner.as_str()],
                )
                .await?;
                Ok(rules.into_iter().next())
            })
            .await
    }

    async fn update(&self, rule: &AlertRule, reset: bool) -> Result<bool, StoreError> {
        self.bounded
            .run(async |client| {
                let transaction = client.transaction().await?;
                let (kind, measure, direction, threshold, clear, window, silence) =
                    condition_columns(&rule.condition);
                let changed = transaction
                    .execute(
                        "UPDATE alert_rules SET device_id = $3, kind = $4, measure = $5, \
                         direction = $6, threshold = $7, clear = $8, window_minutes = $9, \
                         silence_minutes = $10, webhook_url = $11, updated_at = $12 \
                         WHERE id = $1 AND owner = $2",
                        &[
                            &rule.id.as_uuid(),
                            &rule.owner.as_str(),
                            &rule.device.map(|d| d.as_uuid()),
                            &kind,
                            &measure,
                            &direction,
                            &threshold,
                            &clear,
                            &int(window),
                            &int(silence),
                            &rule.webhook_url.as_str(),
                            &rule.updated_at,
                        ],
                    )
                    .await?;
                if changed > 0 && reset {
                    transaction
                        .execute(
                            "DELETE FROM alert_states WHERE rule_id = $1",
                            &[&rule.id.as_uuid()],
                        )
                        .await?;
                }
                transaction.commit().await?;
                Ok(changed > 0)
            })
            .await
    }

    async fn delete(&self, owner: &OwnerId, id: AlertId) -> Result<bool, StoreError> {
        self.bounded
            .run(async |client| {
                let deleted = client
                    .execute(
                        "DELETE FROM alert_rules WHERE id = $1 AND owner = $2",
                        &[&id.as_uuid(), &owner.as_str()],
                    )
                    .await?;
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
        self.bounded
            .run(async |client| {
                let statement = client
                    .prepare_cached(&format!(
                        "UPDATE alert_rules SET secret = $3, updated_at = $4 \
                         WHERE id = $1 AND owner = $2 RETURNING {RULE_COLUMNS}"
                    ))
                    .await?;
                client
                    .query_opt(
                        &statement,
                        &[&id.as_uuid(), &owner.as_str(), &secret.expose(), &now],
                    )
                    .await?
                    .as_ref()
                    .map(rule)
                    .transpose()
            })
            .await
    }

    async fn states(&self, id: AlertId) -> Result<Vec<DeviceState>, StoreError> {
        self.bounded
            .run(async |client| {
                let rows = client
                    .query(
                        "SELECT device_id, state, since, value FROM alert_states \
                         WHERE rule_id = $1 ORDER BY device_id",
                        &[&id.as_uuid()],
                    )
                    .await?;
                rows.iter()
                    .map(|row| {
                        let state: String = row.try_get(1)?;
                        Ok(DeviceState {
                            device: DeviceUuid::from_uuid(row.try_get(0)?),
                            state: StateKind::from_name(&state).ok_or_else(|| {
                                StoreError::Corrupt(format!("alert state {state:?}"))
                            })?,
                            since: row.try_get(2)?,
                            value: row.try_get(3)?,
                        })
                    })
                    .collect()
            })
            .await
    }

    async fn deliveries(&self, id: AlertId, limit: usize) -> Result<Vec<Delivery>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.bounded
            .run(async |client| {
                let rows = client
                    .query(
                        "SELECT id, type, device_id, status, attempts, last_status, last_error, \
                         created_at, delivered_at, next_attempt_at \
                         FROM alert_events WHERE rule_id = $1 ORDER BY seq DESC LIMIT $2",
                        &[&id.as_uuid(), &limit],
                    )
                    .await?;
                rows.iter()
                    .map(|row| {
                        let kind: String = row.try_get(1)?;
                        let status: String = row.try_get(3)?;
                        let status = DeliveryStatus::from_name(&status).ok_or_else(|| {
                            StoreError::Corrupt(format!("delivery status {status:?}"))
                        })?;
                        Ok(Delivery {
                            event: row.try_get(0)?,
                            kind: EventType::from_name(&kind).ok_or_else(|| {
                                StoreError::Corrupt(format!("event type {kind:?}"))
                            })?,
                            device: row
                                .try_get::<_, Option<Uuid>>(2)?
                                .map(DeviceUuid::from_uuid),
                            status,
                            attempts: u32::try_from(row.try_get::<_, i32>(4)?).unwrap_or(0),
                            last_status: row
                                .try_get::<_, Option<i32>>(5)?
                                .and_then(|s| u16::try_from(s).ok()),
                            last_error: row.try_get(6)?,
                            created_at: row.try_get(7)?,
                            delivered_at: row.try_get(8)?,
                            next_attempt_at: match status {
                                DeliveryStatus::Pending => Some(row.try_get(9)?),
                                _ => None,
                            },
                        })
                    })
                    .collect()
            })
            .await
    }

    async fn enqueue(&self, event: &AlertEvent, now: DateTime<Utc>) -> Result<(), StoreError> {
        self.bounded
            .run(async |client| insert_event(&*client, event, now).await)
            .await
    }

    async fn rules(&self) -> Result<Vec<AlertRule>, StoreError> {
        self.bounded
            .run(async |client| select_rules(&*client, "", &[]).await)
            .await
    }

    async fn observe(
        &self,
        observations: &[Observation],
        now: DateTime<Utc>,
    ) -> Result<Vec<Option<DeviceState>>, StoreError> {
        // Locked in one order by every replica, so two passes over the same pairs wait for each
        // other instead of deadlocking.
        let mut order: Vec<usize> = (0..observations.len()).collect();
        order.sort_by_key(|&index| {
            let observation = &observations[index];
            (observation.rule.id.as_uuid(), observation.device.as_uuid())
        });
        self.bounded
            .run(async |client| {
                let transaction = client.transaction().await?;
                let mut states = vec![None; observations.len()];
                for index in order {
                    states[index] = observe_one(&transaction, &observations[index], now).await?;
                }
                transaction.commit().await?;
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
        self.bounded
            .run(async |client| {
                let statement = client
                    .prepare_cached(
                        "WITH due AS ( \
                             SELECT e.seq FROM alert_events e \
                             WHERE e.status = 'pending' AND e.next_attempt_at <= $1 \
                             AND (e.lease_until IS NULL OR e.lease_until <= $1) \
                             AND NOT EXISTS (SELECT 1 FROM alert_events p \
                                 WHERE p.rule_id = e.rule_id \
                                 AND p.device_id IS NOT DISTINCT FROM e.device_id \
                                 AND p.status = 'pending' AND p.seq < e.seq) \
                             ORDER BY e.seq LIMIT $3 FOR UPDATE OF e SKIP LOCKED) \
                         UPDATE alert_events e SET lease_until = $2 \
                         FROM due, alert_rules r \
                         WHERE e.seq = due.seq AND r.id = e.rule_id \
                         RETURNING e.id, e.rule_id, e.body, e.created_at, e.attempts, \
                             r.webhook_url, r.secret, e.seq",
                    )
                    .await?;
                let mut rows = client
                    .query(&statement, &[&now, &lease_until, &max])
                    .await?;
                rows.sort_by_key(|row| row.try_get::<_, i64>(7).unwrap_or(i64::MAX));
                rows.iter()
                    .map(|row| {
                        let rule: Uuid = row.try_get(1)?;
                        Ok(Outgoing {
                            event: row.try_get(0)?,
                            rule: AlertId::from_uuid(rule),
                            body: row.try_get(2)?,
                            created_at: row.try_get(3)?,
                            attempts: u32::try_from(row.try_get::<_, i32>(4)?).unwrap_or(0),
                            url: WebhookUrl::from_stored(row.try_get(5)?).ok_or_else(|| {
                                StoreError::Corrupt(format!("webhook_url of {rule}"))
                            })?,
                            secret: WebhookSecret::from_stored(row.try_get(6)?),
                        })
                    })
                    .collect()
            })
            .await
    }

    async fn settle(
        &self,
        event: Uuid,
        attempt: &Attempt,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.bounded
            .run(async |client| {
                match attempt {
                    Attempt::Delivered(status) => {
                        client
                            .execute(
                                "UPDATE alert_events SET status = 'delivered', \
                                 attempts = attempts + 1, last_status = $2, last_error = NULL, \
                                 delivered_at = $3, lease_until = NULL WHERE id = $1",
                                &[&event, &i32::from(*status), &now],
                            )
                            .await?
                    }
                    Attempt::Failed {
                        status,
                        error,
                        retry_at,
                    } => {
                        let next = if retry_at.is_some() {
                            DeliveryStatus::Pending
                        } else {
                            DeliveryStatus::Failed
                        };
                        client
                            .execute(
                                "UPDATE alert_events SET status = $2, attempts = attempts + 1, \
                                 last_status = $3, last_error = $4, next_attempt_at = $5, \
                                 lease_until = NULL WHERE id = $1",
                                &[
                                    &event,
                                    &next.as_str(),
                                    &status.map(i32::from),
                                    error,
                                    &retry_at.unwrap_or(now),
                                ],
                            )
                            .await?
                    }
                };
                Ok(())
            })
            .await
    }
}

/// Puts `event` in the outbox, due at `now`.
async fn insert_event(
    client: &impl GenericClient,
    event: &AlertEvent,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let body = serde_json::to_string(event)
        .map_err(|error| StoreError::Corrupt(format!("an event that does not render: {error}")))?;
    client
        .execute(
            "INSERT INTO alert_events (id, rule_id, device_id, type, body, created_at, status, \
             attempts, next_attempt_at) VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, $6)",
            &[
                &event.id,
                &event.rule_id,
                &event.device_id,
                &event.kind.as_str(),
                &body,
                &now,
            ],
        )
        .await?;
    Ok(())
}

/// One observation of [`AlertStore::observe`], in its transaction.
async fn observe_one(
    transaction: &deadpool_postgres::Transaction<'_>,
    observation: &Observation,
    now: DateTime<Utc>,
) -> Result<Option<DeviceState>, StoreError> {
    let (rule, device, value) = (&observation.rule, observation.device, observation.value);
    let rule_id = rule.id.as_uuid();
    let device_id = device.as_uuid();
    // The row first (a rule or device deleted meanwhile leaves nothing to insert
    // into), then its lock: every replica decides on the state the last one left.
    let made = transaction
        .execute(
            "INSERT INTO alert_states (rule_id, device_id, state, since, value) \
             SELECT $1, $2, 'ok', $3, NULL \
             WHERE EXISTS (SELECT 1 FROM alert_rules WHERE id = $1) \
             AND EXISTS (SELECT 1 FROM devices WHERE id = $2) \
             ON CONFLICT (rule_id, device_id) DO NOTHING",
            &[&rule_id, &device_id, &now],
        )
        .await;
    match made {
        Ok(_) => {}
        // A rule or device deleted between the check and the insert.
        Err(error)
            if error.code() == Some(&tokio_postgres::error::SqlState::FOREIGN_KEY_VIOLATION) =>
        {
            return Ok(None)
        }
        Err(error) => return Err(error.into()),
    }
    let Some(row) = transaction
        .query_opt(
            "SELECT state, since, value FROM alert_states \
             WHERE rule_id = $1 AND device_id = $2 FOR UPDATE",
            &[&rule_id, &device_id],
        )
        .await?
    else {
        return Ok(None);
    };
    let state: String = row.try_get(0)?;
    let current = StateKind::from_name(&state)
        .ok_or_else(|| StoreError::Corrupt(format!("alert state {state:?}")))?;
    let mut since: DateTime<Utc> = row.try_get(1)?;
    // An observation older than the last move (a replica's pass that began before
    // another's move was recorded) is stale: it is not applied.
    if now < since {
        return Ok(Some(DeviceState {
            device,
            state: current,
            since,
            value: row.try_get(2)?,
        }));
    }
    let next = rule.condition.next(current, value);
    if next != current {
        insert_event(
            transaction,
            &AlertEvent::transition(rule, device, next, value, now),
            now,
        )
        .await?;
        since = now;
    }
    transaction
        .execute(
            "UPDATE alert_states SET state = $3, since = $4, value = $5 \
             WHERE rule_id = $1 AND device_id = $2",
            &[&rule_id, &device_id, &next.as_str(), &since, &value],
        )
        .await?;
    Ok(Some(DeviceState {
        device,
        state: next,
        since,
        value: Some(value),
    }))
}
