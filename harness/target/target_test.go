package target

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const reference = "../../system/faultline.yaml"

func TestLoadReference(t *testing.T) {
	tg, err := Load(reference)
	require.NoError(t, err)

	abs, err := filepath.Abs(reference)
	require.NoError(t, err)
	assert.Equal(t, abs, tg.Path)
	assert.Equal(t, filepath.Dir(abs), tg.Dir)
	assert.Equal(t, "reference", tg.Name)
	require.NotNil(t, tg.Build)
	assert.Equal(t, 5*time.Minute, tg.Build.Timeout)
	assert.Equal(t, "{{build_dir}}/", tg.Build.Args[3].Raw)
	assert.Equal(t, []string{"orders", "inventory"}, tg.Databases)
	assert.True(t, tg.Schema.CreatedByProcesses)
	assert.Equal(t, 2*time.Second, tg.Lease)
	assert.Equal(t, 1500*time.Millisecond, tg.RidesOut)
	assert.Equal(t, map[string]string{"lease-renewal": "400ms"}, tg.ExploreSettings("relay.before-renew"))
	assert.Nil(t, tg.ExploreSettings("relay.after-claim"), "a window that opens on its own needs no setting")

	require.Len(t, tg.Processes, 3)
	relays := tg.ByRole("relay")
	require.Len(t, relays, 1)
	relay := relays[0]
	assert.Equal(t, 2, relay.Instances)
	assert.Equal(t, []string{"relay-1", "relay-2"}, tg.Instances(relay))
	assert.True(t, relay.EventLog)
	// The reference file grows (more windows, more variants): check what
	// it has at least.
	for _, w := range []string{"relay.after-claim", "relay.after-publish", "relay.after-confirm", "relay.after-mark", "relay.before-renew"} {
		assert.Equal(t, w, relay.CrashPoints[w], w)
	}
	assert.Equal(t, "{{control_addr}}", relay.Control.Raw, "default control")
	assert.Equal(t, "http://{{control_addr}}/healthz", relay.Ready.HTTP.Raw)
	assert.Equal(t, 60*time.Second, relay.Ready.Timeout)
	assert.Equal(t, Stop{Signal: syscall.SIGTERM, Timeout: 3 * time.Second}, relay.Stop)
	require.Len(t, relay.Env, 1)
	assert.Equal(t, "FAULTLINE_VARIANT", relay.Env[0].Name)
	assert.Equal(t, "{{variant}}", relay.Env[0].Value.Raw)
	assert.Equal(t, "processes[1].env.FAULTLINE_VARIANT", relay.Env[0].Value.Field)
	assert.Greater(t, relay.Env[0].Value.Line, relay.Line)

	order := tg.ByRole("producer")[0]
	assert.Equal(t, "{{http_addr}}", order.Control.Raw)
	assert.Equal(t, []string{"order"}, tg.Instances(order))
	assert.Equal(t, []string{"relay"}, tg.Windows()["relay.after-confirm"])
	assert.Equal(t, []string{"inventory"}, tg.Windows()["consumer.after-commit"])

	create := tg.Workload.Create
	assert.Equal(t, "POST", create.Method)
	assert.Equal(t, "orderId", create.ID)
	assert.Equal(t, []int{201}, create.OK)
	assert.Equal(t, "application/json", create.Headers["Content-Type"], "default with a body")
	require.Len(t, tg.Workload.Steps, 2)
	assert.Equal(t, []int{409}, tg.Workload.Steps[0].Done)

	assert.Equal(t, Topology{
		Exchange:        "orders.events",
		Queue:           "inventory.order-events",
		DeadLetterQueue: "inventory.order-events.dead",
		RoutingKeys:     []string{"order.created", "order.paid", "order.cancelled"},
	}, tg.Topology)

	c := tg.Contract
	assert.False(t, c.Facts.Default)
	assert.Equal(t, "orders", c.Facts.Database)
	assert.NotZero(t, c.Facts.Line)
	require.NotNil(t, c.HeldBack)
	assert.Equal(t, "SELECT count(*) FROM parked_events", c.HeldBack.SQL)
	// The reference writes out the defaults: they must be the same SQL.
	assert.Equal(t, defaultFactsSQL, c.Facts.SQL)
	assert.Equal(t, defaultEffectsSQL, c.Effects.SQL)
	for _, q := range []*Query{c.Outbox, c.Inbox, c.Payload, c.InboxExpire} {
		require.NotNil(t, q)
		assert.False(t, q.Default)
	}
	assert.Equal(t, defaultOutboxSQL, c.Outbox.SQL)
	assert.Equal(t, defaultInboxSQL, c.Inbox.SQL)
	assert.Equal(t, defaultPayloadSQL, c.Payload.SQL)
	assert.Equal(t, defaultInboxExpireSQL, c.InboxExpire.SQL)

	require.Len(t, tg.Settings, 5)
	renewal := tg.Settings["lease-renewal"]
	assert.Equal(t, "relay", renewal.Role)
	require.Len(t, renewal.Args, 2)
	assert.Equal(t, "--renew-interval={{value}}", renewal.Args[1].Raw)
	assert.True(t, renewal.Args[1].Uses("value"))

	assert.GreaterOrEqual(t, len(tg.Variants), 10)
	for _, name := range []string{"commit-then-publish", "publish-then-commit", "no-mandatory", "ignore-return", "published-before-confirm",
		"no-fencing", "no-lease", "ack-before-commit", "no-inbox", "inbox-own-transaction"} {
		_, ok := tg.Variant(name)
		assert.True(t, ok, name)
	}
	v, ok := tg.Variant("no-fencing")
	require.True(t, ok)
	assert.Equal(t, "stale-write", v.Expect)
	assert.Subset(t, v.CaughtBy, []string{"relay-pause-past-lease", "relay-db-slow-past-lease"})
	_, ok = tg.Variant("correct")
	assert.False(t, ok)
}

