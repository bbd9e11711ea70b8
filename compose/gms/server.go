// Package gms owns the embedded MySQL: go-mysql-server's memory engine on a
// loopback listener, made to answer as MySQL does where the reference server
// relies on it (ARCHITECTURE.md, "The embedded MySQL"): one transaction at a
// time, since the engine takes no row locks (lock.go); the indexes of the
// tables a transaction wrote rebuilt when it ends without COMMIT, and error
// 1062 naming its key (fix.go).
//
// It must not decide when the embedded MySQL is used, name backends or
// watch processes (compose does), apply the schema or touch application
// data.
package gms

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	sqle "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/memory"
	"github.com/dolthub/go-mysql-server/server"
	gmssql "github.com/dolthub/go-mysql-server/sql"
	vmysql "github.com/dolthub/vitess/go/mysql"
	"github.com/sirupsen/logrus"
)

// Server is one embedded MySQL server listening on loopback.
type Server struct {
	srv    *server.Server
	engine *sqle.Engine
	addr   string
	done   chan struct{}
}

// Start serves an empty database named database on a free loopback port. A
// connection that waits longer than lockWait for the engine gets MySQL's
// lock wait timeout (1205). log receives one line per index rebuild (nil:
// none). Close stops it.
func Start(database string, lockWait time.Duration, log *slog.Logger) (*Server, error) {
	// go-mysql-server logs every connection through logrus's process-wide
	// logger at info level; quiet it unless someone chose a level already.
	if logrus.GetLevel() == logrus.InfoLevel {
		logrus.SetLevel(logrus.ErrorLevel)
	}
	db := memory.NewDatabase(database)
	db.EnablePrimaryKeyIndexes()
	pro := memory.NewDBProvider(db)
	pro.WithOption(memory.NativeIndexProvider(true))
	engine := sqle.NewDefault(pro)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("embedded MySQL: listen: %w", err)
	}
	srv, err := server.NewServerWithHandler(server.Config{Protocol: "tcp", Listener: l, Address: l.Addr().String()},
		engine, gmssql.NewContext, memory.NewSessionBuilder(pro), nil,
		func(h vmysql.Handler) (vmysql.Handler, error) {
			return newSerialHandler(h, lockWait, &gmsEngine{pro: pro, log: log}), nil
		})
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("embedded MySQL: %w", err)
	}
	s := &Server{srv: srv, engine: engine, addr: l.Addr().String(), done: make(chan struct{})}
	go func() { // owned by Close: ends when the listener closes
		defer close(s.done)
		_ = srv.Start()
	}()
	return s, nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Done is closed when the server stopped serving.
func (s *Server) Done() <-chan struct{} { return s.done }

// Close stops the server and waits until it stopped serving.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	s.engine.Close()
	return err
}
