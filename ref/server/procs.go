package server

import (
	"context"
	"os"
)

// ProcsPath is the lab route that says which OS process serves the api
// and which roles it runs, so that the lab's capacity search can read the
// server's CPU from /proc without being told its pid. Mounted with
// Config.LabRoutes only (imlab up and the scenario runner turn them on;
// imlab ref with --lab-routes): a pid is no business of a client of a
// production-like set-up.
const ProcsPath = "/v1/lab/procs"

// Procs is ProcsPath's answer: this process's pid (as this machine's
// kernel numbers it) and its roles, in start order.
type Procs struct {
	PID   int      `json:"pid"`
	Roles []string `json:"roles"`
}

func (p *Process) procsAnswer(context.Context) (any, error) {
	return Procs{PID: os.Getpid(), Roles: p.RoleNames()}, nil
}