func TestLoadMinimalGetsDefaults(t *testing.T) {
	tg, err := Load("testdata/minimal.yaml")
	require.NoError(t, err)

	assert.Nil(t, tg.Build)
	assert.Equal(t, 30*time.Second, tg.Lease)
	require.Len(t, tg.Processes, 1)
	p := tg.Processes[0]
	assert.Equal(t, 1, p.Instances)
	assert.False(t, p.EventLog)
	assert.Equal(t, "{{control_addr}}", p.Control.Raw)
	assert.Equal(t, "{{http_addr}}", p.HTTP.Raw)
	assert.Equal(t, Stop{Signal: syscall.SIGTERM, Timeout: 3 * time.Second}, p.Stop)
	assert.Equal(t, 60*time.Second, p.Ready.Timeout)
	assert.Equal(t, Restart{}, p.Restart, "no restart beyond what a fault does")
	assert.Empty(t, p.CrashPoints)

	create := tg.Workload.Create
	assert.Equal(t, "POST", create.Method)
	assert.Equal(t, []int{200, 201}, create.OK)
	assert.Empty(t, create.Done)
	assert.Empty(t, create.Headers, "no body, no default Content-Type")

	c := tg.Contract
	assert.Equal(t, Query{Database: "orders", SQL: defaultFactsSQL, Default: true}, c.Facts)
	assert.Equal(t, Query{Database: "inventory", SQL: defaultEffectsSQL, Default: true}, c.Effects)
	for name, q := range map[string]struct {
		got  *Query
		want Query
	}{
		"outbox":       {c.Outbox, Query{Database: "orders", SQL: defaultOutboxSQL, Default: true}},
		"inbox":        {c.Inbox, Query{Database: "inventory", SQL: defaultInboxSQL, Default: true}},
		"payload":      {c.Payload, Query{Database: "orders", SQL: defaultPayloadSQL, Default: true}},
		"inbox_expire": {c.InboxExpire, Query{Database: "inventory", SQL: defaultInboxExpireSQL, Default: true}},
	} {
		require.NotNil(t, q.got, name)
		assert.Equal(t, q.want, *q.got, name)
	}
	assert.Nil(t, c.HeldBack, "held_back has no default")
	assert.Empty(t, tg.Settings)
	assert.Empty(t, tg.Variants)
}

func TestInitParses(t *testing.T) {
	// A name that is no slug (a folder's name, say) is made one.
	for name, want := range map[string]string{"my-pipeline": "my-pipeline", `odd "name": with # marks`: "odd-name-with-marks", "../../x": "x", "..": "pipeline"} {
		for form, init := range map[string]func(string) []byte{"black-box": Init, "protocol": InitProtocol} {
			t.Run(form+"/"+name, func(t *testing.T) {
				tg, err := Parse("faultline.yaml", init(name))
				require.NoError(t, err)
				assert.Equal(t, want, tg.Name)
				assert.Len(t, tg.Processes, 3)
				assert.Equal(t, defaultFactsSQL, tg.Contract.Facts.SQL)
				assert.Equal(t, defaultEffectsSQL, tg.Contract.Effects.SQL)
				require.NotNil(t, tg.Contract.Outbox)
				assert.Equal(t, defaultOutboxSQL, tg.Contract.Outbox.SQL)
			})
		}
	}

	// Every section is there, under a comment saying what it is.
	for _, tc := range []struct {
		form     string
		data     []byte
		sections []string
	}{
		{"black-box", Init("my-pipeline"), []string{"databases", "schema", "processes", "workload", "topology", "contract", "observe"}},
		{"protocol", InitProtocol("my-pipeline"), []string{"build", "databases", "schema", "processes", "timing", "workload", "topology", "contract", "settings", "variants"}},
	} {
		lines := strings.Split(string(tc.data), "\n")
		for _, section := range tc.sections {
			i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, section+":") })
			require.Positive(t, i, "%s: %s", tc.form, section)
			assert.True(t, strings.HasPrefix(lines[i-1], "#"), "%s: no comment above %s", tc.form, section)
		}
	}
}

// The black-box form offers nothing of the protocol: no event log, crash
// point or control endpoint of its own, no variants; those are comments.
func TestInitBlackBoxSpeaksNoProtocol(t *testing.T) {
	data := Init("team")
	tg, err := Parse("faultline.yaml", data)
	require.NoError(t, err)
	for _, p := range tg.Processes {
		assert.False(t, p.EventLog, p.Name)
		assert.Empty(t, p.CrashPoints, p.Name)
	}
	assert.Empty(t, tg.Variants)
	assert.Nil(t, tg.Build)
	for _, commented := range []string{"#   event_log: true", "#   crashpoints:", "#   control:"} {
		assert.Contains(t, string(data), commented)
	}
	for _, line := range strings.Split(string(data), "\n") {
		for _, key := range []string{"event_log:", "crashpoints:", "control:", "variants:", "build:"} {
			assert.False(t, strings.HasPrefix(strings.TrimSpace(line), key), "a live %s line: %q", key, line)
		}
	}
}

