package proc

import (
	"slices"
)

// roles are the slot's process's roles as the file names them.
func (s *Slot) Roles() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.spec.Process.Roles)
}
