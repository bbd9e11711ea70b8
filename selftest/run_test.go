package selftest

import (
	"testing"

	"imlab/internal/testenv"
	"imlab/runner"
)

// e2eConfig is a runner config on a private database and Redis prefix of
// the real servers (kfake and the proxies are the run's own).
func e2eConfig(t *testing.T) runner.Config {
	t.Helper()
	my := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	cfg := runner.DefaultConfig(t.TempDir())
	cfg.Mode = "external"
	cfg.MySQLDSN, cfg.RedisAddr, cfg.RedisPrefix = my.DSN, rd.Addr, rd.Keys.Prefix
	cfg.FreshDatabase = false
	cfg.ChildCommand = testChildCommand(t)
	return cfg
}
