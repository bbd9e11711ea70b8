package compose

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/FerretDB/FerretDB/ferretdb"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
)

// mongoVersion connects to uri, pings, and returns buildInfo's version.
func mongoVersion(ctx context.Context, uri string) (string, error) {
	cl, err := mongo.Connect(ctx, options.Client().ApplyURI(uri).SetMaxPoolSize(1))
	if err != nil {
		return "", err
	}
	defer cl.Disconnect(context.WithoutCancel(ctx))
	if err := cl.Ping(ctx, nil); err != nil {
		return "", err
	}
	var info struct {
		Version string `bson:"version"`
	}
	if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		return "", nil // answered ping; buildInfo is optional
	}
	return info.Version, nil
}

func (r *run) externalMongo(ctx context.Context) error {
	uri := r.cfg.MongoURI
	var version string
	err := waitFor(ctx, r.cfg.StartTimeout, nil, func(ctx context.Context) error {
		v, err := mongoVersion(ctx, uri)
		version = v
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: external MongoDB: %v", ErrUnavailable, err)
	}
	r.b.MongoURI = uri
	r.b.Kinds[PartMongo] = strings.TrimSpace("external mongodb " + version)
	return nil
}

const embeddedMongoWarning = "MongoDB is embedded FerretDB v1 (SQLite): filtered updates scan the collection " +
	"(measured 8-265 ops/s on 100-slot buckets); history figures from this run are embedded-backend figures"

// warnLevel passes only warnings and errors to the wrapped handler:
// FerretDB logs every connection at info. It also drops FerretDB's dumps of
// a wire exchange that ended in an error ("Request header: ...",
// "Response message: ...", logged at warn, several lines each, e.g. for the
// driver's endSessions, which FerretDB v1 does not know): the client gets
// that error and reports it itself.
type warnLevel struct{ slog.Handler }

func (h warnLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnLevel) Handle(ctx context.Context, r slog.Record) error {
	for _, p := range [...]string{"Request header:", "Request message:", "Response header:", "Response message:"} {
		if strings.HasPrefix(r.Message, p) {
			return nil
		}
	}
	return h.Handler.Handle(ctx, r)
}
func (h warnLevel) WithAttrs(a []slog.Attr) slog.Handler { return warnLevel{h.Handler.WithAttrs(a)} }
func (h warnLevel) WithGroup(n string) slog.Handler      { return warnLevel{h.Handler.WithGroup(n)} }

func (r *run) embeddedMongo(ctx context.Context) error {
	dir := filepath.Join(r.b.root, "ferretdb")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%w: embedded MongoDB: %v", ErrUnavailable, err)
	}
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: "127.0.0.1:0"},
		Logger:    slog.New(warnLevel{r.log.Handler()}),
		Handler:   "sqlite",
		SQLiteURL: "file:" + dir + "/",
	})
	if err != nil {
		return fmt.Errorf("%w: embedded MongoDB: %v", ErrUnavailable, err)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { // owned by the stop func below: ends when rctx is cancelled
		defer close(done)
		_ = f.Run(rctx)
	}()
	r.st.add("embedded MongoDB", func(context.Context) error {
		cancel()
		<-done
		return nil
	})
	uri := f.MongoDBURI()
	if err := waitFor(ctx, r.cfg.StartTimeout, done, func(ctx context.Context) error {
		_, err := mongoVersion(ctx, uri)
		return err
	}); err != nil {
		return fmt.Errorf("%w: embedded MongoDB: %v", ErrUnavailable, err)
	}
	r.b.MongoURI = uri
	r.b.Kinds[PartMongo] = strings.TrimSpace("embedded ferretdb " + moduleVersion("github.com/FerretDB/FerretDB") + " sqlite")
	r.b.Embedded = append(r.b.Embedded, PartMongo)
	r.warn(embeddedMongoWarning)
	return nil
}
