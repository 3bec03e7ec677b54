package target

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// offsetRelay is the relay section of an offset relay (Watermill's SQL
// subscriber), with the pending query it needs, put before topology: in
// minimal.
const offsetRelay = `relay:
  model: offset
  position: {database: orders, table: watermill_offsets_orders_events}
contract:
  pending: {database: orders, sql: "SELECT uuid AS event_id FROM watermill_orders_events"}
topology:`

func TestRelayModels(t *testing.T) {
	t.Run("offset", func(t *testing.T) {
		tg, err := Parse("faultline.yaml", []byte(strings.Replace(minimal, "topology:", offsetRelay, 1)))
		require.NoError(t, err)
		assert.Equal(t, history.ModelOffset, tg.Relay.Model)
		require.NotNil(t, tg.Relay.Position)
		assert.Equal(t, "orders", tg.Relay.Position.Database)
		assert.Equal(t, "watermill_offsets_orders_events", tg.Relay.Position.Name)
		require.NotNil(t, tg.Contract.Pending)
		assert.Equal(t, "orders", tg.Contract.Pending.Database)
		assert.Nil(t, tg.Contract.Outbox, "the article's outbox query reads a status an offset relay never writes")
		assert.Empty(t, tg.Observe.Outbox.Status, "no status column assumed")
		assert.Empty(t, tg.Observe.Outbox.Claim, "no claim column assumed")
		assert.Empty(t, tg.Observe.Outbox.Due, "no due column assumed")
		assert.False(t, tg.StatusOutbox())
	})
	t.Run("log", func(t *testing.T) {
		tg, err := Parse("faultline.yaml", []byte(strings.Replace(minimal, "topology:", "relay: {model: log}\ntopology:", 1)))
		require.NoError(t, err)
		assert.Equal(t, history.ModelLog, tg.Relay.Model)
		assert.Nil(t, tg.Relay.Position)
		assert.Nil(t, tg.Contract.Outbox)
		assert.Nil(t, tg.Contract.Pending)
		assert.False(t, tg.StatusOutbox())
	})
	t.Run("claim keeps the article's defaults", func(t *testing.T) {
		tg, err := Parse("faultline.yaml", []byte(strings.Replace(minimal, "topology:", "relay: {model: claim}\ntopology:", 1)))
		require.NoError(t, err)
		assert.Equal(t, history.ModelClaim, tg.Relay.Model)
		require.NotNil(t, tg.Contract.Outbox)
		assert.Equal(t, "status", tg.Observe.Outbox.Status)
		assert.Equal(t, "locked_by", tg.Observe.Outbox.Claim)
		assert.Equal(t, "next_attempt_at", tg.Observe.Outbox.Due)
		assert.True(t, tg.Observe.Outbox.DueDefault, "watched only where the table has it")
		assert.True(t, tg.StatusOutbox())
	})
	t.Run("not said: what the contract gives, the article's by default", func(t *testing.T) {
		tg, err := Parse("faultline.yaml", []byte(minimal))
		require.NoError(t, err)
		assert.Empty(t, tg.Relay.Model)
		assert.Equal(t, "not said", tg.RelayModel())
		require.NotNil(t, tg.Contract.Outbox)
		assert.True(t, tg.StatusOutbox())
	})
	t.Run("the reference and the Node example say claim, and a batch of 50", func(t *testing.T) {
		for _, path := range []string{reference, "../../examples/node-outbox/faultline.yaml"} {
			tg, err := Load(path)
			require.NoError(t, err, path)
			assert.Equal(t, history.ModelClaim, tg.Relay.Model, path)
			assert.Equal(t, 50, tg.Relay.Batch, path)
		}
	})
	t.Run("the reference says two claims in flight; the Node example says none", func(t *testing.T) {
		tg, err := Load(reference)
		require.NoError(t, err)
		assert.Equal(t, 2, tg.Relay.InFlight)
		tg, err = Load("../../examples/node-outbox/faultline.yaml")
		require.NoError(t, err)
		assert.Zero(t, tg.Relay.InFlight)
	})
}

func TestRelayProblems(t *testing.T) {
	tests := []struct {
		name, relay, field, message string
	}{
		{"unknown model", "relay: {model: offest}\ntopology:", "relay.model", `"offest" is not a relay model (did you mean offset?`},
		{"no model", "relay: {position: {database: orders, table: offsets}}\ntopology:", "relay.model", "required: how the relay takes work from the outbox: claim, offset or log"},
		{"offset without position", "relay: {model: offset}\ncontract: {pending: {database: orders, sql: SELECT 1}}\ntopology:", "relay.position", "required for an offset relay"},
		{"offset without pending", "relay: {model: offset, position: {database: orders, table: offsets}}\ntopology:", "contract.pending", "required for an offset relay"},
		{"position of a claim relay", "relay: {model: claim, position: {database: orders, table: offsets}}\ntopology:", "relay.position", "a position table is for an offset relay; this relay's model is claim"},
		{"position in an undeclared database", strings.Replace(offsetRelay, "position: {database: orders", "position: {database: stock", 1), "relay.position.database", `database "stock" is not declared`},
		{"position table not a name", strings.Replace(offsetRelay, "table: watermill_offsets_orders_events", "table: 'x; DROP TABLE y'", 1), "relay.position.table", "is not a table name"},
		{"pending without sql", strings.Replace(offsetRelay, `, sql: "SELECT uuid AS event_id FROM watermill_orders_events"`, "", 1), "contract.pending.sql", "required"},
		{"unknown key", "relay: {model: claim, lease: 2s}\ntopology:", "relay.lease", "unknown field"},
		{"a batch of no rows", "relay: {model: claim, batch: 0}\ntopology:", "relay.batch", "a relay's batch is 1 row or more, not 0"},
		{"a batch not a number", "relay: {model: claim, batch: fifty}\ntopology:", "relay.batch", "want a whole number"},
		{"no claim in flight", "relay: {model: claim, in_flight: 0}\ntopology:", "relay.in_flight", "a relay has 1 claim in flight or more, not 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "faultline.yaml")
			_, err := Parse(path, []byte(strings.Replace(minimal, "topology:", tt.relay, 1)))
			var errs *Errors
			require.True(t, errors.As(err, &errs), "want *Errors, got %T: %v", err, err)
			require.Len(t, *errs, 1, "want one problem:\n%v", err)
			p := (*errs)[0]
			assert.Equal(t, tt.field, p.Field, "%v", p)
			assert.Contains(t, p.Message, tt.message)
			assert.Positive(t, p.Line, "%v", p)
		})
	}
}
