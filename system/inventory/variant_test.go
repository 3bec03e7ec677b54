package inventory_test

import (
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/crashpoint"
	"github.com/faultline-dev/faultline/system/topology"
	"github.com/faultline-dev/faultline/system/variant"
)

// inboxRows counts the inbox rows of eventID.
func (e *env) inboxRows(eventID string) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.db.QueryRow(e.t.Context(), `SELECT count(*) FROM inbox_messages WHERE event_id = $1`, eventID).Scan(&n))
	return n
}

func startedDetail(es []eventlog.Entry) string {
	for _, x := range es {
		if x.Event == eventlog.Started {
			return x.Detail
		}
	}
	return ""
}

// no-inbox applies a second delivery of one eventId again; a variant of
// another process leaves the consumer correct.
func TestNoInboxAppliesADuplicateTwice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		variant string
		want    []string
		detail  string
	}{
		{variant.NoInbox, []string{"evt-twice", "evt-twice"}, "variant=no-inbox"},
		{variant.NoLease, []string{"evt-twice"}, "variant=no-lease (breaks relay; this process is correct)"},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			cfg := e.config()
			cfg.Variant = tc.variant
			e.start(cfg)
			msg := event("evt-twice", "order-1", 1)
			e.publish(msg)
			e.waitCount(eventlog.Acked, "evt-twice", 1)
			e.publish(msg)
			es := e.waitCount(eventlog.Acked, "evt-twice", 2)
			e.waitDrained()
			assert.Equal(t, tc.want, e.reservations())
			assert.Equal(t, len(tc.want), count(es, eventlog.Reserved, "evt-twice"))
			assert.Equal(t, 2-len(tc.want), count(es, eventlog.Duplicate, "evt-twice"))
			assert.Equal(t, 2-len(tc.want), e.inboxRows("evt-twice"), "no-inbox writes no inbox row")
			assert.Contains(t, startedDetail(es), tc.detail)
		})
	}
}

// ack-before-commit acks a delivery as soon as it is received: `acked`
// comes before `reserved`, and with the database unreachable the broker has
// already forgotten a message nothing committed, so stopping loses it.
func TestAckBeforeCommitAcksBeforeTheTransaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fw := newForwarder(t, testInfra.PostgresAddr())
	cfg := e.config()
	cfg.DBURL = e.dbURLVia(fw.addr)
	cfg.Variant = variant.AckBeforeCommit
	r := e.start(cfg)

	e.publish(event("evt-ok", "order-1", 1))
	es := e.waitCount(eventlog.Reserved, "evt-ok", 1)
	var order []string
	for _, x := range es {
		if x.EventID == "evt-ok" {
			order = append(order, x.Event)
		}
	}
	assert.Equal(t, []string{eventlog.Delivered, eventlog.Acked, eventlog.Reserved}, order)

	fw.cut()
	e.publish(event("evt-lost", "order-2", 1))
	e.waitCount(eventlog.Acked, "evt-lost", 1)
	e.waitCount(eventlog.Disconnected, "", 1)
	r.stop(t) // the batch is abandoned before its commit
	ready, err := e.ready(topology.Queue)
	require.NoError(t, err)
	assert.Equal(t, 0, ready, "the broker does not have it again (the correct consumer's would: TestStopWhileDatabaseDown)")

	// A correct consumer after the outage gets only what comes next: had
	// evt-lost gone back to the queue, it would be reserved before evt-after.
	fw.restore(t)
	cfg.Variant = ""
	e.start(cfg)
	e.publish(event("evt-after", "order-3", 1))
	e.waitCount(eventlog.Acked, "evt-after", 1)
	e.waitDrained()
	assert.Equal(t, []string{"evt-ok", "evt-after"}, e.reservations(), "evt-lost never took effect")
}

