package target

import (
	"syscall"
	"time"
)

// Defaults of the format.
const (
	defaultBuildTimeout = 10 * time.Minute
	// defaultReadyTimeout bounds a process's start, from spawn to ready:
	// ready ends the wait the moment it answers, so the bound costs a fast
	// machine nothing, and a loaded one (a restart while the machine runs
	// several pipelines) gets time to connect to its database and broker.
	defaultReadyTimeout = 60 * time.Second
	defaultStopTimeout  = 3 * time.Second
	// defaultRestartBackoff is the wait before a restart under
	// restart: {policy: always}.
	defaultRestartBackoff = time.Second
	defaultLease          = 30 * time.Second
	defaultControl        = "{{control_addr}}"
	defaultHTTP           = "{{http_addr}}"
)

// The default contract: the article's schema, as written out in the
// reference's target file (system/faultline.yaml). Facts, the outbox and
// the payload live in the facts' database (orders by default), effects and
// the inbox in the effects' one (inventory by default): the outbox row is
// written in the fact's transaction, the inbox row in the effect's.
const (
	defaultFactsDatabase   = "orders"
	defaultEffectsDatabase = "inventory"

	defaultFactsSQL = `SELECT o.order_id AS aggregate_id, s.sequence, ob.event_id
FROM orders o
CROSS JOIN LATERAL generate_series(1, o.version) AS s(sequence)
LEFT JOIN outbox_messages ob ON ob.aggregate_id = o.order_id AND ob.sequence = s.sequence
`
	defaultEffectsSQL = `SELECT event_id, aggregate_id, sequence
FROM inventory_reservations ORDER BY reservation_id
`
	defaultOutboxSQL = `SELECT event_id, aggregate_id, sequence, status, published_at IS NOT NULL AS published,
       attempt_count AS attempts, coalesce(last_error, '') AS last_error
FROM outbox_messages ORDER BY occurred_at, event_id
`
	defaultInboxSQL       = `SELECT event_id FROM inbox_messages`
	defaultPayloadSQL     = `SELECT event_type AS routing_key, payload FROM outbox_messages WHERE event_id = $1`
	defaultInboxExpireSQL = `DELETE FROM inbox_messages`
)

// expects are the violation kinds a variant may expect.
func expects() []string {
	return []string{"lost", "phantom", "duplicate-effect", "stale-write", "stuck-row", "stuck-position", "gave-up-early", "out-of-order", "not-live", "fact-lost", "poison-dropped", "valid-dead-lettered", "live-claim-taken"}
}

// methods are the workload's HTTP methods.
func methods() []string {
	return []string{"GET", "POST", "PUT", "PATCH", "DELETE"}
}

// signals are the signals a process may be stopped with.
func signals() map[string]syscall.Signal {
	return map[string]syscall.Signal{
		"SIGTERM": syscall.SIGTERM,
		"SIGINT":  syscall.SIGINT,
		"SIGQUIT": syscall.SIGQUIT,
		"SIGHUP":  syscall.SIGHUP,
		"SIGKILL": syscall.SIGKILL,
	}
}

// signalNames are the keys of signals, in the order the format lists them.
func signalNames() []string {
	return []string{"SIGTERM", "SIGINT", "SIGQUIT", "SIGHUP", "SIGKILL"}
}
