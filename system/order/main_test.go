package order_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/infra/infratest"
	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/crashpoint"
	"github.com/faultline-dev/faultline/system/order"
	"github.com/faultline-dev/faultline/system/schema"
)

// testInfra is this test binary's PostgreSQL (and RabbitMQ, which these
// tests do not use); each test gets its own database on it.
var testInfra infra.Infra

func TestMain(m *testing.M) {
	infratest.Main(m, func(in infra.Infra) { testInfra = in })
}

// waitTimeout bounds every wait for a condition.
const waitTimeout = 30 * time.Second

// newDatabase creates a fresh database for the test and returns its name,
// dropped when the test ends.
func newDatabase(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "ord_" + hex.EncodeToString(b)
	require.NoError(t, testInfra.CreateDatabase(t.Context(), name))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := testInfra.DropDatabase(ctx, name); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	return name
}

// env is one test's order service, mounted on an httptest server over a
// fresh database with the schema applied.
type env struct {
	t       *testing.T
	db      *pgxpool.Pool
	srv     *httptest.Server
	logPath string
	points  *crashpoint.Set
}

func newEnv(t *testing.T) *env {
	t.Helper()
	name := newDatabase(t)
	db, err := pgxpool.New(t.Context(), testInfra.PostgresURL(name))
	require.NoError(t, err)
	t.Cleanup(db.Close)
	require.NoError(t, schema.ApplyOrders(t.Context(), db))

	logPath := filepath.Join(t.TempDir(), "order.jsonl")
	log, err := eventlog.Open(logPath, "order")
	require.NoError(t, err)
	t.Cleanup(func() { _ = log.Close() })
	points := crashpoint.NewSet("order", log)

	mux := http.NewServeMux()
	order.New(db, log, points).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &env{t: t, db: db, srv: srv, logPath: logPath, points: points}
}

// post sends body to path and returns the status and the answer.
func (e *env) post(path, body string) (int, string) {
	e.t.Helper()
	return do(e.t, e.srv.Client(), http.MethodPost, e.srv.URL+path, body)
}

func do(t *testing.T, client *http.Client, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// count returns the number of rows in table.
func (e *env) count(table string) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.db.QueryRow(e.t.Context(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

func (e *env) events() []eventlog.Entry {
	e.t.Helper()
	return readLog(e.t, e.logPath)
}

func readLog(t *testing.T, path string) []eventlog.Entry {
	t.Helper()
	es, err := eventlog.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	return es
}

// waitLog polls the event log at path until cond finds what it wants.
func waitLog(t *testing.T, path, what string, cond func([]eventlog.Entry) bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		if cond(readLog(t, path)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s in %s", waitTimeout, what, path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
