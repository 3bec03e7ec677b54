-- Database "inventory": the consumer's inbox and its effect.
-- inventory_reservations has NO unique constraint on event_id: the inbox is
-- the only guard, so a broken guard shows up as a duplicate row.
CREATE TABLE IF NOT EXISTS inbox_messages (
  consumer_name varchar(128) NOT NULL,
  event_id      varchar(64) NOT NULL,
  received_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer_name, event_id)
);

CREATE TABLE IF NOT EXISTS inventory_reservations (
  reservation_id bigserial PRIMARY KEY,
  event_id       varchar(64) NOT NULL,
  event_type     varchar(128) NOT NULL,
  order_id       varchar(64) NOT NULL,
  aggregate_id   varchar(64) NOT NULL,
  sequence       bigint NOT NULL,
  amount         numeric(18, 2) NOT NULL,
  currency       char(3) NOT NULL,
  reserved_at    timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS ix_reservations_event ON inventory_reservations (event_id);

-- Per-aggregate ordering: the last sequence applied for each aggregate, and
-- events that arrived ahead of their predecessor, parked until it is applied.
CREATE TABLE IF NOT EXISTS aggregate_versions (
  consumer_name varchar(128) NOT NULL,
  aggregate_id  varchar(64) NOT NULL,
  last_sequence bigint NOT NULL,
  PRIMARY KEY (consumer_name, aggregate_id)
);

CREATE TABLE IF NOT EXISTS parked_events (
  consumer_name varchar(128) NOT NULL,
  aggregate_id  varchar(64) NOT NULL,
  sequence      bigint NOT NULL,
  event_id      varchar(64) NOT NULL,
  payload       jsonb NOT NULL,
  parked_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer_name, aggregate_id, sequence)
);
