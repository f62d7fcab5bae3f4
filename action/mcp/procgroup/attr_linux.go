package procgroup

import "syscall"

// groupAttr starts the command as a new group leader that gets SIGKILL when rbook dies.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
