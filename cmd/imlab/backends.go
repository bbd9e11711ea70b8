package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"imlab/compose"
	"imlab/ref/server"
)

// backends is where the servers are for one run, and how to let go of them.
type backends struct {
	*compose.Backends
	stop func(context.Context) error
}

// server returns the addresses the reference server needs.
func (b *backends) server() server.Backends {
	return server.Backends{
		MySQLDSN:     b.MySQLDSN,
		RedisAddr:    b.RedisAddr,
		KafkaBrokers: b.KafkaBrokers,
		MongoURI:     b.MongoURI,
	}
}

// startBackends resolves the backends through compose: the IMLAB_*
// environment first, then the flags given on the command line. The
// reference server's api role needs MySQL and Redis only; Kafka and MongoDB
// are not started for it.
func startBackends(ctx context.Context, cmd *cobra.Command, log func(*compose.Config)) (*backends, error) {
	cfg := compose.DefaultConfig()
	cfg.WithKafka = false
	cfg.WithMongo = false
	if err := cfg.ApplyEnv(os.LookupEnv); err != nil {
		return nil, err
	}
	f := cmd.Flags()
	if f.Changed("backends") || os.Getenv(compose.EnvBackends) == "" {
		cfg.Mode, _ = f.GetString("backends")
	}
	if f.Changed("mysql-dsn") {
		cfg.MySQLDSN, _ = f.GetString("mysql-dsn")
	}
	if f.Changed("redis-addr") {
		cfg.RedisAddr, _ = f.GetString("redis-addr")
	}
	if log != nil {
		log(&cfg)
	}
	b, stop, err := compose.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &backends{Backends: b, stop: stop}, nil
}
