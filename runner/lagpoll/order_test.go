package lagpoll

import (
	"bytes"
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

	"imlab/ref/server"
)

// lines is a writer shared by two writers of live lines, as the runner's.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

var lineT = regexp.MustCompile(`^t=\s*([0-9.]+)s`)

// TestLiveLinesInTimeOrder: the first lag poll takes 2.5 s (more than
// two of the poller's intervals) while the load prints its line every
// second, as the generator does (its seconds count from its start, a
// little after the run's time base). Every line printed carries a t no
// earlier than the lines printed before it: the slow sample's line is
// stamped when it was printed and says when it was asked, and the poll
// that its slowness cost is said to be skipped, not dropped silently.
func TestLiveLinesInTimeOrder(t *testing.T) {
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
	out := &lines{}
	base := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5600*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the generator's live line, its clock 0.35 s after the base
		defer wg.Done()
		start := base.Add(350 * time.Millisecond)
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
	Poll(ctx, Config{Base: base, Progress: out, Addr: func() string { return strings.TrimPrefix(srv.URL, "http://") }}, log)
	wg.Wait()

	printed := strings.Split(strings.TrimSpace(out.buf.String()), "\n")
	last, lastLine := -1.0, ""
	for _, l := range printed {
		m := lineT.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("a live line without its t: %q", l)
			continue
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		if v < last {
			t.Errorf("out of time order: %q printed after %q\n%s", l, lastLine, out.buf.String())
		}
		last, lastLine = v, l
	}
	all := out.buf.String()
	t.Log("\n" + all)
	if !strings.Contains(all, "asked at t=1.0s") {
		t.Errorf("the slow sample's line does not say when it was asked:\n%s", all)
	}
	if !strings.Contains(all, "1 poll skipped") {
		t.Errorf("the poll the slow one cost is not said to be skipped:\n%s", all)
	}
	if s := log.Snapshot(); len(s) < 3 || s[0].T < 0.9 || s[0].T > 1.2 {
		t.Errorf("samples %+v: want the first at its ask time, t=1.0s", s)
	}
}
