package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/system/topology"
)

// The naive relay's SQL: the article's claim, one row at a time.
const (
	naiveClaimSQL = `
WITH candidate AS (
  SELECT event_id FROM outbox_messages
  WHERE status = 'Pending' AND next_attempt_at <= CURRENT_TIMESTAMP
  ORDER BY occurred_at, event_id
  FOR UPDATE SKIP LOCKED
  LIMIT 1
)
UPDATE outbox_messages AS outbox
SET status = 'Processing', locked_by = $1, locked_until = CURRENT_TIMESTAMP + INTERVAL '30 seconds'
FROM candidate
WHERE outbox.event_id = candidate.event_id
RETURNING outbox.event_id, outbox.event_type, outbox.payload`
	naiveMarkSQL = `
UPDATE outbox_messages
SET status = 'Published', published_at = CURRENT_TIMESTAMP, locked_by = NULL, locked_until = NULL
WHERE event_id = $1 AND status = 'Processing' AND locked_by = $2`
)

// naiveRelay is the baseline the relay is compared with: claim one row,
// publish it (mandatory), wait for its confirm, mark it Published, repeat,
// until no row is due. It keeps every guard and gives up all batching and
// pipelining. It returns how many rows it published and the time it took.
func naiveRelay(ctx context.Context, db *pgxpool.Pool, url string) (int, time.Duration, error) {
	conn, ch, err := confirmChannel(url, "naive relay")
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	returns := ch.NotifyReturn(make(chan amqp.Return, 1))
	const claimID = "naive:1"
	n := 0
	start := time.Now()
	for {
		var id, typ string
		var payload []byte
		err := db.QueryRow(ctx, naiveClaimSQL, claimID).Scan(&id, &typ, &payload)
		if errors.Is(err, pgx.ErrNoRows) {
			return n, time.Since(start), nil
		}
		if err != nil {
			return n, 0, fmt.Errorf("naive relay: claim: %w", err)
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, topology.Exchange, typ, true, false, amqp.Publishing{
			MessageId: id, Type: typ, ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: payload,
		})
		if err != nil {
			return n, 0, fmt.Errorf("naive relay: publish: %w", err)
		}
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			return n, 0, fmt.Errorf("naive relay: confirm: %w", err)
		}
		if !ok {
			return n, 0, fmt.Errorf("naive relay: event %s nacked", id)
		}
		select {
		case r := <-returns:
			return n, 0, fmt.Errorf("naive relay: event %s returned: %s", r.MessageId, r.ReplyText)
		default:
		}
		if _, err := db.Exec(ctx, naiveMarkSQL, id, claimID); err != nil {
			return n, 0, fmt.Errorf("naive relay: mark: %w", err)
		}
		n++
	}
}
