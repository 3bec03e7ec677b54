//go:build linux

package crashpoint

import (
	"os"
	"runtime"
	"syscall"
)

// selfSignal sends the signal to the calling thread (tgkill), not just the
// process: a process-directed signal lands asynchronously, and the goroutine
// at the crash point could run on past it (write its mark, answer its
// request) before the stop or kill takes the process. A thread-directed
// signal is taken on the way back from the system call, before any more of
// this goroutine runs; SIGSTOP and SIGKILL then act on the whole process.
func selfSignal(action string) {
	sig := syscall.SIGSTOP
	if action == Kill {
		sig = syscall.SIGKILL
	}
	runtime.LockOSThread()
	_ = syscall.Tgkill(os.Getpid(), syscall.Gettid(), sig)
	runtime.UnlockOSThread()
	if action == Kill {
		select {} // unreachable: the process is gone
	}
}
