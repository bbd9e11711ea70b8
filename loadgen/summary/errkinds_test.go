package summary_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"imlab/loadgen/summary"
)

// TestErrorKindsManyTimeouts: a hundred device timeouts of the final drain
// (what a busy machine gives) make one line with their count and the first
// three as examples, on the terminal and so in the report's Notes; an
// error alone of its kind stays as it was.
func TestErrorKindsManyTimeouts(t *testing.T) {
	var k summary.ErrorKinds
	for i := range 100 {
		k.Add(fmt.Sprintf("device %d ack %d: unknown: fasthttp: timeout", 180+i, 20+i%7))
	}
	k.Add("final drain timed out after 30s")
	k.Add("device 7 register: status 503")
	k.Add("device 8 register: status 503")
	got := k.Lines()
	want := []string{
		"100 × device N ack N: unknown: fasthttp: timeout (e.g. device 180 ack 20; device 181 ack 21; device 182 ack 22)",
		"final drain timed out after 30s",
		"2 × device N register: status N (e.g. device 7 register: status 503; device 8 register: status 503)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var b bytes.Buffer
	s := &summary.Summary{Errors: got}
	s.WriteText(&b)
	if n := strings.Count(b.String(), "error: "); n != 3 {
		t.Fatalf("%d error lines in the text, want 3:\n%s", n, b.String())
	}
}

// TestErrorKindsBounded: beyond the kinds kept apart, errors are counted
// together in one last line; identical errors without a number give no
// examples.
func TestErrorKindsBounded(t *testing.T) {
	var k summary.ErrorKinds
	for i := range 30 {
		k.Add(fmt.Sprintf("kind %c failed at %d", 'a'+i, i))
	}
	k.Add("no number")
	k.Add("no number")
	got := k.Lines()
	if len(got) != 21 || got[20] != "12 more errors of other kinds (only the first 20 kinds are kept apart)" {
		t.Fatalf("lines (%d): %q", len(got), got)
	}
	var k2 summary.ErrorKinds
	k2.Add("no number")
	k2.Add("no number")
	if got := k2.Lines(); len(got) != 1 || got[0] != "2 × no number" {
		t.Fatalf("lines: %q", got)
	}
}

// TestErrorKindsKeepNumbersInWords: a number that is part of a word
// ("HS256") is the error's text, not what tells one error from another:
// it stays in the kind, and the examples are cut after the last number
// that does (here the status), not inside the word.
func TestErrorKindsKeepNumbersInWords(t *testing.T) {
	var k summary.ErrorKinds
	for _, dev := range []int{129, 130} {
		k.Add(fmt.Sprintf("device %d register: failed: status 401 unauthenticated: bad signature or algorithm (HS256 required)", dev))
	}
	want := "2 × device N register: failed: status N unauthenticated: bad signature or algorithm (HS256 required) (e.g. device 129 register: failed: status 401; device 130 register: failed: status 401)"
	if got := k.Lines(); len(got) != 1 || got[0] != want {
		t.Fatalf("lines %q\nwant %q", got, want)
	}
}
