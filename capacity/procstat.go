package capacity

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"imlab/internal/proccpu"
)

// MaxProcs bounds the watched processes.
const MaxProcs = 64

// Proc is one watched process.
type Proc struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// Found is FoundByName for a process found by its command name alone,
	// none of them the target's (FindProcs): it may be another client's.
	Found string `json:"found,omitempty"`
}

// FoundByName marks a process found by its command name alone.
const FoundByName = "by name"

// ByNameNote says what a process found by name alone is worth.
const ByNameNote = "found by name, may not be the target's: its CPU may be another client's (give --pid NAME=PID, or run the target under imlab up, whose private servers are its own)"

// cpuTime is the CPU time (user + system) a process has used so far.
func cpuTime(pid int) (time.Duration, error) {
	d, _, err := proccpu.Stat(pid)
	if err != nil {
		return 0, fmt.Errorf("capacity: %w", err)
	}
	return d, nil
}

// FindProcs lists the processes whose command name (/proc/PID/comm) is
// one of names, the generator's own pid left out (it is watched as
// "generator"). Where some of a name's processes descend from one of
// owners (the target's processes: imlab up's private mariadbd is its
// child), only those are listed: the others are the machine's, shared.
// Else every match is listed, marked found by name (Proc.Found, and
// "(by name)" in its name). A name matching several is named name:PID.
func FindProcs(names []string, owners []int) ([]Proc, error) {
	byName, err := proccpu.ByComm(names)
	if err != nil {
		return nil, fmt.Errorf("capacity: %w", err)
	}
	var out []Proc
	for _, n := range names {
		pids := byName[n]
		own := slices.DeleteFunc(slices.Clone(pids), func(p int) bool { return !proccpu.Descends(p, owners) })
		found := ""
		if len(own) > 0 {
			pids = own
		} else {
			found = FoundByName
		}
		for _, p := range pids {
			name := n
			if len(pids) > 1 {
				name = fmt.Sprintf("%s:%d", n, p)
			}
			if found != "" {
				name += " (" + found + ")"
			}
			out = append(out, Proc{Name: name, PID: p, Found: found})
		}
	}
	if len(out) > MaxProcs {
		return nil, fmt.Errorf("%w: %d processes match %v: at most %d", ErrInvalid, len(out), names, MaxProcs)
	}
	return out, nil
}

// ParsePIDs reads 'ref=1234,consumer=1240'.
func ParsePIDs(s string) ([]Proc, error) {
	var out []Proc
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		n, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		pid, err := strconv.Atoi(v)
		if !ok || n == "" || err != nil || pid <= 0 {
			return nil, fmt.Errorf("%w: pid %q: want name=PID", ErrInvalid, part)
		}
		out = append(out, Proc{Name: n, PID: pid})
	}
	return out, nil
}
