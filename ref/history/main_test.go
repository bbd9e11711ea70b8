package history

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
	"go.mongodb.org/mongo-driver/event"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"imlab/internal/testenv"
	"imlab/ref/model"
)

// mongoURI is the server the tests and benchmarks use: the embedded
// FerretDB (SQLite handler) that TestMain starts and stops, or, when
// IMLAB_TEST_MONGO is set (e.g. mongodb://127.0.0.1:27017 from compose), a
// real MongoDB. Each test uses its own database on it.
var mongoURI string

// onFerret is true when mongoURI is the embedded FerretDB.
var onFerret bool

// ferretDir is the embedded FerretDB's SQLite directory (one file
// "{database}.sqlite" per database), when onFerret.
var ferretDir string

func TestMain(m *testing.M) {
	if uri := os.Getenv("IMLAB_TEST_MONGO"); uri != "" {
		mongoURI = uri
		os.Exit(m.Run())
	}
	onFerret = true
	os.Exit(runWithFerret(m))
}

func runWithFerret(m *testing.M) int {
	dir, err := os.MkdirTemp("", "imlab-history-ferret-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "ferret dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ferretDir = dir
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: "127.0.0.1:0"},
		Handler:   "sqlite",
		SQLiteURL: "file:" + dir + "/",
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "ferretdb:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.Run(ctx)
	}()
	mongoURI = f.MongoDBURI()
	code := m.Run()
	cancel()
	<-done
	return code
}

// cmdCounter counts the commands a client sends, by name.
type cmdCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *cmdCounter) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.n == nil {
			c.n = map[string]int{}
		}
		c.n[e.CommandName]++
	}}
}

func (c *cmdCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n = map[string]int{}
}

// write resets c, writes msgs through s (failing t on an error) and
// returns the update and insert commands the batch took.
func (c *cmdCounter) write(t *testing.T, s *Store, msgs []model.Message) (updates, inserts int) {
	t.Helper()
	c.reset()
	if err := s.WriteBatch(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	return c.get("update"), c.get("insert")
}

func (c *cmdCounter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// countedStore is a Store on a fresh database and the counter of the
// commands its client sends.
func countedStore(t *testing.T) (*Store, *cmdCounter) {
	t.Helper()
	cc := &cmdCounter{}
	return newStore(t, newDB(t, cc.monitor()), nil), cc
}

// newDB connects a client to mongoURI and returns a fresh database,
// dropped when the test ends.
func newDB(tb testing.TB, mon *event.CommandMonitor) *mongo.Database {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := options.Client().ApplyURI(mongoURI)
	if mon != nil {
		opts.SetMonitor(mon)
	}
	cl, err := mongo.Connect(ctx, opts)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	db := cl.Database(testenv.RandomName("hist_"))
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := db.Drop(ctx); err != nil {
			tb.Errorf("drop %s: %v", db.Name(), err)
		}
		_ = cl.Disconnect(ctx)
	})
	return db
}

func newStore(tb testing.TB, db *mongo.Database, mut func(*Config)) *Store {
	tb.Helper()
	cfg := DefaultConfig()
	if mut != nil {
		mut(&cfg)
	}
	s, err := New(context.Background(), db, cfg)
	if err != nil {
		tb.Fatalf("history.New: %v", err)
	}
	return s
}
