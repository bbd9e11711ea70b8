package compare_test

import (
	"bytes"
	"fmt"

	"imlab/checker"
	"imlab/compare"
	"imlab/result"
)

// exampleRun is the result.json a scenario run writes (result.Result's
// own writer), read back as compare reads it.
func exampleRun(name string, lost uint64) (*compare.Run, error) {
	res := &result.Result{Format: result.ResultFormat, Scenario: "redis-wipe", Passed: lost == 0,
		Verdict:  &checker.Verdict{Format: checker.VerdictFormat, Valid: lost == 0},
		Findings: []result.FindingSummary{{Name: "lost", Count: lost}}}
	var b bytes.Buffer
	if err := res.WriteJSON(&b); err != nil {
		return nil, err
	}
	return compare.Parse(name+"/"+result.ResultFile, b.Bytes())
}

// Comparing results: main's run against a change's; a finding that
// appears regresses whatever the tolerance.
func ExampleCompare() {
	base, err := exampleRun("main", 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	change, err := exampleRun("change", 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	rep, err := compare.Compare([]*compare.Run{base}, []*compare.Run{change}, compare.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, row := range rep.Rows {
		fmt.Println(row.Metric, compare.FormatValue(row.Unit, row.Base), "->", compare.FormatValue(row.Unit, row.New), row.Verdict)
	}
	fmt.Println("regressed:", rep.Regressed())
	// Output:
	// lost 0 -> 3 REGRESSED
	// passed yes -> no FAILED
	// regressed: true
}
