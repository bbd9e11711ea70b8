package scenario

import (
	"fmt"
	"slices"
)

// ReferenceSuffix ends the name of a file's reference side
// (ReferenceSide): NAME.reference.
const ReferenceSuffix = ".reference"

// ReferenceSide is the reference server's side of a file whose target block
// names an external server: the same load (shape, population, mix,
// retries, timeouts) and the same fault schedule, against the reference
// server started as one exec process named "server" (roles all, the
// strict policy), so that its CPU is measured as the external server's
// is. A fault on the external server's database goes to the reference's
// MySQL proxy; a stop or kill of "server" stops or kills the reference
// process. The expectation is the reference's own promise, whatever the
// file expects of the external server: verdict valid. The copy is
// validated; f is not changed.
func ReferenceSide(f *File) (*File, error) {
	if !f.Target.External() {
		return nil, Bad("target", "a reference side is made of a file whose target block names an external server (driver tinode)")
	}
	g := *f
	g.Name = f.Name + ReferenceSuffix
	if len(g.Name) > MaxNameLen {
		return nil, Bad("name", "%q with the suffix %s is longer than %d", g.Name, ReferenceSuffix, MaxNameLen)
	}
	g.Description = fmt.Sprintf("The reference server's side of %s: the same load and faults, the reference server "+
		"in one exec process (strict policy), its MySQL behind the proxy that stands for the %s server's database.",
		f.Name, f.Target.Driver)
	g.Variant = "reference side of " + f.Name
	g.Target = nil
	g.Server = ServerSpec{Policy: "strict", Processes: []ProcessSpec{{Name: TargetServerProcess, Roles: []string{"all"}, Exec: true}}}
	g.Faults = slices.Clone(f.Faults)
	for i := range g.Faults {
		if g.Faults[i].Target == TargetDatabaseProxy {
			g.Faults[i].Target = TargetMySQL
		}
	}
	g.Expect = ExpectSpec{Verdict: VerdictValid}
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("reference side of %s: %w", f.Name, err)
	}
	return &g, nil
}
