package capacity_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"imlab/capacity"
	"imlab/loadgen/faketarget"
)

// A capacity search: ramp from 50 sends/s by ×2 up to 400 against an
// in-process server speaking the lab's contract, two-second steps, each
// judged by the SLO and the checker; the sustainable rate is the highest
// that held twice. (Its figures depend on the machine, so it prints no
// fixed output.)
func ExampleSearch() {
	const secret = "imlab-example-secret-0123456789"
	srv, err := faketarget.Start(faketarget.DefaultConfig(secret))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	out, err := os.MkdirTemp("", "imlab-capacity-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(out)

	cfg := capacity.DefaultConfig(srv.URL(), secret, out)
	cfg.From, cfg.To, cfg.Growth = 50, 400, 2
	cfg.WarmUp, cfg.Step, cfg.CoolDown, cfg.CeilingFor = time.Second, 2*time.Second, 0, 0
	cfg.MaxSteps = 6
	if cfg.SLO, err = capacity.ParseSLO("ack_p99<=500ms,errors<=1%"); err != nil {
		fmt.Println(err)
		return
	}
	res, err := capacity.Search(context.Background(), cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	if res.Sustainable != nil {
		fmt.Printf("sustainable: %.0f sends/s\n", *res.Sustainable)
	}
	if err := res.WriteTable(os.Stdout); err != nil {
		fmt.Println(err)
	}
}
