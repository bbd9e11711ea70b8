package faults

import (
	"fmt"

	"imlab/chaos"
)

// process is the target check of the process kinds: a process of the
// file (and for kill, one that runs as a separate OS process).
func process(field string, x Spec, c Context, needExec bool) error {
	i, exec, ok := c.Process(x.Target)
	switch {
	case !ok:
		return invalid(field+".target", "%q is not a process of server.processes", x.Target)
	case needExec && !exec:
		return invalid(field+".target", "%q runs inside the runner: a kill is a SIGKILL of a separate OS process, so it needs server.processes[%d].exec: true (or use kind stop, the graceful stop)", x.Target, i)
	}
	return nil
}

// restarted is the value check of the process kinds: a positive duration.
func restarted(field string, x Spec) error {
	if x.For <= 0 {
		return invalid(field+".for", "a %s needs a positive duration (the process is started again after it)", x.Kind)
	}
	return nil
}

// processFault is the process kinds' fault: act on the target, restart
// it when healed.
func processFault(x Spec, env Env, act func(Process) chaos.Fault) (chaos.Fault, error) {
	p, ok := env.Process(x.Target)
	if !ok {
		return nil, fmt.Errorf("faults: %s: %q is not a process of the run", x.Kind, x.Target)
	}
	return act(p), nil
}
