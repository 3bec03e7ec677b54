package fault

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every kind on the table: found by its name and by its example's kind;
// it writes its example as an object that starts with its kind and reads
// it back the same, refuses a field it does not have, and says where its
// example is armed. A new kind's file is tested here with no list to edit.
func TestKinds(t *testing.T) {
	kinds := Kinds()
	require.GreaterOrEqual(t, len(kinds), 9, "crash, toxic, link-down, unbind, poison, broker-restart, replay, on-commit, commit-order at least")
	for i, k := range kinds {
		t.Run(k.Name(), func(t *testing.T) {
			if i > 0 {
				assert.Less(t, kinds[i-1].Name(), k.Name(), "by name, once each")
			}
			assert.NotEmpty(t, k.Doc())
			byName, ok := KindNamed(k.Name())
			require.True(t, ok)
			assert.Equal(t, k.Name(), byName.Name())
			f := k.Example()
			require.NotNil(t, f)
			of, ok := KindOf(f)
			require.True(t, ok, "%T", f)
			assert.Equal(t, k.Name(), of.Name())

			data, err := k.Encode(f)
			require.NoError(t, err)
			var head struct{ Kind string }
			require.NoError(t, json.Unmarshal(data, &head), "%s", data)
			assert.Equal(t, k.Name(), head.Kind)
			back, err := k.Decode(data)
			require.NoError(t, err, "%s", data)
			assert.Equal(t, f, back)

			_, err = k.Decode([]byte(`{"kind":"` + k.Name() + `","colour":"red"}`))
			require.Error(t, err)
			assert.Contains(t, err.Error(), `unknown field "colour"`)
		})
	}
	_, ok := KindNamed("meteor")
	assert.False(t, ok)
}

// The shrink helpers make a copy smaller in one field each, never f itself.
func TestShrinkHelpers(t *testing.T) {
	c := CommitOrder{Trigger: Trigger{AfterOrders: 20, Delay: time.Second}, Every: 4, Holds: 5, Hold: 600 * time.Millisecond}
	var got []string
	for _, s := range mustKind(t, c).Shrink(c) {
		got = append(got, s.Change)
	}
	assert.Equal(t, []string{"trigger after 20 → 10 orders", "trigger delay 1s → 0", "hold 600ms → 300ms", "hold 600ms → 450ms", "holds 5 → 2", "holds 5 → 3"}, got)
	assert.Equal(t, 5, c.Holds, "f itself unchanged")
}

// mustKind is f's kind, which the test needs.
func mustKind(t *testing.T, f Fault) Kind {
	k, ok := KindOf(f)
	require.True(t, ok, "%T", f)
	return k
}

// An unacked fault cuts mid-transaction only with a link to cut.
func TestUnackedMidTransactionNeedsCut(t *testing.T) {
	k, ok := KindNamed(KindUnacked)
	require.True(t, ok)
	_, err := k.Decode([]byte(`{"kind":"unacked","process":"consumer","action":"kill","mid_transaction":true}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mid_transaction needs cut")

	f, err := k.Decode([]byte(`{"kind":"unacked","process":"consumer","action":"kill","cut":"consumer.pg","mid_transaction":true}`))
	require.NoError(t, err)
	assert.Equal(t, Unacked{Process: "consumer", Action: ActKill, Cut: "consumer.pg", MidTransaction: true}, f)
}

// A toxic ends by one observed cause at most: a takeover or a drained queue.
func TestToxicUntilDrained(t *testing.T) {
	k, ok := KindNamed(KindToxic)
	require.True(t, ok)
	f, err := k.Decode([]byte(`{"kind":"toxic","link":"relay-1.amqp","toxic":{"type":"slicer","average_size":64,"delay":"1ms"},"duration":"20s","until_drained":true}`))
	require.NoError(t, err)
	assert.True(t, f.(Toxic).UntilDrained)
	assert.Contains(t, f.Describe().Detail, "until the queue, seen refusing publishes, is seen with none ready")

	_, err = k.Decode([]byte(`{"kind":"toxic","link":"relay-1.amqp","toxic":{"type":"latency","latency":"3s"},"duration":"20s","at":{"process":"relay-1","point":"relay.after-claim"},"until_takeover":true,"until_drained":true}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "name one")
}

// The own-retention replay needs its consumer and the retention it is
// judged against.
func TestOwnRetentionNeedsRetention(t *testing.T) {
	k, ok := KindNamed(KindOwnRetention)
	require.True(t, ok)
	_, err := k.Decode([]byte(`{"kind":"own-retention","consumer":"consumer"}`))
	assert.ErrorContains(t, err, "a retention")
	f, err := k.Decode([]byte(`{"kind":"own-retention","consumer":"consumer","retention":"4s","trigger":{"after_orders":20}}`))
	require.NoError(t, err)
	assert.Equal(t, OwnRetention{Consumer: "consumer", Retention: 4 * time.Second, Trigger: Trigger{AfterOrders: 20}}, f)
}

// A fault struct is its own wire form: zero fields are left out, a
// field's data is checked as it is read (a toxic of no known type, a
// duration that is not one), and a kind's Check refuses what is unsound.
func TestWireForm(t *testing.T) {
	broker, _ := KindNamed(KindBrokerRestart)
	data, err := broker.Encode(BrokerRestart{})
	require.NoError(t, err)
	assert.JSONEq(t, `{"kind":"broker-restart"}`, string(data))
	data, err = broker.Encode(BrokerRestart{Down: 1500 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, `{"kind":"broker-restart","down":"1.5s"}`, string(data))

	for _, tc := range []struct{ kind, data, want string }{
		{KindBrokerRestart, `{"kind":"broker-restart","down":"soon"}`, `broker-restart fault: down: bad duration "soon"`},
		{KindToxic, `{"kind":"toxic","link":"relay-1.pg","toxic":{"type":"meteor"}}`, `toxic fault: toxic: unknown toxic type "meteor"`},
		{KindToxic, `{"kind":"toxic","link":"relay-1.pg","toxic":{"type":"latency","latency":"1s","colour":"red"}}`, `unknown field "colour"`},
		{KindToxic, `{"kind":"toxic","link":"relay-1.pg"}`, `toxic fault: needs toxic`},
		{KindCrash, `{"kind":"crash","process":"relay-1","point":"relay.after-claim","action":"kill","hit":"two"}`, `crash fault: hit:`},
		{KindUnbind, `{"kind":"unbind","until_published":true}`, `unbind fault: needs a duration, and no shape`},
		{KindUnbind, `{"kind":"unbind","duration":"3s","shape":true,"until_published":true}`, `unbind fault: needs a duration, and no shape`},
		{KindCrash, `{"kind":"crash","process":"relay-1","point":"relay.after-publish","action":"hold","hit":2,"hold":"10s"}`, `hold needs until_routed`},
		{KindCrash, `{"kind":"crash","process":"relay-1","point":"relay.after-publish","action":"hold","hit":2,"until_routed":true}`, `hold needs until_routed and a hold`},
		{KindCrash, `{"kind":"crash","process":"relay-1","point":"relay.after-publish","action":"pause","hit":2,"hold":"10s","until_routed":true}`, `until_routed ends a hold`},
	} {
		k, ok := KindNamed(tc.kind)
		require.True(t, ok)
		_, err := k.Decode([]byte(tc.data))
		require.Error(t, err, tc.data)
		assert.Contains(t, err.Error(), tc.want, tc.data)
	}
}
