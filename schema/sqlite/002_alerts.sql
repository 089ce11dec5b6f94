-- Alert rules, their per-device states and their events' deliveries (issue 38). Times are
-- microseconds since the Unix epoch; a device's rows leave with the device (foreign keys are on,
-- src/store/sqlite/mod.rs).

CREATE TABLE alert_rules (
    id              TEXT    PRIMARY KEY,                 -- UUID, hyphenated lower case
    owner           TEXT    NOT NULL,
    device_id       TEXT    REFERENCES devices (id) ON DELETE CASCADE,  -- NULL: every device
    kind            TEXT    NOT NULL,                    -- threshold | silence
    measure         TEXT,                                -- threshold
    direction       TEXT,                                -- threshold: above | below
    threshold       REAL,                                -- threshold
    clear           REAL,                                -- threshold
    window_minutes  INTEGER,                             -- threshold
    silence_minutes INTEGER,                             -- silence
    webhook_url     TEXT    NOT NULL,
    secret          TEXT    NOT NULL,                    -- the HMAC key; shown at creation and rotation only
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT;

CREATE INDEX alert_rules_by_owner ON alert_rules (owner, created_at, id);

-- A device's state under a rule: changed only together with the event that tells it.
CREATE TABLE alert_states (
    rule_id   TEXT    NOT NULL REFERENCES alert_rules (id) ON DELETE CASCADE,
    device_id TEXT    NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
    state     TEXT    NOT NULL,                          -- ok | firing
    since     INTEGER NOT NULL,
    value     REAL,
    PRIMARY KEY (rule_id, device_id)
) STRICT;

-- The outbox: every event, its body as sent, and its delivery. `seq` orders the events of a
-- (rule, device) pair; the oldest pending one of a pair is the only one sent.
CREATE TABLE alert_events (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT    NOT NULL UNIQUE,             -- the event's id, in its body
    rule_id         TEXT    NOT NULL REFERENCES alert_rules (id) ON DELETE CASCADE,
    device_id       TEXT    REFERENCES devices (id) ON DELETE CASCADE,  -- NULL: a test of an every-device rule
    type            TEXT    NOT NULL,
    body            TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    status          TEXT    NOT NULL,                    -- pending | delivered | failed
    attempts        INTEGER NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    lease_until     INTEGER,                             -- a deliverer holds it until then
    last_status     INTEGER,
    last_error      TEXT,
    delivered_at    INTEGER
) STRICT;

CREATE INDEX alert_events_pending ON alert_events (status, next_attempt_at) WHERE status = 'pending';
CREATE INDEX alert_events_by_rule ON alert_events (rule_id, seq);