// TestBroken loads a file with seeded mistakes: each must be reported,
// on its line, once, and nothing else.
func TestBroken(t *testing.T) {
	_, err := Load("testdata/broken.yaml")
	require.Error(t, err)
	var errs *Errors
	require.True(t, errors.As(err, &errs), "want *Errors, got %T", err)

	want := []struct {
		line    int
		field   string
		message string
	}{
		{14, "processes[0].command[1]", `unknown placeholder "pg_url" (known: amqp, amqp_urls, build_dir, control_addr,`},
		{17, "processes[0].ready", "give exactly one of http, tcp, log"},
		{21, "processes[0].crashpoints", `"relay.after-confirm" is not a consumer window (consumer windows: consumer.after-receive,`},
		{25, "processes[1].command[1]", `unknown database "nope" (databases: orders, inventory)`},
		{27, "processes[1].crashpoints", "crash points need event_log: true"},
		{30, "processes[2].name", `process "relay" given twice (first at line 23)`},
		{33, "processes[2].ready.timeout", `bad duration "5 minutes"`},
		{36, "processes[3].role", `"producr" is not a role (did you mean producer?`},
		{40, "timming", "unknown field (did you mean timing?)"},
		{45, "workload.create.path", "{{id}} is not available in workload.create"},
		{55, "contract.facts.database", `database "shop" is not declared in databases`},
		{59, "variants[0].expect", `"duplicated" is not a violation`},
	}
	for _, w := range want {
		found := false
		for _, p := range *errs {
			if p.Line == w.line && p.Field == w.field && strings.Contains(p.Message, w.message) {
				found = true
				assert.Equal(t, "testdata/broken.yaml", p.File)
			}
		}
		assert.True(t, found, "no problem at line %d: %s: %s", w.line, w.field, w.message)
	}
	assert.Len(t, *errs, len(want), "one problem per mistake:\n%v", err)

	// The error text is one problem per line, file:line: field: message.
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, len(*errs))
	assert.Equal(t, "testdata/broken.yaml:40: timming: unknown field (did you mean timing?)", lines[8])
}

// minimal is the smallest valid file; TestProblems breaks it one way at a
// time.
const minimal = `faultline: 1
name: minimal
databases: [orders, inventory]
schema:
  created_by: processes
processes:
  - name: order
    role: producer
    command: [./bin/order, "--listen={{http_addr}}"]
    ready: {tcp: "{{http_addr}}"}
workload:
  create: {path: /orders}
topology:
  exchange: orders.events
  queue: inventory.order-events
  routing_keys: [order.created]
`

func TestRestartPolicy(t *testing.T) {
	tests := []struct {
		name    string
		restart string
		want    Restart
	}{
		{"never", "{policy: never}", Restart{}},
		{"always, default backoff", "{policy: always}", Restart{Always: true, Backoff: time.Second}},
		{"always with a backoff", "{policy: always, backoff: 500ms}", Restart{Always: true, Backoff: 500 * time.Millisecond}},
		{"always at the bound", "{policy: always, backoff: 1m}", Restart{Always: true, Backoff: time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := strings.Replace(minimal, "    role: producer", "    role: producer\n    restart: "+tt.restart, 1)
			tg, err := Parse(filepath.Join(t.TempDir(), "faultline.yaml"), []byte(data))
			require.NoError(t, err)
			require.Len(t, tg.Processes, 1)
			assert.Equal(t, tt.want, tg.Processes[0].Restart)
		})
	}
}

