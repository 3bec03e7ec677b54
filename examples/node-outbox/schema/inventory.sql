-- The inventory service's database: the inbox and the effect it guards.
CREATE TABLE IF NOT EXISTS inbox (
  consumer    varchar(128) NOT NULL,
  event_id    varchar(64) NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer, event_id)
);

-- One row per event applied: a reservation for order.created, its
-- confirmation for order.paid, its release for order.cancelled. On purpose
-- there is NO unique constraint on event_id: the inbox is the only guard,
-- so a broken guard shows as a second row.
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
