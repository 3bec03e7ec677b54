package runner

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/faultline-dev/faultline/harness/redact"
	"github.com/faultline-dev/faultline/harness/result"
)

// redactor masks the infrastructure's passwords (a local run's random
// ones, a team's real ones with the external provider) and any URL or DSN
// password in what a run writes: the supervisor log, the result (and so
// results.json, the report, the terminal), the kept folder. It is made
// from the provider each time: the secrets are the provider's, fixed at
// its start.
func (sh *Shared) redactor() *redact.Redactor {
	if sh.Infra == nil {
		return redact.New()
	}
	return redact.New(sh.Infra.Secrets()...)
}

// redactResult masks the passwords in every text of res that can carry an
// error or a line of a process's output.
func redactResult(red *redact.Redactor, res *result.Scenario) {
	res.Reason = red.String(res.Reason)
	for i := range res.Faults {
		f := &res.Faults[i]
		f.Detail, f.Error = red.String(f.Detail), red.String(f.Error)
	}
	for i := range res.Evidence {
		res.Evidence[i].Detail = red.String(res.Evidence[i].Detail)
	}
	for i := range res.Invariants {
		inv := &res.Invariants[i]
		inv.Detail = red.String(inv.Detail)
		for j := range inv.Violations {
			v := &inv.Violations[j]
			v.Message = red.String(v.Message)
			red.Strings(v.Timeline)
		}
	}
}

// scrubDir masks the passwords in every regular file under dir, the kept
// folder of a finished run: the processes' output (<name>.out) is written
// by the processes themselves, not through faultline, and a target that
// echoes its URLs must not leave the password in a CI artifact. Files that
// hold nothing to mask are not rewritten. It is best effort, like the
// summary it runs beside: a file it cannot read or write is left as it is.
func scrubDir(red *redact.Redactor, dir string) {
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		masked := []byte(red.String(string(b)))
		if bytes.Equal(masked, b) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		_ = os.WriteFile(path, masked, info.Mode().Perm())
		return nil
	})
}
