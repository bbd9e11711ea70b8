package proc

import (
	"fmt"
	"os"
	"syscall"
)

// pollable returns a duplicate of f in non-blocking mode, so that closing
// it ends a pending read (a read of a blocking pipe or terminal cannot be
// interrupted), and a restore func that puts f back into blocking mode
// (the mode is shared with every holder of the descriptor, e.g. a shell's
// terminal).
func pollable(f *os.File) (*os.File, func(), error) {
	fd := int(f.Fd())
	nfd, err := syscall.Dup(fd)
	if err != nil {
		return nil, nil, fmt.Errorf("scenarios: child stdin: dup: %w", err)
	}
	syscall.CloseOnExec(nfd)
	if err := syscall.SetNonblock(nfd, true); err != nil {
		_ = syscall.Close(nfd)
		return nil, nil, fmt.Errorf("scenarios: child stdin: non-blocking mode: %w", err)
	}
	return os.NewFile(uintptr(nfd), f.Name()), func() { _ = syscall.SetNonblock(fd, false) }, nil
}
