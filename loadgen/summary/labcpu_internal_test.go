package summary

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// The share is CPU over CPUs x window; over half is labelled; a mark not
// read or an empty window is unknown (nil), never 0.
func TestLabCPUShare(t *testing.T) {
	t0 := time.Now()
	n := float64(runtime.NumCPU())
	busy := CPUShare(CPUMark{at: t0, cpu: time.Second, ok: true}, CPUMark{at: t0.Add(2 * time.Second), cpu: time.Second + time.Duration(1.2*n*float64(time.Second)), ok: true})
	if busy == nil || busy.Share < 0.5999 || busy.Share > 0.6001 || !busy.OverHalf || !strings.Contains(busy.String(), "generator used 60% of the machine's CPU during the measured window") ||
		!strings.Contains(busy.String(), "MORE THAN HALF") {
		t.Fatalf("busy: %+v %s", busy, busy)
	}
	idle := CPUShare(CPUMark{at: t0, ok: true}, CPUMark{at: t0.Add(10 * time.Second), cpu: time.Duration(n * float64(time.Second)), ok: true})
	if idle == nil || idle.Share < 0.0999 || idle.Share > 0.1001 || idle.OverHalf || strings.Contains(idle.String(), "HALF") {
		t.Fatalf("idle: %+v %s", idle, idle)
	}
	for _, m := range [][2]CPUMark{{{}, {at: t0, ok: true}}, {{at: t0, ok: true}, {at: t0, ok: true}}} {
		if l := CPUShare(m[0], m[1]); l != nil {
			t.Fatalf("%+v: want unknown, got %+v", m, l)
		}
	}
	if !strings.Contains((*LabCPU)(nil).String(), "unknown") {
		t.Fatal("a nil share must say unknown")
	}
	if m := MarkCPU(); !m.ok || m.cpu <= 0 {
		t.Fatalf("this process's CPU: %+v", m)
	}
}

// A figure of a process the generator shared with other parts of a run
// says it is the whole process's, names them, and keeps the over-half
// label; alone (imlab load) the generator's wording is unchanged.
func TestLabCPUInProcess(t *testing.T) {
	l := &LabCPU{CPUSeconds: 3.61, WindowSeconds: 6.1, CPUs: 2, Share: 0.3, InProcess: []string{"api", "in-process kafka"}}
	want := "the runner process (the generator and, inside it, api, in-process kafka) used 30% of the machine's CPU during the measured window (3.61 CPU-s in 6.1 s on 2 CPUs): the generator's own share is not separable"
	if got := l.String(); got != want {
		t.Fatalf("shared:\n got %s\nwant %s", got, want)
	}
	l.Share, l.OverHalf = 0.6, true
	if got := l.String(); !strings.HasPrefix(got, "the runner process (") || !strings.HasSuffix(got, "not separable: MORE THAN HALF, the target had less than half of the machine") {
		t.Fatalf("shared, over half: %s", got)
	}
	l.InProcess, l.Share, l.OverHalf = nil, 0.3, false
	if got := l.String(); got != "generator used 30% of the machine's CPU during the measured window (3.61 CPU-s in 6.1 s on 2 CPUs)" {
		t.Fatalf("alone: %s", got)
	}
}
