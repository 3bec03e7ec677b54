package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/faultline-dev/faultline/harness/target"
)

// TargetFile is the reference pipeline's target file, relative to the root
// of faultline's source tree: its build step builds the programs the bench
// runs, and its workload is the order the end-to-end figure sends.
const TargetFile = "system/faultline.yaml"

// Programs are the reference pipeline as the bench runs it.
type Programs struct {
	// Dir is the folder the target's build step built order, relay and
	// inventory into (runner.Built.BuildDir).
	Dir string
	// Workload is the request that creates one order (the target file's
	// workload; only its create request is sent).
	Workload target.Workload
}

// ProgramsOf are t's programs as its build step put them in buildDir.
func ProgramsOf(t *target.Target, buildDir string) Programs {
	return Programs{Dir: buildDir, Workload: t.Workload}
}

// check reports a missing program before any repetition starts.
func (p Programs) check() error {
	if p.Dir == "" {
		return errors.New("programs: no build folder")
	}
	for _, name := range []string{progOrder, progRelay, progInventory} {
		path := filepath.Join(p.Dir, name)
		st, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("programs: %w (does the target's build step build %s?)", err, name)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("programs: %s is not an executable", path)
		}
	}
	if p.Workload.Create.Method == "" {
		return errors.New("programs: the workload has no create request")
	}
	return nil
}
