package redact

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestURL(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"postgres", "postgres://postgres:s3cret@127.0.0.1:5432/orders?sslmode=disable",
			"postgres://postgres:xxxxx@127.0.0.1:5432/orders?sslmode=disable"},
		{"amqp with vhost", "amqp://fl-user:p%40ss@127.0.0.1:5672/%2F", "amqp://fl-user:xxxxx@127.0.0.1:5672/%2F"},
		{"http management", "http://admin:hunter2@mq:15672", "http://admin:xxxxx@mq:15672"},
		{"no password", "postgres://postgres@127.0.0.1:5432/db", "postgres://postgres@127.0.0.1:5432/db"},
		{"password in the query", "postgres://db:5432/x?user=u&password=pw", "postgres://db:5432/x?password=xxxxx&user=u"},
		{"DSN", "host=db port=5432 user=postgres password=s3cret dbname=x", "host=db port=5432 user=postgres password=xxxxx dbname=x"},
		{"DSN quoted with escapes", `host=db password='it\'s a \\ b' dbname=x`, "host=db password=xxxxx dbname=x"},
		{"DSN quoted simple", "user=u password='a b' dbname=x", "user=u password=xxxxx dbname=x"},
		{"not a URL", "plain text", "plain text"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, URL(tc.in))
		})
	}
}

func TestRedactorString(t *testing.T) {
	const pgPass, mqPass = "9f2c4e6a8b0d1f3e5a7c9b1d3f5e7a9c2b4d6f8e0a1c3e5b", "p@ss/word"
	r := New(pgPass, mqPass, "")
	tests := []struct {
		name, in, want string
	}{
		{"URL in a log line", "spawned pid 7: relay --pg postgres://postgres:" + pgPass + "@127.0.0.1:40001/x",
			"spawned pid 7: relay --pg postgres://postgres:xxxxx@127.0.0.1:40001/x"},
		{"bare known secret", "PGPASSWORD=" + pgPass + " relay", "PGPASSWORD=xxxxx relay"},
		{"secret URL-escaped in a URL", "amqp://u:p%40ss%2Fword@h:5672/v", "amqp://u:xxxxx@h:5672/v"},
		{"secret query-escaped", "x=p%40ss%2Fword&y=1", "x=xxxxx&y=1"},
		{"env of a DSN", "DSN=host=h password=other dbname=d", "DSN=host=h password=xxxxx dbname=d"},
		{"several URLs on a line", "a=amqp://u:one@h/ b=http://v:two@m:15672 c", "a=amqp://u:xxxxx@h/ b=http://v:xxxxx@m:15672 c"},
		{"nothing secret", "relay-1 exited: killed by SIGKILL (password policy ok)", "relay-1 exited: killed by SIGKILL (password policy ok)"},
		{"empty", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := r.String(tc.in)
			assert.Equal(t, tc.want, got)
			assert.NotContains(t, got, pgPass)
		})
	}

	t.Run("nil redactor masks shapes only", func(t *testing.T) {
		var none *Redactor
		assert.Equal(t, "amqp://u:xxxxx@h/", none.String("amqp://u:p@h/"))
		assert.Equal(t, "token "+pgPass, none.String("token "+pgPass))
	})
}

func TestRedactorError(t *testing.T) {
	r := New("hunter2")
	base := fmt.Errorf("dial amqp://u:hunter2@h:5672/: %w", fs.ErrNotExist)
	err := r.Error(fmt.Errorf("start: %w", base))
	require.Error(t, err)
	assert.Equal(t, "start: dial amqp://u:xxxxx@h:5672/: file does not exist", err.Error())
	assert.ErrorIs(t, err, fs.ErrNotExist, "the chain survives")

	plain := errors.New("nothing here")
	assert.Same(t, plain, r.Error(plain))
	assert.NoError(t, r.Error(nil))
}

func TestRedactorWriter(t *testing.T) {
	var b bytes.Buffer
	w := New("hunter2").Writer(&b)
	n, err := fmt.Fprintf(w, "env PASS=hunter2 url=postgres://p:hunter2@h/db\n")
	require.NoError(t, err)
	assert.Equal(t, len("env PASS=hunter2 url=postgres://p:hunter2@h/db\n"), n, "reports the caller's bytes")
	assert.Equal(t, "env PASS=xxxxx url=postgres://p:xxxxx@h/db\n", b.String())
}
