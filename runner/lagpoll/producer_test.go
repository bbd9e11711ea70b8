package lagpoll_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"imlab/expect"
	"imlab/ref/fanout"
	"imlab/ref/server"
	"imlab/report"
	"imlab/report/runpage"
	"imlab/result"
	"imlab/runner/lagpoll"
	"imlab/scenario"
)

// TestPolledSamplesReadBack: the poller's samples, from the server's own
// answer type (fanout.LagSnapshot) through result.json and back, are read
// part by part by recovery and the run page alike: a poll whose outbox
// query alone failed is known for the consumer lag (drawn, counted) and
// unknown for the outbox (a gap); one that also had a group's error is
// unknown for both; a complete one is known for both.
func TestPolledSamplesReadBack(t *testing.T) {
	const group = "imlab-inbox"
	oe := "fanout: outbox backlog: invalid connection"
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != server.LagNowPath {
			http.NotFound(w, r)
			return
		}
		s := fanout.LagSnapshot{At: time.Now().UTC(), Partitions: []fanout.PartitionLag{},
			MaxAgeSeconds: map[string]float64{group: 0.25}, Records: map[string]int64{group: 3}, OutboxOldestAgeSeconds: -1}
		switch n.Add(1) {
		case 1: // the outbox query alone failed
			s.OutboxError, s.Errors = oe, []string{oe}
		case 2: // a group's offsets and the outbox failed
			s.OutboxError, s.Errors = oe, []string{"group " + group + ": timeout", oe}
			delete(s.MaxAgeSeconds, group)
		default: // complete
			s.OutboxBacklog, s.OutboxOldestAgeSeconds = 4, 0.5
		}
		_ = json.NewEncoder(w).Encode(s)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	var log lagpoll.Log
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		lagpoll.Poll(ctx, lagpoll.Config{Base: time.Now(), Addr: func() string { return addr }}, &log)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for log.Len() < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	polled := log.Snapshot()
	if len(polled) < 3 {
		t.Fatalf("%d samples in 20s", len(polled))
	}
	polled = polled[:3]

	res := &result.Result{Format: result.ResultFormat, Scenario: "polled", Lag: polled,
		Spec: &scenario.File{Name: "polled", Server: scenario.ServerSpec{Policy: "outbox"}}}
	path := filepath.Join(t.TempDir(), result.ResultFile)
	if err := result.WriteFile(path, res.WriteJSON); err != nil {
		t.Fatal(err)
	}
	back, err := result.ReadRun(path)
	if err != nil {
		t.Fatal(err)
	}
	// Empty maps are left out of the file and read back as nil: compare
	// the samples as the file holds them.
	if w, r := jsonText(t, polled), jsonText(t, back.Lag); w != r {
		t.Fatalf("read back %s\nwritten %s", r, w)
	}
	lag := back.Lag
	if lag[0].Err != "" || lag[0].OutboxErr != oe || !strings.Contains(lag[1].Err, "timeout") || strings.Contains(lag[1].Err, "outbox") ||
		lag[2].Err != "" || lag[2].OutboxErr != "" {
		t.Fatalf("samples' errors: %q/%q, %q/%q, %q/%q", lag[0].Err, lag[0].OutboxErr, lag[1].Err, lag[1].OutboxErr, lag[2].Err, lag[2].OutboxErr)
	}

	rs := expect.RecoverySamples(lag)
	want := []struct{ lag, outbox bool }{{true, false}, {false, false}, {true, true}}
	for i, w := range want {
		if rs[i].Known != w.lag || (rs[i].OutboxAge >= 0) != w.outbox {
			t.Errorf("sample %d: recovery reads lag known %v, outbox age %v; want lag known %v, outbox measured %v", i, rs[i].Known, rs[i].OutboxAge, w.lag, w.outbox)
		}
	}
	var lagChart, outboxChart *report.Chart
	rep := runpage.HTMLReport(back)
	for i, c := range rep.Charts {
		switch {
		case strings.HasPrefix(c.Title, "Consumer lag"):
			lagChart = &rep.Charts[i]
		case c.Title == "Outbox backlog":
			outboxChart = &rep.Charts[i]
		}
	}
	if lagChart == nil || outboxChart == nil {
		t.Fatalf("charts %+v: want consumer lag and outbox", rep.Charts)
	}
	for i, w := range want {
		at := lag[i].T
		has := func(s report.Series) bool {
			return slices.ContainsFunc(s.Points, func(p report.Point) bool { return p.T == at })
		}
		if has(lagChart.Series[0]) != w.lag || slices.Contains(lagChart.Series[0].Gaps, at) == w.lag {
			t.Errorf("sample %d: consumer lag drawn %v, want %v", i, has(lagChart.Series[0]), w.lag)
		}
		if has(outboxChart.Series[0]) != w.outbox || slices.Contains(outboxChart.Series[0].Gaps, at) == w.outbox {
			t.Errorf("sample %d: outbox drawn %v, want %v", i, has(outboxChart.Series[0]), w.outbox)
		}
	}
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
