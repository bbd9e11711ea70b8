package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// pacedTraffic sends n messages round-robin over a 1:1 pair and group 7,
// pause apart, appending each ACKed one to out; it stops at the first
// failure.
func (e *e2e) pacedTraffic(tag string, n int, pause time.Duration, out *[]sent, mu *sync.Mutex) error {
	for i := 0; i < n; i++ {
		var body, content string
		var from uint64
		var rcpts []uint64
		content = fmt.Sprintf("%s #%d", tag, i)
		switch i % 3 {
		case 0:
			from, rcpts = 1, []uint64{1, 2}
			body = fmt.Sprintf(`{"client_msg_id":"%s-%d","conv_type":1,"to_uid":2,"content":%q}`, tag, i, content)
		case 1:
			from, rcpts = 3, []uint64{3, 4}
			body = fmt.Sprintf(`{"client_msg_id":"%s-%d","conv_type":1,"to_uid":4,"content":%q}`, tag, i, content)
		default:
			from, rcpts = 2, []uint64{1, 2, 3}
			body = fmt.Sprintf(`{"client_msg_id":"%s-%d","conv_type":2,"group_id":7,"content":%q}`, tag, i, content)
		}
		r := e.callQuiet("POST", "/v1/msg/send", e.tok(from, "phone"), body)
		if r.status != 200 {
			return fmt.Errorf("send %s: %d %s", body, r.status, r.body)
		}
		var a sendAnswer
		if err := json.Unmarshal(r.body, &a); err != nil {
			return err
		}
		mu.Lock()
		*out = append(*out, sent{a: a, content: content, rcpts: rcpts})
		mu.Unlock()
		time.Sleep(pause)
	}
	return nil
}

// TestRoleSeparation runs the api in one process (outbox policy) and the
// relay and consumer in another over the same backends; the worker process
// is stopped while messages flow and started again: every ACKed message
// reaches every inbox. The worker serves /metrics, /healthz and the lag on
// its own listener.
func TestRoleSeparation(t *testing.T) {
	fb := startFullBackends(t, false)
	apiCfg := fullConfig(fb, "outbox", RoleAPI)
	apiCfg.Send.Node = 1
	api := startProcess(t, apiCfg, fb.b)
	if got := strings.Join(api.RoleNames(), ","); got != "api" {
		t.Fatalf("api roles %s", got)
	}
	workCfg := fullConfig(fb, "outbox", RoleRelay, RoleConsumer)
	workCfg.Send.Node = 2
	worker := startProcess(t, workCfg, fb.b)
	if worker.APIAddr() != nil || worker.Addr() == nil {
		t.Fatalf("worker addresses: api %v, ops %v", worker.APIAddr(), worker.Addr())
	}
	e := clientFor(t, api, fb.my)
	w := clientFor(t, worker, fb.my)
	if r := w.call("GET", "/healthz", "", ""); r.status != 200 || string(r.body) != `{"status":"ok"}` {
		t.Fatalf("worker healthz: %d %s", r.status, r.body)
	}
	if r := w.call("GET", "/v1/msg/send", "", ""); r.status != 404 {
		t.Fatalf("worker serves the api: %d %s", r.status, r.body)
	}
	if r := e.call("POST", "/v1/group/create", e.tok(1, "phone"), `{"group_id":7,"members":[1,2,3]}`); r.status != 200 {
		t.Fatalf("group: %d %s", r.status, r.body)
	}

	var mu sync.Mutex
	var msgs []sent
	errc := make(chan error, 1)
	go func() { errc <- e.pacedTraffic("sep", 90, 15*time.Millisecond, &msgs, &mu) }()
	time.Sleep(400 * time.Millisecond)
	stopProcess(t, worker)
	mu.Lock()
	atStop := len(msgs)
	mu.Unlock()
	time.Sleep(500 * time.Millisecond)
	worker2 := startProcess(t, workCfg, fb.b)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if atStop == 0 || atStop == len(msgs) {
		t.Fatalf("the worker was not stopped mid-stream: %d of %d sent at stop", atStop, len(msgs))
	}
	e.waitInboxes(msgs, 25*time.Second)
	w2 := clientFor(t, worker2, fb.my)
	w2.waitLagZero([]string{workCfg.Fanout.Consumer.Group}, int(workCfg.Fanout.Topics.Partitions), 15*time.Second)
	if r := w2.call("GET", "/metrics", "", ""); r.status != 200 || !strings.Contains(string(r.body), "imlab_consumer_records_total") {
		t.Fatalf("worker metrics: %d", r.status)
	}
	// The api process has the same view of the queue.
	e.waitLagZero([]string{apiCfg.Fanout.Consumer.Group}, int(apiCfg.Fanout.Topics.Partitions), 5*time.Second)
	t.Logf("%d messages, %d sent before the worker stopped", len(msgs), atStop)
}
