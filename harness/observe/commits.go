package observe

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/safe"
)

// listen feeds the commit notifications of database db to the faults, on a
// connection of its own (straight to PostgreSQL, not through a link),
// until Close.
func (w *Watch) listen(ctx context.Context, db string) error {
	conn, err := pgx.Connect(ctx, infra.OwnSession(w.run.Infra.PostgresURL(w.run.DBName[db])))
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	safe.Go("commit stream (LISTEN)", func() {
		defer close(done)
		for {
			n, err := conn.WaitForNotification(lctx)
			if err != nil {
				return
			}
			var c struct {
				Table, Op, Writer, Status, Claim string
				EventID                          string `json:"event_id"`
			}
			if json.Unmarshal([]byte(n.Payload), &c) != nil {
				continue
			}
			if c.Table == fault.TableOutbox {
				c.Status = w.run.Target.Observe.Outbox.ArticleStatus(c.Status)
			}
			w.commits.Publish(fault.Commit{Table: c.Table, Op: c.Op, Writer: c.Writer, EventID: c.EventID, Status: c.Status, Claim: c.Claim, At: time.Now()})
		}
	}, w.run.OnPanic)
	w.onClose(func() {
		cancel()
		<-done
		conn.Close(context.Background())
	})
	return nil
}
