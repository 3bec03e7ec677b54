//go:build linux

package proxies

import "syscall"

// serverProcAttr puts the server in its own process group, so a terminal's
// signals do not reach it, and has the kernel kill it when the thread that
// started it dies (in practice: when faultline or the test binary dies).
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
