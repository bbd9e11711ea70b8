package main

import (
	"context"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"imlab/compose"
	"imlab/ref/server"
)

// backends is where the servers are for one run, and how to let go of them.
type backends struct {
	*compose.Backends
	// Asked is the mode the flag or the environment asked for ("auto"
	// when neither did); Backends.Mode is what it resolved to.
	Asked string
	stop  func(context.Context) error
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
// environment first, then the flags given on the command line.
//
// Kafka is requested when the ack policy is not strict, when a role that
// consumes the queue is named (relay, consumer, history), when brokers are
// given, and always for up (which runs every role). MongoDB is requested
// when history is on (--history, default true) and, for ref, when a URI is
// given or the history role is named; up starts an in-process one when no
// URI is given.
func startBackends(ctx context.Context, cmd *cobra.Command, scfg server.Config, up bool) (*backends, error) {
	cfg := compose.DefaultConfig()
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
	if f.Changed("kafka-brokers") {
		v, _ := f.GetString("kafka-brokers")
		cfg.KafkaBrokers = compose.SplitList(v)
	}
	if f.Changed("mongo-uri") {
		cfg.MongoURI, _ = f.GetString("mongo-uri")
	}
	history, err := historyWanted(cmd)
	if err != nil {
		return nil, err
	}
	named := func(r string) bool { return slices.Contains(scfg.Roles, r) }
	cfg.WithKafka = up || scfg.Send.Policy != "strict" || len(cfg.KafkaBrokers) > 0 ||
		named(server.RoleRelay) || named(server.RoleConsumer) || named(server.RoleHistory)
	cfg.WithMongo = history && (up || cfg.MongoURI != "" || named(server.RoleHistory))
	if !cfg.WithMongo {
		cfg.MongoURI = ""
	}
	if os.Getenv(compose.EnvKafkaPartitions) == "" {
		cfg.KafkaPartitions = int(scfg.Fanout.Topics.Partitions)
	}
	cfg.Logger = scfg.Logger
	cfg.MongoCommand = embeddedMongoCommand()
	b, stop, err := compose.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &backends{Backends: b, Asked: cfg.Mode, stop: stop}, nil
}
