package faults

import "imlab/chaos"

// Stop stops a process gracefully (server.Process.Stop in process,
// SIGTERM for an exec process: batches drained, offsets committed) and
// starts it again after for.
type Stop struct{}

// Name is "stop".
func (Stop) Name() string { return "stop" }

// Params: none.
func (Stop) Params() []string { return nil }

// Unit: a stop counts nothing.
func (Stop) Unit() string { return "" }

// CheckTarget: a process of the file.
func (Stop) CheckTarget(field string, x Spec, c Context) error { return process(field, x, c, false) }

// CheckValues: a positive duration.
func (Stop) CheckValues(field string, x Spec, _ Context) error { return restarted(field, x) }

// Build is the stop of the target, healed by its restart.
func (Stop) Build(x Spec, env Env) (chaos.Fault, error) {
	return processFault(x, env, func(p Process) chaos.Fault { return chaos.Func("stop("+x.Target+")", p.Stop, p.Restart) })
}
