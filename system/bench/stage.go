package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/system/message"
	"github.com/faultline-dev/faultline/system/schema"
	"github.com/faultline-dev/faultline/system/topology"
)

// stage is one repetition's own databases and vhost, with the pipeline's
// schemas and topology in place, so no repetition sees another's rows or
// messages.
type stage struct {
	in           infra.Infra
	id           string
	orders       *pgxpool.Pool
	inventory    *pgxpool.Pool
	ordersURL    string
	inventoryURL string
	amqpURL      string
}

// newStage creates the databases <id>_orders and <id>_inventory and the
// vhost <id>, and applies the schemas and the consumer's topology.
func newStage(ctx context.Context, in infra.Infra, id string) (*stage, error) {
	s := &stage{in: in, id: id}
	for _, db := range []string{id + "_orders", id + "_inventory"} {
		if err := in.CreateDatabase(ctx, db); err != nil {
			s.close(ctx)
			return nil, fmt.Errorf("stage %s: %w", id, err)
		}
	}
	if err := in.CreateVHost(ctx, id); err != nil {
		s.close(ctx)
		return nil, fmt.Errorf("stage %s: %w", id, err)
	}
	s.ordersURL, s.inventoryURL, s.amqpURL = in.PostgresURL(id+"_orders"), in.PostgresURL(id+"_inventory"), in.AMQPURL(id)
	var err error
	if s.orders, err = pgxpool.New(ctx, s.ordersURL); err != nil {
		s.close(ctx)
		return nil, fmt.Errorf("stage %s: orders pool: %w", id, err)
	}
	if s.inventory, err = pgxpool.New(ctx, s.inventoryURL); err != nil {
		s.close(ctx)
		return nil, fmt.Errorf("stage %s: inventory pool: %w", id, err)
	}
	if err := schema.ApplyOrders(ctx, s.orders); err != nil {
		s.close(ctx)
		return nil, fmt.Errorf("stage %s: %w", id, err)
	}
	if err := schema.ApplyInventory(ctx, s.inventory); err != nil {
		s.close(ctx)
		return nil, fmt.Errorf("stage %s: %w", id, err)
	}
	if err := s.declare(); err != nil {
		s.close(ctx)
		return nil, fmt.Errorf("stage %s: %w", id, err)
	}
	return s, nil
}

// declare puts the consumer's topology (exchange, quorum queue, bindings)
// in the vhost, so publishes before the consumer starts are queued.
func (s *stage) declare() error {
	conn, err := amqp.Dial(s.amqpURL)
	if err != nil {
		return fmt.Errorf("declare topology: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("declare topology: %w", err)
	}
	return topology.DeclareConsumer(ch, topology.QueueOptions{})
}

// close drops everything the stage made; it runs after a cancelled run too.
func (s *stage) close(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if s.orders != nil {
		s.orders.Close()
	}
	if s.inventory != nil {
		s.inventory.Close()
	}
	_ = s.in.DeleteVHost(ctx, s.id)
	_ = s.in.DropDatabase(ctx, s.id+"_orders")
	_ = s.in.DropDatabase(ctx, s.id+"_inventory")
}

// event is one outbox row's worth: what the order service would commit.
type event struct {
	ID, AggregateID, Type string
	Payload               []byte
	OccurredAt            time.Time
}

// makeEvents builds n order.created events shaped like the order service's.
func makeEvents(n int) ([]event, error) {
	entropy := ulid.Monotonic(rand.Reader, 0)
	now := time.Now().UTC()
	out := make([]event, n)
	for i := range out {
		id := ulid.MustNew(ulid.Timestamp(now), entropy).String()
		orderID := ulid.MustNew(ulid.Timestamp(now), entropy).String()
		at := now.Add(time.Duration(i) * time.Microsecond)
		ev := message.Event{
			EventID: id, EventType: message.OrderCreated, OccurredAt: at.Format(time.RFC3339Nano),
			OrderID: orderID, CustomerID: fmt.Sprintf("customer-%d", i%97), Amount: json.Number(fmt.Sprintf("%d.%02d", 10+i%90, i%100)),
			Currency: "EUR", Items: json.RawMessage(`[{"sku":"SKU-1","qty":2}]`), AggregateID: orderID, Sequence: 1,
		}
		payload, err := json.Marshal(ev)
		if err != nil {
			return nil, fmt.Errorf("encode event: %w", err)
		}
		out[i] = event{ID: id, AggregateID: orderID, Type: ev.EventType, Payload: payload, OccurredAt: at}
	}
	return out, nil
}

// seedOutbox commits events as Pending outbox rows in one transaction and
// returns when the commit is done.
func (s *stage) seedOutbox(ctx context.Context, events []event) error {
	rows := make([][]any, len(events))
	for i, e := range events {
		rows[i] = []any{e.ID, e.AggregateID, int64(1), e.Type, e.Payload, e.OccurredAt}
	}
	_, err := s.orders.CopyFrom(ctx, pgx.Identifier{"outbox_messages"},
		[]string{"event_id", "aggregate_id", "sequence", "event_type", "payload", "occurred_at"}, pgx.CopyFromRows(rows))
	if err != nil {
		return fmt.Errorf("seed outbox: %w", err)
	}
	return nil
}

// waitDone polls done (a query giving one boolean) every 100 ms until it
// is true, up to timeout. The figures never depend on when this notices:
// they come from the processes' own timestamps.
func waitDone(ctx context.Context, db *pgxpool.Pool, what string, timeout time.Duration, done string, args ...any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var lastErr error
	for {
		var ok bool
		err := db.QueryRow(ctx, done, args...).Scan(&ok)
		if err == nil && ok {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("%s: not done after %s (last error: %w)", what, timeout, lastErr)
			}
			return fmt.Errorf("%s: not done after %s", what, timeout)
		case <-t.C:
		}
	}
}
