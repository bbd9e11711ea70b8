// Package loadavg reads the machine's load average (1, 5 and 15 minutes,
// as Linux publishes it in /proc/loadavg), which every result the lab
// writes records beside its figures. It owns the reading and parsing
// only; what a busy machine means for a run is its caller's to say. It
// imports no imlab package.
package loadavg

import (
	"os"
	"strconv"
	"strings"
)

// File is where Linux publishes the load average.
const File = "/proc/loadavg"

// Read reads the load average; ok is false where there is none (not
// Linux) or it cannot be read.
func Read() (v [3]float64, ok bool) {
	b, err := os.ReadFile(File)
	if err != nil {
		return v, false
	}
	return Parse(string(b))
}

// Parse reads the first three fields of /proc/loadavg's text; ok is false
// when there are fewer than three or one is not a non-negative number.
func Parse(s string) (v [3]float64, ok bool) {
	fs := strings.Fields(s)
	if len(fs) < 3 {
		return v, false
	}
	for i := range v {
		x, err := strconv.ParseFloat(fs[i], 64)
		if err != nil || x < 0 {
			return [3]float64{}, false
		}
		v[i] = x
	}
	return v, true
}
