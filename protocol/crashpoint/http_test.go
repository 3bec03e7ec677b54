package crashpoint

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func call(t *testing.T, srv *httptest.Server, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func list(t *testing.T, srv *httptest.Server) map[string]Status {
	t.Helper()
	code, body := call(t, srv, http.MethodGet, "/crashpoints", "")
	require.Equal(t, http.StatusOK, code, body)
	var sts []Status
	require.NoError(t, json.Unmarshal([]byte(body), &sts), body)
	out := map[string]Status{}
	for _, st := range sts {
		out[st.Name] = st
	}
	return out
}

func TestHandler(t *testing.T) {
	s, rec := newTestSet(t)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)

	// GET lists every point of the process, unarmed.
	sts := list(t, srv)
	require.Len(t, sts, len(s.Names()))
	for _, n := range s.Names() {
		assert.Equal(t, Status{Name: n}, sts[n])
	}

	// PUT arms: 204, visible in the listing and effective on Hit.
	code, body := call(t, srv, http.MethodPut, "/crashpoints/"+RelayAfterConfirm, "kill@2\n")
	assert.Equal(t, http.StatusNoContent, code, body)
	code, body = call(t, srv, http.MethodPut, "/crashpoints/"+RelayAfterClaim, "delay:200ms@*")
	assert.Equal(t, http.StatusNoContent, code, body)
	sts = list(t, srv)
	assert.Equal(t, Status{Name: RelayAfterConfirm, Armed: true, Arming: "kill@2"}, sts[RelayAfterConfirm])
	assert.Equal(t, Status{Name: RelayAfterClaim, Armed: true, Arming: "delay:200ms@*"}, sts[RelayAfterClaim])
	s.Hit(RelayAfterConfirm)
	s.Hit(RelayAfterConfirm)
	assert.Equal(t, []string{Kill}, rec.got())
	assert.Equal(t, Status{Name: RelayAfterConfirm, Hits: 2, Fired: 1}, list(t, srv)[RelayAfterConfirm])

	// PUT with a bad body: 400 with the parse error, nothing armed.
	for _, bad := range []string{"explode", "kill@0", "delay", ""} {
		code, body = call(t, srv, http.MethodPut, "/crashpoints/"+RelayAfterMark, bad)
		assert.Equal(t, http.StatusBadRequest, code, "body %q", bad)
		assert.Contains(t, body, "crash point arming", "body %q", bad)
	}
	assert.False(t, list(t, srv)[RelayAfterMark].Armed)

	// PUT to an unknown name: 404 naming the known points.
	code, body = call(t, srv, http.MethodPut, "/crashpoints/relay.nowhere", "kill")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, "relay.nowhere")
	assert.Contains(t, body, RelayAfterConfirm)

	// DELETE disarms: 204; Hit no longer acts.
	code, body = call(t, srv, http.MethodDelete, "/crashpoints/"+RelayAfterClaim, "")
	assert.Equal(t, http.StatusNoContent, code, body)
	assert.False(t, list(t, srv)[RelayAfterClaim].Armed)
	code, _ = call(t, srv, http.MethodDelete, "/crashpoints/relay.nowhere", "")
	assert.Equal(t, http.StatusNotFound, code)

	// Other methods are refused.
	code, _ = call(t, srv, http.MethodPost, "/crashpoints/"+RelayAfterClaim, "kill")
	assert.Equal(t, http.StatusMethodNotAllowed, code)
}
