package judge

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOptions: bad options are refused before anything is read, each
// naming its flag; a directory that is not a run's is named.
func TestOptions(t *testing.T) {
	for name, o := range map[string]Options{
		"nothing":   {},
		"both":      {Dirs: []string{"a"}, SegmentsIn: "b"},
		"wait":      {Dirs: []string{"a"}, Wait: -time.Second},
		"long wait": {Dirs: []string{"a"}, Wait: MaxWait + time.Second},
		"limit":     {Dirs: []string{"a"}, Limit: 1},
		"limit < 0": {Dirs: []string{"a"}, Limit: -0.1},
		"limit > 1": {Dirs: []string{"a"}, Limit: 2},
	} {
		if _, err := Dirs(context.Background(), o); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	missing := filepath.Join(t.TempDir(), "none")
	if _, err := Dirs(context.Background(), Options{Dirs: []string{missing}}); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing directory: %v", err)
	}
}

// TestVerdictPath: --out, else the run's directory, else the segments'
// common parent; segments without one are refused.
func TestVerdictPath(t *testing.T) {
	for _, c := range []struct {
		dirs      []string
		out, want string
	}{
		{[]string{"r"}, "", filepath.Join("r", "verdict.json")},
		{[]string{"p/s1", "p/s2"}, "", filepath.Join("p", "verdict.json")},
		{[]string{"p/s1", "q/s2"}, "v.json", "v.json"},
	} {
		if got, err := verdictPath(c.dirs, c.out); err != nil || got != c.want {
			t.Errorf("%v %q: %q %v, want %q", c.dirs, c.out, got, err, c.want)
		}
	}
	if _, err := verdictPath([]string{"p/s1", "q/s2"}, ""); err == nil {
		t.Error("segments without a common parent were given a verdict path")
	}
}
