package target

import (
	"strconv"
	"strings"
)

// Init returns the black-box form of a target file for a new pipeline
// (what `faultline init` writes): what faultline needs to start, drive and
// judge the pipeline from outside — databases, processes and their
// readiness, workload, topology, the contract's two required queries and
// the tables it watches — each under a comment saying what it is. The
// protocol's parts (event log, crash points, control endpoints) are there
// only as comments. Its names are those of the article's pipeline (the
// reference), so that a pipeline built from the article needs only its
// processes' commands; it parses without error. The name is made a slug
// first (see Slug), as the loader wants one.
func Init(name string) []byte {
	return []byte(strings.NewReplacer(
		"@NAME@", strconv.Quote(Slug(name)),
		"@FACTS@", indent(defaultFactsSQL, 6),
		"@EFFECTS@", indent(defaultEffectsSQL, 6),
		"@WORKLOAD_TOPOLOGY@", workloadTopology,
	).Replace(blackBoxTemplate))
}

// InitProtocol returns the full form of a target file for a new pipeline
// built from the article that speaks faultline's protocol (`faultline init
// --protocol`): every section present, each with a comment saying what it
// is and what faultline hands in. It parses without error; its commands
// point at ./bin/..., which the build makes.
func InitProtocol(name string) []byte {
	return []byte(strings.NewReplacer(
		"@NAME@", strconv.Quote(Slug(name)),
		"@FACTS@", indent(defaultFactsSQL, 6),
		"@EFFECTS@", indent(defaultEffectsSQL, 6),
		"@OUTBOX@", indent(defaultOutboxSQL, 6),
		"@INBOX@", defaultInboxSQL,
		"@PAYLOAD@", defaultPayloadSQL,
		"@INBOX_EXPIRE@", defaultInboxExpireSQL,
		"@WORKLOAD_TOPOLOGY@", workloadTopology,
	).Replace(initTemplate))
}

// Slug makes name a pipeline name the loader takes (a folder's name, say):
// lowercase, every run of other characters one "-", no "..", from a letter
// or digit, at most 63 characters; "pipeline" when nothing is left.
func Slug(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		case r == '.' && !strings.HasSuffix(b.String(), "."):
			b.WriteRune(r)
		case !strings.HasSuffix(b.String(), "-"):
			b.WriteRune('-')
		}
	}
	s := strings.TrimLeft(b.String(), "._-")
	s = strings.TrimRight(s[:min(len(s), 63)], "-")
	if s == "" {
		return "pipeline"
	}
	return s
}

// workloadTopology is the workload and topology sections both forms of
// the file write: the reference's business and broker names.
const workloadTopology = `# What makes one business fact. create is one request; steps are the
# follow-ups of the same aggregate. Each: method (default POST), path and
# body (templates with {{n}}, the fact's number from 0; {{random LO HI}}, an
# int drawn from the run's seed; and in steps {{id}}, the field named by
# create's id in its answer: the aggregate_id of the facts the contract
# reads, so that facts-kept checks each acknowledged aggregate by it),
# headers (default Content-Type:
# application/json with a body), ok (default [200, 201]) and done (statuses
# meaning "already done", e.g. 409 for a step retried after a crash).
workload:
  create:
    method: POST
    path: /orders
    body: '{"customerId":"C{{random 10000 99999}}","amount":{{random 1 500}},"currency":"CNY","items":[{"sku":"SKU-{{n}}","quantity":1}]}'
    id: orderId
    ok: [201]
  steps:
    - {method: POST, path: "/orders/{{id}}/pay", ok: [201], done: [409]}
    - {method: POST, path: "/orders/{{id}}/cancel", ok: [201], done: [409]}

# The broker's side: the exchange the relays publish to, the queue the
# consumers read, its dead-letter queue (optional) and the routing keys.
topology:
  exchange: orders.events
  queue: inventory.order-events
  dead_letter_queue: inventory.order-events.dead
  routing_keys: [order.created, order.paid, order.cancelled]`

// indent indents every line of s by n spaces, for a YAML block scalar.
func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = pad + l
	}
	return strings.Join(lines, "\n")
}

