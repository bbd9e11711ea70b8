package runpage

import (
	"fmt"
	"path/filepath"

	"imlab/capacity"
	"imlab/report"
	"imlab/result"
)

// capacityReport is where a capacity search's own page is: beside its
// result.json.
func capacityReport(c *result.CapacitySummary) string {
	return filepath.Join(filepath.Dir(c.Result), capacity.ReportFile)
}

// capacityNoCharts is what a capacity run's Charts section says in place
// of "no charts": what the search measured, and where it is drawn.
func capacityNoCharts(c *result.CapacitySummary) string {
	return fmt.Sprintf("No chart on this page: a capacity search measures step by step, not second by second, so there is no throughput, "+
		"ACK latency or lag per second to draw. It ran %d steps (%d checked, %d INVALID) within %s; the Capacity search table below has "+
		"its answer, and its own page, %s, draws each step's ACK latency and CPU against the offered rate and lists every step's figures.",
		c.Steps, c.Checked, c.Invalid, c.SLO, capacityReport(c))
}

// capacityTable is a capacity run's answer, figure by figure; a figure
// the search did not find says why, never a bare dash or 0.
func capacityTable(c *result.CapacitySummary) report.Table {
	rate := func(v *float64, none string) string {
		if v == nil {
			return none
		}
		return fmt.Sprintf("%.0f sends/s", *v)
	}
	sustainable := rate(c.Sustainable, "none: no rate held twice")
	broke := rate(c.Broke, "none broke")
	if c.Broke == nil && c.Limit == "to" {
		broke += " (the search's upper bound held)"
	}
	limit := c.Limit
	switch limit {
	case "":
		limit = "not known (no step broke)"
	case "to":
		limit = "the search's upper bound (--to): the capacity is at least the sustainable rate"
	}
	cost := "not measured: no sustainable rate, or no process's CPU read"
	if len(c.Cost) > 0 {
		cost = capacity.CostText(c.Cost)
	}
	return report.Table{Title: "Capacity search (its steps and curves: " + capacityReport(c) + ")",
		Header: []string{"SLO", "sustainable", "first rate that broke", "what bounded it", "knee", "steps (checked, INVALID)", "CPU-µs per ACKed message at the sustainable rate"},
		Rows: [][]string{{c.SLO, sustainable, broke, limit, rate(c.Knee, "none: no step met the knee rule (its page states the rule)"),
			fmt.Sprintf("%d (%d checked, %d INVALID)", c.Steps, c.Checked, c.Invalid), cost}}}
}
