package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"imlab/targets/drivers"
	tinodedriver "imlab/targets/tinode/driver"
)

// driverFlags are the driver options imlab load and imlab capacity set: the
// tinode driver's API key.
type driverFlags struct {
	tinodeAPIKey string
}

func (d *driverFlags) register(f *pflag.FlagSet) {
	f.StringVar(&d.tinodeAPIKey, "tinode-apikey", "", "with a tinode+ws:// target: the API key signed with the server's api_key_salt (default $"+tinodedriver.EnvAPIKey+")")
}

// options are the target's driver options (nil when none is set).
func (d *driverFlags) options() map[string]string {
	if d.tinodeAPIKey == "" {
		return nil
	}
	return map[string]string{tinodedriver.OptAPIKey: d.tinodeAPIKey}
}

// httpTarget reports whether target is served over HTTP (the reference
// server's contract, with GET /healthz): another driver's target (e.g.
// tinode+ws://) has no health route to wait for.
func httpTarget(target string) bool { return drivers.HTTP(target) }

// noHealthWait says that a target without a health route is not waited for.
func noHealthWait(w io.Writer, target string) {
	fmt.Fprintf(w, "not waiting for %s to be ready: it serves no GET /healthz (the run fails at once if it is not answering)\n", target)
}
