package runner

import (
	"errors"
	"io"
	"path/filepath"

	"imlab/report"
	"imlab/report/runpage"
	"imlab/result"
)

// writeOutputs writes result.json, junit.xml and report.html.
func (r *run) writeOutputs() error {
	dir := r.cfg.OutDir
	return errors.Join(
		result.WriteFile(filepath.Join(dir, result.ResultFile), r.res.WriteJSON),
		result.WriteFile(filepath.Join(dir, result.JUnitFile), func(w io.Writer) error { return result.WriteJUnit(w, r.res) }),
		result.WriteFile(filepath.Join(dir, result.ReportFile), func(w io.Writer) error { return report.WriteHTML(w, runpage.HTMLReport(r.res)) }),
	)
}
