package workload

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestProfilesAreValid(t *testing.T) {
	for _, p := range ProfileList() {
		assert.NoError(t, p.Spec.Validate(), p.Name)
		assert.Equal(t, p.Name, p.Spec.ProfileName(), p.Name)
		assert.NotEmpty(t, p.Sends, p.Name)
	}
}

func TestSpecValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		err  string
	}{
		{"unnamed is paced", Spec{Orders: 10}, ""},
		{"unknown profile", Spec{Profile: "tsunami", Orders: 10}, `unknown traffic profile "tsunami"`},
		{"hold of the producer", Spec{Profile: RelayBacklog, Orders: 10, Hold: &Hold{Role: "producer", Backlog: 5}}, `holds role "producer"`},
		{"backlog beyond the orders", Spec{Profile: RelayBacklog, Orders: 10, Hold: &Hold{Role: "relay", Backlog: 11}}, "a backlog of 11 of 10 facts"},
		{"no backlog", Spec{Profile: RelayBacklog, Orders: 10, Hold: &Hold{Role: "relay"}}, "a backlog of 0 of 10 facts"},
		{"a paced backlog", Spec{Profile: ConsumerBacklog, Orders: 10, Pace: time.Second, Hold: &Hold{Role: "consumer", Backlog: 5}}, "sent unpaced"},
	} {
		err := tc.spec.Validate()
		if tc.err == "" {
			assert.NoError(t, err, tc.name)
			continue
		}
		assert.ErrorContains(t, err, tc.err, tc.name)
	}
}