func TestProblems(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "orders.sql"), []byte("CREATE TABLE orders ();"), 0o644))

	tests := []struct {
		name    string
		old     string // replaced in minimal by new
		new     string
		line    int
		field   string
		message string
	}{
		{"yaml syntax", "queue: inventory.order-events", "queue: [inventory", 15, "", "bad YAML:"},
		{"version", "faultline: 1", "faultline: 2", 1, "faultline", "version 2 is not supported"},
		{"no version", "faultline: 1", "", 2, "faultline", "required"},
		{"misspelt required key is not reported missing too", "    command:", "    comand:", 9, "processes[0].comand", "unknown field (did you mean command?)"},
		{"unknown key without suggestion", "name: minimal", "name: minimal\nowner: me", 3, "owner", "unknown field (known: faultline, name,"},
		{"key given twice", "name: minimal", "name: minimal\nname: again", 3, "name", "given twice (first at line 2)"},
		{"bad database name", "[orders, inventory]", "[orders, inventory, Stock]", 3, "databases[2]", `"Stock" is not a database name`},
		{"schema with two ways", "  created_by: processes", "  created_by: processes\n  commands: [[psql, '{{postgres \"orders\"}}']]", 4, "schema", "give exactly one of created_by, commands, sql"},
		{"schema command placeholder", "  created_by: processes", "  commands: [[psql, '{{control_addr}}']]", 5, "schema.commands[0][1]", `placeholder "control_addr" is not available in schema commands`},
		{"schema sql file missing", "  created_by: processes", "  sql: {orders: orders.sql, inventory: inventory.sql}", 5, "schema.sql.inventory", "inventory.sql: no such file or directory"},
		{"schema sql undeclared database", "  created_by: processes", "  sql: {orders: orders.sql, stock: orders.sql}", 5, "schema.sql.stock", `database "stock" is not declared`},
		{"process placeholder typo", `"--listen={{http_addr}}"`, `"--listen={{http_adr}}"`, 9, "processes[0].command[1]", `unknown placeholder "http_adr" (did you mean http_addr?)`},
		{"value outside settings", `"--listen={{http_addr}}"`, `"--x={{value}}"`, 9, "processes[0].command[1]", `placeholder "value" is not available in a process`},
		{"field syntax", `"--listen={{http_addr}}"`, `"--listen={{.http_addr}}"`, 9, "processes[0].command[1]", "write {{http_addr}}, without the dot"},
		{"template syntax", `"--listen={{http_addr}}"`, `"--listen={{http_addr}"`, 9, "processes[0].command[1]", "bad template:"},
		{"postgres without a database", `"--listen={{http_addr}}"`, `"--db={{postgres}}"`, 9, "processes[0].command[1]", "wrong number of args for postgres"},
		{"command as a string", `command: [./bin/order, "--listen={{http_addr}}"]`, `command: ./bin/order`, 9, "processes[0].command", "want a list of arguments"},
		{"no ready", `    ready: {tcp: "{{http_addr}}"}`, "", 7, "processes[0].ready", "required"},
		{"ready with none", `    ready: {tcp: "{{http_addr}}"}`, "    ready: {timeout: 1s}", 10, "processes[0].ready", "give exactly one of http, tcp, log"},
		{"ready http not a URL", `ready: {tcp: "{{http_addr}}"}`, `ready: {http: "{{http_addr}}/healthz"}`, 10, "processes[0].ready.http", "want an http:// URL"},
		{"ready bad regexp", `ready: {tcp: "{{http_addr}}"}`, `ready: {log: "listening (on"}`, 10, "processes[0].ready.log", "bad regexp:"},
		{"control not host:port", "    role: producer", "    role: producer\n    control: http://{{control_addr}}", 9, "processes[0].control", "want host:port"},
		{"bad signal", "    role: producer", "    role: producer\n    stop: {signal: SIGSTOP}", 9, "processes[0].stop.signal", `"SIGSTOP" is not a signal`},
		{"duration without unit", "    role: producer", "    role: producer\n    stop: {timeout: 3}", 9, "processes[0].stop.timeout", "bad duration 3: give a unit"},
		{"restart policy unknown", "    role: producer", "    role: producer\n    restart: {policy: alway}", 9, "processes[0].restart.policy", `"alway" is not a policy (did you mean always?`},
		{"restart without policy", "    role: producer", "    role: producer\n    restart: {backoff: 1s}", 9, "processes[0].restart.policy", "required: never or always"},
		{"restart backoff without always", "    role: producer", "    role: producer\n    restart: {policy: never, backoff: 1s}", 9, "processes[0].restart.backoff", "a backoff needs policy: always"},
		{"restart backoff past its bound", "    role: producer", "    role: producer\n    restart: {policy: always, backoff: 2m}", 9, "processes[0].restart.backoff", "at most 1m0s between restarts"},
		{"restart backoff zero", "    role: producer", "    role: producer\n    restart: {policy: always, backoff: 0s}", 9, "processes[0].restart.backoff", "must be above zero"},
		{"restart as a string", "    role: producer", "    role: producer\n    restart: always", 9, "processes[0].restart", "want a mapping"},
		{"zero instances", "    role: producer", "    role: producer\n    instances: 0", 9, "processes[0].instances", "must be at least 1"},
		{"unknown window", "    role: producer", "    role: producer\n    event_log: true\n    env: {LOG: '{{event_log}}'}\n    crashpoints: {producer.after-comit: x}", 11, "processes[0].crashpoints", `"producer.after-comit" is not a window (did you mean producer.after-commit?)`},
		{"event log not handed in", "    role: producer", "    role: producer\n    event_log: true", 9, "processes[0].event_log", "neither command nor env hands the process {{event_log}}"},
		{"env name", "    role: producer", "    role: producer\n    env: {BAD-NAME: x}", 9, "processes[0].env.BAD-NAME", "not an environment variable name"},
		{"env crash points", "    role: producer", "    role: producer\n    env: {FAULTLINE_CRASHPOINTS: x}", 9, "processes[0].env.FAULTLINE_CRASHPOINTS", "set by faultline itself"},
		{"no producer", "    role: producer", "    role: consumer", 6, "processes", "no process has role producer"},
		{"bad process name", "  - name: order", "  - name: Order", 7, "processes[0].name", `"Order" is not a process name`},
		{"bad lease", "topology:", "timing: {lease: soon}\ntopology:", 13, "timing.lease", `bad duration "soon"`},
		{"steps use id without create id", "  create: {path: /orders}", "  create: {path: /orders}\n  steps: [{path: '/orders/{{id}}/pay'}]", 12, "workload.create.id", "required: steps use {{id}} (line 13)"},
		{"path without slash", "{path: /orders}", "{path: orders}", 12, "workload.create.path", "must start with /"},
		{"bad method", "{path: /orders}", "{path: /orders, method: FETCH}", 12, "workload.create.method", `"FETCH" is not a method`},
		{"bad status", "{path: /orders}", "{path: /orders, ok: [2001]}", 12, "workload.create.ok[0]", "2001 is not an HTTP status"},
		{"random backwards", "{path: /orders}", "{path: /orders, body: '{{random 9 1}}'}", 12, "workload.create.body", "the low end is above the high end"},
		{"multi-line body: the line of the mistake", "  create: {path: /orders}", "  create:\n    path: /orders\n    body: |\n      {\"n\": {{n}},\n       \"x\": {{nn}}}", 16, "workload.create.body", `unknown placeholder "nn" (did you mean n?)`},
		{"no routing keys", "  routing_keys: [order.created]", "  routing_keys: []", 16, "topology.routing_keys", "must list at least one routing key"},
		{"event_id of no known form", "  routing_keys: [order.created]", "  routing_keys: [order.created]\n  event_id: id", 17, "topology.event_id", "want message_id, header:NAME or body:PATH"},
		{"event_id header without a name", "  routing_keys: [order.created]", "  routing_keys: [order.created]\n  event_id: 'header:'", 17, "topology.event_id", "want message_id"},
		{"event_id body path with an empty step", "  routing_keys: [order.created]", "  routing_keys: [order.created]\n  event_id: body:data..id", 17, "topology.event_id", "want message_id"},
		{"contract defaults need their databases", "databases: [orders, inventory]", "databases: [orders, stock]", 3, "contract", "the contract defaults need database inventory (declared: orders, stock); declare it, or write contract.effects"},
		{"contract query without sql", "topology:", "contract: {facts: {database: orders}}\ntopology:", 13, "contract.facts.sql", "required"},
		{"inbox_pending without sql", "topology:", "contract: {inbox_pending: {database: inventory}}\ntopology:", 13, "contract.inbox_pending.sql", "required"},
		{"inbox_pending in an unknown database", "topology:", "contract: {inbox_pending: {database: stock, sql: SELECT event_id FROM inbox}}\ntopology:", 13, "contract.inbox_pending.database", `database "stock" is not declared`},
		{"inbox_pending misspelt", "topology:", "contract: {inbox_pendng: {database: inventory, sql: SELECT event_id FROM inbox}}\ntopology:", 13, "contract.inbox_pendng", "did you mean inbox_pending?"},
		{"setting role without process", "topology:", "settings: {budget: {role: relay, args: ['--budget={{value}}']}}\ntopology:", 13, "settings.budget.role", "no process has role relay"},
		{"setting explore without value", "topology:", "settings: {budget: {role: producer, args: ['--b={{value}}'], explore: {opens: [producer.after-commit]}}}\ntopology:", 13, "settings.budget.explore.value", "required"},
		{"setting explore opens no window", "topology:", "settings: {budget: {role: producer, args: ['--b={{value}}'], explore: {value: '3', opens: [relay.before-renw]}}}\ntopology:", 13, "settings.budget.explore.opens[0]", `"relay.before-renw"`},
		{"setting explore without opens", "topology:", "settings: {budget: {role: producer, args: ['--b={{value}}'], explore: {value: '3'}}}\ntopology:", 13, "settings.budget.explore.opens", "required"},
		{"setting explore opens nothing", "topology:", "settings: {budget: {role: producer, args: ['--b={{value}}'], explore: {value: '3', opens: []}}}\ntopology:", 13, "settings.budget.explore.opens", "name at least one window"},
		{"bad rides_out", "topology:", "timing: {lease: 2s, rides_out: -1s}\ntopology:", 13, "timing.rides_out", "bad duration"},
		{"setting without args or env", "topology:", "settings: {budget: {role: producer}}\ntopology:", 13, "settings.budget", "give args or env"},
		{"variant named correct", "topology:", "variants: [{name: correct, guard: g, expect: lost, caught_by: [s]}]\ntopology:", 13, "variants[0].name", `"correct" names the pipeline without a variant`},
		{"variant without caught_by", "topology:", "variants: [{name: v, guard: g, expect: lost}]\ntopology:", 13, "variants[0].caught_by", "required"},
		{"variant env placeholder", "topology:", "variants: [{name: v, guard: g, expect: lost, caught_by: [s], env: {X: '{{n}}'}}]\ntopology:", 13, "variants[0].env.X", `placeholder "n" is not available in a process`},
		{"build placeholder", "topology:", "build: {command: [make, 'OUT={{instance}}']}\ntopology:", 13, "build.command[1]", `placeholder "instance" is not available in build (available: build_dir, target_dir)`},
		{"observe status not the article's", "topology:", "observe: {outbox: {database: orders, table: outbox, statuses: {NEW: Pendng}}}\ntopology:", 13, "observe.outbox.statuses.NEW", `"Pendng" is not an article status (did you mean Pending?`},
		{"observe status given twice", "topology:", "observe: {outbox: {database: orders, table: outbox, statuses: {NEW: Pending, OLD: Pending}}}\ntopology:", 13, "observe.outbox.statuses.OLD", `Pending is given twice (also for "NEW")`},
		{"statuses only on the outbox", "topology:", "observe: {facts: {database: orders, table: orders, statuses: {NEW: Pending}}}\ntopology:", 13, "observe.facts.statuses", "unknown field"},
		{"not a mapping", "topology:\n  exchange: orders.events\n  queue: inventory.order-events\n  routing_keys: [order.created]\n", "topology: [orders.events]\n", 13, "topology", "want a mapping (key: value), got a list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Contains(t, minimal, tt.old)
			data := strings.Replace(minimal, tt.old, tt.new, 1)
			path := filepath.Join(dir, "faultline.yaml")
			_, err := Parse(path, []byte(data))
			require.Error(t, err, data)
			var errs *Errors
			require.True(t, errors.As(err, &errs), "want *Errors, got %T: %v", err, err)
			require.Len(t, *errs, 1, "want one problem:\n%v", err)
			p := (*errs)[0]
			assert.Equal(t, path, p.File)
			assert.Equal(t, tt.line, p.Line, "%v", p)
			assert.Equal(t, tt.field, p.Field, "%v", p)
			assert.Contains(t, p.Message, tt.message)
		})
	}
}

