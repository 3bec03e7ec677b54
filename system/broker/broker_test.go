package broker_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/system/broker"
)

const (
	a = "amqp://u:p@127.0.0.1:1001/v"
	b = "amqp://u:p@127.0.0.1:1002/v"
	c = "amqp://u:p@127.0.0.1:1003/v"
)

func TestURLs(t *testing.T) {
	cases := []struct {
		name, urls, url string
		want            []string
		err             string
	}{
		{"single url", "", a, []string{a}, ""},
		{"list wins over url", a + "," + b, c, []string{a, b}, ""},
		{"blanks dropped", " " + a + " , " + b + ",  " + c, "", []string{a, b, c}, ""},
		{"one in the list", a, "", []string{a}, ""},
		{"nothing", "", "", nil, "no broker address"},
		{"empty entry", a + ",," + b, "", nil, "address 2 is empty"},
		{"bad entry", a + ",http://x", "", nil, "address 2 is not an AMQP URL"},
		{"bad url", "", "http://x", nil, "--amqp-url: not an AMQP URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := broker.URLs(tc.urls, tc.url)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				assert.NotContains(t, err.Error(), "u:p", "an address carries the password")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestRingNext(t *testing.T) {
	cases := []struct {
		name string
		ring *broker.Ring
		want []int // positions given by successive Next calls
	}{
		{"one node", broker.NewRing([]string{a}), []int{0, 0, 0}},
		{"three nodes round robin", broker.NewRing([]string{a, b, c}), []int{0, 1, 2, 0, 1, 2, 0}},
		{"pinned stays on the first", broker.Pinned([]string{a, b, c}), []int{0, 0, 0, 0}},
	}
	urls := []string{a, b, c}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, want := range tc.want {
				url, i := tc.ring.Next()
				assert.Equal(t, want, i)
				assert.Equal(t, urls[want], url)
			}
		})
	}
}

// TestDialFirst: the first address that answers wins; a lost connection
// is followed by a dial of the node after it; a round with no answer
// returns every node's error.
func TestDialFirst(t *testing.T) {
	type step struct {
		up      map[string]bool // nodes answering during this dial
		want    int             // position connected, -1: none
		dialled []string
	}
	cases := []struct {
		name  string
		ring  *broker.Ring
		steps []step
	}{
		{"first answers", broker.NewRing([]string{a, b, c}), []step{
			{map[string]bool{a: true, b: true, c: true}, 0, []string{a}},
		}},
		{"first down: second", broker.NewRing([]string{a, b, c}), []step{
			{map[string]bool{b: true, c: true}, 1, []string{a, b}},
		}},
		{"after a loss the next node, round robin", broker.NewRing([]string{a, b, c}), []step{
			{map[string]bool{a: true, b: true, c: true}, 0, []string{a}},
			{map[string]bool{a: true, b: true, c: true}, 1, []string{b}},
			{map[string]bool{a: true, c: true}, 2, []string{c}},
			{map[string]bool{b: true}, 1, []string{a, b}},
		}},
		{"none answers", broker.NewRing([]string{a, b, c}), []step{
			{map[string]bool{}, -1, []string{a, b, c}},
			{map[string]bool{a: true}, 0, []string{a}},
		}},
		{"pinned never fails over", broker.Pinned([]string{a, b, c}), []step{
			{map[string]bool{a: true, b: true, c: true}, 0, []string{a}},
			{map[string]bool{b: true, c: true}, -1, []string{a}},
			{map[string]bool{b: true, c: true}, -1, []string{a}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for n, s := range tc.steps {
				var dialled []string
				got, i, err := broker.DialFirst(context.Background(), tc.ring, func(_ context.Context, url string) (string, error) {
					dialled = append(dialled, url)
					if !s.up[url] {
						return "", errors.New("connection refused")
					}
					return url, nil
				})
				assert.Equal(t, s.dialled, dialled, "step %d", n)
				assert.Equal(t, s.want, i, "step %d", n)
				if s.want < 0 {
					require.Error(t, err)
					assert.Contains(t, err.Error(), "node 1: connection refused")
					continue
				}
				require.NoError(t, err)
				assert.Equal(t, dialled[len(dialled)-1], got)
			}
		})
	}
}

func TestDialFirstStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	_, _, err := broker.DialFirst(ctx, broker.NewRing([]string{a, b, c}), func(ctx context.Context, _ string) (int, error) {
		calls++
		return 0, ctx.Err()
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, calls)
}