// A real SIGKILL at inventory.before-commit. The correct consumer loses
// inbox row and effect together, and the redelivery applies the effect. With
// inbox-own-transaction the inbox row was already committed: the redelivery
// is taken for a duplicate and the effect is lost.
func TestInboxOwnTransactionLosesTheEffectAtBeforeCommit(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, tc := range []struct {
		variant string
		broken  bool
	}{
		{"", false},
		{variant.InboxOwnTransaction, true},
	} {
		name := tc.variant
		if name == "" {
			name = variant.Correct
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			start := func(arming string) *exec.Cmd {
				return e.startBinary(bin, variant.EnvVar+"="+tc.variant, crashpoint.EnvVar+"="+arming)
			}

			first := start(crashpoint.InventoryBeforeCommit + "=kill@1")
			e.waitConnected(1)
			e.publish(event("evt-window", "order-1", 1))
			status := waitExit(t, first)
			require.Equal(t, syscall.SIGKILL, status.Signal(), "killed by the crash point")
			es := e.events()
			require.Equal(t, 1, count(es, eventlog.CrashPoint, ""))
			crash := es[slices.IndexFunc(es, func(x eventlog.Entry) bool { return x.Event == eventlog.CrashPoint })]
			assert.Equal(t, crashpoint.InventoryBeforeCommit, crash.Point)
			assert.Equal(t, 0, count(es, eventlog.Reserved, "evt-window"), "the crash came before the commit")
			assert.Equal(t, 0, count(es, eventlog.Acked, "evt-window"))
			assert.Empty(t, e.reservations(), "the effect rolled back")
			assert.Equal(t, boolInt(tc.broken), e.inboxRows("evt-window"), "the inbox row survives only in its own transaction")

			second := start("")
			e.waitConnected(2)
			es = e.waitCount(eventlog.Acked, "evt-window", 1)
			e.waitDrained()
			assert.Equal(t, 1, e.inboxRows("evt-window"))
			if tc.broken {
				assert.Empty(t, e.reservations(), "the effect is lost")
				assert.Equal(t, 1, count(es, eventlog.Duplicate, "evt-window"), "the redelivery was taken for a duplicate")
				assert.Contains(t, startedDetail(es), "variant="+variant.InboxOwnTransaction)
			} else {
				assert.Equal(t, []string{"evt-window"}, e.reservations(), "the redelivery applied the effect")
				assert.Equal(t, 0, count(es, eventlog.Duplicate, "evt-window"))
			}

			require.NoError(t, second.Process.Signal(syscall.SIGTERM))
			status = waitExit(t, second)
			assert.Equal(t, 0, status.ExitStatus(), "SIGTERM is a clean exit")
		})
	}
}

// commit-error-ignored: the batch's transaction is held at
// inventory.before-commit while its database connection is cut, so its
// COMMIT fails and nothing commits. The correct consumer does not ack: it
// runs the transaction again once the database is back, and the effect
// takes place once. The variant takes the failed commit for done, logs the
// reservation and acks: the broker has forgotten a message nothing
// applied, and the effect is lost.
func TestCommitErrorIgnoredAcksAFailedCommit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		variant string
		lost    bool
	}{
		{variant.Correct, false},
		{variant.CommitErrorIgnored, true},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			fw := newForwarder(t, testInfra.PostgresAddr())
			cfg := e.config()
			cfg.DBURL = e.dbURLVia(fw.addr)
			cfg.Variant = tc.variant
			r := e.start(cfg)
			code, body := request(t, http.MethodPut, r.control, "/crashpoints/"+crashpoint.InventoryBeforeCommit, "delay:1s@1")
			require.Equal(t, http.StatusNoContent, code, body)

			e.publish(event("evt-cut", "order-1", 1))
			e.waitFor("the transaction held before its COMMIT", func(es []eventlog.Entry) bool { return count(es, eventlog.CrashPoint, "") == 1 })
			fw.cut() // the COMMIT goes out on a dead connection
			e.waitFor("the failed COMMIT", func(es []eventlog.Entry) bool {
				return slices.ContainsFunc(es, func(x eventlog.Entry) bool { return strings.Contains(x.Error, "commit: ") })
			})

			if tc.lost {
				es := e.waitCount(eventlog.Acked, "evt-cut", 1)
				assert.Contains(t, dump(es), "ignored: acked as done")
				assert.Equal(t, 1, count(es, eventlog.Reserved, "evt-cut"), "the reservation is logged, though nothing committed")
				e.waitDrained() // the broker has forgotten it
				fw.restore(t)
				assert.Empty(t, e.reservations(), "the effect is lost")
				assert.Zero(t, e.inboxRows("evt-cut"), "the inbox row rolled back with it")
				assert.Contains(t, startedDetail(es), "variant="+variant.CommitErrorIgnored)
				return
			}
			e.waitFor("the transaction retried while the database is away", func(es []eventlog.Entry) bool {
				return slices.ContainsFunc(es, func(x eventlog.Entry) bool { return x.Event == eventlog.ErrorOccurred && x.Attempt >= 2 })
			})
			e.waitReady(topology.Queue, 0) // held by the consumer, unacked
			assert.Equal(t, 0, count(e.events(), eventlog.Acked, "evt-cut"), "never acked while the COMMIT fails")
			fw.restore(t)
			es := e.waitCount(eventlog.Acked, "evt-cut", 1)
			e.waitDrained()
			assert.Equal(t, []string{"evt-cut"}, e.reservations(), "the transaction ran again and committed")
			assert.Equal(t, 1, e.inboxRows("evt-cut"))
			assert.Equal(t, 1, count(es, eventlog.Reserved, "evt-cut"))
			assert.NotContains(t, dump(es), "ignored: acked as done")
		})
	}
}
