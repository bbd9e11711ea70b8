// Package proccpu reads what Linux accounts of processes and of the
// machine in /proc: a process's CPU time (user + system) and start time,
// its parent, the processes of a command name, and the machine's busy CPU
// time. It owns the parsing of /proc/PID/stat and /proc/stat and nothing
// else: which processes to watch, and what their figures mean, belong to
// its callers (capacity's steps, a scenario run's CPU timeline).
package proccpu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ClockTick is USER_HZ, the unit of utime and stime in /proc/PID/stat and
// of /proc/stat: 100 on every Linux architecture Go supports (the kernel
// fixes it for user space whatever CONFIG_HZ is).
const ClockTick = 10 * time.Millisecond

// MaxChain bounds the walk up a process's parents (a chain is short, and
// pids may be reused).
const MaxChain = 64

// ErrUnreadable is wrapped by every error about a /proc file that was
// read but could not be parsed.
var ErrUnreadable = errors.New("unreadable /proc entry")

// Stat is a process's CPU time (user + system) so far and its start time
// (clock ticks since boot: a pid reused by another process has another).
func Stat(pid int) (cpu time.Duration, start uint64, err error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, 0, err
	}
	// After ')': state is field 3, so utime (14) and stime (15) are at
	// indexes 11 and 12, starttime (22) at 19.
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("%w: pid %d: short stat", ErrUnreadable, pid)
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, fmt.Errorf("%w: pid %d: bad utime/stime/starttime", ErrUnreadable, pid)
	}
	return time.Duration(ut+st) * ClockTick, start, nil
}

// Parent is a process's parent pid (field 4 of /proc/PID/stat).
func Parent(pid int) (int, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 2 {
		return 0, fmt.Errorf("%w: pid %d: short stat", ErrUnreadable, pid)
	}
	return strconv.Atoi(f[1])
}

// statFields are /proc/PID/stat's fields after the command name (field
// 2, in parentheses, may hold spaces: the fields start after the last
// ')'), so index 0 is field 3 (state).
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("%w: pid %d: no command name", ErrUnreadable, pid)
	}
	return strings.Fields(s[i+1:]), nil
}

// Descends tells whether pid is a descendant of one of owners, by its
// parents in /proc (a process that cannot be read is nobody's).
func Descends(pid int, owners []int) bool {
	for range MaxChain {
		ppid, err := Parent(pid)
		if err != nil || ppid <= 1 {
			return false
		}
		if slices.Contains(owners, ppid) {
			return true
		}
		pid = ppid
	}
	return false
}

// ByComm lists the pids of the processes whose command name
// (/proc/PID/comm) is one of names, each name's in increasing order, this
// process left out.
func ByComm(names []string) (map[string][]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("proccpu: %w", err)
	}
	out := map[string][]int{}
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil {
			continue
		}
		if c := strings.TrimSpace(string(b)); slices.Contains(names, c) {
			out[c] = append(out[c], pid)
		}
	}
	for _, pids := range out {
		slices.Sort(pids)
	}
	return out, nil
}

// Machine is the machine's CPU time so far, summed over its CPUs
// (/proc/stat's first line): Busy is user, nice, system, irq and softirq
// (what ran here), Total adds idle, iowait and steal (what the hypervisor
// gave to others).
type Machine struct {
	Busy, Total time.Duration
}

// ReadMachine reads /proc/stat's first line.
func ReadMachine() (Machine, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return Machine{}, fmt.Errorf("proccpu: %w", err)
	}
	return parseMachine(string(b))
}

func parseMachine(s string) (Machine, error) {
	line, _, _ := strings.Cut(s, "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return Machine{}, fmt.Errorf("%w: /proc/stat: first line %q", ErrUnreadable, line)
	}
	var m Machine
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return Machine{}, fmt.Errorf("%w: /proc/stat: field %d %q", ErrUnreadable, i+1, v)
		}
		d := time.Duration(n) * ClockTick
		// user nice system idle iowait irq softirq steal guest guest_nice:
		// guest time is already counted in user and nice.
		if i >= 8 {
			continue
		}
		m.Total += d
		if i != 3 && i != 4 && i != 7 {
			m.Busy += d
		}
	}
	return m, nil
}
