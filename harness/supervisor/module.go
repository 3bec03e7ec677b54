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
