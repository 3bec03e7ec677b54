//go:build !linux

package crashpoint

import "runtime"

// selfSignal is never reached outside Linux: Set.Arm refuses kill and
// pause there (actionSupported), so no armed point asks for them.
func selfSignal(action string) {
	panic("crashpoint: " + actionSupported(runtime.GOOS, action).Error())
}