// topology.event_id says where a message carries its event's id; left
// out, the article's: its message id, else its body's eventId.
func TestTopologyEventID(t *testing.T) {
	for _, tc := range []struct {
		line string
		want MessageID
	}{
		{"", MessageID{}},
		{"\n  event_id: message_id", MessageID{}},
		{"\n  event_id: header:x-event-id", MessageID{Header: "x-event-id"}},
		{"\n  event_id: body:data.id", MessageID{Body: "data.id"}},
	} {
		t.Run(tc.want.String(), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "faultline.yaml")
			data := strings.Replace(minimal, "  routing_keys: [order.created]", "  routing_keys: [order.created]"+tc.line, 1)
			require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
			tg, err := Load(path)
			require.NoError(t, err)
			assert.Equal(t, tc.want, tg.Topology.EventID)
		})
	}
}

func TestSchemaSQL(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "schema"), 0o755))
	for _, f := range []string{"orders.sql", "inventory.sql"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "schema", f), []byte("CREATE TABLE t ();"), 0o644))
	}
	data := strings.Replace(minimal, "  created_by: processes", "  sql: {orders: schema/orders.sql, inventory: schema/inventory.sql}", 1)
	path := filepath.Join(dir, "faultline.yaml")
	require.NoError(t, os.WriteFile(path, []byte(data), 0o644))

	tg, err := Load(path)
	require.NoError(t, err)
	assert.False(t, tg.Schema.CreatedByProcesses)
	assert.Equal(t, map[string]string{
		"orders":    filepath.Join(dir, "schema", "orders.sql"),
		"inventory": filepath.Join(dir, "schema", "inventory.sql"),
	}, tg.Schema.SQL)
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/nope.yaml")
	require.Error(t, err)
	var errs *Errors
	assert.False(t, errors.As(err, &errs), "a missing file is not a problem of the file")
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "load target: open testdata/nope.yaml: no such file")
}

