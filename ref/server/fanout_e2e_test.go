package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"imlab/compose"
	"imlab/internal/testenv"
	"imlab/ref/model"
	"imlab/ref/push"
)

// fullBackends are a private MySQL database and Redis prefix on the real
// servers, and an in-process Kafka (kfake) and MongoDB (FerretDB) through
// compose, all stopped at cleanup.
type fullBackends struct {
	b      Backends
	prefix string
	my     *testenv.MySQL
}

func startFullBackends(t *testing.T, withMongo bool) fullBackends {
	t.Helper()
	my := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	cc := compose.DefaultConfig()
	cc.MySQLDSN, cc.RedisAddr = my.DSN, rd.Addr
	cc.WithMongo = withMongo
	cc.StartTimeout = 20 * time.Second
	cc.StopTimeout = 10 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cb, stop, err := compose.Start(ctx, cc)
	if err != nil {
		t.Fatalf("backends: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := stop(ctx); err != nil {
			t.Errorf("stop backends: %v", err)
		}
	})
	return fullBackends{
		b:      Backends{MySQLDSN: my.DSN, RedisAddr: rd.Addr, KafkaBrokers: cb.KafkaBrokers, MongoURI: cb.MongoURI},
		prefix: rd.Keys.Prefix, my: my,
	}
}

// fullConfig is a test process config over fb: fast consumer commits,
// loose pull rate limit, short stops.
func fullConfig(fb fullBackends, policy string, roles ...string) Config {
	cfg := e2eConfig(fb.prefix)
	cfg.MySQL.MaxOpenConns, cfg.MySQL.MaxIdleConns = 24, 24
	cfg.Pull.RateLimit, cfg.Pull.RateBurst = 1e5, 1e5
	cfg.ShutdownTimeout = 15 * time.Second
	cfg.API.WS.CloseGrace = 200 * time.Millisecond
	cfg.Send.Policy = policy
	cfg.Roles = roles
	cfg.AdminUIDs = []uint64{900}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Fanout.Consumer.SessionTimeout = 6 * time.Second
	// GET_LOCK names are server-wide: one relay lock per test database.
	cfg.Fanout.Relay.LockName = "imlab_relay_" + fb.my.Name
	cfg.Fanout.Monitor.Interval = 200 * time.Millisecond
	return cfg
}

func startProcess(t *testing.T, cfg Config, b Backends) *Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	p, err := Start(ctx, cfg, b, DefaultRoles())
	if err != nil {
		t.Fatalf("start %v: %v", cfg.Roles, err)
	}
	t.Cleanup(func() { stopProcess(t, p) })
	return p
}

func stopProcess(t *testing.T, p *Process) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Errorf("stop %v: %v", p.RoleNames(), err)
	}
}

func clientFor(t *testing.T, p *Process, db *testenv.MySQL) *e2e {
	e := &e2e{t: t, p: p, db: db.DB, base: "http://" + p.Addr().String(), auth: p.Auth, client: &http.Client{Timeout: 15 * time.Second}}
	t.Cleanup(e.client.CloseIdleConnections)
	return e
}

// sent is one ACKed message and who must get it.
type sent struct {
	a       sendAnswer
	content string
	rcpts   []uint64
}

// pullAll pulls uid's whole inbox from seq 0 (explicit cursors: nothing is
// acknowledged).
func (e *e2e) pullAll(token string) []push.Item {
	e.t.Helper()
	var out []push.Item
	cursor := uint64(0)
	for {
		a := e.pull(token, fmt.Sprintf("?cursor=%d&limit=500", cursor))
		out = append(out, a.Msgs...)
		if !a.HasMore {
			return out
		}
		cursor = a.NextCursor
	}
}

