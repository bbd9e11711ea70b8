package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"imlab/report"
	"imlab/report/runpage"
	"imlab/result"
)

// newReportCmd is `imlab report`: pages made from finished runs.
func newReportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "report",
		Short: "HTML pages made from finished runs' result.json files",
	}
	cmd.AddCommand(newReportCompareCmd())
	return cmd
}

func newReportCompareCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "compare RUN... -o review.html",
		Short: "One self-contained page setting scenario runs side by side for an architecture review",
		Long: `Reads each RUN's result.json (RUN is a scenario's output directory or the file itself) and
writes one self-contained HTML page: the runs and their verdicts, the settings that differ, the
recovery figures (recovery time, peak lag, backlog peak, drain records/s and inbox rows/s, outbox
drain) and the generator's burst figures in one table each, and the lag, records-behind,
throughput and ACK-latency curves of every run overlaid on one time axis aligned at each run's
burst start. Runs of different scenarios are allowed (the page says so at the top); a missing
file or a result.json of another format is an error naming the file, and nothing is written.`,
		Args: cobra.RangeArgs(1, runpage.MaxReviewRuns),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageError(errors.New("report compare: -o FILE is required (the page to write)"))
			}
			var runs []*result.Result
			for _, a := range args {
				r, err := result.ReadRun(a)
				if err != nil {
					return err
				}
				runs = append(runs, r)
			}
			rep, err := runpage.Review(runs)
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			if err := report.WriteHTML(&buf, rep); err != nil {
				return err
			}
			if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
				return fmt.Errorf("report compare: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "review of %d runs: %s\n", len(runs), out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "the page to write (e.g. review.html)")
	return cmd
}
