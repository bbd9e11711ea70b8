package selftest

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"imlab/ref/server"
	"imlab/runner"
	"imlab/scenario"
)

// Outcomes of one cell of the selftest matrix.
const (
	// CellCaught: the scenario failed against the defective server.
	CellCaught = "caught"
	// CellMissed: the scenario passed although the server had the defect.
	CellMissed = "missed"
	// CellPass and CellFail are the unmodified server's outcomes.
	CellPass = "pass"
	CellFail = "FAIL"
	// CellError: the run could not be carried out (it proves nothing).
	CellError = "error"
	// CellTiming: only timing checks failed (ACK p99, rate, send
	// failures, lag age). Against a defective server it is not a catch (a
	// shared machine fails those without any defect); for the unmodified
	// server it is still a failure, told apart from a correctness one.
	CellTiming = "timing"
)

// timingChecks are the checks about speed, not correctness: a defect is
// caught only by a failed correctness check.
var timingChecks = map[string]bool{"max_ack_p99": true, "min_rate_ratio": true, "max_send_fail_ratio": true, "max_lag_age": true}

// Unmodified names the matrix row of the server without defects.
const Unmodified = "(unmodified)"

// SelftestConfig configures Selftest.
type SelftestConfig struct {
	// Base is the runner config of every run; its OutDir is the parent of
	// the runs (OutDir/ROW/SCENARIO) and its Defects are ignored.
	Base runner.Config
	// Defects are the rows (default: every shipped defect, ref/server's
	// Defects); the unmodified server is always run too.
	Defects []string
	// Parallel runs at most this many scenarios at once (default 1; the
	// runs share the machine, so latency thresholds get looser with more).
	Parallel int
	// Progress receives one line per finished run (nil: none).
	Progress io.Writer
}

// Cell is one run of the matrix.
type Cell struct {
	Defect   string   `json:"defect"`
	Scenario string   `json:"scenario"`
	Outcome  string   `json:"outcome"`
	Failed   []string `json:"failed_checks,omitempty"`
	Why      []string `json:"why,omitempty"` // each failed check: want, got
	Err      string   `json:"error,omitempty"`
	Seconds  float64  `json:"seconds"`
	Dir      string   `json:"dir"`
}

// Matrix is the selftest's answer: defect × scenario.
type Matrix struct {
	Defects   []string `json:"defects"` // rows after Unmodified
	Scenarios []string `json:"scenarios"`
	Cells     []Cell   `json:"cells"`
	Seconds   float64  `json:"seconds"`
}

// Cell returns the cell of (defect, scenario).
func (m *Matrix) Cell(defect, scenario string) (Cell, bool) {
	for _, c := range m.Cells {
		if c.Defect == defect && c.Scenario == scenario {
			return c, true
		}
	}
	return Cell{}, false
}

// CaughtBy lists the scenarios that caught defect.
func (m *Matrix) CaughtBy(defect string) []string {
	var out []string
	for _, s := range m.Scenarios {
		if c, ok := m.Cell(defect, s); ok && c.Outcome == CellCaught {
			out = append(out, s)
		}
	}
	return out
}

// Problems says what makes the matrix a failure: a defect no scenario
// caught, a scenario the unmodified server did not pass. Empty: the
// library fails every defect and passes the correct server.
func (m *Matrix) Problems() []string {
	var out []string
	for _, s := range m.Scenarios {
		if c, ok := m.Cell(Unmodified, s); !ok || c.Outcome != CellPass {
			out = append(out, fmt.Sprintf("the unmodified server did not pass %s (%s)", s, c.Outcome))
		}
	}
	for _, d := range m.Defects {
		if len(m.CaughtBy(d)) == 0 {
			out = append(out, fmt.Sprintf("defect %s was missed by every scenario", d))
		}
	}
	return out
}

// Table is the matrix as aligned text: one row per defect (the unmodified
// server first), one column per scenario, and the count of scenarios that
// caught each defect.
func (m *Matrix) Table() string {
	rows := append([]string{Unmodified}, m.Defects...)
	w0 := len("defect")
	for _, r := range rows {
		w0 = max(w0, len(r))
	}
	ws := make([]int, len(m.Scenarios))
	for i, s := range m.Scenarios {
		ws[i] = max(len(s), len(CellCaught))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s", w0, "defect")
	for i, s := range m.Scenarios {
		fmt.Fprintf(&b, "  %-*s", ws[i], s)
	}
	b.WriteString("  caught by\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-*s", w0, r)
		for i, s := range m.Scenarios {
			c, ok := m.Cell(r, s)
			o := "-"
			if ok {
				o = c.Outcome
			}
			fmt.Fprintf(&b, "  %-*s", ws[i], o)
		}
		if r == Unmodified {
			b.WriteString("  -\n")
		} else {
			fmt.Fprintf(&b, "  %d\n", len(m.CaughtBy(r)))
		}
	}
	return b.String()
}