func TestRender(t *testing.T) {
	tg, err := Load(reference)
	require.NoError(t, err)
	relay := tg.ByRole("relay")[0]

	var asked []string
	values := Values{
		Postgres: func(database string) (string, error) {
			asked = append(asked, database)
			return "postgres://proxy:6001/" + database, nil
		},
		AMQP:        "amqp://guest:guest@127.0.0.1:5672/run-1",
		ControlAddr: "127.0.0.1:7101",
		HTTPAddr:    "127.0.0.1:7102",
		Instance:    "relay-2",
		EventLog:    "/tmp/run/relay-2.jsonl",
		Variant:     "no-fencing",
		BuildDir:    "/tmp/build",
		TargetDir:   tg.Dir,
	}
	var args []string
	for _, a := range relay.Command {
		s, err := a.Render(values)
		require.NoError(t, err)
		args = append(args, s)
	}
	// What each placeholder of the reference's relay renders to.
	want := strings.NewReplacer(
		"{{build_dir}}", "/tmp/build",
		"{{instance}}", "relay-2",
		`{{postgres "orders"}}`, "postgres://proxy:6001/orders",
		"{{amqp}}", "amqp://guest:guest@127.0.0.1:5672/run-1",
		// one node: {{amqp_urls}} is {{amqp}}
		"{{amqp_urls}}", "amqp://guest:guest@127.0.0.1:5672/run-1",
		"{{event_log}}", "/tmp/run/relay-2.jsonl",
		"{{control_addr}}", "127.0.0.1:7101",
	)
	require.Len(t, args, len(relay.Command))
	for i, a := range relay.Command {
		assert.Equal(t, want.Replace(a.Raw), args[i], a.Field)
		assert.NotContains(t, args[i], "{{")
	}
	assert.Equal(t, "/tmp/build/relay", args[0])
	assert.Contains(t, args, "--instance=relay-2")
	assert.Contains(t, args, "--db-url=postgres://proxy:6001/orders")
	assert.Contains(t, args, "--control-addr=127.0.0.1:7101")
	assert.Equal(t, []string{"orders"}, asked, "the instance's postgres \"orders\" asks Values.Postgres")

	env, err := relay.Env[0].Value.Render(values)
	require.NoError(t, err)
	assert.Equal(t, "no-fencing", env)
	ready, err := relay.Ready.HTTP.Render(values)
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:7101/healthz", ready)

	setting := tg.Settings["retry-budget"].Args[0]
	values.Value = "3"
	s, err := setting.Render(values)
	require.NoError(t, err)
	assert.Equal(t, "--retry-budget=3", s)

	// A failing Postgres is reported with the field and line.
	values.Postgres = func(string) (string, error) { return "", errors.New("no proxy") }
	dbURL := relay.Command[slices.IndexFunc(relay.Command, func(a Template) bool { return a.Uses("postgres") })]
	_, err = dbURL.Render(values)
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("%s (line %d)", dbURL.Field, dbURL.Line))
	assert.Contains(t, err.Error(), "no proxy")

	// A log relay's slot and publication, in a process and in a schema
	// command; a workload template has neither.
	values.Slot, values.Publication = "run_1_slot", "run_1_pub"
	s, err = Template{Raw: "--slot={{slot}} --publication={{publication}}"}.Render(values)
	require.NoError(t, err)
	assert.Equal(t, "--slot=run_1_slot --publication=run_1_pub", s)
	parsed, err := Parse("faultline.yaml", []byte(strings.Replace(minimal, "  created_by: processes", "  commands: [[psql, '-c', 'CREATE PUBLICATION {{publication}} FOR TABLE outbox']]", 1)))
	require.NoError(t, err, "{{publication}} in a schema command")
	assert.Equal(t, "CREATE PUBLICATION {{publication}} FOR TABLE outbox", parsed.Schema.Commands[0][2].Raw)
}

