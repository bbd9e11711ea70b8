package scenario

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"imlab/scenarios"
)

// DefaultSet names the shipped scenarios `imlab demo` runs: short, one
// fault each, covering the three answers a newcomer wants first: the
// strict policy survives a Redis wipe and a seq allocator rollback (valid),
// the store policy's reconciliation repairs lost queue records (valid), and
// the unsafe queue policy under the same fault is caught losing messages
// (the negative control: it passes only when the checker reports loss).
var DefaultSet = []string{"redis-wipe", "allocator-rollback", "queue-loss-store", "queue-loss-unsafe"}

// ShippedNames lists the compiled-in scenario names, sorted.
func ShippedNames() []string {
	ents, _ := fs.ReadDir(scenarios.FS, ".")
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok && !e.IsDir() {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Shipped parses the compiled-in scenario name (without ".yaml"); its
// Path is the file's name in the source tree, scenarios/NAME.yaml.
func Shipped(name string) (*File, error) {
	p := name + ".yaml"
	if !nameRE.MatchString(name) || path.Base(p) != p {
		return nil, fmt.Errorf("%w: %q is not a scenario name", ErrInvalid, name)
	}
	b, err := scenarios.FS.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%w: no shipped scenario %q (have %s)", ErrInvalid, name, strings.Join(ShippedNames(), ", "))
	}
	f, err := Parse(p, b)
	if err != nil {
		return nil, err
	}
	f.Path = path.Join("scenarios", p)
	return f, nil
}
