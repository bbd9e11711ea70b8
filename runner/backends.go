package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/chaos"
	"imlab/ref/server"
	"imlab/scenario"
)

// proxiedKafka is the run's in-process one-broker kfake cluster. Real is
// the broker's own listener; after Advertise the broker names the proxy.
type proxiedKafka struct {
	cluster *kfake.Cluster
	adv     chaos.Advertiser
	real    string
}

func startKafka(partitions int) (*proxiedKafka, error) {
	k := &proxiedKafka{}
	var mu sync.Mutex
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(partitions),
		kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			ln, err := net.Listen(network, addr)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			k.real = ln.Addr().String()
			mu.Unlock()
			return k.adv.Wrap(ln), nil
		}))
	if err != nil {
		return nil, fmt.Errorf("scenarios: in-process kafka: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	k.cluster = c
	if k.real == "" {
		c.Close()
		return nil, errors.New("scenarios: in-process kafka did not listen")
	}
	return k, nil
}

// Advertise makes the broker name addr (the proxy) in metadata.
func (k *proxiedKafka) Advertise(addr string) error {
	if err := k.adv.Set(addr); err != nil {
		return fmt.Errorf("scenarios: kafka proxy address: %w", err)
	}
	return nil
}

// admin is the lab's own Kafka admin client: it dials the broker's real
// listener even when metadata names the proxy, so faults on the proxy
// never stop the lab's fault injection.
func (k *proxiedKafka) admin() (*kadm.Client, *kgo.Client, error) {
	real := k.real
	dialer := func(ctx context.Context, network, host string) (net.Conn, error) {
		if a := k.adv.Addr(); a != nil && host == a.String() {
			host = real
		}
		var d net.Dialer
		return d.DialContext(ctx, network, host)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(real), kgo.Dialer(dialer), kgo.RequestTimeoutOverhead(5*time.Second))
	if err != nil {
		return nil, nil, fmt.Errorf("scenarios: kafka admin client: %w", err)
	}
	return kadm.NewClient(cl), cl, nil
}

func (k *proxiedKafka) Close() { k.cluster.Close() }

// withAddr returns dsn with its address replaced.
func withAddr(dsn, addr string) (string, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("%w: mysql dsn: %v", scenario.ErrInvalid, err)
	}
	c.Addr = addr
	return c.FormatDSN(), nil
}

// databaseSetting says which MySQL database a run used: its own (name)
// in place of the DSN's when fresh, said as a replacement of the DSN's
// database so that no one looks for the run's rows under the DSN's name;
// the DSN's own otherwise.
func databaseSetting(dsn string, fresh bool, name string) string {
	given := "none"
	if c, err := mysql.ParseDSN(dsn); err == nil && c.DBName != "" {
		given = c.DBName
	}
	if !fresh {
		return given + " (the DSN's own)"
	}
	return fmt.Sprintf("%s (one per run, in place of the DSN's database %s)", name, given)
}

// freshDatabase creates a database of its own for the run next to the
// DSN's and returns its DSN and a drop function.
func freshDatabase(ctx context.Context, dsn, name string) (string, func(context.Context) error, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", nil, fmt.Errorf("%w: mysql dsn: %v", scenario.ErrInvalid, err)
	}
	c.DBName = name
	fresh, err := server.MySQLDSN(c.FormatDSN()) // the options every imlab connection uses
	if err != nil {
		return "", nil, err
	}
	admin := c.Clone()
	admin.DBName = ""
	db, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		return "", nil, fmt.Errorf("scenarios: mysql: %w", err)
	}
	if _, err := db.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4"); err != nil {
		db.Close()
		return "", nil, fmt.Errorf("scenarios: create database %s: %w", name, err)
	}
	drop := func(ctx context.Context) error {
		defer db.Close()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			return fmt.Errorf("scenarios: drop database %s: %w", name, err)
		}
		return nil
	}
	return fresh, drop, nil
}

// mongoHost is the host:port of a single-host MongoDB URI.
func mongoHost(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "mongodb" || u.Host == "" || strings.Contains(u.Host, ",") {
		return "", fmt.Errorf("%w: mongo uri %q cannot be proxied (want mongodb://host:port/, one host)", scenario.ErrInvalid, uri)
	}
	return u.Host, nil
}

// mongoVia rewrites uri to go through addr, connecting directly (no
// discovery of other members that would bypass the proxy).
func mongoVia(uri, addr string) string {
	u, _ := url.Parse(uri)
	u.Host = addr
	q := u.Query()
	q.Set("directConnection", "true")
	u.RawQuery = q.Encode()
	return u.String()
}