const initTemplate = `# faultline target file: how faultline starts, drives, attacks and judges
# this pipeline (an outbox → RabbitMQ → inbox pipeline built from the
# article). faultline knows the pipeline only through this file and the
# protocol (crash points, event log, /healthz and /crashpoints).
#
# Strings marked "template" may use placeholders, which faultline fills per
# run and per process instance:
#   {{postgres "db"}}  URL of the run's fresh database db (one of databases)
#   {{amqp}}           URL of the run's fresh RabbitMQ vhost
#   {{amqp_urls}}      that vhost on every node of a clustered broker, comma-
#                      separated, the instance's own node first ({{amqp}}
#                      alone on one node); a target that takes it runs the
#                      cluster scenarios (gate --profile production)
#   {{control_addr}}   host:port the instance serves /healthz and /crashpoints on
#   {{http_addr}}      host:port the instance serves its API on (the producer)
#   {{instance}}       instance name, e.g. relay-2
#   {{event_log}}      path the instance writes its protocol event log to
#   {{variant}}        the variant under test (see variants)
#   {{build_dir}}      folder faultline makes for the build, removed after the run
#   {{target_dir}}     this file's folder
faultline: 1
name: @NAME@

# Run once per faultline start, in this file's folder, before anything
# starts. Template: only {{build_dir}} and {{target_dir}}.
build:
  command: [go, build, -o, ./bin/, ./cmd/order, ./cmd/relay, ./cmd/inventory]
  timeout: 10m

# Each run gets a fresh PostgreSQL database per name (lowercase, [a-z0-9_]).
databases: [orders, inventory]

# How the fresh databases get their tables, exactly one of:
#   created_by: processes          every program applies its own at start
#   commands: [[args...], ...]     run in order ({{postgres "db"}} is a direct URL)
#   sql: {orders: schema/orders.sql, ...}   files relative to this folder
schema:
  created_by: processes

# The programs. Each: name, role (producer, relay or consumer), instances,
# command and env (templates), event_log (it writes protocol event-log lines
# to {{event_log}}), control (where faultline reaches its /crashpoints;
# default {{control_addr}}), ready (exactly one of http: URL answering 200,
# tcp: host:port accepting, log: regexp of an output line; timeout default
# 60s: a bound, not a wait), stop (signal, default SIGTERM; timeout before SIGKILL, default 3s),
# restart (what happens when it exits by itself, as production's supervisor
# would do it: {policy: always, backoff: 1s} starts it again after the
# backoff, at most 1m, for as long as the run lasts; default {policy:
# never}, and a run whose process exited by itself is indeterminate),
# crashpoints (protocol window: the program's own point name; needs
# event_log: true) and http (where the workload sends requests; default
# {{http_addr}}).
processes:
  - name: order
    role: producer
    command:
      - "{{target_dir}}/bin/order"
      - --instance={{instance}}
      - --db-url={{postgres "orders"}}
      - --event-log={{event_log}}
      - --listen={{http_addr}}
    env:
      FAULTLINE_VARIANT: "{{variant}}"
    event_log: true
    # one server: the API, /healthz and /crashpoints
    control: "{{http_addr}}"
    ready:
      http: "http://{{http_addr}}/healthz"
      timeout: 60s
    stop: {signal: SIGTERM, timeout: 3s}
    crashpoints:
      producer.before-commit: order.before-commit
      producer.after-commit: order.after-commit

  - name: relay
    role: relay
    instances: 2
    command:
      - "{{target_dir}}/bin/relay"
      - --instance={{instance}}
      - --db-url={{postgres "orders"}}
      - --amqp-url={{amqp}}
      - --event-log={{event_log}}
      - --control-addr={{control_addr}}
      - --lease=2s
    env:
      FAULTLINE_VARIANT: "{{variant}}"
    event_log: true
    ready:
      http: "http://{{control_addr}}/healthz"
    stop: {signal: SIGTERM, timeout: 3s}
    restart: {policy: always, backoff: 500ms}
    crashpoints:
      relay.after-claim: relay.after-claim
      relay.after-publish: relay.after-publish
      relay.after-confirm: relay.after-confirm
      relay.after-mark: relay.after-mark
      relay.before-renew: relay.before-renew

  - name: inventory
    role: consumer
    command:
      - "{{target_dir}}/bin/inventory"
      - --instance={{instance}}
      - --db-url={{postgres "inventory"}}
      - --amqp-url={{amqp}}
      - --event-log={{event_log}}
      - --control-addr={{control_addr}}
    env:
      FAULTLINE_VARIANT: "{{variant}}"
    event_log: true
    ready:
      http: "http://{{control_addr}}/healthz"
    stop: {signal: SIGTERM, timeout: 3s}
    crashpoints:
      consumer.after-receive: inventory.after-receive
      consumer.before-commit: inventory.before-commit
      consumer.after-commit: inventory.after-commit

# How the relays take work from the outbox: claim (the article's: rows
# claimed by a status column, with a lease and a claim id), offset (a
# position kept in a table of its own, the outbox rows never updated: name
# that table, and give contract.pending, the committed events beyond it), or
# log (logical replication). Leave it out to say nothing: then nothing is
# assumed beyond what the contract gives.
#   relay: {model: offset, position: {database: orders, table: outbox_offsets}}
relay:
  model: claim

# The relays' claim lease (--lease above; default 30s): a scenario that
# holds a claim past it holds it at least this long.
# rides_out (optional): the longest spell of the queue's bindings gone
# that the relays ride out with no row ending Failed; explore checks it.
timing:
  lease: 2s
  # rides_out: 1500ms

@WORKLOAD_TOPOLOGY@

# The contract, as SQL over the pipeline's own tables: facts (aggregate_id,
# sequence, event_id of every fact committed), effects (event_id,
# aggregate_id, sequence of every effect applied), and optionally outbox,
# inbox, held_back, payload, inbox_expire, pending (event_id of every
# committed event an offset relay has not passed yet) and inbox_pending
# (event_id of every event a consumer that stores first and applies later
# has in its inbox, not applied yet: the run is not settled while it returns
# rows). These are the defaults, the article's schema: leave out what you
# keep as is.
#   inbox_pending: {database: inventory, sql: "SELECT event_id FROM inbox WHERE applied_at IS NULL"}
contract:
  facts:
    database: orders
    sql: |
@FACTS@
  effects:
    database: inventory
    sql: |
@EFFECTS@
  outbox:
    database: orders
    sql: |
@OUTBOX@
  inbox:
    database: inventory
    sql: @INBOX@
  payload:
    database: orders
    sql: @PAYLOAD@
  inbox_expire:
    database: inventory
    sql: @INBOX_EXPIRE@

# The tables faultline may watch from outside, for the black-box scenarios
# (they need no crash point and no event log): it installs triggers on them
# in each run's own databases — an audit trail of every outbox write with
# its writer, and a notification the moment a writing transaction commits.
# These are the article's tables; name yours if they differ. If your
# outbox's status values are not the article's, map them:
#   statuses: {NEW: Pending, SENDING: Processing, SENT: Published, DEAD: Failed}
# due: the column a retry writes the row's next due time in (the article's
# next_attempt_at, watched where the table has it): the backoff is read
# from it, whatever the machine's speed. lease: the column a claim writes
# its lease's end in (the article's locked_until, watched where the table
# has it): lease-kept checks no row is claimed before it.
observe:
  outbox: {database: orders, table: outbox_messages, event_id: event_id, status: status, claim: locked_by}
  facts: {database: orders, table: orders}
  effects: {database: inventory, table: inventory_reservations, event_id: event_id}

# Knobs a scenario may turn, as this pipeline's own arguments or
# environment for the processes of one role; templates may use {{value}}:
#   retry-budget: {role: relay, args: ["--retry-budget={{value}}"]}
# explore: {value, opens: [windows]} turns a setting on when explore
# attacks a window that only opens with it:
#   lease-renewal: {role: relay, args: ["--renew-every={{value}}"], explore: {value: 400ms, opens: [relay.before-renew]}}
settings: {}

# The broken variants (negative controls): each removes one guard (chosen
# by {{variant}} above, or by its env), and names the violation it causes
# (lost, phantom, duplicate-effect, stale-write, stuck-row, stuck-position,
# gave-up-early, out-of-order, not-live, fact-lost, poison-dropped, valid-dead-lettered,
# live-claim-taken) and the
# scenarios that must catch it:
#   - {name: no-inbox, guard: inbox row, expect: duplicate-effect, caught_by: [consumer-crash-after-commit]}
variants: []

# Known findings: weaknesses of the pipeline as built (of a library it
# uses) that the gate reproduces on every run of a scenario. A run of
# that scenario failing with exactly these violation kinds does not fail
# the gate; one that passes does (the entry is stale: remove it).
#   - {scenario: blackbox-unroutable-then-routable, violations: [lost], cause: "the AMQP library drops basic.return: an unroutable publish is confirmed and skipped"}
known_findings: []
`

