package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"imlab/ref/auth"
)

// Environment variables the server subcommands read (a flag given on the
// command line wins over its variable).
const (
	envListen    = "IMLAB_LISTEN"
	envSecret    = "IMLAB_SECRET"
	envMySQLDSN  = "IMLAB_MYSQL_DSN"
	envRedisAddr = "IMLAB_REDIS_ADDR"
	envAllocator = "IMLAB_ALLOCATOR"
	envPolicy    = "IMLAB_POLICY"
	envRoles     = "IMLAB_ROLES"
	envBackends  = "IMLAB_BACKENDS"
	envLogLevel  = "IMLAB_LOG_LEVEL"

	envKafkaBrokers = "IMLAB_KAFKA_BROKERS" // as compose reads it
	envMongoURI     = "IMLAB_MONGO_URI"     // as compose reads it
	envHistory      = "IMLAB_HISTORY"
	envMongoDB      = "IMLAB_MONGO_DB"
	envDedup        = "IMLAB_DEDUP"
	envTopic        = "IMLAB_TOPIC"
	envDLQTopic     = "IMLAB_DLQ_TOPIC"
	envPartitions   = "IMLAB_PARTITIONS"
	envInboxGroup   = "IMLAB_INBOX_GROUP"
	envHistoryGroup = "IMLAB_HISTORY_GROUP"
	envAdminUIDs    = "IMLAB_ADMIN_UIDS"
	envPprof        = "IMLAB_PPROF"
	envMongoPprof   = "IMLAB_MONGO_PPROF" // read by the embedded-mongo child only
	envLabRoutes    = "IMLAB_LAB_ROUTES"
	envPushBus      = "IMLAB_PUSH_BUS" // imlab ref only; up is one process (local)
)

// fromEnv returns the flag's value, or the environment variable's when
// the flag was not given and the variable is set.
func fromEnv(fs *pflag.FlagSet, flag, env string) string {
	v, _ := fs.GetString(flag)
	if fs.Changed(flag) {
		return v
	}
	if e, ok := os.LookupEnv(env); ok && e != "" {
		return e
	}
	return v
}

// labSecret is a resolved signing secret: --secret, IMLAB_SECRET, or
// (dev) the well-known lab secret, whose warning the command prints once,
// after its flags proved valid (warn), so that --help and a flag error
// print none.
type labSecret struct {
	value string
	dev   bool
}

// warn prints the lab secret's warning to w (nothing for a secret given).
func (s labSecret) warn(w io.Writer) {
	if s.dev {
		fmt.Fprintf(w, "WARNING: %s is not set: using the well-known lab secret; anyone can mint tokens for this server\n", envSecret)
	}
}

// lookupSecret resolves --secret / IMLAB_SECRET. With allowDev, an unset
// secret falls back to auth.DevSecret (its warning is the caller's to
// print, once: labSecret.warn).
func lookupSecret(cmd *cobra.Command, allowDev bool) (labSecret, error) {
	s := fromEnv(cmd.Flags(), "secret", envSecret)
	if s != "" {
		return labSecret{value: s}, nil
	}
	if !allowDev {
		return labSecret{}, fmt.Errorf("no secret: set %s or --secret (at least %d bytes)", envSecret, auth.MinSecretLen)
	}
	return labSecret{value: auth.DevSecret, dev: true}, nil
}

func newLogger(cmd *cobra.Command) (*slog.Logger, error) {
	lvl := fromEnv(cmd.Flags(), "log-level", envLogLevel)
	var l slog.Level
	if err := l.UnmarshalText([]byte(lvl)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", lvl)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// redactDSN hides a DSN's password for printing.
func redactDSN(dsn string) string {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	if c.Passwd != "" {
		c.Passwd = "xxx"
	}
	return c.FormatDSN()
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// lookupEnv is the environment variable's value ("" when unset).
func lookupEnv(name string) string { return os.Getenv(name) }
