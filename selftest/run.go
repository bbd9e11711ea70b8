package selftest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"imlab/scenario"
)

// DefaultGlob selects the files Run runs when none is named.
const DefaultGlob = "scenarios/*.yaml"

// MatrixFile is the matrix's name in the output directory.
const MatrixFile = "matrix.json"

// ProblemsError: the matrix was made, and it has problems
// (Matrix.Problems): a defect no scenario caught, or a file the
// unmodified server did not pass. Any other error of Run is a bad file or
// a selftest that could not run.
type ProblemsError struct {
	Problems []string
}

func (e *ProblemsError) Error() string { return strings.Join(e.Problems, "; ") }

// Run is `imlab scenario selftest`: it reads the files at paths (none:
// those DefaultGlob matches, capacity searches left out), runs Selftest
// with progress on w, prints the matrix and writes it to
// Base.OutDir/MatrixFile. A matrix with problems is a *ProblemsError.
func Run(ctx context.Context, cfg SelftestConfig, paths []string, w io.Writer) (*Matrix, error) {
	files, err := Files(paths, w)
	if err != nil {
		return nil, err
	}
	cfg.Progress = w
	rows := len(cfg.Defects)
	if cfg.Defects == nil {
		rows = len(shippedDefects())
	}
	out := cfg.Base.OutDir
	fmt.Fprintf(w, "selftest: %d scenarios x (unmodified + %d defects), %d at a time, into %s\n", len(files), rows, max(1, cfg.Parallel), out)
	m, err := Selftest(ctx, cfg, files)
	if m != nil {
		fmt.Fprintf(w, "\n%s\nselftest took %.0fs\n", m.Table(), m.Seconds)
		if werr := writeJSON(filepath.Join(out, MatrixFile), m); werr != nil {
			return m, werr
		}
		fmt.Fprintf(w, "wrote %s\n", filepath.Join(out, MatrixFile))
	}
	if err != nil {
		return m, err
	}
	if probs := m.Problems(); len(probs) > 0 {
		return m, &ProblemsError{Problems: probs}
	}
	fmt.Fprintln(w, "selftest: every defect was caught by at least one scenario; the unmodified server passed every scenario")
	return m, nil
}

// Files reads the scenario files at paths. With no paths it reads those
// DefaultGlob matches (none is an error) and leaves out capacity searches,
// saying so on w: a search per defect would be long, so such a file runs
// only when named.
func Files(paths []string, w io.Writer) ([]*scenario.File, error) {
	globbed := len(paths) == 0
	if globbed {
		var err error
		if paths, err = filepath.Glob(DefaultGlob); err != nil || len(paths) == 0 {
			return nil, fmt.Errorf("no files given and none match %s", DefaultGlob)
		}
	}
	var files []*scenario.File
	for _, p := range paths {
		f, err := scenario.ReadFile(p)
		if err != nil {
			return nil, err
		}
		if globbed && f.Kind == scenario.KindCapacity {
			fmt.Fprintf(w, "skipped %s: a capacity search (name it to include it)\n", p)
			continue
		}
		files = append(files, f)
	}
	return files, nil
}

// writeJSON writes v as indented JSON to path (its directory made).
func writeJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
