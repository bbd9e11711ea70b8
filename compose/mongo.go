package compose

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

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

const embeddedMongoWarning = "MongoDB is embedded FerretDB v1 (SQLite): a filter other than {_id} scans the collection " +
	"and every update rewrites a whole 100-slot bucket; history figures from this run are embedded-backend figures"

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
	var uri string
	var exited <-chan struct{}
	var child *proc
	var err error
	where := "in-process"
	if len(r.cfg.MongoCommand) > 0 {
		uri, child, err = r.childMongo(dir)
		if child != nil {
			exited = child.exited
		}
		where = fmt.Sprintf("child process, nice %d", r.cfg.MongoNice)
	} else {
		uri, exited, err = r.inProcessMongo(ctx, dir)
	}
	if err != nil {
		return fmt.Errorf("%w: embedded MongoDB: %v", ErrUnavailable, err)
	}
	if err := waitFor(ctx, r.cfg.StartTimeout, exited, func(ctx context.Context) error {
		_, err := mongoVersion(ctx, uri)
		return err
	}); err != nil {
		return fmt.Errorf("%w: embedded MongoDB: %v", ErrUnavailable, err)
	}
	if child != nil && r.cfg.MongoNice != 0 {
		if err := renice(child.cmd.Process.Pid, r.cfg.MongoNice); err != nil {
			return fmt.Errorf("%w: embedded MongoDB: %v", ErrUnavailable, err)
		}
	}
	r.b.MongoURI = uri
	r.b.Kinds[PartMongo] = "embedded ferretdb " + moduleVersion("github.com/FerretDB/FerretDB") + " sqlite (" + where + ")"
	r.b.Embedded = append(r.b.Embedded, PartMongo)
	r.warn(embeddedMongoWarning)
	return nil
}

// newFerretDB builds FerretDB v1 with its SQLite handler on a free loopback
// port, its files under dir, logging warnings and errors to log.
func newFerretDB(dir string, log *slog.Logger) (*ferretdb.FerretDB, error) {
	return ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: "127.0.0.1:0"},
		Logger:    slog.New(warnLevel{log.Handler()}),
		Handler:   "sqlite",
		SQLiteURL: "file:" + dir + "/",
	})
}

// inProcessMongo runs FerretDB on a goroutine of this process: it shares
// the process's CPUs with everything else here (Config.MongoCommand).
func (r *run) inProcessMongo(ctx context.Context, dir string) (string, <-chan struct{}, error) {
	f, err := newFerretDB(dir, r.log)
	if err != nil {
		return "", nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { // owned by the stop func below: ends when rctx is cancelled
		defer close(done)
		_ = f.Run(rctx)
	}()
	idxDone := make(chan struct{})
	go func() { // owned by the stop func below: ends when rctx is cancelled
		defer close(idxDone)
		newFerretIDIndexes(dir, r.log).run(rctx)
	}()
	r.st.add("embedded MongoDB", func(context.Context) error {
		cancel()
		<-done
		<-idxDone
		return nil
	})
	return f.MongoDBURI(), done, nil
}

// childMongo runs Config.MongoCommand (which calls ServeEmbeddedMongo),
// reads the URI from the first line of its stdout,
// and passes its later lines (FerretDB's warnings) to the run's log. The
// child's stdin is a pipe this process never writes: it reads EOF when
// this process dies, and exits.
func (r *run) childMongo(dir string) (string, *proc, error) {
	cmd := exec.Command(r.cfg.MongoCommand[0], append(slices.Clone(r.cfg.MongoCommand[1:]), dir)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	logPath := filepath.Join(dir, "stderr.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = logf
	p, err := launch("embedded MongoDB", cmd, logPath) // reniced once it answers
	logf.Close()
	if err != nil {
		return "", nil, err
	}
	grace := r.cfg.StopTimeout
	r.st.add("embedded MongoDB", func(ctx context.Context) error {
		stdin.Close() // the child's signal to stop
		return p.stop(ctx, grace)
	})
	uric := make(chan string, 1)
	go func() { // owned by p: ends at the child's stdout EOF (it exited)
		sc := bufio.NewScanner(out)
		first := true
		for sc.Scan() {
			if first {
				first = false
				uric <- strings.TrimSpace(sc.Text())
				continue
			}
			r.log.Warn("compose: embedded MongoDB: " + sc.Text())
		}
		if first {
			close(uric)
		}
	}()
	t := time.NewTimer(r.cfg.StartTimeout)
	defer t.Stop()
	select {
	case uri, ok := <-uric:
		if !ok || !strings.HasPrefix(uri, "mongodb://") {
			<-p.exited
			return "", nil, fmt.Errorf("%s did not print a MongoDB URI (%v): %s", strings.Join(r.cfg.MongoCommand, " "), p.waitErr, p.logTail())
		}
		return uri, p, nil
	case <-t.C:
		return "", nil, fmt.Errorf("%s printed no URI within %s", strings.Join(r.cfg.MongoCommand, " "), r.cfg.StartTimeout)
	}
}

// ServeEmbeddedMongo is the body of the child process that
// Config.MongoCommand names: it runs FerretDB (SQLite files under dir) on a
// free loopback port, writes its mongodb:// URI as the first line of out,
// then FerretDB's warnings as text log lines, and returns when ctx ends or
// stdin reaches EOF (the parent closed it, or died). Meanwhile it keeps the
// _id lookups of every collection indexed (ferretidx.go).
func ServeEmbeddedMongo(ctx context.Context, dir string, stdin io.Reader, out io.Writer) error {
	if dir == "" {
		return fmt.Errorf("%w: embedded MongoDB: no directory", ErrConfig)
	}
	var mu sync.Mutex // out is written by FerretDB's goroutines
	w := &lockedWriter{mu: &mu, w: out}
	f, err := newFerretDB(dir, slog.New(slog.NewTextHandler(w, nil)))
	if err != nil {
		return fmt.Errorf("%w: embedded MongoDB: %v", ErrUnavailable, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }() // owned here: waited for below
	uric := make(chan string, 1)
	go func() { uric <- f.MongoDBURI() }() // returns once FerretDB listens; abandoned if Run fails first
	select {
	case uri := <-uric:
		if _, err := fmt.Fprintln(w, uri); err != nil {
			cancel()
			<-done
			return err
		}
	case err := <-done:
		return fmt.Errorf("%w: embedded MongoDB: %v", ErrUnavailable, err)
	}
	go func() { // ends at stdin EOF or error (the parent closed it or died); then cancels the server
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	idxDone := make(chan struct{})
	go func() { // ends with ctx, waited for below
		defer close(idxDone)
		newFerretIDIndexes(dir, slog.New(slog.NewTextHandler(w, nil))).run(ctx)
	}()
	err = <-done
	stopped := ctx.Err() != nil
	cancel()
	<-idxDone
	if stopped {
		return nil
	}
	return err
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
