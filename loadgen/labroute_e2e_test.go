package loadgen_test

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"testing"

	_ "github.com/go-sql-driver/mysql"

	"imlab/internal/testenv"
	"imlab/ref/server"
	"imlab/targets/ref/client"
)

// TestLabRoutesReadTheStore: the lab routes of the real reference server
// (MariaDB + Redis) answer what MySQL holds, not what the hot cache holds:
// a row deleted behind the cache's back is still served by sync/pull (the
// cache) and absent from GET /v1/lab/inbox and /v1/lab/stored. Right after
// an ACK under strict, the sender's and the recipient's rows and the
// content are stored. Without the flag the routes are absent (404).
func TestLabRoutesReadTheStore(t *testing.T) {
	const secret = "loadgen-lab-secret-0123456789"
	my := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	start := func(lab bool) string { return startRef(t, secret, my, rd, lab) }
	cc := client.DefaultConfig()
	cc.Target, cc.Secret = start(true), secret
	cl, err := client.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	alice, _ := cl.Token(7001, "d0")
	bob, _ := cl.Token(7002, "d0")
	var acks []client.SendAck
	for i := range 3 {
		ack, err := cl.Send(alice, &client.SendReq{ClientMsgID: "lab-" + string(rune('a'+i)), ConvType: 1, ToUID: 7002, Content: "hello"})
		if err != nil {
			t.Fatal(err)
		}
		// Read after ACK: strict promises both inbox rows and the content.
		for _, tok := range []string{alice, bob} {
			m, err := cl.Stored(tok, ack.MsgID)
			if err != nil {
				t.Fatal(err)
			}
			if m.Policy != "strict" || !m.Content || !m.Inbox || m.ConvSeq != ack.ConvSeq || m.Outbox != "none" {
				t.Fatalf("stored right after the ACK: %+v (ack %+v)", m, ack)
			}
		}
		acks = append(acks, ack)
	}
	// Warm bob's hot cache, then delete his middle row behind its back.
	pr, err := cl.Pull(bob, client.PullOpts{Limit: 10, UseCursor: true})
	if err != nil || len(pr.Msgs) != 3 {
		t.Fatalf("pull: %v %+v", err, pr)
	}
	db, err := sql.Open("mysql", my.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("DELETE FROM offline_msg WHERE uid = ? AND msg_id = ?", 7002, acks[1].MsgID); err != nil {
		t.Fatal(err)
	}
	pr, err = cl.Pull(bob, client.PullOpts{Limit: 10, UseCursor: true})
	if err != nil || len(pr.Msgs) != 3 {
		t.Fatalf("the cache should still serve the deleted row (this test proves the lab route bypasses it): %v %+v", err, pr)
	}
	// Pages of one row: bounded pages by seq.
	var got []uint64
	var after uint64
	for range 10 {
		p, err := cl.StoredInbox(bob, after, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Msgs {
			got = append(got, m.MsgID)
		}
		if !p.HasMore {
			break
		}
		after = p.NextCursor
	}
	if len(got) != 2 || got[0] != acks[0].MsgID || got[1] != acks[2].MsgID {
		t.Fatalf("stored inbox %v, want %d and %d", got, acks[0].MsgID, acks[2].MsgID)
	}
	if m, err := cl.Stored(bob, acks[1].MsgID); err != nil || m.Inbox || !m.Content {
		t.Fatalf("stored state of the deleted row: %+v %v", m, err)
	}
	// GET /v1/lab/procs names the process serving the api (here this test
	// process: the server runs in it) and its roles, without a token.
	procs := getJSON(t, cc.Target+server.ProcsPath)
	if int(procs["pid"].(float64)) != os.Getpid() || !slices.Contains(anyStrings(procs["roles"]), "api") {
		t.Fatalf("lab procs: %v", procs)
	}
	// Off by default.
	cc.Target = start(false)
	if resp, err := http.Get(cc.Target + server.ProcsPath); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("lab procs without the flag: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	off, err := client.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	var ce *client.Error
	if _, err := off.StoredInbox(bob, 0, 10); !asStatus(err, &ce, 404) {
		t.Fatalf("lab route without the flag: %v", err)
	}
}

func getJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %v", url, resp.StatusCode, err)
	}
	return m
}

func anyStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func asStatus(err error, ce **client.Error, status int) bool {
	e, ok := err.(*client.Error)
	*ce = e
	return ok && e.Status == status
}