const blackBoxTemplate = `# faultline target file, black-box form: how faultline starts, drives,
# attacks and judges this pipeline from outside — its processes, the
# requests that make its business facts, its broker topology and SQL over
# its own tables. Nothing of faultline runs inside the pipeline.
#
# The names below (databases orders and inventory, exchange orders.events,
# queue inventory.order-events, tables orders, outbox_messages,
# inventory_reservations) are those of the article's pipeline, faultline's
# reference: a pipeline built from the article needs only its processes'
# commands. For yours, write your own names.
#
# Next: faultline check-target (checks this file, then starts the pipeline
# once and checks every part of it), faultline list, faultline gate.
# faultline init --protocol writes the full form, for a pipeline that
# speaks faultline's protocol (docs/protocol.md): crash points, an event
# log, control endpoints, settings and broken variants.
#
# Templates: strings may use placeholders faultline fills per run and per
# process instance:
#   {{postgres "db"}}  URL of the run's fresh database db (one of databases)
#   {{amqp}}           URL of the run's fresh RabbitMQ vhost
#   {{http_addr}}      host:port the instance serves its API on (the producer)
#   {{control_addr}}   a free host:port of the instance's own (e.g. for /healthz)
#   {{instance}}       instance name, e.g. relay-2
#   {{target_dir}}     this file's folder
faultline: 1
name: @NAME@

# Run once per faultline start, in this file's folder, before anything
# starts (template: {{build_dir}}, a folder faultline makes, and
# {{target_dir}}). Leave it out when the programs are built already.
#   build: {command: [go, build, -o, ./bin/, ./cmd/order, ./cmd/relay, ./cmd/inventory], timeout: 10m}

# Each run gets a fresh PostgreSQL database per name (lowercase, [a-z0-9_]).
databases: [orders, inventory]

# How the fresh databases get their tables, exactly one of:
#   created_by: processes          every program applies its own at start
#   commands: [[args...], ...]     run in order ({{postgres "db"}} is a direct URL)
#   sql: {orders: schema/orders.sql, ...}   files relative to this folder
schema:
  created_by: processes

# The programs: a producer (the service whose API makes business facts and
# writes the outbox in the same transaction), the relays (outbox → broker)
# and a consumer (broker → inbox and effect). Commands run in this file's
# folder. Each process is ready (exactly one of: http: a URL answering
# 200, tcp: host:port accepting, log: a regexp of an output line; timeout
# default 60s) before the workload starts, and is stopped with SIGTERM
# (stop: {signal, timeout} before SIGKILL, default 3s).
#
# The protocol's parts, for a pipeline that speaks it (docs/protocol.md),
# per process:
#   event_log: true          it writes protocol event-log lines to {{event_log}}
#   control: "{{http_addr}}" where faultline reaches its /crashpoints (default {{control_addr}})
#   crashpoints: {relay.after-confirm: relay.after-confirm}   protocol window: its point's name
# Without them faultline judges from outside (the contract, the outbox's
# writes, a tap queue, the broker): the blackbox-* scenarios.
processes:
  - name: order
    role: producer
    command:
      - ./bin/order
      - --db-url={{postgres "orders"}}
      - --listen={{http_addr}}
    ready:
      http: "http://{{http_addr}}/healthz"

  - name: relay
    role: relay
    instances: 2
    command:
      - ./bin/relay
      - --db-url={{postgres "orders"}}
      - --amqp-url={{amqp}}
      - --control-addr={{control_addr}}
    # a relay that serves no HTTP: ready: {log: "relay started"}
    ready:
      http: "http://{{control_addr}}/healthz"
    # restart: {policy: always, backoff: 1s} starts it again when it exits
    # by itself, as production's supervisor would (default: never; a run
    # whose process exited by itself is indeterminate)

  - name: inventory
    role: consumer
    command:
      - ./bin/inventory
      - --db-url={{postgres "inventory"}}
      - --amqp-url={{amqp}}
      - --control-addr={{control_addr}}
    ready:
      http: "http://{{control_addr}}/healthz"

@WORKLOAD_TOPOLOGY@

# The contract, as SQL over the pipeline's own tables: facts (aggregate_id,
# sequence, event_id of every fact committed) and effects (event_id,
# aggregate_id, sequence of every effect applied). Optional, with the
# article's tables as defaults: outbox, inbox, payload, inbox_expire (and
# held_back, pending, inbox_pending); faultline init --protocol writes
# them out.
contract:
  facts:
    database: orders
    sql: |
@FACTS@
  effects:
    database: inventory
    sql: |
@EFFECTS@

# The tables faultline watches from outside (the blackbox-* scenarios): it
# installs triggers on them in each run's own databases — an audit trail of
# every outbox write with its writer, and a notification the moment a
# writing transaction commits. If your outbox's status values are not the
# article's, map them:
#   statuses: {NEW: Pending, SENDING: Processing, SENT: Published, DEAD: Failed}
# due: the column a retry writes the row's next due time in (the article's
# next_attempt_at, watched where the table has it): the backoff is read
# from it, whatever the machine's speed. lease: the column a claim writes
# its lease's end in (the article's locked_until, watched where the table
# has it): lease-kept checks no row is claimed before it.
observe:
  outbox: {database: orders, table: outbox_messages, event_id: event_id, status: status, claim: locked_by}
  facts: {database: orders, table: orders}
  effects: {database: inventory, table: inventory_reservations, event_id: event_id}

# How the relays take work from the outbox, if you know: claim (rows
# claimed by a status column, with a lease), offset (a position in a table
# of its own) or log (logical replication); the relay windows are timed by
# it. Left out, nothing is assumed beyond what the contract gives.
#   relay: {model: claim}
# The relays' claim lease (default 30s): a scenario that holds a claim
# past it holds it at least this long.
#   timing: {lease: 30s}
`
