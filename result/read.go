package result

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"imlab/compare"
	"imlab/scenario"
)

// ResultFormat names the layout of result.json; its readers (Review,
// imlab compare and the baseline gate: package compare) refuse a file of
// another format, or of none.
const ResultFormat = compare.ScenarioResultFormat

// ReadRun reads one run for a review: path is a run's output directory
// (holding result.json) or a result.json itself. A missing file, one that
// is not a result, or one of another format is an error naming the file.
func ReadRun(path string) (*Result, error) {
	file := path
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		file = filepath.Join(path, ResultFile)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s: no such file (want a run directory holding %s, or the file itself)", scenario.ErrInvalid, file, ResultFile)
		}
		return nil, fmt.Errorf("%w: %s: %w", scenario.ErrInvalid, file, err)
	}
	var head struct {
		Format   *string `json:"format"`
		Scenario *string `json:"scenario"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("%w: %s: not a result.json: %v", scenario.ErrInvalid, file, err)
	}
	switch {
	case head.Scenario == nil:
		return nil, fmt.Errorf("%w: %s: not a scenario result (no \"scenario\")", scenario.ErrInvalid, file)
	case head.Format == nil:
		return nil, fmt.Errorf("%w: %s: a result of an older imlab (no \"format\"; this one reads %q): run the scenario again", scenario.ErrInvalid, file, ResultFormat)
	case *head.Format != ResultFormat:
		return nil, fmt.Errorf("%w: %s: result format %q, this imlab reads %q", scenario.ErrInvalid, file, *head.Format, ResultFormat)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", scenario.ErrInvalid, file, err)
	}
	r.Path = file
	return &r, nil
}
