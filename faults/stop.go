package faults

import "imlab/chaos"

// Stop stops a process gracefully (server.Process.Stop in process,
// SIGTERM for an exec process: batches drained, offsets committed) and
// starts it again after for.
type Stop struct{ processKind }

// Name is "stop".
func (Stop) Name() string { return "stop" }

// CheckTarget: a process of the file.
func (Stop) CheckTarget(field string, x Spec, c Context) error { return process(field, x, c, false) }

// Build is the stop of the target, healed by its restart.
func (Stop) Build(x Spec, env Env) (chaos.Fault, error) {
	return processFault(x, env, func(p Process) chaos.Fault { return chaos.Func("stop("+x.Target+")", p.Stop, p.Restart) })
}
