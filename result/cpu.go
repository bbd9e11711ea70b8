package result

// CPULine is a run's CPU by process, second by second: what each process
// of the run, and the whole machine, used in each second of the load and
// the recovery after it, so that every figure of the run can be read
// beside who had the machine's CPU at that moment (on one machine the lab,
// the server and its databases share the cores).
type CPULine struct {
	// CPUs is the machine's CPU count: the cores every figure is out of.
	CPUs int `json:"cpus"`
	// Procs are the processes read, in the order they are charted.
	Procs []CPUProc `json:"procs"`
	// Seconds are the samples, one per second (at most MaxCPUSeconds).
	Seconds []CPUSecond `json:"seconds"`
	// Notes say what was not read, and what a line holds besides its
	// process (the runner's line holds the generator and every part of
	// the run inside the runner).
	Notes []string `json:"notes,omitempty"`
}

// MaxCPUSeconds bounds a CPU timeline: past it the sampler stops and says
// so in the timeline's notes.
const MaxCPUSeconds = 3600

// CPUProc is one line of the timeline: a process of the run (each
// incarnation of a restarted one under the same name).
type CPUProc struct {
	Name string `json:"name"`
	// PIDs are its pids, one per incarnation seen.
	PIDs []int `json:"pids"`
	// Found says how it was found when that was not by its pid: "by name"
	// (a shared server's CPU may be other clients' too).
	Found string `json:"found,omitempty"`
}

// CPUSecond is one second of the timeline.
type CPUSecond struct {
	// T is the end of the second (seconds since the run's time base).
	T float64 `json:"t_s"`
	// Cores is the CPU each process used over the second, in cores (CPU
	// seconds per second). A process missing was not measured in that
	// second (not running, unreadable, or first seen in it): unknown, not
	// idle.
	Cores map[string]float64 `json:"cores"`
	// Machine is the machine's busy cores over the second (every
	// process's, the run's and others'); nil when /proc/stat could not be
	// read.
	Machine *float64 `json:"machine_cores,omitempty"`
}

// Mid is where a chart draws the second: its middle.
func (s CPUSecond) Mid() float64 { return s.T - 0.5 }

// OthersBusyShare: a run in which the rest of the machine (processes
// outside the run, the kernel's own work) used at least this share of the
// machine's CPU on average is BUSY: its figures describe a target that
// shared the cores with other work.
const OthersBusyShare = 0.25

// Others is the rest of the machine over the timeline's seconds (Rest):
// its mean and peak in cores, over n seconds with the machine's figure,
// and how many seconds had the processes' sum above the machine's (floored
// at 0 there: the two are read a few microseconds apart).
func (l *CPULine) Others() (mean, peak float64, n, floored int) {
	if l == nil {
		return 0, 0, 0, 0
	}
	var sum float64
	for _, s := range l.Seconds {
		raw, ok := s.rest()
		if !ok {
			continue
		}
		if raw < -flooredBy {
			floored++
		}
		r := max(raw, 0)
		sum, peak, n = sum+r, max(peak, r), n+1
	}
	if n == 0 {
		return 0, 0, 0, 0
	}
	return sum / float64(n), peak, n, floored
}

// Rest is the machine's busy cores that the processes measured in the
// second do not account for: other processes, the kernel's own work, and a
// process of the run in a second it was not measured in (the second a
// restarted process first appeared). ok is false when the machine's
// figure was not read. Sampling the two a few microseconds apart can make
// it slightly negative: it is floored at 0.
func (s CPUSecond) Rest() (float64, bool) {
	rest, ok := s.rest()
	return max(rest, 0), ok
}

// flooredBy is how far under 0 the rest of the machine must come out for
// a second to count as floored (Others): less is the kernel's 10 ms tick.
const flooredBy = 0.02

// rest is the machine's busy cores less the measured processes', not
// floored.
func (s CPUSecond) rest() (float64, bool) {
	if s.Machine == nil {
		return 0, false
	}
	rest := *s.Machine
	for _, c := range s.Cores {
		rest -= c
	}
	return rest, true
}