func TestRenderWorkload(t *testing.T) {
	tg, err := Load(reference)
	require.NoError(t, err)

	var draws [][2]int
	v := WorkloadValues{N: 7, ID: "ord-42", Random: func(lo, hi int) int {
		draws = append(draws, [2]int{lo, hi})
		return hi
	}}
	body, err := tg.Workload.Create.Body.RenderWorkload(v)
	require.NoError(t, err)
	assert.Equal(t, `{"customerId":"C99999","amount":500.99,"currency":"CNY","items":[{"sku":"SKU-7","quantity":1}]}`, body)
	assert.Equal(t, [][2]int{{10000, 99999}, {1, 500}, {10, 99}}, draws)

	path, err := tg.Workload.Steps[0].Path.RenderWorkload(v)
	require.NoError(t, err)
	assert.Equal(t, "/orders/ord-42/pay", path)
	assert.True(t, tg.Workload.Steps[0].Path.Uses("id"))
	assert.False(t, tg.Workload.Create.Body.Uses("id"))
}

func TestTemplate(t *testing.T) {
	tests := []struct {
		raw  string
		uses map[string]bool
	}{
		{"{{control_addr}}", map[string]bool{"control_addr": true, "http_addr": false}},
		{`--db={{postgres "orders"}}`, map[string]bool{"postgres": true, "orders": false}},
		{"plain", map[string]bool{"plain": false}},
		{"{{if variant}}{{variant}}{{else}}x{{end}}", map[string]bool{"variant": true}},
		{"{{broken", map[string]bool{"broken": false}},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			tmpl := Template{Raw: tt.raw}
			for name, want := range tt.uses {
				assert.Equal(t, want, tmpl.Uses(name), name)
			}
		})
	}
	assert.True(t, Template{}.IsZero())
	assert.False(t, Template{Raw: "x"}.IsZero())
	s, err := Template{}.Render(Values{})
	require.NoError(t, err)
	assert.Empty(t, s)
}

func TestInstances(t *testing.T) {
	tg := &Target{}
	tests := []struct {
		p    Process
		want []string
	}{
		{Process{Name: "inventory", Instances: 1}, []string{"inventory"}},
		{Process{Name: "relay", Instances: 3}, []string{"relay-1", "relay-2", "relay-3"}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tg.Instances(tt.p))
	}
}

// Teams share parts of processes with anchors and merge keys.
func TestAnchorsAndMergeKeys(t *testing.T) {
	data := strings.Replace(minimal, "workload:", `  - name: inventory
    role: consumer
    command: [./bin/inventory, "--control-addr={{control_addr}}"]
    ready: {http: "http://{{control_addr}}/healthz"}
    <<: *common
    stop: {signal: SIGQUIT}
workload:`, 1)
	data = strings.Replace(data, "  - name: order\n", `  - name: order
    <<: &common
      env: {FAULTLINE_VARIANT: "{{variant}}"}
      stop: {signal: SIGINT}
`, 1)
	tg, err := Parse("faultline.yaml", []byte(data))
	require.NoError(t, err, data)
	require.Len(t, tg.Processes, 2)
	for _, p := range tg.Processes {
		require.Len(t, p.Env, 1, p.Name)
		assert.Equal(t, "{{variant}}", p.Env[0].Value.Raw, p.Name)
	}
	assert.Equal(t, syscall.SIGINT, tg.Processes[0].Stop.Signal)
	assert.Equal(t, syscall.SIGQUIT, tg.Processes[1].Stop.Signal, "a key of its own wins over a merged one")
}

// The outbox's own status values are read by the article's names; a value
// the target file does not map is read as it is.
func TestObserveStatuses(t *testing.T) {
	data := strings.Replace(minimal, "topology:", "observe:\n  outbox: {database: orders, table: outbox, statuses: {NEW: Pending, SENDING: Processing, SENT: Published, DEAD: Failed}}\ntopology:", 1)
	tg, err := Parse("faultline.yaml", []byte(data))
	require.NoError(t, err)
	outbox := tg.Observe.Outbox
	for value, want := range map[string]string{"NEW": "Pending", "SENDING": "Processing", "SENT": "Published", "DEAD": "Failed", "OTHER": "OTHER"} {
		assert.Equal(t, want, outbox.ArticleStatus(value), value)
	}
	ref, err := Parse("faultline.yaml", []byte(minimal))
	require.NoError(t, err)
	assert.Equal(t, "Processing", ref.Observe.Outbox.ArticleStatus("Processing"), "no statuses: the article's names")
}

// The outbox's due column is the article's unless named; a name given is
// one the table must have.
func TestObserveDue(t *testing.T) {
	data := strings.Replace(minimal, "topology:", "observe:\n  outbox: {database: orders, table: outbox, due: retry_after}\ntopology:", 1)
	tg, err := Parse("faultline.yaml", []byte(data))
	require.NoError(t, err)
	assert.Equal(t, "retry_after", tg.Observe.Outbox.Due)
	assert.False(t, tg.Observe.Outbox.DueDefault)

	bad := strings.Replace(minimal, "topology:", "observe:\n  outbox: {database: orders, table: outbox, due: \"x; DROP TABLE y\"}\ntopology:", 1)
	_, err = Parse("faultline.yaml", []byte(bad))
	assert.ErrorContains(t, err, "a column name")
}

