package loadgen_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"imlab/checker"
	"imlab/loadgen"
	"imlab/loadgen/faketarget"
	"imlab/loadgen/schedule"
	"imlab/loadgen/summary"
)

const exampleSecret = "imlab-example-secret-0123456789"

// exampleConfig is a short open-loop run of 40 sends/s for one second
// against target, with its ledger in dir.
func exampleConfig(target, dir string) loadgen.Config {
	cfg := loadgen.DefaultConfig(target, exampleSecret, dir)
	cfg.Shape = schedule.Constant{PerSec: 40}
	cfg.Duration = time.Second
	cfg.Pop.Users, cfg.Pop.Groups, cfg.Pop.GroupShare, cfg.Pop.Crashy = 10, 0, 0, 0
	cfg.Conns, cfg.Settle, cfg.CeilingFor = 8, 200*time.Millisecond, 0
	cfg.Pacer.Grace = time.Minute // a busy machine makes sends late, never missed
	return cfg
}

// runAgainstFake runs exampleConfig against an in-process contract server
// with faults fc and returns the run directory, which the caller removes.
func runAgainstFake(faults faketarget.Faults) (*summary.Summary, string, error) {
	fc := faketarget.DefaultConfig(exampleSecret)
	fc.Faults = faults
	srv, err := faketarget.Start(fc)
	if err != nil {
		return nil, "", err
	}
	defer srv.Close()
	dir, err := os.MkdirTemp("", "imlab-example-")
	if err != nil {
		return nil, "", err
	}
	sum, err := loadgen.Run(context.Background(), exampleConfig(srv.URL(), dir))
	return sum, dir, err
}

// Driving a load run: an in-process server speaking the lab's contract,
// one second of constant load, the summary's counts.
func ExampleRun() {
	sum, dir, err := runAgainstFake(faketarget.Faults{})
	defer os.RemoveAll(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("sends:", sum.OK+sum.Fail+sum.Unknown, "failed:", sum.Fail+sum.Unknown)
	// Output: sends: 40 failed: 0
}

// Judging a ledger: a run against a server that loses every tenth
// message it ACKs, and the checker's verdict on its ledger.
func Example_judgeALedger() {
	_, dir, err := runAgainstFake(faketarget.Faults{DropEvery: 10})
	defer os.RemoveAll(dir)
	if err != nil {
		fmt.Println(err)
		return
	}

	v, err := checker.Check(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("valid:", v.Valid)
	fmt.Println("lost:", v.Findings["lost"].Count)
	// Output:
	// valid: false
	// lost: 4
}
