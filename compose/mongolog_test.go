package compose

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestWarnLevelDropsWireDumps(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(warnLevel{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})})
	log.Info("connection accepted")
	log.Warn("Response header: length: 121, id: 20, response_to: 463, opcode: OP_MSG")
	log.Warn("Response message:\n{\"ok\": 0.0, \"errmsg\": \"no such command: 'endSessions'\"}")
	log.Warn("Request header: length: 90")
	log.With("name", "conn").Warn("Request message: {}")
	log.Warn("disk almost full")
	log.Error("storage failed")
	out := buf.String()
	for _, gone := range []string{"connection accepted", "Response header", "Response message", "Request header", "Request message"} {
		if strings.Contains(out, gone) {
			t.Errorf("%q was passed on:\n%s", gone, out)
		}
	}
	for _, kept := range []string{"disk almost full", "storage failed"} {
		if !strings.Contains(out, kept) {
			t.Errorf("%q was dropped:\n%s", kept, out)
		}
	}
	if !(warnLevel{slog.NewTextHandler(&buf, nil)}).Enabled(context.Background(), slog.LevelWarn) {
		t.Error("warnings are not enabled")
	}
}
