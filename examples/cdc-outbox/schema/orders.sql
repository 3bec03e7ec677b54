-- The order service's tables: an order and its outbox, written in one
-- transaction. Outbox rows are inserted once and never updated: the relay
-- streams the inserts from the write-ahead log (the publication names this
-- table) and keeps its position in its replication slot, not in a column.
CREATE TABLE orders (
  order_id    text PRIMARY KEY,
  customer_id text NOT NULL,
  amount      numeric(12, 2) NOT NULL,
  currency    text NOT NULL,
  items       jsonb,
  status      text NOT NULL,
  version     integer NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE outbox (
  id           bigserial PRIMARY KEY,
  event_id     uuid NOT NULL UNIQUE,
  aggregate_id text NOT NULL,
  sequence     integer NOT NULL,
  event_type   text NOT NULL,
  payload      jsonb NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now()
);
