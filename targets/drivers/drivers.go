// Package drivers chooses a targets.Driver by name or by the target URL's
// scheme (targets.Config.Endpoint) and opens it. It is the one place that
// knows every driver; callers hold only the targets interface. It owns no
// state of its own.
package drivers

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"imlab/targets"
	"imlab/targets/ref"
	tinodedriver "imlab/targets/tinode/driver"
)

// Factory opens a driver of one kind.
type Factory func(targets.Config) (targets.Driver, error)

// factories lists the drivers by name.
func factories() map[string]Factory {
	return map[string]Factory{
		targets.DriverRef:    func(c targets.Config) (targets.Driver, error) { return ref.New(c) },
		targets.DriverTinode: func(c targets.Config) (targets.Driver, error) { return tinodedriver.Open(c) },
	}
}

// Names lists the drivers this build knows, sorted.
func Names() []string {
	var out []string
	for n := range factories() {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Open validates cfg and opens the driver its Driver or Target names.
func Open(cfg targets.Config) (targets.Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	name, _, err := cfg.Endpoint()
	if err != nil {
		return nil, err
	}
	f, ok := factories()[name]
	if !ok {
		return nil, fmt.Errorf("%w: driver %q: this build knows %v", targets.ErrInvalid, name, Names())
	}
	return f(cfg)
}

// Check validates cfg as Open would, without keeping a driver (a factory
// must not connect: drivers connect in Warm and in their sessions).
func Check(cfg targets.Config) error {
	d, err := Open(cfg)
	if err != nil {
		return err
	}
	return d.Close()
}

// HTTP tells whether target is served over HTTP (http://, https://,
// ref+http://: the reference server's contract, with GET /healthz and the
// lab routes when they are on); another driver's target (e.g.
// tinode+ws://) has neither.
func HTTP(target string) bool {
	u, err := url.Parse(target)
	if err != nil {
		return false
	}
	s := strings.TrimPrefix(u.Scheme, "ref+")
	return s == "http" || s == "https"
}
