-- Alert rules, their per-device states and their events' deliveries (issue 38), shared by every
-- replica. Idempotent, like every script here. A device's rows leave with the device.
CREATE TABLE IF NOT EXISTS alert_rules (
    id              uuid             PRIMARY KEY,
    owner           text             NOT NULL,
    device_id       uuid             REFERENCES devices (id) ON DELETE CASCADE,  -- NULL: every device
    kind            text             NOT NULL,                   -- threshold | silence
    measure         text,
    direction       text,                                        -- above | below
    threshold       double precision,
    clear           double precision,
    window_minutes  integer,
    silence_minutes integer,
    webhook_url     text             NOT NULL,
    secret          text             NOT NULL,                   -- the HMAC key; shown at creation and rotation only
    created_at      timestamptz      NOT NULL,
    updated_at      timestamptz      NOT NULL
);

CREATE INDEX IF NOT EXISTS alert_rules_by_owner ON alert_rules (owner, created_at, id);

-- A device's state under a rule: changed only together with the event that tells it, under the
-- row's lock, so replicas evaluating at once record one transition, not one each.
CREATE TABLE IF NOT EXISTS alert_states (
    rule_id   uuid             NOT NULL REFERENCES alert_rules (id) ON DELETE CASCADE,
    device_id uuid             NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
    state     text             NOT NULL,                         -- ok | firing
    since     timestamptz      NOT NULL,
    value     double precision,
    PRIMARY KEY (rule_id, device_id)
);

-- The outbox: every event, its body as sent, and its delivery; `seq` orders a (rule, device)
-- pair's events, and a replica claims one by a lease (a conditional UPDATE).
CREATE TABLE IF NOT EXISTS alert_events (
    seq             bigserial        PRIMARY KEY,
    id              uuid             NOT NULL UNIQUE,
    rule_id         uuid             NOT NULL REFERENCES alert_rules (id) ON DELETE CASCADE,
    device_id       uuid             REFERENCES devices (id) ON DELETE CASCADE,
    type            text             NOT NULL,
    body            text             NOT NULL,
    created_at      timestamptz      NOT NULL,
    status          text             NOT NULL,                   -- pending | delivered | failed
    attempts        integer          NOT NULL,
    next_attempt_at timestamptz      NOT NULL,
    lease_until     timestamptz,
    last_status     integer,
    last_error      text,
    delivered_at    timestamptz
);

CREATE INDEX IF NOT EXISTS alert_events_pending ON alert_events (next_attempt_at) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS alert_events_by_rule ON alert_events (rule_id, seq);
