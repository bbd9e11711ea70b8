package proc

import "syscall"

// childProcAttr makes an exec process its own process group (a Ctrl-C in
// the terminal reaches the runner only, which stops its children itself)
// and has the kernel SIGKILL it when the runner dies. The kernel sends
// Pdeathsig when the thread that started the child exits; Go keeps its
// threads for the life of the process unless a goroutine locked to one
// exits, which this package never does.
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
