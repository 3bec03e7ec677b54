// Package version says which faultline is running, from the build
// information the Go toolchain embeds in every binary: the module version
// for a binary installed by its module path (go install …@v1.2.3), else the
// VCS revision a build from a checkout records, else "devel".
package version

import (
	"runtime/debug"
)

// String is faultline's version, for `faultline version`, a report's header
// and results.json.
func String() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return fromBuildInfo(info)
}

// fromBuildInfo picks the version out of info: a real module version wins;
// a checkout build gives "devel+<revision>", with "-dirty" when it had
// uncommitted changes.
func fromBuildInfo(info *debug.BuildInfo) string {
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := "devel+" + rev
	if modified == "true" {
		v += "-dirty"
	}
	return v
}
