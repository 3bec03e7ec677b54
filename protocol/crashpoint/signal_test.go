package crashpoint

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestActionSupported(t *testing.T) {
	for _, tc := range []struct {
		goos, action string
		ok           bool
	}{
		{"linux", Kill, true},
		{"linux", Pause, true},
		{"linux", Delay, true},
		{"darwin", Delay, true},
		{"windows", Delay, true},
		{"darwin", Hold, true},
		{"linux", Hold, true},
		{"darwin", Kill, false},
		{"darwin", Pause, false},
		{"windows", Kill, false},
		{"windows", Pause, false},
		{"freebsd", Kill, false},
	} {
		t.Run(tc.goos+"/"+tc.action, func(t *testing.T) {
			err := actionSupported(tc.goos, tc.action)
			if tc.ok {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, errors.ErrUnsupported)
			assert.Contains(t, err.Error(), "action "+tc.action+" is not supported on "+tc.goos)
			assert.Contains(t, err.Error(), "only delay and hold work here")
		})
	}
}

// A Set as NewSet makes it on this OS: kill and pause arm on Linux only.
func TestArmOnThisOS(t *testing.T) {
	s := NewSet("relay", eventlog.New(&syncBuffer{}, "relay-1"), RelayAfterClaim)
	for _, action := range []string{Kill, Pause} {
		err := s.Arm(RelayAfterClaim, Arming{Action: action, Hit: 1})
		if runtime.GOOS == "linux" {
			assert.NoError(t, err, action)
		} else {
			assert.ErrorIs(t, err, errors.ErrUnsupported, action)
		}
		require.NoError(t, s.Disarm(RelayAfterClaim))
	}
	assert.NoError(t, s.Arm(RelayAfterClaim, Arming{Action: Delay, Delay: 1, Hit: 1}))
}

// Where the OS cannot act, arming leaves the point unarmed, and the
// control endpoint answers 501 with the reason.
func TestArmRefusedWhereTheOSCannotAct(t *testing.T) {
	s, _ := newTestSet(t)
	s.canAct = func(action string) error { return actionSupported("darwin", action) }

	err := s.Arm(RelayAfterClaim, Arming{Action: Kill, Hit: 1})
	require.Error(t, err)
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	assert.Contains(t, err.Error(), `crash point "relay.after-claim" for process relay: action kill is not supported on darwin`)

	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	code, body := call(t, srv, http.MethodPut, "/crashpoints/"+RelayAfterConfirm, "pause@2")
	assert.Equal(t, http.StatusNotImplemented, code)
	assert.Contains(t, body, "action pause is not supported on darwin")
	code, _ = call(t, srv, http.MethodPut, "/crashpoints/"+RelayAfterMark, "delay:5ms@*")
	assert.Equal(t, http.StatusNoContent, code)

	sts := list(t, srv)
	assert.False(t, sts[RelayAfterClaim].Armed)
	assert.False(t, sts[RelayAfterConfirm].Armed)
	assert.True(t, sts[RelayAfterMark].Armed)
}
