package capacity

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"imlab/targets/drivers"
)

// Watch names the processes a search reads the CPU of besides the
// generator.
type Watch struct {
	// PIDs: NAME=PID,... (ParsePIDs).
	PIDs string
	// Names: every process of these command names (FindProcs).
	Names []string
	// NoTarget: do not ask the target for its own process (ProcsPath).
	NoTarget bool
}

// Run carries out a search as imlab capacity does: the processes w names
// and the target's own (asked on its lab route unless w.NoTarget; what
// cannot be watched is a note of the result, said on warn), one line
// saying what is searched, the search, and its table on out with the
// files it wrote. The result is nil only when the search could not start.
func Run(ctx context.Context, c Config, w Watch, out, warn io.Writer) (*Result, error) {
	procs, err := ParsePIDs(w.PIDs)
	if err != nil {
		return nil, err
	}
	c.Procs = append(c.Procs, procs...)
	note := func(n string) {
		fmt.Fprintln(warn, "imlab:", n)
		c.Notes = append(c.Notes, n)
	}
	switch {
	case w.NoTarget:
	case !drivers.HTTP(c.Load.Target):
		note("the server's own processes are not watched: " + c.Load.Target + " does not name them (no lab route): give --pid NAME=PID")
	default:
		tp, err := TargetProcs(ctx, c.Load.Target)
		if err != nil {
			note("the server's own processes are not watched: " + err.Error())
		}
		c.Procs = append(c.Procs, tp...)
	}
	if len(w.Names) > 0 {
		found, notes, err := findNamed(w.Names, c.Procs)
		if err != nil {
			return nil, err
		}
		for _, n := range notes {
			note(n)
		}
		c.Procs = append(c.Procs, found...)
	}
	c.Progress = out
	fmt.Fprintf(out, "capacity search of %s within %s, %.0f..%.0f sends/s, into %s; watching %d processes besides the generator\n",
		c.Load.Target, c.SLO, c.From, c.To, c.OutDir, len(c.Procs))
	res, err := Search(ctx, c)
	if res != nil {
		fmt.Fprintln(out)
		if werr := res.WriteTable(out); werr != nil {
			return res, werr
		}
		fmt.Fprintf(out, "wrote %s and %s\n", filepath.Join(c.OutDir, ResultFile), filepath.Join(c.OutDir, ReportFile))
	}
	return res, err
}

// findNamed finds the processes of names (FindProcs), the target's own
// preferred: those that descend from a process already watched (the
// target's, or one given by pid). The notes say what was not found and
// which were found by name alone.
func findNamed(names []string, watched []Proc) ([]Proc, []string, error) {
	owners := make([]int, 0, len(watched))
	for _, p := range watched {
		owners = append(owners, p.PID)
	}
	found, err := FindProcs(names, owners)
	if err != nil {
		return nil, nil, err
	}
	var notes, byName []string
	if len(found) == 0 {
		notes = append(notes, "no process named "+strings.Join(names, ",")+" on this machine")
	}
	for _, p := range found {
		if p.Found == FoundByName {
			byName = append(byName, fmt.Sprintf("%s pid %d", p.Name, p.PID))
		}
	}
	if len(byName) > 0 {
		notes = append(notes, strings.Join(byName, ", ")+": "+ByNameNote)
	}
	return found, notes, nil
}
