// Package selftest runs the defect matrix: every shipped defect of the
// reference server (ref/defect) switched on alone, against the scenario
// library, and the table of which scenario caught which defect through
// which finding.
//
// It must not judge runs itself (the runner's checks and the checker's
// findings do) or switch defects outside the child processes it starts.
//
// # The defect matrix
//
// Selftest runs files once against the unmodified server and once per
// shipped defect of the reference server (ref/server's Defects; a defect
// is put into every server process of a run through Config.Defects) and
// returns the Matrix: caught (the scenario failed), missed (it passed) or
// error (the run could not be carried out: it proves nothing). Problems
// lists each defect no scenario caught and each file the unmodified server
// did not pass; `imlab scenario selftest` exits 1 on any.
package selftest
