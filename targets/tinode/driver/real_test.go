package driver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"imlab/checker"
	"imlab/ledger"
)

// Environment naming a real Tinode; TestRealTinodeRun is skipped without
// IMLAB_TINODE_URL.
const (
	envURL    = "IMLAB_TINODE_URL"    // ws://HOST:PORT/v0/channels
	envAPIKey = "IMLAB_TINODE_APIKEY" // an API key signed with the server's api_key_salt
)

// TestRealTinodeRun runs the lab's small run against a real Tinode: every
// send ACKed, every message delivered and in the witness, VALID.
func TestRealTinodeRun(t *testing.T) {
	url := os.Getenv(envURL)
	if url == "" {
		t.Skipf("%s is not set: no real Tinode to run against (set it to the server's WebSocket endpoint, "+
			"e.g. ws://127.0.0.1:6060/v0/channels, and %s to its API key)", envURL, envAPIKey)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(url, os.Getenv(envAPIKey), "r"+hex.EncodeToString(b))
	cfg.Wire.RequestTimeout = 10 * time.Second
	r := newLabRun(t, ctx, cfg, 5)
	for _, a := range r.sendMix(ctx, 60) {
		if a.Outcome != ledger.OK {
			t.Fatalf("send %+v", a)
		}
	}
	v := r.finish(ctx, checker.Options{})
	if !v.Valid || v.OK != 60 {
		t.Fatalf("valid %v ok %d findings %v", v.Valid, v.OK, counts(v))
	}
	t.Logf("real Tinode: %d sends ACKed, %d deliveries", v.OK, v.Deliveries)
}
