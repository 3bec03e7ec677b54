package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/testctx"
)

// faultline bench end to end, small, on the reference given by --target
// (bench does not read FAULTLINE_TARGET): it starts its own infrastructure,
// prints the figures and the ratios, and writes bench.json.
func TestBenchWritesJSON(t *testing.T) {
	ctx := testctx.BeforeDeadline(t) // bench bounds its start-ups and its runs
	path := filepath.Join(t.TempDir(), "out", "bench.json")
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"bench", "--target", filepath.Join("..", "..", referenceTarget), "--events", "300", "--naive-events", "30", "--reps", "1", "--relays", "1", "--clients", "4", "--json", path}, &out, &errOut)
	require.Equal(t, exitOK, code, "stderr:\n%s", errOut.String())
	for _, want := range []string{"raw", "naive-relay", "relay×1", "consumer", "end-to-end", "relay_vs_raw", "consumer_vs_relay", "figures: " + path} {
		assert.Contains(t, out.String(), want)
	}
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var rep struct {
		Schema  string             `json:"schema"`
		Figures []map[string]any   `json:"figures"`
		Ratios  map[string]float64 `json:"ratios"`
	}
	require.NoError(t, json.Unmarshal(data, &rep))
	assert.Equal(t, "github.com/faultline-dev/faultline/bench/v1", rep.Schema)
	assert.Len(t, rep.Figures, 5)
	for _, key := range []string{"relay_vs_raw", "relay_vs_naive", "consumer_vs_relay"} {
		assert.Positive(t, rep.Ratios[key], key)
	}
}
