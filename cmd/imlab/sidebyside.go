package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"imlab/report"
	"imlab/report/runpage"
	"imlab/result"
	"imlab/scenario"
)

// SideBySideSuffix ends the review page of a file and its reference side:
// OUT/NAME.side-by-side.html.
const SideBySideSuffix = ".side-by-side.html"

// writeSideBySide writes, for every run whose reference side ran too
// (NAME and NAME.reference), the review page of the two into
// OUT/NAME.side-by-side.html, the external server first. A run whose
// other side is missing (not carried out) gets no page, said on w.
func writeSideBySide(w io.Writer, out string, results []*result.Result) error {
	byName := map[string]*result.Result{}
	for _, r := range results {
		byName[r.Scenario] = r
	}
	for _, r := range results {
		if strings.HasSuffix(r.Scenario, scenario.ReferenceSuffix) {
			continue
		}
		ref := byName[r.Scenario+scenario.ReferenceSuffix]
		if ref == nil {
			fmt.Fprintf(w, "side by side %s: no page, its reference side did not run\n", r.Scenario)
			continue
		}
		rep, err := runpage.Review([]*result.Result{r, ref})
		if err != nil {
			return fmt.Errorf("side by side %s: %w", r.Scenario, err)
		}
		var buf bytes.Buffer
		if err := report.WriteHTML(&buf, rep); err != nil {
			return fmt.Errorf("side by side %s: %w", r.Scenario, err)
		}
		if err := os.MkdirAll(out, 0o755); err != nil {
			return fmt.Errorf("side by side %s: %w", r.Scenario, err)
		}
		path := filepath.Join(out, r.Scenario+SideBySideSuffix)
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("side by side %s: %w", r.Scenario, err)
		}
		note := ""
		if r.Skipped != "" {
			note = " (the " + r.Scenario + " side was skipped: " + r.Skipped + ")"
		}
		fmt.Fprintf(w, "side by side %s and %s: %s%s\n", r.Scenario, ref.Scenario, path, note)
	}
	return nil
}
