//go:build unix && !linux

package procgroup

import "syscall"

// groupAttr starts the command as a new group leader; only Linux has Pdeathsig.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
