package faults

import "imlab/chaos"

// Kill sends SIGKILL to an exec process (nothing drained, nothing
// committed) and starts a new one after for.
type Kill struct{}

// Name is "kill".
func (Kill) Name() string { return "kill" }

// Params: none.
func (Kill) Params() []string { return nil }

// Unit: a kill counts nothing.
func (Kill) Unit() string { return "" }

// CheckTarget: an exec process of the file.
func (Kill) CheckTarget(field string, x Spec, c Context) error { return process(field, x, c, true) }

// CheckValues: a positive duration.
func (Kill) CheckValues(field string, x Spec, _ Context) error { return restarted(field, x) }

// Build is the SIGKILL of the target, healed by a new incarnation.
func (Kill) Build(x Spec, env Env) (chaos.Fault, error) {
	return processFault(x, env, func(p Process) chaos.Fault { return chaos.Func("kill("+x.Target+")", p.Kill, p.Restart) })
}
