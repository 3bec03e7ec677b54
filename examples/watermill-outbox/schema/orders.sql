-- The order service's table.
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

-- watermill-sql's tables for the forwarder topic orders_outbox, exactly as
-- its DefaultPostgreSQLSchema and DefaultPostgreSQLOffsetsAdapter create
-- them (v4.1.2; the relay's subscriber would create them the same way with
-- InitializeSchema). Rows of the messages table are never updated: the
-- relay's position is the consumer group's row of the offsets table.
CREATE TABLE "watermill_orders_outbox" (
  "offset" BIGSERIAL,
  "uuid" VARCHAR(36) NOT NULL,
  "created_at" TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "payload" JSON DEFAULT NULL,
  "metadata" JSON DEFAULT NULL,
  "transaction_id" xid8 NOT NULL,
  PRIMARY KEY ("transaction_id", "offset")
);
CREATE TABLE "watermill_offsets_orders_outbox" (
  consumer_group VARCHAR(255) NOT NULL,
  offset_acked BIGINT,
  last_processed_transaction_id xid8 NOT NULL,
  PRIMARY KEY(consumer_group)
);

-- Added for faultline's observer only (the library neither writes nor
-- reads it): the row's "uuid" is the forwarder envelope's own UUID, the
-- event's Watermill UUID is inside the envelope.
ALTER TABLE "watermill_orders_outbox"
  ADD COLUMN event_id text GENERATED ALWAYS AS (payload ->> 'uuid') STORED;