// Selftest runs every file once against the unmodified server and once
// per defect, and returns the matrix. A defect is caught by a scenario
// when a correctness check failed (the verdict, a finding's bound, the
// repairs, the drain, faults_reached); a run where only timing checks
// failed is a timing cell and a run that could not be carried out an error
// cell: neither is a catch. The error is for a bad configuration or
// a cancelled context only; the outcome is in the matrix (Problems).
func Selftest(ctx context.Context, cfg SelftestConfig, files []*scenario.File) (*Matrix, error) {
	defects := cfg.Defects
	if defects == nil {
		defects = shippedDefects()
	}
	for _, d := range defects {
		if _, err := server.ParseDefects(d); err != nil {
			return nil, fmt.Errorf("%w: %v", scenario.ErrInvalid, err)
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no scenario files", scenario.ErrInvalid)
	}
	m := &Matrix{Defects: slices.Clone(defects)}
	for _, f := range files {
		if slices.Contains(m.Scenarios, f.Name) {
			return nil, fmt.Errorf("%w: scenario name %q used by two files", scenario.ErrInvalid, f.Name)
		}
		m.Scenarios = append(m.Scenarios, f.Name)
	}
	par := max(1, cfg.Parallel)
	type job struct {
		row string
		f   *scenario.File
	}
	var jobs []job
	for _, row := range append([]string{Unmodified}, defects...) {
		for _, f := range files {
			jobs = append(jobs, job{row, f})
		}
	}
	began := time.Now()
	cells := make([]Cell, len(jobs))
	var mu sync.Mutex // Progress
	var wg sync.WaitGroup
	sem := make(chan struct{}, par)
	for i, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cells[i] = selftestRun(ctx, cfg.Base, j.row, j.f)
			if cfg.Progress != nil {
				mu.Lock()
				c := cells[i]
				fmt.Fprintf(cfg.Progress, "selftest %-26s %-24s %-7s %5.1fs %s\n", c.Defect, c.Scenario, c.Outcome, c.Seconds, strings.Join(c.Failed, ","))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	m.Seconds = time.Since(began).Seconds()
	for _, c := range cells {
		if c.Scenario != "" {
			m.Cells = append(m.Cells, c)
		}
	}
	if err := ctx.Err(); err != nil {
		return m, fmt.Errorf("scenarios: selftest: %w", err)
	}
	return m, nil
}

// shippedDefects are the names of the shipped defects (ref/server's
// Defects): the matrix's rows by default.
func shippedDefects() []string {
	var names []string
	for _, d := range server.Defects() {
		names = append(names, d.Name)
	}
	return names
}

// selftestRun runs one cell.
func selftestRun(ctx context.Context, base runner.Config, row string, f *scenario.File) Cell {
	c := base
	c.Defects = nil
	dirName := "unmodified"
	if row != Unmodified {
		c.Defects = []string{row}
		dirName = row
	}
	c.OutDir = filepath.Join(base.OutDir, dirName, f.Name)
	c.Progress = nil
	cell := Cell{Defect: row, Scenario: f.Name, Dir: c.OutDir}
	res, err := runner.Run(ctx, c, f)
	if res != nil {
		cell.Seconds = res.Seconds
		for _, ch := range res.Checks {
			if !ch.OK {
				cell.Failed = append(cell.Failed, ch.Name)
				cell.Why = append(cell.Why, ch.Name+": want "+ch.Want+", got "+ch.Got)
			}
		}
	}
	switch {
	case err != nil || res == nil || res.Incomplete:
		cell.Outcome = CellError
		if err != nil {
			cell.Err = err.Error()
		} else if res != nil && len(res.Errors) > 0 {
			cell.Err = res.Errors[0]
		}
	case row == Unmodified && res.Passed:
		cell.Outcome = CellPass
	case row == Unmodified && onlyTiming(cell.Failed):
		cell.Outcome = CellTiming // still a failure of the unmodified server (Problems), of timing only
	case row == Unmodified:
		cell.Outcome = CellFail
	case res.Passed:
		cell.Outcome = CellMissed
	case onlyTiming(cell.Failed):
		cell.Outcome = CellTiming
	default:
		cell.Outcome = CellCaught
	}
	return cell
}

// onlyTiming tells whether every failed check is a timing check.
func onlyTiming(failed []string) bool {
	for _, n := range failed {
		if !timingChecks[n] {
			return false
		}
	}
	return len(failed) > 0
}
