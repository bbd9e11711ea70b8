package compose

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
)

// ferretIDQueryPlan is SQLite's plan for the statement FerretDB v1.24's
// SQLite backend runs for a filter {_id: "<string>"} (backends/sqlite
// collection.go, Query: `SELECT _ferretdb_sjson FROM "<table>" WHERE
// _ferretdb_sjson->'$._id' = ?`).
func ferretIDQueryPlan(t *testing.T, path, table string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(fmt.Sprintf(`EXPLAIN QUERY PLAN SELECT _ferretdb_sjson FROM %q WHERE _ferretdb_sjson->'$._id' = ?`, table), `"k1"`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	return strings.Join(plan, "; ")
}

func ferretTable(t *testing.T, path, coll string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var table string
	if err := db.QueryRow(`SELECT table_name FROM "_ferretdb_collections" WHERE name = ?`, coll).Scan(&table); err != nil {
		t.Fatalf("table of %s: %v", coll, err)
	}
	return table
}

func startFerret(t *testing.T, dir string) *mongo.Client {
	t.Helper()
	f, err := newFerretDB(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.Run(ctx)
	}()
	cl, err := mongo.Connect(ctx, options.Client().ApplyURI(f.MongoDBURI()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cl.Disconnect(context.Background())
		cancel()
		<-done
	})
	return cl
}

// TestFerretIDIndex: FerretDB's own _id index does not serve its _id
// lookups (the plan is a scan); after a pass every collection's lookup uses
// the added index, documents and FerretDB's index list are unchanged, a
// re-created collection is indexed again, and a dropped database is not
// brought back.
func TestFerretIDIndex(t *testing.T) {
	dir := t.TempDir()
	cl := startFerret(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := cl.Database("d1").Collection("c1")
	for i := 0; i < 20; i++ {
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("k%d", i)}, {Key: "v", Value: int64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.Database("d1").Collection("c2").InsertOne(ctx, bson.D{{Key: "_id", Value: "x"}}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "d1.sqlite")
	table := ferretTable(t, path, "c1")
	if p := ferretIDQueryPlan(t, path, table); !strings.HasPrefix(p, "SCAN") {
		t.Fatalf("plan before the index: %q (FerretDB's own _id index serves the lookup now: the added index may be unnecessary)", p)
	}
	x := newFerretIDIndexes(dir, nil)
	if n := x.pass(ctx); n != 2 {
		t.Fatalf("first pass created %d indexes, want 2 (c1, c2)", n)
	}
	for _, coll := range []string{"c1", "c2"} {
		if p := ferretIDQueryPlan(t, path, ferretTable(t, path, coll)); !strings.Contains(p, "USING INDEX "+ferretTable(t, path, coll)+ferretIDIndexSuffix) {
			t.Fatalf("plan of %s after the pass: %q", coll, p)
		}
	}
	if n := x.pass(ctx); n != 0 {
		t.Fatalf("second pass created %d indexes, want 0", n)
	}
	if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "k7"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: int64(70)}}}}); err != nil {
		t.Fatal(err)
	}
	var d struct {
		V int64 `bson:"v"`
	}
	if err := c.FindOne(ctx, bson.D{{Key: "_id", Value: "k7"}}).Decode(&d); err != nil || d.V != 70 {
		t.Fatalf("k7 after the update: %+v %v", d, err)
	}
	if n, err := c.CountDocuments(ctx, bson.D{}); err != nil || n != 20 {
		t.Fatalf("documents: %d %v", n, err)
	}
	var idx []bson.M
	cur, err := c.Indexes().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx, &idx); err != nil || len(idx) != 1 || idx[0]["name"] != "_id_" {
		t.Fatalf("listIndexes: %v %v, want FerretDB's _id_ only", idx, err)
	}

	if err := c.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "k1"}}); err != nil {
		t.Fatal(err)
	}
	if n := x.pass(ctx); n != 1 {
		t.Fatalf("pass after re-creating c1 created %d indexes, want 1", n)
	}
	if err := cl.Database("d1").Drop(ctx); err != nil {
		t.Fatal(err)
	}
	x.pass(ctx)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("dropped database file after a pass: %v", err)
	}
}

// waitIDIndexed creates a collection on uri and waits until the embedded
// FerretDB under dir serves its _id lookup from an index.
func waitIDIndexed(t *testing.T, uri, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := connectMongo(t, ctx, uri)
	defer cl.Disconnect(context.Background())
	if _, err := cl.Database("idx").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "idx.sqlite")
	table := ferretTable(t, path, "c")
	var p string
	for ctx.Err() == nil {
		if p = ferretIDQueryPlan(t, path, table); strings.Contains(p, "USING INDEX") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the embedded MongoDB's _id lookup is not indexed after 30s: %q", p)
}
