package lagpoll

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"imlab/internal/testenv"
	"imlab/ref/server"
)

var lineT = regexp.MustCompile(`^t=\s*([0-9.]+)s`)

// TestLiveLinesInTimeOrder: the first lag poll takes 2.5 s (more than
// two of the poller's intervals) while the load prints its line every
// second, as the generator does (its seconds count from its start, a
// little after the run's time base). Every line printed carries a t no
// earlier than the lines printed before it: the slow sample's line is
// stamped when it was printed and says when it was asked, and the poll
// that its slowness cost is said to be skipped, not dropped silently.
func TestLiveLinesInTimeOrder(t *testing.T) { liveLinesInOrder(t, 350*time.Millisecond) }

// TestLiveLinesOnTheLoadsClock: the load's set-up takes 1.6 s, so its
// live line counts from 1.6 s after the run's time base; the lag lines,
// told the load's start (LineBase), count from there too and stay in
// order with it, while the samples keep the run's time base.
func TestLiveLinesOnTheLoadsClock(t *testing.T) { liveLinesInOrder(t, 1600*time.Millisecond) }

// liveLinesInOrder runs the poller beside a generator whose live line
// starts setup after the base.
func liveLinesInOrder(t *testing.T, setup time.Duration) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != server.LagNowPath {
			http.NotFound(w, r)
			return
		}
		if calls.Add(1) == 1 {
			time.Sleep(2500 * time.Millisecond)
		}
		fmt.Fprintf(w, `{"at":%q,"max_age_seconds":{"imlab-inbox":0.1},"records":{"imlab-inbox":1},"outbox_oldest_age_seconds":-1}`,
			time.Now().UTC().Format(time.RFC3339Nano))
	}))
	defer srv.Close()
	out := &testenv.LockedBuffer{} // shared by two writers of live lines, as the runner's
	base := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5600*time.Millisecond+setup)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	var loadAt atomic.Int64
	go func() { // the generator's live line, its clock setup after the base
		defer wg.Done()
		start := base.Add(setup)
		select { // the runner learns the load's start when it starts
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start)):
		}
		loadAt.Store(start.UnixNano())
		for sec := 1; ; sec++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(start.Add(time.Duration(sec) * time.Second))):
			}
			fmt.Fprintf(out, "t=%3ds sending\n", sec)
		}
	}()
	log := &Log{}
	Poll(ctx, Config{Base: base, Progress: out, LineBase: &loadAt, Addr: func() string { return strings.TrimPrefix(srv.URL, "http://") }}, log)
	wg.Wait()

	printed := strings.Split(strings.TrimSpace(out.String()), "\n")
	last, lastLine := -1.0, ""
	for _, l := range printed {
		m := lineT.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("a live line without its t: %q", l)
			continue
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		if v < last {
			t.Errorf("out of time order: %q printed after %q\n%s", l, lastLine, out.String())
		}
		last, lastLine = v, l
	}
	all := out.String()
	t.Log("\n" + all)
	samples := log.Snapshot()
	if len(samples) == 0 {
		t.Fatal("no samples")
	}
	// On the load's clock, as the line says it: the sample's T is on the
	// run's time base.
	if want := fmt.Sprintf("asked at t=%.1fs", samples[0].T-setup.Seconds()); !strings.Contains(all, want) {
		t.Errorf("the slow sample's line does not say when it was asked (%q):\n%s", want, all)
	}
	if !strings.Contains(all, "1 poll skipped") {
		t.Errorf("the poll the slow one cost is not said to be skipped:\n%s", all)
	}
	if s := log.Snapshot(); len(s) < 3 || s[0].T < 0.9 || s[0].T > 1.2 {
		t.Errorf("samples %+v: want the first at its ask time, t=1.0s", s)
	}
}
