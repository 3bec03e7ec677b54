package observe

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/safe"
	"github.com/faultline-dev/faultline/harness/target"
)

func init() {
	addSource(source{name: history.SourceCommits, when: Live,
		offered: func(t *target.Target, _ map[string]bool) bool {
			return t.Observe.Outbox.Name != "" || t.Observe.Facts.Name != "" || t.Observe.Effects.Name != ""
		},
		record: (*Watch).recordEffectsCommitted})
	// The commits watched where they can be: what a fault that reads
	// them where it can (a failover's) asks for; every target gives it.
	addSource(source{name: history.SourceCommitsSeen, when: Derived})
}

// recordEffectsCommitted keeps the eventIds whose effect write was seen
// to commit, where the effects table is watched by its eventId column
// and the stream did not fail.
func (w *Watch) recordEffectsCommitted(_ context.Context, o *history.Record) error {
	if !w.effects || w.run.Target.Observe.Effects.EventID == "" || w.commits.Err() != nil {
		return nil
	}
	// EventIDs is the run's own copy; watched and none seen is empty.
	if o.EffectsCommitted = w.commits.EventIDs(history.TableEffects); o.EffectsCommitted == nil {
		o.EffectsCommitted = map[string]bool{}
	}
	return nil
}

// listen feeds the commit notifications of database db to the faults, on a
// connection of its own (straight to PostgreSQL, not through a link),
// until Close. A connection lost (the server crashed and restarts) is
// dialled again until it is back: the commits made meanwhile are not
// told, what a fault reads after it is read from the tables.
func (w *Watch) listen(ctx context.Context, db string) error {
	url := infra.OwnSession(w.run.Infra.PostgresURL(w.run.DBName[db]))
	dial := func(ctx context.Context) (*pgx.Conn, error) {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return nil, err
		}
		if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
			conn.Close(context.WithoutCancel(ctx))
			return nil, err
		}
		return conn, nil
	}
	conn, err := dial(ctx)
	if err != nil {
		return err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	safe.Go("commit stream (LISTEN)", func() {
		defer close(done)
		defer func() {
			if conn != nil {
				conn.Close(context.Background())
			}
		}()
		for {
			n, err := conn.WaitForNotification(lctx)
			if err != nil {
				if lctx.Err() != nil {
					return
				}
				conn.Close(context.Background())
				if conn = w.redial(lctx, dial); conn == nil {
					return
				}
				continue
			}
			var c struct {
				Table, Op, Writer, Status, Claim string
				EventID                          string `json:"event_id"`
			}
			if json.Unmarshal([]byte(n.Payload), &c) != nil {
				continue
			}
			if c.Table == history.TableOutbox {
				c.Status = w.run.Target.Observe.Outbox.ArticleStatus(c.Status)
			}
			w.commits.Publish(history.Commit{Table: c.Table, Op: c.Op, Writer: c.Writer, EventID: c.EventID, Status: c.Status, Claim: c.Claim, At: time.Now()})
		}
	}, w.run.OnPanic)
	w.onClose(func() {
		cancel()
		<-done
	})
	return nil
}

// relistenEvery is how often a lost commit stream is dialled again.
const relistenEvery = 200 * time.Millisecond

// redial dials the commit stream until it answers or ctx ends (then nil).
func (w *Watch) redial(ctx context.Context, dial func(context.Context) (*pgx.Conn, error)) *pgx.Conn {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(relistenEvery):
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := dial(dctx)
		cancel()
		if err == nil {
			return conn
		}
	}
}
