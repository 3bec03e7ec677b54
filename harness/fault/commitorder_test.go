package fault

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/target"
)

func TestCommitOrderRequire(t *testing.T) {
	outbox := target.Table{Database: "orders", Name: "outbox_messages", EventID: "event_id"}
	sound := CommitOrder{Every: 4, Holds: 5, Hold: 600 * time.Millisecond, Duration: 3 * time.Second}
	for _, tc := range []struct {
		name   string
		fault  CommitOrder
		outbox target.Table
		want   string // "" when it may run
	}{
		{"sound", sound, outbox, ""},
		{"no outbox table", sound, target.Table{Database: "orders", EventID: "event_id"}, "names no outbox table"},
		{"no event id column", sound, target.Table{Database: "orders", Name: "outbox"}, "names no outbox table"},
		{"every 0", CommitOrder{Holds: 5, Hold: time.Second}, outbox, "every 0"},
		{"no hold", CommitOrder{Every: 4, Holds: 5}, outbox, "hold 0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.fault.Require(&Env{Observe: target.Observe{Outbox: tc.outbox}})
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// The target's names are quoted; everything faultline creates carries its
// prefix; the hold is deferred to the commit.
func TestCommitOrderInstallSQL(t *testing.T) {
	c := CommitOrder{Every: 3, Holds: 2, Hold: 450 * time.Millisecond}
	sql := strings.Join(c.install(target.Table{Name: "shop.Outbox", EventID: "EventId"}, history.ModelClaim), "\n")
	assert.Contains(t, sql, `AFTER INSERT ON "shop"."Outbox" DEFERRABLE INITIALLY DEFERRED`)
	assert.Contains(t, sql, `NEW."EventId"::text`)
	assert.Contains(t, sql, "make_interval(secs => 0.450000)")
	assert.Contains(t, sql, "pg_sleep(0.020000)")
	assert.Contains(t, sql, "mod(mine, 3) <> 0 OR mine > 6")
	for _, created := range []string{"CREATE TABLE ", "CREATE FUNCTION ", "CREATE TRIGGER ", "CREATE CONSTRAINT TRIGGER "} {
		for _, rest := range strings.Split(sql, created)[1:] {
			assert.True(t, strings.HasPrefix(rest, "faultline_"), "%s%s", created, rest[:min(len(rest), 40)])
		}
	}
}

func TestOrdinal(t *testing.T) {
	for n, want := range map[int]string{1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 11: "11th", 12: "12th", 13: "13th", 21: "21st", 102: "102nd", 111: "111th"} {
		assert.Equal(t, want, ordinal(n))
	}
}

// The window opened only where every relay was seen past a held insert
// before it committed: later inserts merely committed, or one relay of
// two past it, are not enough — the other still reads it.
func TestJudgeCommitOrder(t *testing.T) {
	for _, tc := range []struct {
		name       string
		held       []heldInsert
		opened     bool
		passed     []string
		why        string
		notOffered bool
	}{
		{name: "nothing held", why: "no outbox insert was held"},
		{name: "later inserts committed, no relay past", held: []heldInsert{{number: 4, eventID: "a", later: 3, relays: 2}, {number: 8, eventID: "b", later: 1, relays: 2}},
			why: "every relay seen past it"},
		{name: "one relay of two past: the other still reads it", held: []heldInsert{{number: 4, eventID: "a", later: 3, passedBy: 1, relays: 2}},
			why: "every relay seen past it"},
		{name: "every relay past one of them", held: []heldInsert{{number: 4, eventID: "a", later: 3, passedBy: 2, relays: 2}, {number: 8, eventID: "b", later: 1, passedBy: 1, relays: 2}},
			opened: true, passed: []string{"a"}},
		{name: "every held one made the others wait", held: []heldInsert{{number: 4, eventID: "a", blocked: 2}, {number: 8, eventID: "b", blocked: 1}},
			why: "wait for one another", notOffered: true},
		{name: "one made the others wait, one ran out unread", held: []heldInsert{{number: 4, eventID: "a", blocked: 2}, {number: 8, eventID: "b", later: 3}},
			why: "every relay seen past it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opened, passed, why, notOffered := judgeCommitOrder(tc.held, 12)
			assert.Equal(t, tc.opened, opened)
			assert.Equal(t, tc.notOffered, notOffered != "")
			assert.Equal(t, tc.passed, passed)
			if tc.why == "" {
				assert.Empty(t, why)
			} else {
				assert.Contains(t, why, tc.why)
			}
		})
	}
}
