package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"imlab/loadgen"
	"imlab/loadgen/checker"
)

// errInvalidRun makes `imlab check` exit non-zero.
var errInvalidRun = errors.New("run is INVALID")

// newCheckCmd is `imlab check RUN_DIR`: the verdict of a load run.
func newCheckCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check RUN_DIR",
		Short: "Judge a load run's ledger: ok, lost, duplicated, unexpected, recovered, reordered, skipped",
		Long: `Reads RUN_DIR/ledger-*.bin, prints the verdict table, writes RUN_DIR/verdict.json and
exits non-zero when the run is invalid (valid iff lost = unexpected = skipped = 0).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runCheck(cmd, args[0], asJSON) },
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the verdict as JSON instead of a table")
	return cmd
}

func runCheck(cmd *cobra.Command, dir string, asJSON bool) error {
	v, err := checker.Check(dir)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if s, err := loadgen.ReadSummary(dir); err == nil {
		if s.Ceiling != nil {
			fmt.Fprintf(out, "generator ceiling (no-op endpoint): %.0f sends/s; achieved %.0f sends/s\n", s.Ceiling.PerSec, s.AchievedPerSec)
		}
		if !s.Drain.Complete {
			v.Warnings = append(v.Warnings, "the run's final drain did not complete: lost may include messages still in flight")
		}
	}
	if asJSON {
		if err := v.WriteJSON(out); err != nil {
			return err
		}
	} else {
		v.WriteTable(out)
	}
	f, err := os.Create(filepath.Join(dir, "verdict.json"))
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	werr := v.WriteJSON(f)
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if !v.Valid {
		return errInvalidRun
	}
	return nil
}
