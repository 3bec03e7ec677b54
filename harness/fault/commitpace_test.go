package fault

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/faultline-dev/faultline/harness/supervisor"
)

// A relay past an insert seen held is frozen while another relay is not
// past it, and only while: once every relay is past it, once it commits,
// or once the relay has been frozen the hold in all, it runs again.
func TestPacerFreezesOnlyTheRelaysAhead(t *testing.T) {
	pacerWith := func(present []int64, wrote map[string]int64, frozen map[string]time.Duration) *pacer {
		p := &pacer{every: 4, last: 20, hold: 5 * time.Second, present: map[int64]bool{}, wrote: wrote, frozen: frozen,
			since: map[string]time.Time{}, procs: map[string]*supervisor.Process{"relay-1": nil, "relay-2": nil}}
		for _, n := range present {
			p.present[n], p.top = true, max(p.top, n)
		}
		return p
	}
	upTo := func(top int64, except ...int64) []int64 {
		var out []int64
	next:
		for n := int64(1); n <= top; n++ {
			for _, e := range except {
				if n == e {
					continue next
				}
			}
			out = append(out, n)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		present []int64
		wrote   map[string]int64
		frozen  map[string]time.Duration
		want    []string
	}{
		{"#4 held, relay-1 past it, relay-2 not", upTo(7, 4), map[string]int64{"relay-1": 6, "relay-2": 3}, nil, []string{"relay-1"}},
		{"#4 held, both past it", upTo(7, 4), map[string]int64{"relay-1": 6, "relay-2": 5}, nil, nil},
		{"#4 held, neither past it", upTo(7, 4), map[string]int64{"relay-1": 3, "relay-2": 2}, nil, nil},
		{"#4 committed", upTo(7), map[string]int64{"relay-1": 6, "relay-2": 3}, nil, nil},
		{"#4 missing with nothing after it: not seen held", upTo(3), map[string]int64{"relay-1": 3}, nil, nil},
		{"#24 missing: past the holds", upTo(27, 24), map[string]int64{"relay-1": 26, "relay-2": 3}, nil, nil},
		{"#5 missing: not one to hold", upTo(7, 5), map[string]int64{"relay-1": 6, "relay-2": 3}, nil, nil},
		{"frozen the hold already", upTo(7, 4), map[string]int64{"relay-1": 6, "relay-2": 3}, map[string]time.Duration{"relay-1": 5 * time.Second}, nil},
		{"#4 and #8 held, relay-2 past both, relay-1 past #4 only", upTo(11, 4, 8), map[string]int64{"relay-1": 5, "relay-2": 10}, nil, []string{"relay-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pacerWith(tc.present, tc.wrote, tc.frozen)
			var got []string
			for name := range p.toFreeze() {
				got = append(got, name)
			}
			assert.ElementsMatch(t, tc.want, got)
		})
	}
}
