package fault

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol/eventlog"
	"faultline/system/topology"
)

// RetentionReplay shows the article's retention boundary on one event that
// already took effect: it replays the event (same eventId) while its inbox
// row exists — the inbox absorbs it — then has the consumer clean its inbox
// as if the retention had passed, and replays it again: the second replay
// takes effect twice. The replayed eventId is in the result.
type RetentionReplay struct {
	Consumer string // the inventory process
	Trigger  Trigger
}

// Describe implements Fault.
func (r RetentionReplay) Describe() result.Fault {
	return result.Fault{Kind: "replay", Target: r.Consumer, Detail: "one event replayed inside the inbox retention, then again after the inbox cleanup, " + r.Trigger.String()}
}

// Inject implements Fault.
func (r RetentionReplay) Inject(ctx context.Context, env *Env) result.Fault {
	start := time.Now()
	fail := func(hit bool, err error, ids ...string) result.Fault {
		res := record(r, start, hit, err)
		res.EventIDs = ids
		return res
	}
	if err := env.Wait(ctx, r.Trigger); err != nil {
		return fail(false, err)
	}
	// The first event the consumer reserved.
	first, err := env.WaitLog(ctx, r.Consumer, func(e eventlog.Entry) bool { return e.Event == eventlog.Reserved })
	if err != nil {
		return fail(false, err)
	}
	id := first.EventID
	var eventType string
	var payload []byte
	if err := env.OrdersDB.QueryRow(ctx, `SELECT event_type, payload FROM outbox_messages WHERE event_id = $1`, id).Scan(&eventType, &payload); err != nil {
		return fail(false, fmt.Errorf("read outbox row %s: %w", id, err), id)
	}
	start = time.Now()
	if err := r.publish(ctx, env, id, eventType, payload); err != nil {
		return fail(false, err, id)
	}
	if _, err := env.WaitLog(ctx, r.Consumer, func(e eventlog.Entry) bool { return e.Event == eventlog.Duplicate && e.EventID == id }); err != nil {
		return fail(true, fmt.Errorf("replay inside the retention was not absorbed: %w", err), id)
	}
	env.Logf("replay of %s absorbed by the inbox", id)
	deleted, err := r.cleanInbox(ctx, env)
	if err != nil {
		return fail(true, err, id)
	}
	env.Logf("inbox cleanup removed %d rows", deleted)
	if err := r.publish(ctx, env, id, eventType, payload); err != nil {
		return fail(true, err, id)
	}
	reserved := 0
	if _, err := env.WaitLog(ctx, r.Consumer, func(e eventlog.Entry) bool {
		if e.Event == eventlog.Reserved && e.EventID == id {
			reserved++
		}
		return reserved >= 2
	}); err != nil {
		return fail(true, fmt.Errorf("replay after the cleanup did not take effect: %w", err), id)
	}
	env.Logf("replay of %s after the retention took effect again", id)
	return fail(true, nil, id)
}

func (r RetentionReplay) publish(ctx context.Context, env *Env, id, eventType string, payload []byte) error {
	conn, ch, err := env.Admin(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := ch.Confirm(false); err != nil {
		return fmt.Errorf("confirm mode: %w", err)
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, topology.Exchange, eventType, true, false, amqp.Publishing{
		MessageId: id, Type: eventType, ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: payload,
	})
	if err != nil {
		return fmt.Errorf("replay %s: %w", id, err)
	}
	if ok, err := dc.WaitContext(ctx); err != nil || !ok {
		return fmt.Errorf("replay %s not confirmed: %v", id, err)
	}
	return nil
}

// cleanInbox asks the consumer to run its inbox cleanup as if every row
// were past the retention.
func (r RetentionReplay) cleanInbox(ctx context.Context, env *Env) (int, error) {
	p, err := env.Process(r.Consumer)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.ControlAddr()+"/inbox/cleanup?older-than=0s", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("inbox cleanup: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("inbox cleanup: %s: %s", resp.Status, body)
	}
	var out struct {
		Deleted int `json:"deleted"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return 0, fmt.Errorf("inbox cleanup answer %q: %w", body, err)
	}
	return out.Deleted, nil
}
