package config_test

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/system/config"
)

// flags is a small program's configuration.
type flags struct {
	batchSize int
	lease     time.Duration
	renew     bool
	name      string
}

func newFlagSet(out io.Writer) (*flag.FlagSet, *flags) {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	fs.SetOutput(out)
	f := &flags{}
	fs.IntVar(&f.batchSize, "batch-size", 100, "rows per claim")
	fs.DurationVar(&f.lease, "lease", 30*time.Second, "claim lease")
	fs.BoolVar(&f.renew, "renew", false, "renew leases")
	fs.StringVar(&f.name, "instance", "relay", "instance name")
	return fs, f
}

func TestEnvName(t *testing.T) {
	for _, tc := range []struct{ prefix, flag, want string }{
		{"RELAY", "batch-size", "RELAY_BATCH_SIZE"},
		{"RELAY", "lease", "RELAY_LEASE"},
		{"INVENTORY", "db-url", "INVENTORY_DB_URL"},
		{"ORDER", "event-log", "ORDER_EVENT_LOG"},
		{"X", "a-b-c", "X_A_B_C"},
	} {
		assert.Equal(t, tc.want, config.EnvName(tc.prefix, tc.flag))
	}
}

func TestParseEnvironmentFallbacks(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want flags
	}{
		{name: "defaults", want: flags{batchSize: 100, lease: 30 * time.Second, name: "relay"}},
		{name: "environment only",
			env:  map[string]string{"RELAY_BATCH_SIZE": "7", "RELAY_LEASE": "2s", "RELAY_RENEW": "true", "RELAY_INSTANCE": "relay-9"},
			want: flags{batchSize: 7, lease: 2 * time.Second, renew: true, name: "relay-9"}},
		{name: "command line wins over environment",
			env:  map[string]string{"RELAY_BATCH_SIZE": "7", "RELAY_LEASE": "2s"},
			args: []string{"--batch-size", "9"},
			want: flags{batchSize: 9, lease: 2 * time.Second, name: "relay"}},
		{name: "command line wins even when equal to the default",
			env:  map[string]string{"RELAY_BATCH_SIZE": "7"},
			args: []string{"--batch-size=100"},
			want: flags{batchSize: 100, lease: 30 * time.Second, name: "relay"}},
		{name: "bool on the command line wins over environment",
			env:  map[string]string{"RELAY_RENEW": "true"},
			args: []string{"--renew=false"},
			want: flags{batchSize: 100, lease: 30 * time.Second, name: "relay"}},
		{name: "a bad value for a flag given on the command line is not read",
			env:  map[string]string{"RELAY_LEASE": "x"},
			args: []string{"--lease", "5s"},
			want: flags{batchSize: 100, lease: 5 * time.Second, name: "relay"}},
		{name: "other prefixes are ignored",
			env:  map[string]string{"INVENTORY_BATCH_SIZE": "3", "BATCH_SIZE": "4"},
			want: flags{batchSize: 100, lease: 30 * time.Second, name: "relay"}},
		{name: "an empty variable is a value",
			env:  map[string]string{"RELAY_INSTANCE": ""},
			want: flags{batchSize: 100, lease: 30 * time.Second, name: ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"RELAY_BATCH_SIZE", "RELAY_LEASE", "RELAY_RENEW", "RELAY_INSTANCE"} {
				unsetenv(t, k)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			fs, got := newFlagSet(io.Discard)
			require.NoError(t, config.Parse(fs, "RELAY", tc.args))
			assert.Equal(t, tc.want, *got)
		})
	}
}

// unsetenv removes k for this test (t.Setenv restores it afterwards).
func unsetenv(t *testing.T, k string) {
	t.Helper()
	t.Setenv(k, "")
	require.NoError(t, os.Unsetenv(k))
}

func TestParseBadEnvironmentValueNamesTheVariable(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"RELAY_LEASE": "x"}, []string{`environment RELAY_LEASE="x"`}},
		{map[string]string{"RELAY_BATCH_SIZE": "many"}, []string{`environment RELAY_BATCH_SIZE="many"`}},
		{map[string]string{"RELAY_RENEW": "perhaps"}, []string{`environment RELAY_RENEW="perhaps"`}},
		{map[string]string{"RELAY_LEASE": "x", "RELAY_BATCH_SIZE": "many"},
			[]string{`environment RELAY_LEASE="x"`, `environment RELAY_BATCH_SIZE="many"`}},
	} {
		t.Run(strings.Join(tc.want, " and "), func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			fs, _ := newFlagSet(io.Discard)
			err := config.Parse(fs, "RELAY", nil)
			require.Error(t, err, "%v", tc.env)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w, "every bad variable is reported")
			}
		})
	}
}

func TestParseBadCommandLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"positional argument", []string{"extra"}, `unexpected argument "extra"`},
		{"positional after flags", []string{"--lease", "1s", "now"}, `unexpected argument "now"`},
		{"unknown flag", []string{"--nope"}, "flag provided but not defined: -nope"},
		{"bad value", []string{"--batch-size", "x"}, `invalid value "x" for flag -batch-size`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, _ := newFlagSet(io.Discard)
			err := config.Parse(fs, "RELAY", tc.args)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestParseHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		var out bytes.Buffer
		fs, _ := newFlagSet(&out)
		err := config.Parse(fs, "RELAY", []string{arg})
		assert.True(t, errors.Is(err, flag.ErrHelp), "%s: %v", arg, err)
		usage := out.String()
		assert.Contains(t, usage, "usage: relay [flags]")
		assert.Contains(t, usage, "RELAY_<FLAG>", "the usage names the environment prefix")
		assert.Contains(t, usage, "-batch-size", "the usage lists the flags")
		assert.Contains(t, usage, "claim lease")
	}
}
