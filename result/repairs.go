package result

import (
	"fmt"

	"imlab/checker"
	"imlab/ref/server"
)

// RepairSummary is what forward reconciliation repaired during the run, as
// the server processes report it (GET /v1/lab/repairs): inbox rows the
// pipeline had lost and reconciliation wrote afterwards. A repair is a
// finding of the pipeline, reported beside the verdict; a repair can also
// hide a loss from the checker, which is why scenarios not about repair
// run reconciliation late (see DefaultReconcileGrace).
type RepairSummary struct {
	// Known: every process that ran the reconciler answered; false makes
	// the counts lower bounds and fails min_repairs / max_repairs.
	Known bool `json:"known"`
	// Rows is the number of inbox rows repaired; MsgIDs the distinct
	// messages (at most MaxListedIDs; Truncated says there were more).
	Rows      uint64   `json:"rows"`
	MsgIDs    []uint64 `json:"msg_ids"`
	Truncated bool     `json:"truncated,omitempty"`
	// Errors say which process could not be read.
	Errors []string `json:"errors,omitempty"`
	// Fate is what the checker's ledger says became of the listed
	// messages (MsgIDs): delivered in the end, however late, lost, or not
	// in the ledger. nil: none was listed, or the ledger was not checked.
	Fate *checker.Fate `json:"fate,omitempty"`
}

// FateLine says apart, in one line, the repaired messages that were
// delivered in the end (late, by the repair) and those still lost; "" when
// nothing was repaired.
func (s RepairSummary) FateLine() string {
	f := s.Fate
	switch {
	case len(s.MsgIDs) == 0:
		return ""
	case f == nil:
		return fmt.Sprintf("%d messages repaired by reconciliation: delivered or lost unknown (the ledger was not checked)", len(s.MsgIDs))
	}
	of := ""
	if s.Truncated {
		of = fmt.Sprintf(" (of the first %d repaired)", f.Messages)
	}
	line := fmt.Sprintf("%d messages repaired late by reconciliation and delivered in the end, %d repaired but still lost%s", f.Delivered, len(f.Lost), of)
	if n := len(f.Unexplained); n > 0 {
		line += fmt.Sprintf(", %d not in the ledger", n)
	}
	return line
}

// add merges one answer.
func (s *RepairSummary) Add(r server.Repairs) {
	s.Rows += r.Rows
	s.Truncated = s.Truncated || r.Truncated
	seen := make(map[uint64]bool, len(s.MsgIDs))
	for _, id := range s.MsgIDs {
		seen[id] = true
	}
	for _, id := range r.MsgIDs {
		if seen[id] {
			continue
		}
		if len(s.MsgIDs) >= MaxListedIDs {
			s.Truncated = true
			break
		}
		seen[id] = true
		s.MsgIDs = append(s.MsgIDs, id)
	}
}
