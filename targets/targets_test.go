package targets_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"imlab/targets"
)

func TestEndpointChoosesTheDriverByScheme(t *testing.T) {
	cases := []struct {
		target, driver string
		wantName       string
		wantURL        string
		bad            bool
	}{
		{target: "http://127.0.0.1:8080", wantName: "ref", wantURL: "http://127.0.0.1:8080"},
		{target: "ref+http://127.0.0.1:8080", wantName: "ref", wantURL: "http://127.0.0.1:8080"},
		{target: "tinode+ws://127.0.0.1:6060/v0/channels", wantName: "tinode", wantURL: "ws://127.0.0.1:6060/v0/channels"},
		{target: "ws://127.0.0.1:6060", driver: "tinode", wantName: "tinode", wantURL: "ws://127.0.0.1:6060"},
		{target: "http://127.0.0.1:8080", driver: "tinode", wantName: "tinode", wantURL: "http://127.0.0.1:8080"},
		{target: "ws://127.0.0.1:6060", bad: true},                       // names no driver
		{target: "tinode+ws://127.0.0.1:6060", driver: "ref", bad: true}, // disagrees
		{target: "127.0.0.1:8080", bad: true},
		{target: "", bad: true},
	}
	for _, c := range cases {
		name, u, err := targets.Config{Target: c.target, Driver: c.driver}.Endpoint()
		if c.bad {
			if !errors.Is(err, targets.ErrInvalid) {
				t.Errorf("%q driver %q: err %v, want ErrInvalid", c.target, c.driver, err)
			}
			continue
		}
		if err != nil || name != c.wantName || u != c.wantURL {
			t.Errorf("%q driver %q: %q %q %v, want %q %q", c.target, c.driver, name, u, err, c.wantName, c.wantURL)
		}
	}
}

func TestConfigValidateNamesTheKey(t *testing.T) {
	ok := targets.Config{Target: "http://127.0.0.1:1", Conns: 1, Timeout: time.Second}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for key, c := range map[string]targets.Config{
		"conns":   {Target: ok.Target, Timeout: time.Second},
		"timeout": {Target: ok.Target, Conns: 1},
		"send pool conns": {Target: ok.Target, Conns: 1, Timeout: time.Second,
			SendPool: targets.SendPool{Own: true}},
		"target": {Target: "nope", Conns: 1, Timeout: time.Second},
	} {
		err := c.Validate()
		if !errors.Is(err, targets.ErrInvalid) || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v, want ErrInvalid naming it", key, err)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want targets.Class
	}{
		{nil, targets.OK},
		{&targets.Error{Class: targets.Failed, Status: 403}, targets.Failed},
		{fmt.Errorf("wrapped: %w", &targets.Error{Class: targets.Retryable, Status: 429}), targets.Retryable},
		{fmt.Errorf("%w: bad", targets.ErrInvalid), targets.Failed},
		{errors.New("connection reset"), targets.Unknown},
		{targets.NotOffered("x", "history"), targets.Failed},
	} {
		if got := targets.Classify(c.err); got != c.want {
			t.Errorf("%v: %s, want %s", c.err, got, c.want)
		}
	}
	for st, want := range map[int]targets.Class{200: targets.OK, 204: targets.OK, 400: targets.Failed, 404: targets.Failed,
		409: targets.Failed, 408: targets.Unknown, 429: targets.Retryable, 500: targets.Unknown, 503: targets.Unknown, 0: targets.Unknown} {
		if got := targets.ClassOfStatus(st); got != want {
			t.Errorf("status %d: %s, want %s", st, got, want)
		}
	}
	e := &targets.Error{Class: targets.Retryable, Status: 429, RetryAfter: time.Second}
	if targets.StatusOf(e) != 429 || targets.RetryAfterOf(e) != time.Second || targets.StatusOf(nil) != 200 || targets.StatusOf(errors.New("x")) != 0 {
		t.Fatal("StatusOf / RetryAfterOf")
	}
}
