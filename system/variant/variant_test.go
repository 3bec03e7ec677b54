package variant_test

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/system/crashpoint"
	"github.com/faultline-dev/faultline/system/variant"
)

func TestCatalogueHasTheTwentyNineVariants(t *testing.T) {
	want := []string{
		variant.CommitThenPublish, variant.PublishThenCommit, variant.CommitErrorAnswered, variant.OutboxOwnTransaction,
		variant.NoMandatory, variant.IgnoreReturn, variant.PublishedBeforeConfirm, variant.NoFencing, variant.NoLease,
		variant.LeaseIgnored, variant.UnfencedRetry, variant.UnfencedRenewal, variant.NoBackoff, variant.ReadsByID,
		variant.NackAsSuccess, variant.LastConfirmOnly, variant.OwnBatchReturnsOnly, variant.SingleNode,
		variant.AckBeforeCommit, variant.NoInbox, variant.BatchDuplicatesApplied, variant.InboxOwnTransaction, variant.CommitErrorIgnored, variant.PoisonAcked, variant.DeadLetterMultiple, variant.CleanupRetentionInMS,
		variant.ClassicQueue, variant.TransientQueue, variant.LimitWithoutDLX,
	}
	var got []string
	processes := map[string]bool{}
	for _, v := range variant.Catalogue() {
		got = append(got, v.Name)
		processes[v.Process] = true
		assert.Contains(t, []string{variant.Order, variant.Relay, variant.Inventory}, v.Process, v.Name)
		assert.NotEmpty(t, v.Guard, v.Name)
		assert.NotEmpty(t, v.Removes, v.Name)
		found, err := variant.Lookup(v.Name)
		require.NoError(t, err)
		assert.Equal(t, v, found)
		assert.True(t, found.Breaks(v.Process))
		assert.Equal(t, "variant="+v.Name, found.Detail(v.Process))
	}
	assert.Equal(t, want, got)
	assert.Len(t, got, 29)
	assert.Len(t, processes, 3)
	assert.Equal(t, append([]string{variant.Correct}, want...), variant.Names())

	// The windows of inbox-own-transaction, unfenced-retry and
	// unfenced-renewal need their own crash points.
	for _, name := range []string{crashpoint.InventoryBeforeCommit, crashpoint.RelayBeforeRetry, crashpoint.RelayBeforeRenew} {
		p, ok := crashpoint.Lookup(name)
		assert.True(t, ok, name)
		assert.Contains(t, []string{variant.Relay, variant.Inventory}, p.Process, name)
	}
	p, _ := crashpoint.Lookup(crashpoint.RelayBeforeRetry)
	assert.Equal(t, "a return or nack seen, retry (or Failed) not yet written", p.Window)
	assert.Equal(t, "retry and Failed writes conditional on the claim id", p.Guard)
}

