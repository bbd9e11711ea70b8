package capacity

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"imlab/capacity/lablag"
)

// A consumer group whose lag grew through the window by more than a
// quarter of it (and 2 s) breaks the step: the pipeline did not keep up,
// whatever the ACK path shows. A lag that stayed, or fell, does not.
func TestFallingBehindDoesNotHold(t *testing.T) {
	st := &Step{LagGroups: []GroupLag{{Group: "imlab-inbox", StartS: 0.2, EndS: 0.4}, {Group: "imlab-history", StartS: 11.7, EndS: 27.4}}}
	why := falling(st, 10*time.Second)
	if !strings.Contains(why, "imlab-history") || strings.Contains(why, "imlab-inbox") {
		t.Fatalf("falling: %q", why)
	}
	for _, g := range [][2]float64{{60, 20}, {1, 3}, {10, 12.4}} {
		st := &Step{LagGroups: []GroupLag{{Group: "g", StartS: g[0], EndS: g[1]}}}
		if why := falling(st, 10*time.Second); why != "" {
			t.Errorf("lag %v → %v over 10s is not falling behind: %q", g[0], g[1], why)
		}
	}
	if falling(&Step{}, 10*time.Second) != "" {
		t.Fatal("no lag polls: nothing to say")
	}
	c := DefaultConfig("http://127.0.0.1:1", testSecret, t.TempDir())
	s := &search{cfg: c, res: &Result{}}
	st.LagGroups = []GroupLag{{Group: "imlab-history", StartS: 1, EndS: 9}}
	s.judge(st)
	if st.Held || !strings.Contains(strings.Join(st.Broken, ";"), "fell behind") || st.Limit != LimitServer {
		t.Fatalf("judge: held %v, broken %v, limit %q", st.Held, st.Broken, st.Limit)
	}
}

// lagServer answers GET /v1/lab/lag with the largest age per group that
// ages returns at each call.
func lagServer(t *testing.T, ages func(n int) map[string]float64) *httptest.Server {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != lablag.Path {
			http.NotFound(w, r)
			return
		}
		n := int(calls.Add(1))
		_ = json.NewEncoder(w).Encode(map[string]any{"at": time.Now().UTC(), "max_age_seconds": ages(n)})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// settle waits for the backlog to drain (returns nil once it did), gives
// up after SettleMax with the backlog named, and does not wait on a
// target without the lag route.
func TestSettleWaitsForTheBacklog(t *testing.T) {
	draining := lagServer(t, func(n int) map[string]float64 {
		return map[string]float64{"imlab-inbox": 0.1, "imlab-history": max(0, 5-2*float64(n))}
	})
	c := DefaultConfig(draining.URL, testSecret, t.TempDir())
	c.SettleMax, c.SettleLag = 20*time.Second, time.Second
	var out strings.Builder
	c.Progress = &out
	s := &search{cfg: c, res: &Result{}}
	if b := s.settle(context.Background()); b != nil {
		t.Fatalf("a draining backlog was left: %+v", b)
	}
	if !strings.Contains(out.String(), "imlab-history") {
		t.Fatalf("the wait is not said: %q", out.String())
	}

	stuck := lagServer(t, func(int) map[string]float64 { return map[string]float64{"imlab-history": 160} })
	c = DefaultConfig(stuck.URL, testSecret, t.TempDir())
	c.SettleMax, c.SettleLag = 1500*time.Millisecond, time.Second
	s = &search{cfg: c, res: &Result{}}
	began := time.Now()
	b := s.settle(context.Background())
	if b == nil || b.group != "imlab-history" || b.age != 160 {
		t.Fatalf("a stuck backlog: %+v", b)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("the wait was not bounded: %s", d)
	}

	none := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(none.Close)
	c = DefaultConfig(none.URL, testSecret, t.TempDir())
	s = &search{cfg: c, res: &Result{}}
	if b := s.settle(context.Background()); b != nil {
		t.Fatalf("no lag route: %+v", b)
	}
}

func TestSettleValidation(t *testing.T) {
	c := DefaultConfig("http://127.0.0.1:1", testSecret, t.TempDir())
	for _, bad := range []struct{ max, lag time.Duration }{{-time.Second, time.Second}, {MaxSettle + time.Second, time.Second}, {time.Second, 0}} {
		c.SettleMax, c.SettleLag = bad.max, bad.lag
		if err := c.Validate(); err == nil {
			t.Errorf("settle-max %s settle-lag %s accepted", bad.max, bad.lag)
		}
	}
}

// The step-down always goes down: at 5/s with a 10% resolution the
// rounding gave 5 again, and the search repeated 5/s until it ran out of
// steps.
func TestStepDownGoesDown(t *testing.T) {
	for _, c := range []struct{ held, res, want float64 }{{5, 0.1, 4}, {100, 0.1, 90}, {2880, 0.1, 2592}, {1.5, 0.1, 1}, {1, 0.1, 0}} {
		if got := stepDown(c.held, c.res); got != c.want {
			t.Errorf("stepDown(%g, %g) = %g, want %g", c.held, c.res, got, c.want)
		}
	}
}
