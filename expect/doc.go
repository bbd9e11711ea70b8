// Package expect turns what a run observed into checks: pure functions
// from observations (the checker's verdict, the load's summary, the lag
// timeline, the faults' reach, the repairs) to the checks of a file's
// expect section, in a fixed order, with the recovery and burst figures
// they are judged on.
//
// It must not do I/O, start or talk to anything, or keep state: the same
// observations give the same checks.
package expect
