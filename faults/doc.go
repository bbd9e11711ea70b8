// Package faults owns the fault kinds a scenario file may schedule: for
// each kind, one type in a file of its own that checks its entry (target,
// parameters, values), builds the chaos.Fault that injects and heals it,
// and names the unit its count of affected things is in. Kinds lists them
// all; a new kind is one new file and one line there.
//
// It must not implement the faults themselves (package chaos does),
// parse files (package scenario reads the entries, Spec is their shape),
// or start, stop or find processes and backends: the runner hands a kind
// what it builds against (Env).
package faults