func TestKnownFindings(t *testing.T) {
	data := minimal + `known_findings:
  - scenario: blackbox-unroutable-then-routable
    violations: [lost]
    cause: "  the library registers no basic.return listener  "
  - scenario: random-chaos
    violations: [lost, stuck-row]
    cause: >
      a folded
      cause
`
	tg, err := parseWithin(t, "faultline.yaml", []byte(data))
	require.NoError(t, err)
	require.Len(t, tg.KnownFindings, 2)
	assert.Equal(t, KnownFinding{Scenario: "blackbox-unroutable-then-routable", Violations: []string{"lost"},
		Cause: "the library registers no basic.return listener", Line: 18}, tg.KnownFindings[0])
	assert.Equal(t, []string{"lost", "stuck-row"}, tg.KnownFindings[1].Violations)
	assert.Equal(t, "a folded cause", tg.KnownFindings[1].Cause)
	k, ok := tg.KnownFinding("random-chaos")
	assert.True(t, ok)
	assert.Equal(t, 21, k.Line)
	_, ok = tg.KnownFinding("broker-restart")
	assert.False(t, ok)

	tg, err = parseWithin(t, "faultline.yaml", []byte(minimal))
	require.NoError(t, err)
	assert.Empty(t, tg.KnownFindings)
}

// Each mistake in known_findings is one problem naming its line and field.
func TestKnownFindingsMistakes(t *testing.T) {
	entry := func(body string) string { return minimal + "known_findings:\n" + body }
	tests := []struct {
		name    string
		data    string
		line    int
		field   string
		message string
	}{
		{"not a list", minimal + "known_findings: {scenario: x}\n", 17, "known_findings", "want a list"},
		{"no scenario", entry("  - {violations: [lost], cause: c}\n"), 18, "known_findings[0].scenario", "required"},
		{"empty scenario", entry("  - {scenario: '', violations: [lost], cause: c}\n"), 18, "known_findings[0].scenario", "must not be empty"},
		{"scenario not a name", entry("  - {scenario: '../x', violations: [lost], cause: c}\n"), 18, "known_findings[0].scenario", "is not a scenario name"},
		{"scenario too long", entry("  - {scenario: " + strings.Repeat("a", 101) + ", violations: [lost], cause: c}\n"), 18, "known_findings[0].scenario", "at most 100"},
		{"scenario a list", entry("  - {scenario: [a], violations: [lost], cause: c}\n"), 18, "known_findings[0].scenario", "want a string"},
		{"duplicate scenario", entry("  - {scenario: a, violations: [lost], cause: c}\n  - {scenario: a, violations: [phantom], cause: d}\n"), 19,
			"known_findings[1].scenario", `known finding of scenario "a" given twice (first at line 18)`},
		{"no violations", entry("  - {scenario: a, cause: c}\n"), 18, "known_findings[0].violations", "required"},
		{"empty violations", entry("  - {scenario: a, violations: [], cause: c}\n"), 18, "known_findings[0].violations", "must name at least one violation kind"},
		{"violations a string", entry("  - {scenario: a, violations: lost, cause: c}\n"), 18, "known_findings[0].violations", "want a list"},
		{"unknown kind", entry("  - {scenario: a, violations: [lose], cause: c}\n"), 18, "known_findings[0].violations[0]", "did you mean lost?"},
		{"duplicate kind", entry("  - {scenario: a, violations: [lost, lost], cause: c}\n"), 18, "known_findings[0].violations[1]", `violation kind "lost" given twice`},
		{"no cause", entry("  - {scenario: a, violations: [lost]}\n"), 18, "known_findings[0].cause", "required"},
		{"empty cause", entry("  - {scenario: a, violations: [lost], cause: ''}\n"), 18, "known_findings[0].cause", "must not be empty"},
		{"blank cause", entry("  - {scenario: a, violations: [lost], cause: '   '}\n"), 18, "known_findings[0].cause", "must not be empty"},
		{"cause a mapping", entry("  - {scenario: a, violations: [lost], cause: {a: b}}\n"), 18, "known_findings[0].cause", "want a string"},
		{"unknown field", entry("  - {scenario: a, violations: [lost], cause: c, seeds: [1]}\n"), 18, "known_findings[0].seeds", "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseWithin(t, "faultline.yaml", []byte(tt.data))
			p := oneProblem(t, err)
			assert.Equal(t, tt.line, p.Line, "%v", p)
			assert.Equal(t, tt.field, p.Field, "%v", p)
			assert.Contains(t, p.Message, tt.message)
		})
	}
}

func TestInboxPending(t *testing.T) {
	tests := []struct {
		name string
		file string
		want *Query
	}{
		{"left out: no default", minimal, nil},
		{"given", strings.Replace(minimal, "topology:", "contract:\n  inbox_pending: {database: inventory, sql: SELECT event_id FROM inbox WHERE applied_at IS NULL}\ntopology:", 1),
			&Query{Database: "inventory", SQL: "SELECT event_id FROM inbox WHERE applied_at IS NULL", Line: 14}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg, err := Parse(filepath.Join(t.TempDir(), "faultline.yaml"), []byte(tt.file))
			require.NoError(t, err)
			assert.Equal(t, tt.want, tg.Contract.InboxPending)
		})
	}
}

// TestUsesLink: a process has a link to the database where it is handed
// {{postgres}}, and to the broker where it is handed {{amqp}} or
// {{amqp_urls}} (every node's address is one of its links).
func TestUsesLink(t *testing.T) {
	for _, tc := range []struct {
		name     string
		command  []string
		pg, amqp bool
	}{
		{"both", []string{"app", `--db={{postgres "orders"}}`, "--amqp={{amqp}}"}, true, true},
		{"every broker node only", []string{"app", "--amqp-urls={{amqp_urls}}"}, false, true},
		{"neither", []string{"app", "--instance={{instance}}"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Process{Name: "p"}
			for _, arg := range tc.command {
				p.Command = append(p.Command, Template{Raw: arg})
			}
			assert.Equal(t, tc.pg, p.UsesLink("pg"))
			assert.Equal(t, tc.amqp, p.UsesLink("amqp"))
			assert.False(t, p.UsesLink("redis"), "an unknown link is not used")
		})
	}
}
