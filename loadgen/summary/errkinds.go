package summary

import (
	"fmt"
	"regexp"
	"strings"
)

// Bounds of an ErrorKinds: the kinds it keeps apart and the examples it
// keeps of each; errors of further kinds are counted together.
const (
	maxErrorKinds    = 20
	maxErrorExamples = 3
)

// digits are the numbers that tell one error of a kind from another (a
// device's index, a sequence, a uid), each with the character before it
// (group 1): a number that follows a letter is part of a word ("HS256",
// "e2e", "ipv4") and stays.
var digits = regexp.MustCompile(`(^|[^A-Za-z_0-9])[0-9]+`)

// ErrorKinds counts a run's errors by kind: an error's kind is its text
// with every number written N ("device N ack N: unknown: fasthttp:
// timeout"). It keeps the first few errors of each kind as examples, so
// that a hundred timeouts make one line, not a hundred. The zero value is
// ready; it is not safe for concurrent use (its owner guards it).
type ErrorKinds struct {
	kinds  []errorKind
	index  map[string]int
	others int
}

type errorKind struct {
	kind     string
	count    int
	examples []string
}

// Add counts one error.
func (k *ErrorKinds) Add(msg string) {
	kind := digits.ReplaceAllString(msg, "${1}N")
	i, ok := k.index[kind]
	if !ok {
		if len(k.kinds) >= maxErrorKinds {
			k.others++
			return
		}
		if k.index == nil {
			k.index = make(map[string]int)
		}
		i = len(k.kinds)
		k.index[kind] = i
		k.kinds = append(k.kinds, errorKind{kind: kind})
	}
	e := &k.kinds[i]
	e.count++
	if len(e.examples) < maxErrorExamples {
		e.examples = append(e.examples, msg)
	}
}

// Lines are the errors summarised, in the order their kinds first
// occurred: an error alone of its kind as it was, a repeated kind as its
// count, its text and its first examples:
//
//	100 × device N ack N: unknown: fasthttp: timeout (e.g. device 183 ack 22; device 396 ack 25; device 182 ack 24)
func (k *ErrorKinds) Lines() []string {
	var out []string
	for _, e := range k.kinds {
		if e.count == 1 {
			out = append(out, e.examples[0])
			continue
		}
		line := fmt.Sprintf("%d × %s", e.count, e.kind)
		if ex := shortExamples(e.examples); len(ex) > 0 {
			line += " (e.g. " + strings.Join(ex, "; ") + ")"
		}
		out = append(out, line)
	}
	if k.others > 0 {
		out = append(out, fmt.Sprintf("%d more errors of other kinds (only the first %d kinds are kept apart)", k.others, maxErrorKinds))
	}
	return out
}

// shortExamples cuts from each example its text after the last number,
// which its kind repeats: "device 183 ack 22: unknown: fasthttp: timeout"
// is "device 183 ack 22". Examples without a number are all the kind's
// text itself: none are given.
func shortExamples(examples []string) []string {
	var out []string
	for _, ex := range examples {
		m := digits.FindAllStringIndex(ex, -1)
		if len(m) == 0 {
			return nil
		}
		out = append(out, ex[:m[len(m)-1][1]])
	}
	return out
}
