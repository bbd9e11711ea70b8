package scenario

import (
	"fmt"
	"slices"
)

// MaxMatrixValues bounds the values of a matrix parameter.
const MaxMatrixValues = 8

// MatrixSpec runs one file several times, once per value of a parameter.
// The only parameter is Consumers: the count of the file's consumer
// process (the one process whose roles include consumer and not api),
// each value at most the topic's partitions, so that every consumer owns
// a partition.
type MatrixSpec struct {
	Consumers []int `yaml:"consumers" json:"consumers"`
}

// consumerProcess is the index of the file's process that runs the
// consumer tier alone (without the api), -1 if there is none or several.
func (f *File) consumerProcess() int {
	at := -1
	for i, p := range f.Server.Processes {
		if slices.Contains(p.Roles, "consumer") && !p.RunsAPI() {
			if at >= 0 {
				return -1
			}
			at = i
		}
	}
	return at
}

func (m *MatrixSpec) validate(f *File) error {
	if m == nil {
		return nil
	}
	if len(m.Consumers) == 0 || len(m.Consumers) > MaxMatrixValues {
		return Bad("matrix.consumers", "%d values: want 1..%d", len(m.Consumers), MaxMatrixValues)
	}
	at := f.consumerProcess()
	if at < 0 {
		return Bad("matrix.consumers", "needs exactly one process in server.processes whose roles include consumer and not api")
	}
	if f.Server.Processes[at].Count > 1 {
		return Bad("matrix.consumers", "server.processes[%d] has a count of its own: the matrix sets it", at)
	}
	others := len(f.Processes()) - 1
	seen := map[int]bool{}
	for i, c := range m.Consumers {
		field := fmt.Sprintf("matrix.consumers[%d]", i)
		if c < 1 || c > f.Backends.PartitionsOr() || others+c > MaxProcesses {
			return Bad(field, "%d: want 1..%d (the topic's partitions, and at most %d processes in all)", c, min(f.Backends.PartitionsOr(), MaxProcesses-others), MaxProcesses)
		}
		if seen[c] {
			return Bad(field, "%d given twice", c)
		}
		seen[c] = true
	}
	for _, x := range f.Faults {
		if (x.Kind == KindStop || x.Kind == KindKill) && x.Target == f.Server.Processes[at].Name {
			return Bad("matrix.consumers", "a fault targets %q, which the matrix replaces by %s-1..%s-N", x.Target, x.Target, x.Target)
		}
	}
	return nil
}

// Expand returns the runs of a file: the file itself without a matrix,
// else one copy per matrix value, named NAME.consumers-N, with the
// consumer process's count set to N and Variant "consumers=N". The copies
// are validated; f is not changed.
func Expand(f *File) ([]*File, error) {
	if f.Matrix == nil {
		return []*File{f}, nil
	}
	at := f.consumerProcess()
	if at < 0 {
		return nil, Bad("matrix.consumers", "needs exactly one process whose roles include consumer and not api")
	}
	var out []*File
	for _, c := range f.Matrix.Consumers {
		g := *f
		g.Matrix = nil
		g.Name = fmt.Sprintf("%s.consumers-%d", f.Name, c)
		if len(g.Name) > MaxNameLen {
			return nil, Bad("name", "%q with the matrix suffix is longer than %d", g.Name, MaxNameLen)
		}
		g.Variant = fmt.Sprintf("consumers=%d", c)
		g.Server.Processes = slices.Clone(f.Server.Processes)
		g.Server.Processes[at].Count = c
		if err := g.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", g.Variant, err)
		}
		out = append(out, &g)
	}
	return out, nil
}

// ConsumerProcesses counts the processes that run the consumer tier.
func (f *File) ConsumerProcesses() int {
	n := 0
	for _, p := range f.Processes() {
		if slices.Contains(p.Roles, "consumer") || slices.Contains(p.Roles, "all") {
			n++
		}
	}
	return n
}
