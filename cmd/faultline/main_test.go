package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every usage error is caught before any infrastructure starts: exit 2 and
// a clear message.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage:"},
		{[]string{"explode"}, `unknown command "explode"`},
		{[]string{"run"}, "name at least one scenario"},
		{[]string{"run", "no-such-scenario"}, `unknown scenario "no-such-scenario"`},
		{[]string{"run", "--variant", "nope", "broker-nack"}, `unknown variant "nope"`},
		{[]string{"run", "--parallel", "0", "broker-nack"}, "--parallel must be at least 1"},
		{[]string{"run", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"run", "broker-nack", "--seed", "x"}, `invalid value "x" for flag -seed`},
		{[]string{"run", "broker-nack", "nope", "--seed", "3"}, `unknown scenario "nope"`},
		{[]string{"gate", "--seeds", "0"}, "--seeds must be at least 1"},
		{[]string{"gate", "--infra", "cloud"}, `--infra "cloud": want one of`},
		{[]string{"gate", "extra"}, `gate takes no arguments`},
		{[]string{"list", "extra"}, "list takes no arguments"},
		{[]string{"bench", "extra"}, "bench takes no arguments"},
		{[]string{"bench", "--relays", "1,x"}, `--relays: "x" is not a number`},
		{[]string{"bench", "--relays", "0"}, "relay instances must be 1..16"},
		{[]string{"bench", "--reps", "0"}, "repetitions must be at least 1"},
		{[]string{"bench", "--only", "relay,warp"}, `unknown figure "warp"`},
		{[]string{"bench", "--infra", "cloud"}, `--infra "cloud": want one of`},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), tc.args, &out, &errOut)
		assert.Equal(t, exitUsage, code, "%v", tc.args)
		assert.Contains(t, errOut.String(), tc.want, "%v", tc.args)
	}
}

func TestList(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, exitOK, run(context.Background(), []string{"list"}, &out, &errOut))
	for _, want := range []string{"relay.after-confirm", "inventory.before-commit", "relay-pause-past-lease", "random-chaos", "no-fencing", "inbox-own-transaction"} {
		assert.Contains(t, out.String(), want)
	}
}

func TestBar(t *testing.T) {
	assert.Equal(t, "[--------------------]   0%", bar(0))
	assert.Equal(t, "[##########----------]  50%", bar(0.5))
	assert.Equal(t, "[####################] 100%", bar(1))
}
