-- The order service's database: orders and their outbox, written in one
-- transaction. The outbox is the article's outbox_messages, renamed.
CREATE TABLE IF NOT EXISTS orders (
  order_id     varchar(64) PRIMARY KEY,
  customer_id  varchar(64) NOT NULL,
  amount       numeric(12, 2) NOT NULL CHECK (amount >= 0),
  currency     char(3) NOT NULL,
  items        jsonb NOT NULL,
  status       varchar(16) NOT NULL CHECK (status IN ('Created', 'Paid', 'Cancelled')),
  -- the sequence of the aggregate's last event: 1 after order.created
  version      integer NOT NULL CHECK (version >= 1),
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS outbox (
  event_id        varchar(64) PRIMARY KEY,
  aggregate_id    varchar(64) NOT NULL,
  sequence        bigint NOT NULL,
  event_type      varchar(128) NOT NULL,
  payload         jsonb NOT NULL,
  occurred_at     timestamptz NOT NULL,
  status          varchar(16) NOT NULL DEFAULT 'Pending',
  attempt_count   integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_error      text NULL,
  locked_by       varchar(128) NULL,
  locked_until    timestamptz NULL,
  published_at    timestamptz NULL,
  UNIQUE (aggregate_id, sequence),
  CHECK (status IN ('Pending', 'Processing', 'Published', 'Failed')),
  CHECK ((status = 'Published') = (published_at IS NOT NULL))
);

CREATE INDEX IF NOT EXISTS outbox_dispatch
  ON outbox (occurred_at, event_id)
  WHERE status IN ('Pending', 'Processing');