func TestLookup(t *testing.T) {
	for _, name := range []string{"", variant.Correct} {
		v, err := variant.Lookup(name)
		require.NoError(t, err, "%q is the correct pipeline", name)
		assert.Equal(t, variant.Correct, v.Name)
		assert.Empty(t, v.Process)
		for _, p := range []string{variant.Order, variant.Relay, variant.Inventory} {
			assert.False(t, v.Breaks(p))
			assert.Equal(t, "variant=correct", v.Detail(p))
		}
	}
	_, err := variant.Lookup("nope")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown variant "nope"`)
	for _, name := range variant.Names() {
		assert.Contains(t, err.Error(), name, "the error names the known variants")
	}
	v, err := variant.Lookup(variant.NoInbox)
	require.NoError(t, err)
	assert.False(t, v.Breaks(variant.Relay))
	assert.Equal(t, "variant=no-inbox (breaks inventory; this process is correct)", v.Detail(variant.Relay))
}

// A --variant value may combine variants, joined by commas: each process
// applies the ones whose Process is its own; unknown or repeated names
// are errors.
func TestParse(t *testing.T) {
	tests := []struct {
		value   string
		names   []string
		of      map[string][]string // process → its own variants' names
		detail  string              // the inventory's started detail
		wantErr string
	}{
		{value: "", detail: "variant=correct"},
		{value: variant.Correct, detail: "variant=correct"},
		{value: variant.NoInbox, names: []string{variant.NoInbox}, of: map[string][]string{variant.Inventory: {variant.NoInbox}},
			detail: "variant=no-inbox"},
		{value: "ignore-return,ack-before-commit", names: []string{variant.IgnoreReturn, variant.AckBeforeCommit},
			of:     map[string][]string{variant.Relay: {variant.IgnoreReturn}, variant.Inventory: {variant.AckBeforeCommit}},
			detail: "variant=ignore-return (breaks relay; this process is correct) variant=ack-before-commit"},
		{value: "no-fencing, no-lease", names: []string{variant.NoFencing, variant.NoLease},
			of:     map[string][]string{variant.Relay: {variant.NoFencing, variant.NoLease}},
			detail: "variant=no-fencing (breaks relay; this process is correct) variant=no-lease (breaks relay; this process is correct)"},
		{value: "ignore-return,nope", wantErr: `unknown variant "nope"`},
		{value: "no-inbox,no-inbox", wantErr: "names no-inbox twice"},
		{value: "correct,no-inbox", wantErr: `"correct" combines with no other name`},
		{value: "no-inbox,", wantErr: `"correct" combines with no other name`},
	}
	for _, tt := range tests {
		set, err := variant.Parse(tt.value)
		if tt.wantErr != "" {
			assert.ErrorContains(t, err, tt.wantErr, tt.value)
			continue
		}
		require.NoError(t, err, tt.value)
		var names []string
		for _, v := range set {
			names = append(names, v.Name)
		}
		assert.Equal(t, tt.names, names, tt.value)
		for _, p := range []string{variant.Order, variant.Relay, variant.Inventory} {
			var own []string
			for _, v := range set.Of(p) {
				own = append(own, v.Name)
			}
			assert.Equal(t, tt.of[p], own, "%s: %s", tt.value, p)
		}
		assert.Equal(t, tt.detail, set.Detail(variant.Inventory), tt.value)
	}
}

// A process whose variants replace one of its steps runs one of its own at
// a time; another process's variants leave it correct.
func TestOne(t *testing.T) {
	set, err := variant.Parse("ignore-return,ack-before-commit")
	require.NoError(t, err)
	v, err := set.One(variant.Inventory)
	require.NoError(t, err)
	assert.Equal(t, variant.AckBeforeCommit, v.Name)
	v, err = set.One(variant.Order)
	require.NoError(t, err)
	assert.Equal(t, variant.Correct, v.Name)
	assert.False(t, v.Breaks(variant.Order))
	two, err := variant.Parse("ack-before-commit,no-inbox")
	require.NoError(t, err)
	_, err = two.One(variant.Inventory)
	assert.ErrorContains(t, err, "variants ack-before-commit, no-inbox all break inventory")
}

func TestRegisterFallsBackToTheEnvironment(t *testing.T) {
	parse := func(args ...string) string {
		var got string
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		variant.Register(fs, &got)
		require.NoError(t, fs.Parse(args))
		return got
	}
	t.Setenv(variant.EnvVar, "")
	assert.Equal(t, "", parse())
	t.Setenv(variant.EnvVar, variant.NoLease)
	assert.Equal(t, variant.NoLease, parse())
	assert.Equal(t, variant.NoInbox, parse("--variant", variant.NoInbox), "the command line wins")
}

// Every program rejects an unknown variant, from the flag or from the
// shared environment variable, with exit status 2 and the known names.
func TestProgramsRejectAnUnknownVariant(t *testing.T) {
	t.Parallel()
	db := "postgres://postgres@127.0.0.1:1/x?sslmode=disable"
	mq := "amqp://guest:guest@127.0.0.1:1/"
	programs := []struct {
		name string
		args []string
	}{
		{"order", []string{"--db-url", db, "--listen", "127.0.0.1:0"}},
		{"relay", []string{"--db-url", db, "--amqp-url", mq}},
		{"inventory", []string{"--db-url", db, "--amqp-url", mq}},
	}
	for _, p := range programs {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			bin := build(t, p.name)
			for _, how := range []string{"flag", "environment"} {
				args, env := p.args, []string{variant.EnvVar + "="}
				if how == "flag" {
					args = append([]string{"--variant", "nope"}, args...)
				} else {
					env = []string{variant.EnvVar + "=nope"}
				}
				cmd := exec.CommandContext(t.Context(), bin, args...)
				cmd.Env = append(os.Environ(), env...)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				err := cmd.Run()
				var exit *exec.ExitError
				require.True(t, errors.As(err, &exit), "%s: want an exit status, got %v", how, err)
				assert.Equal(t, 2, exit.ExitCode(), "%s: %s", how, stderr.String())
				assert.Contains(t, stderr.String(), `unknown variant "nope"`, how)
				for _, name := range variant.Names() {
					assert.Contains(t, stderr.String(), name, how)
				}
			}
			out, err := exec.CommandContext(t.Context(), bin, "--help").CombinedOutput()
			require.NoError(t, err)
			assert.Contains(t, string(out), "-variant")
			assert.Contains(t, string(out), variant.EnvVar)
		})
	}
}

func TestOrderVariantNeedsAnAMQPURL(t *testing.T) {
	t.Parallel()
	bin := build(t, "order")
	for _, name := range []string{variant.CommitThenPublish, variant.PublishThenCommit} {
		cmd := exec.CommandContext(t.Context(), bin, "--db-url", "postgres://postgres@127.0.0.1:1/x", "--variant", name)
		cmd.Env = append(os.Environ(), "ORDER_AMQP_URL=")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "want an exit status, got %v", err)
		assert.Equal(t, 2, exit.ExitCode(), string(out))
		assert.Contains(t, string(out), "--amqp-url is required with --variant "+name)
	}
}

// build compiles system/cmd/<program> into a temporary folder.
func build(t *testing.T, program string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), program)
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/faultline-dev/faultline/system/cmd/"+program).CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}
