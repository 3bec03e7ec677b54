package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Process kinds: the three programs of the pipeline under test.
const (
	KindOrder     = "order"
	KindRelay     = "relay"
	KindInventory = "inventory"
)

// Binaries are the built system programs.
type Binaries struct {
	Order, Relay, Inventory string
}

// For returns the binary of a process kind.
func (b Binaries) For(kind string) (string, error) {
	var path string
	switch kind {
	case KindOrder:
		path = b.Order
	case KindRelay:
		path = b.Relay
	case KindInventory:
		path = b.Inventory
	default:
		return "", fmt.Errorf("binary for kind %q: unknown kind (want order, relay or inventory)", kind)
	}
	if path == "" {
		return "", fmt.Errorf("binary for kind %q: not built", kind)
	}
	return path, nil
}

// Build compiles the three system programs (system/cmd/{order,relay,inventory})
// into outDir with one `go build` run from the module root. A failed build is
// an error carrying the go command's output.
func Build(ctx context.Context, outDir string) (Binaries, error) {
	paths, err := build(ctx, outDir, KindOrder, KindRelay, KindInventory)
	if err != nil {
		return Binaries{}, err
	}
	return Binaries{Order: paths[KindOrder], Relay: paths[KindRelay], Inventory: paths[KindInventory]}, nil
}

// build compiles system/cmd/<kind> for each kind into outDir and returns
// kind → absolute path of the executable.
func build(ctx context.Context, outDir string, kinds ...string) (map[string]string, error) {
	root, err := ModuleRoot(ctx)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(outDir)
	if err != nil {
		return nil, fmt.Errorf("build: output folder %q: %w", outDir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("build: output folder: %w", err)
	}
	args := []string{"build", "-o", abs + string(filepath.Separator)}
	for _, k := range kinds {
		args = append(args, "./system/cmd/"+k)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("build: go %s (in %s): %w\n%s", strings.Join(args, " "), root, err, bytes.TrimSpace(out))
	}
	paths := make(map[string]string, len(kinds))
	for _, k := range kinds {
		p := filepath.Join(abs, k)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("build: go build reported success but %s is missing: %w", p, err)
		}
		paths[k] = p
	}
	return paths, nil
}

// ModuleRoot is the folder of the go.mod of the module the current
// directory belongs to (from `go env GOMOD`).
func ModuleRoot(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "env", "GOMOD")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("module root: go env GOMOD: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("module root: not inside a Go module (go env GOMOD is empty); run from the faultline module")
	}
	return filepath.Dir(gomod), nil
}