// waitInboxes polls every recipient's inbox until it holds exactly the
// messages sent to it, then checks seq and conv_seq order.
func (e *e2e) waitInboxes(msgs []sent, deadline time.Duration) {
	e.t.Helper()
	want := map[uint64]map[uint64]sent{}
	for _, m := range msgs {
		for _, u := range m.rcpts {
			if want[u] == nil {
				want[u] = map[uint64]sent{}
			}
			want[u][m.a.MsgID] = m
		}
	}
	uids := make([]uint64, 0, len(want))
	for u := range want {
		uids = append(uids, u)
	}
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
	end := time.Now().Add(deadline)
	for _, u := range uids {
		tok := e.tok(u, "phone")
		for {
			got := e.pullAll(tok)
			if len(got) >= len(want[u]) || time.Now().After(end) {
				checkInbox(e.t, u, got, want[u])
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func checkInbox(t *testing.T, uid uint64, got []push.Item, want map[uint64]sent) {
	t.Helper()
	seen := map[uint64]bool{}
	lastSeq := uint64(0)
	lastConvSeq := map[uint64]uint64{}
	for _, it := range got {
		w, ok := want[it.MsgID]
		switch {
		case !ok:
			t.Fatalf("uid %d: unexpected msg %d", uid, it.MsgID)
		case seen[it.MsgID]:
			t.Fatalf("uid %d: msg %d twice", uid, it.MsgID)
		case it.Seq <= lastSeq:
			t.Fatalf("uid %d: seq %d after %d", uid, it.Seq, lastSeq)
		case it.ConvSeq <= lastConvSeq[it.ConvID]:
			t.Fatalf("uid %d: conv %d conv_seq %d after %d", uid, it.ConvID, it.ConvSeq, lastConvSeq[it.ConvID])
		case it.ConvID != w.a.ConvID || it.ConvSeq != w.a.ConvSeq || it.Content != w.content:
			t.Fatalf("uid %d: msg %d is %+v, sent %+v %q", uid, it.MsgID, it, w.a, w.content)
		}
		seen[it.MsgID] = true
		lastSeq = it.Seq
		lastConvSeq[it.ConvID] = it.ConvSeq
	}
	if len(seen) != len(want) {
		t.Fatalf("uid %d: %d of %d messages arrived", uid, len(seen), len(want))
	}
}

type histItem struct {
	ConvSeq   uint64 `json:"conv_seq"`
	MsgID     uint64 `json:"msg_id"`
	MsgIDStr  string `json:"msg_id_str"`
	SenderUID uint64 `json:"sender_uid"`
	CreatedAt int64  `json:"created_at"`
	Content   string `json:"content"`
	Revoked   bool   `json:"revoked"`
	Tombstone bool   `json:"tombstone"`
	IsRead    bool   `json:"is_read"`
}

func (e *e2e) history(token string, conv, from, to uint64) []histItem {
	e.t.Helper()
	r := e.call("GET", fmt.Sprintf("/v1/history?conv_id=%d&from_seq=%d&to_seq=%d", conv, from, to), token, "")
	if r.status != 200 {
		e.t.Fatalf("history %d: %d %s", conv, r.status, r.body)
	}
	var a struct {
		Msgs []histItem `json:"msgs"`
	}
	if err := json.Unmarshal(r.body, &a); err != nil {
		e.t.Fatalf("history answer %s: %v", r.body, err)
	}
	return a.Msgs
}

// waitHistory polls until the history tier has written conv_seq 1..n.
func (e *e2e) waitHistory(token string, conv, n uint64, deadline time.Duration) []histItem {
	e.t.Helper()
	end := time.Now().Add(deadline)
	for {
		got := e.history(token, conv, 1, n)
		if uint64(len(got)) == n || time.Now().After(end) {
			if uint64(len(got)) != n {
				e.t.Fatalf("history of conv %d: %d of %d seqs after %s: %+v", conv, len(got), n, deadline, got)
			}
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type lagAnswer struct {
	Partitions []struct {
		Group     string  `json:"group"`
		Topic     string  `json:"topic"`
		Partition int32   `json:"partition"`
		Records   int64   `json:"records"`
		Age       float64 `json:"age_seconds"`
		Committed int64   `json:"committed"`
		End       int64   `json:"end"`
	} `json:"partitions"`
	OutboxBacklog int64 `json:"outbox_backlog"`
}

func (e *e2e) lag() lagAnswer {
	e.t.Helper()
	r := e.call("GET", LagPath, "", "") // no token: operational data
	if r.status != 200 {
		e.t.Fatalf("lag: %d %s", r.status, r.body)
	}
	var a lagAnswer
	if err := json.Unmarshal(r.body, &a); err != nil {
		e.t.Fatalf("lag answer %s: %v", r.body, err)
	}
	return a
}

// lagNowIsFresh checks that /v1/lab/lag/now answers a measurement taken
// at the request (the monitor's own snapshot may be up to its interval
// old), with the same partitions as /v1/lab/lag.
func (e *e2e) lagNowIsFresh() {
	e.t.Helper()
	for range 3 {
		before := time.Now()
		r := e.call("GET", LagNowPath, "", "")
		after := time.Now()
		if r.status != 200 {
			e.t.Fatalf("lag now: %d %s", r.status, r.body)
		}
		var a struct {
			At         time.Time       `json:"at"`
			Partitions json.RawMessage `json:"partitions"`
		}
		if err := json.Unmarshal(r.body, &a); err != nil {
			e.t.Fatalf("lag now answer %s: %v", r.body, err)
		}
		if a.At.Before(before.Add(-100*time.Millisecond)) || a.At.After(after) {
			e.t.Fatalf("lag now measured at %s, asked %s..%s", a.At, before, after)
		}
		if len(e.lag().Partitions) == 0 || string(a.Partitions) == "null" {
			e.t.Fatalf("lag now without partitions: %s", r.body)
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// waitLagZero polls /v1/lab/lag until every partition of every group
// reports nothing behind and the outbox is empty.
func (e *e2e) waitLagZero(groups []string, minPartitions int, deadline time.Duration) {
	e.t.Helper()
	end := time.Now().Add(deadline)
	for {
		a := e.lag()
		perGroup := map[string]int{}
		behind := int64(0)
		for _, p := range a.Partitions {
			perGroup[p.Group]++
			behind += p.Records
			if p.Age < 0 {
				e.t.Fatalf("negative age: %+v", p)
			}
		}
		ok := behind == 0 && a.OutboxBacklog == 0
		for _, g := range groups {
			ok = ok && perGroup[g] >= minPartitions
		}
		if ok {
			return
		}
		if time.Now().After(end) {
			e.t.Fatalf("lag not zero after %s: behind %d, outbox %d, partitions per group %v", deadline, behind, a.OutboxBacklog, perGroup)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// traffic sends 1:1 messages 1->2 and 2->1 and group messages in group 7
// (members 1, 2, 3), from several goroutines, and returns what was ACKed.
func (e *e2e) traffic(tag string, n int) []sent {
	e.t.Helper()
	var mu sync.Mutex
	var out []sent
	var wg sync.WaitGroup
	errs := make(chan string, 3*n)
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				var body, content string
				var from uint64
				var rcpts []uint64
				content = fmt.Sprintf("%s w%d #%d", tag, w, i)
				switch w {
				case 0:
					from, rcpts = 1, []uint64{1, 2}
					body = fmt.Sprintf(`{"client_msg_id":"%s-%d-%d","conv_type":1,"to_uid":2,"content":%q}`, tag, w, i, content)
				case 1:
					from, rcpts = 2, []uint64{1, 2}
					body = fmt.Sprintf(`{"client_msg_id":"%s-%d-%d","conv_type":1,"to_uid":1,"content":%q}`, tag, w, i, content)
				default:
					from, rcpts = uint64(1+i%3), []uint64{1, 2, 3}
					body = fmt.Sprintf(`{"client_msg_id":"%s-%d-%d","conv_type":2,"group_id":7,"content":%q}`, tag, w, i, content)
				}
				r := e.callQuiet("POST", "/v1/msg/send", e.tok(from, "phone"), body)
				if r.status != 200 {
					errs <- fmt.Sprintf("send %s: %d %s", body, r.status, r.body)
					return
				}
				var a sendAnswer
				if err := json.Unmarshal(r.body, &a); err != nil {
					errs <- err.Error()
					return
				}
				mu.Lock()
				out = append(out, sent{a: a, content: content, rcpts: rcpts})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		e.t.Fatal(s)
	}
	return out
}

// callQuiet is call without t.Fatal (safe from other goroutines).
func (e *e2e) callQuiet(method, path, token, body string) resp {
	req, err := http.NewRequest(method, e.base+path, strings.NewReader(body))
	if err != nil {
		return resp{status: -1, body: []byte(err.Error())}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	r, err := e.client.Do(req)
	if err != nil {
		return resp{status: -1, body: []byte(err.Error())}
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return resp{status: -1, body: []byte(err.Error())}
	}
	return resp{r.StatusCode, r.Header, b}
}

// maxConvSeq is the highest conv_seq ACKed in conv.
func maxConvSeq(msgs []sent, conv uint64) uint64 {
	var n uint64
	for _, m := range msgs {
		if m.a.ConvID == conv && m.a.ConvSeq > n {
			n = m.a.ConvSeq
		}
	}
	return n
}

// TestFanoutPolicies runs the whole pipeline in one process for every ack
// policy: every recipient pulls every message in order, the history tier
// fills MongoDB, the history routes project per user, the lag drains.
func TestFanoutPolicies(t *testing.T) {
	for _, policy := range []string{"strict", "store", "outbox", "queue"} {
		t.Run(policy, func(t *testing.T) {
			fb := startFullBackends(t, true)
			p := startProcess(t, fullConfig(fb, policy, RoleAll), fb.b)
			if got := strings.Join(p.RoleNames(), ","); got != "api,relay,consumer,history,reconciler" {
				t.Fatalf("roles %s", got)
			}
			e := clientFor(t, p, fb.my)
			if r := e.call("POST", "/v1/group/create", e.tok(1, "phone"), `{"group_id":7,"members":[1,2,3]}`); r.status != 200 {
				t.Fatalf("group: %d %s", r.status, r.body)
			}
			msgs := e.traffic(policy, 8)
			e.waitInboxes(msgs, 20*time.Second)

			one, _ := model.SingleConvID(1, 2)
			grp, _ := model.GroupConvID(7)
			n1, ng := maxConvSeq(msgs, one), maxConvSeq(msgs, grp)
			if n1 != 16 || ng != 8 {
				t.Fatalf("conv_seqs: 1:1 %d, group %d", n1, ng)
			}
			byConvSeq := map[[2]uint64]sent{}
			for _, m := range msgs {
				byConvSeq[[2]uint64{m.a.ConvID, m.a.ConvSeq}] = m
			}
			a1, a2, a3 := e.tok(1, "phone"), e.tok(2, "phone"), e.tok(3, "phone")
			h := e.waitHistory(a1, one, n1, 20*time.Second)
			for i, it := range h {
				w := byConvSeq[[2]uint64{one, uint64(i + 1)}]
				if it.ConvSeq != uint64(i+1) || it.Tombstone || it.MsgID != w.a.MsgID || it.MsgIDStr != strconv.FormatUint(w.a.MsgID, 10) || it.Content != w.content {
					t.Fatalf("history 1:1 seq %d: %+v, sent %+v", i+1, it, w)
				}
			}
			e.waitHistory(a3, grp, ng, 20*time.Second)
			if r := e.call("GET", fmt.Sprintf("/v1/history?conv_id=%d&from_seq=1&to_seq=2", one), a3, ""); r.status != 403 {
				t.Fatalf("outsider reads 1:1 history: %d %s", r.status, r.body)
			}

			// Revoke: only the sender. Find one 1:1 message of uid 1.
			var mine sent
			for _, m := range msgs {
				if m.a.ConvID == one && strings.Contains(m.content, " w0 ") { // sent by uid 1
					mine = m
					break
				}
			}
			ref := fmt.Sprintf(`{"conv_id":%d,"conv_seq":%d}`, one, mine.a.ConvSeq)
			if r := e.call("POST", "/v1/msg/revoke", a2, ref); r.status != 403 {
				t.Fatalf("revoke by the recipient: %d %s", r.status, r.body)
			}
			for i := 0; i < 2; i++ { // idempotent
				if r := e.call("POST", "/v1/msg/revoke", a1, ref); r.status != 200 {
					t.Fatalf("revoke: %d %s", r.status, r.body)
				}
			}
			for _, tok := range []string{a1, a2} {
				got := e.history(tok, one, mine.a.ConvSeq, mine.a.ConvSeq)
				if len(got) != 1 || !got[0].Revoked || got[0].Content != "" {
					t.Fatalf("revoked message seen as %+v", got)
				}
			}
			// Delete for me: uid 2 loses conv_seq 2 (a tombstone), uid 1 keeps it.
			if r := e.call("POST", "/v1/msg/delete", a2, fmt.Sprintf(`{"conv_id":%d,"conv_seq":2}`, one)); r.status != 200 {
				t.Fatalf("delete: %d %s", r.status, r.body)
			}
			if got := e.history(a2, one, 2, 2); len(got) != 1 || !got[0].Tombstone || got[0].Content != "" {
				t.Fatalf("deleted message seen by its deleter as %+v", got)
			}
			if got := e.history(a1, one, 2, 2); len(got) != 1 || got[0].Tombstone {
				t.Fatalf("message deleted by another seen as %+v", got)
			}
			// Read flag (1:1 only) and the admin purge, conv_id given as the
			// string of its digits (a 1:1 conv_id passes 2^53); a malformed
			// one is refused.
			for _, bad := range []string{`"12x"`, `"-1"`, `""`} {
				if r := e.call("POST", ReadPath, a2, `{"conv_id":`+bad+`,"from_seq":1,"to_seq":1}`); r.status != 400 || r.code() != "invalid_argument" {
					t.Fatalf("read with conv_id %s: %d %s", bad, r.status, r.body)
				}
				if r := e.call("POST", PurgePath, e.tok(900, "ops"), `{"conv_id":`+bad+`,"conv_seq":1}`); r.status != 400 || r.code() != "invalid_argument" {
					t.Fatalf("purge with conv_id %s: %d %s", bad, r.status, r.body)
				}
			}
			if r := e.call("POST", ReadPath, a2, fmt.Sprintf(`{"conv_id":"%d","from_seq":1,"to_seq":%d}`, one, n1)); r.status != 200 {
				t.Fatalf("read: %d %s", r.status, r.body)
			}
			// is_read marks what the other party (uid 1) sent to uid 2.
			for _, m := range msgs {
				if m.a.ConvID != one || m.a.ConvSeq == mine.a.ConvSeq || m.a.ConvSeq == 2 {
					continue
				}
				fromOne := strings.Contains(m.content, " w0 ")
				if got := e.history(a1, one, m.a.ConvSeq, m.a.ConvSeq); len(got) != 1 || got[0].IsRead != fromOne {
					t.Fatalf("read flag of %q: %+v", m.content, got)
				}
			}
			if r := e.call("POST", ReadPath, a2, fmt.Sprintf(`{"conv_id":%d,"from_seq":1,"to_seq":2}`, grp)); r.status != 400 {
				t.Fatalf("read on a group: %d %s", r.status, r.body)
			}
			purge := fmt.Sprintf(`{"conv_id":"%d","conv_seq":1}`, grp)
			if r := e.call("POST", PurgePath, a1, purge); r.status != 403 {
				t.Fatalf("purge by a member: %d %s", r.status, r.body)
			}
			if r := e.call("POST", PurgePath, e.tok(900, "ops"), purge); r.status != 200 {
				t.Fatalf("admin purge: %d %s", r.status, r.body)
			}
			if got := e.history(a2, grp, 1, 2); len(got) != 2 || !got[0].Tombstone || got[1].Tombstone {
				t.Fatalf("after purge: %+v", got)
			}
			// Clear: uid 2's watermark goes to the conversation's last
			// conv_seq; uid 1 still sees everything.
			r := e.call("POST", "/v1/conv/clear", a2, fmt.Sprintf(`{"conv_id":%d}`, one))
			if r.status != 200 || string(r.body) != fmt.Sprintf(`{"min_seq":%d}`, n1) {
				t.Fatalf("clear: %d %s", r.status, r.body)
			}
			if got := e.history(a2, one, 1, n1); len(got) != 0 {
				t.Fatalf("cleared history still shows %+v", got)
			}
			if got := e.history(a1, one, 1, n1); uint64(len(got)) != n1 {
				t.Fatalf("other side after clear: %d items", len(got))
			}

			e.waitLagZero([]string{p.Cfg.Fanout.Consumer.Group, p.Cfg.Fanout.HistoryGroup}, int(p.Cfg.Fanout.Topics.Partitions), 15*time.Second)
			e.lagNowIsFresh()
			if r := e.call("GET", "/metrics", "", ""); r.status != 200 || !strings.Contains(string(r.body), "imlab_consumer_lag_seconds") {
				t.Fatalf("metrics without lag series: %d", r.status)
			}
			if policy == "outbox" {
				var pending int
				if err := fb.my.DB.QueryRow("SELECT COUNT(*) FROM mq_outbox WHERE status < 2").Scan(&pending); err != nil || pending != 0 {
					t.Fatalf("outbox rows not confirmed: %d %v", pending, err)
				}
			}
			if !slices.Contains(p.RoleNames(), RoleHistory) {
				t.Fatal("history role missing")
			}
		})
	}
}
