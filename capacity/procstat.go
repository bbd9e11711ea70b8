package capacity

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of utime and stime in /proc/PID/stat:
// 100 on every Linux architecture Go supports (the kernel fixes it for
// user space whatever CONFIG_HZ is).
const clockTick = 10 * time.Millisecond

// MaxProcs bounds the watched processes.
const MaxProcs = 64

// Proc is one watched process.
type Proc struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
}

// cpuTime is the CPU time (user + system) a process has used so far.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, fmt.Errorf("capacity: pid %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields that follow start after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("capacity: pid %d: unreadable stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// After ')': state is field 3, so utime (14) and stime (15) are at
	// indexes 11 and 12.
	if len(f) < 13 {
		return 0, fmt.Errorf("capacity: pid %d: short stat", pid)
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("capacity: pid %d: bad utime/stime", pid)
	}
	return time.Duration(ut+st) * clockTick, nil
}

// FindProcs lists the processes whose command name (/proc/PID/comm) is
// one of names, each named name:PID when a name matches several, the
// generator's own pid left out (it is watched as "generator").
func FindProcs(names []string) ([]Proc, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("capacity: %w", err)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	byName := map[string][]int{}
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
		if c := strings.TrimSpace(string(b)); want[c] {
			byName[c] = append(byName[c], pid)
		}
	}
	var out []Proc
	for _, n := range names {
		pids := byName[n]
		sort.Ints(pids)
		for _, p := range pids {
			name := n
			if len(pids) > 1 {
				name = fmt.Sprintf("%s:%d", n, p)
			}
			out = append(out, Proc{Name: name, PID: p})
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

// cpuSample is the CPU time of each watched process at one instant (an
// entry missing: the process could not be read).
type cpuSample struct {
	at   time.Time
	used map[int]time.Duration
	errs map[int]string
}

func sampleCPU(ps []Proc) cpuSample {
	s := cpuSample{at: time.Now(), used: map[int]time.Duration{}, errs: map[int]string{}}
	for _, p := range ps {
		d, err := cpuTime(p.PID)
		if err != nil {
			s.errs[p.PID] = err.Error()
			continue
		}
		s.used[p.PID] = d
	}
	return s
}
