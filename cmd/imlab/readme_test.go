package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"imlab/loadgen/summary"
	"imlab/targets"
)

// readme is README.md with its line breaks and runs of spaces as one
// space, so that a quoted line may wrap.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// TestReadmeNamesEveryShippedScenario: README's "Shipped scenarios"
// paragraph names every file the glob scenarios/*.yaml holds, so the list
// cannot fall behind the directory (README gives no count of them).
func TestReadmeNamesEveryShippedScenario(t *testing.T) {
	text := readme(t)
	start := strings.Index(text, "Shipped scenarios (")
	end := strings.Index(text, "### Every option under a fault")
	if start < 0 || end < start {
		t.Fatal(`README has no "Shipped scenarios" paragraph before "### Every option under a fault"`)
	}
	para := text[start:end]
	paths, err := filepath.Glob("../../scenarios/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("scenarios: %v %v", paths, err)
	}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".yaml")
		if !strings.Contains(para, "`"+name+"`") {
			t.Errorf("README's Shipped scenarios do not name %s (%s)", name, p)
		}
	}
}

// TestReadmeDeviceErrorLine: the device error README quotes after the
// load's summary is what the generator prints for a hundred final-drain
// timeouts (device.go's "device %d ack %d: %v" of an unknown outcome),
// counted by kind.
func TestReadmeDeviceErrorLine(t *testing.T) {
	cause := &targets.Error{Class: targets.Unknown, Err: errors.New("fasthttp: timeout")}
	var k summary.ErrorKinds
	for _, d := range [][2]int{{183, 22}, {396, 25}, {182, 24}} {
		k.Add(fmt.Sprintf("device %d ack %d: %v", d[0], d[1], cause))
	}
	for i := range 97 {
		k.Add(fmt.Sprintf("device %d ack %d: %v", i, 1+i%30, cause))
	}
	var b bytes.Buffer
	(&summary.Summary{Errors: k.Lines()}).WriteText(&b)
	var line string
	for l := range strings.SplitSeq(b.String(), "\n") {
		if strings.HasPrefix(l, "error: ") {
			line = l
		}
	}
	if line == "" || !strings.Contains(readme(t), "`"+line+"`") {
		t.Fatalf("README does not quote the line the generator prints: %q", line)
	}
}
