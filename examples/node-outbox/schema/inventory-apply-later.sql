-- The inventory service's database when its consumer applies later
-- (inventory.js --apply=later): each delivery is stored in the inbox, with
-- the event, in one transaction and acked; a poller applies the rows not
-- applied yet (applied_at NULL), each in one transaction with its effect,
-- and retries a failed one at next_attempt_at.
CREATE TABLE IF NOT EXISTS inbox (
  consumer        varchar(128) NOT NULL,
  event_id        varchar(64) NOT NULL,
  event           jsonb NOT NULL,
  received_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
  applied_at      timestamptz NULL,
  attempts        integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  last_error      text NULL,
  PRIMARY KEY (consumer, event_id)
);

CREATE INDEX IF NOT EXISTS inbox_unapplied ON inbox (next_attempt_at) WHERE applied_at IS NULL;

-- As in inventory.sql: one row per event applied, no unique constraint on
-- event_id (the inbox is the only guard).
CREATE TABLE IF NOT EXISTS stock_reservations (
  reservation_id bigserial PRIMARY KEY,
  event_id       varchar(64) NOT NULL,
  order_id       varchar(64) NOT NULL,
  sequence       bigint NOT NULL,
  action         varchar(16) NOT NULL CHECK (action IN ('reserve', 'confirm', 'release')),
  items          jsonb NULL,
  applied_at     timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS stock_reservations_order ON stock_reservations (order_id, sequence);
