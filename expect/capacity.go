package expect

import (
	"fmt"

	"imlab/result"
	"imlab/scenario"
)

// CapacityCheck and StepsVerdictCheck are the checks of a capacity run.
const (
	CapacityCheck     = "min_sustainable"
	StepsVerdictCheck = "verdict"
)

// evaluateCapacity: the sustainable rate reached min_sustainable, and no
// step the checker judged was INVALID (a rate at which messages were lost
// is a failure of the set-up, whether or not the search went past it).
func EvaluateCapacity(e scenario.ExpectSpec, s *result.CapacitySummary) []result.Check {
	got := "no rate held the SLO twice"
	if s.Sustainable != nil {
		got = fmt.Sprintf("%.0f/s", *s.Sustainable)
	}
	switch s.Limit {
	case "":
	case "to":
		got += " (the search's upper bound held)"
	default:
		got += " (" + s.Limit + "'s limit)"
	}
	checks := []result.Check{{Name: CapacityCheck, Want: fmt.Sprintf(">= %g/s within %s", *e.MinSustainable, s.SLO), Got: got,
		OK: s.Sustainable != nil && *s.Sustainable >= *e.MinSustainable}}
	checks = append(checks, result.Check{Name: StepsVerdictCheck, Want: "VALID on every step the checker judged (at least one)",
		Got: fmt.Sprintf("%d of %d checked steps INVALID", s.Invalid, s.Checked), OK: s.Invalid == 0 && s.Checked > 0})
	return checks
}
