package testenv

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
)

// NewFerretDB starts an embedded FerretDB v1 (SQLite handler, MongoDB wire
// protocol on a free loopback port) for one test and returns a fresh
// database on it. The server, its temp directory and the client are gone
// when the test ends.
func NewFerretDB(t testing.TB) *mongo.Database {
	t.Helper()
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: "127.0.0.1:0"},
		Handler:   "sqlite",
		SQLiteURL: "file:" + t.TempDir() + "/",
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatalf("testenv: ferretdb: %v", err)
	}
	fctx, fcancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(fctx) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := mongo.Connect(ctx, options.Client().ApplyURI(f.MongoDBURI()))
	if err != nil {
		fcancel()
		<-done
		t.Fatalf("testenv: connect ferretdb: %v", err)
	}
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		_ = cl.Disconnect(dctx)
		fcancel()
		<-done
	})
	return cl.Database(RandomName("t_"))
}
