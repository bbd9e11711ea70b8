package faults

import "imlab/chaos"

// Kill sends SIGKILL to an exec process (nothing drained, nothing
// committed) and starts a new one after for.
type Kill struct{ processKind }

// Name is "kill".
func (Kill) Name() string { return "kill" }

// CheckTarget: a process of the file that runs as a separate OS process.
func (Kill) CheckTarget(field string, x Spec, c Context) error { return process(field, x, c, true) }

// Build is the SIGKILL of the target, healed by a new incarnation.
func (Kill) Build(x Spec, env Env) (chaos.Fault, error) {
	return processFault(x, env, func(p Process) chaos.Fault { return chaos.Func("kill("+x.Target+")", p.Kill, p.Restart) })
}
