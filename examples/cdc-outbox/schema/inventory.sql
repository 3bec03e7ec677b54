-- The inventory consumer's tables: the inbox (one row per applied event)
-- and the effect, written in one transaction.
CREATE TABLE inbox (
  event_id    uuid PRIMARY KEY,
  event_type  text NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE stock_reservations (
  reservation_id bigserial PRIMARY KEY,
  event_id   uuid NOT NULL,
  order_id   text NOT NULL,
  sequence   integer NOT NULL,
  event_type text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
