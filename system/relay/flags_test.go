package relay

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func TestConfigRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--lease", "0s"}, "--lease must be positive"},
		{[]string{"--batch-size", "0"}, "--batch-size must be 1..10000"},
		{[]string{"--in-flight", "0"}, "--in-flight must be 1..16"},
		{[]string{"--retry-budget", "0"}, "--retry-budget must be at least 1"},
		{[]string{"--amqp-url", "http://x"}, "--amqp-url"},
		{[]string{"--amqp-urls", "amqp://127.0.0.1:1/,http://x"}, "--amqp-urls: address 2 is not an AMQP URL"},
		{[]string{"--amqp-heartbeat", "0s"}, "--amqp-heartbeat must be positive"},
		{[]string{"--control-addr", "0.0.0.0:9000"}, "only loopback"},
		{[]string{"--renew", "--renew-interval", "5s", "--lease", "2s"}, "must be shorter than --lease"},
		{[]string{"--backoff-base", "2s", "--backoff-max", "1s"}, "is below --backoff-base"},
	} {
		var c Config
		fs := newFlagSet()
		c.Flags(fs)
		require.NoError(t, fs.Parse(tc.args))
		err := c.Validate()
		assert.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
	var c Config
	fs := newFlagSet()
	c.Flags(fs)
	require.NoError(t, fs.Parse(nil))
	assert.NoError(t, c.Validate(), "the defaults are valid")
	assert.Equal(t, c.Lease/3, c.RenewInterval)
	assert.Equal(t, []string{c.AMQPURL}, c.nodes, "one node: --amqp-url")
}

func TestConfigAMQPURLsReplaceAMQPURL(t *testing.T) {
	var c Config
	fs := newFlagSet()
	c.Flags(fs)
	require.NoError(t, fs.Parse([]string{"--amqp-url", "amqp://127.0.0.1:9/", "--amqp-urls", "amqp://127.0.0.1:1/, amqp://127.0.0.1:2/"}))
	require.NoError(t, c.Validate())
	assert.Equal(t, []string{"amqp://127.0.0.1:1/", "amqp://127.0.0.1:2/"}, c.nodes)
}
