//go:build unix && !linux

package proxies

import "syscall"

// serverProcAttr puts the server in its own process group. Outside Linux
// there is no parent-death signal: Stop must run.
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
