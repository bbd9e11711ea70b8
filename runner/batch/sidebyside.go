package batch

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

// Files reads the scenario files at paths and expands each (a matrix: one
// file per value; matrix says whether any had one). With sideBySide each
// file's reference side (scenario.ReferenceSide) follows its runs.
func Files(paths []string, sideBySide bool) (files []*scenario.File, matrix bool, err error) {
	for _, p := range paths {
		f, err := scenario.ReadFile(p)
		if err != nil {
			return nil, false, err
		}
		runs, err := scenario.Expand(f)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", p, err)
		}
		matrix = matrix || f.Matrix != nil
		files = append(files, runs...)
		if sideBySide {
			ref, err := scenario.ReferenceSide(f)
			if err != nil {
				return nil, false, fmt.Errorf("%s: --side-by-side: %w", p, err)
			}
			files = append(files, ref)
		}
	}
	return files, matrix, nil
}

// WriteSideBySide writes, for every file whose reference side ran too
// (NAME and NAME.reference in files), the review page of the two runs
// (their OUT/NAME/result.json) into OUT/NAME.side-by-side.html, the
// external server first. A pair one of whose runs left no result gets no
// page, said on w.
func WriteSideBySide(w io.Writer, out string, files []*scenario.File) error {
	for _, f := range files {
		if strings.HasSuffix(f.Name, scenario.ReferenceSuffix) {
			continue
		}
		refName := f.Name + scenario.ReferenceSuffix
		r, err := result.ReadRun(filepath.Join(out, f.Name))
		if err != nil {
			fmt.Fprintf(w, "side by side %s: no page, its run left no result (%v)\n", f.Name, err)
			continue
		}
		ref, err := result.ReadRun(filepath.Join(out, refName))
		if err != nil {
			fmt.Fprintf(w, "side by side %s: no page, its reference side left no result (%v)\n", f.Name, err)
			continue
		}
		rep, err := runpage.Review([]*result.Result{r, ref})
		if err != nil {
			return fmt.Errorf("side by side %s: %w", f.Name, err)
		}
		var buf bytes.Buffer
		if err := report.WriteHTML(&buf, rep); err != nil {
			return fmt.Errorf("side by side %s: %w", f.Name, err)
		}
		path := filepath.Join(out, f.Name+SideBySideSuffix)
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("side by side %s: %w", f.Name, err)
		}
		note := ""
		if r.Skipped != "" {
			note = " (the " + f.Name + " side was skipped: " + r.Skipped + ")"
		}
		fmt.Fprintf(w, "side by side %s and %s: %s%s\n", f.Name, refName, path, note)
	}
	return nil
}
