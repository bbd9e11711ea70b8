package compose

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"imlab/compose/gms"
)

// mysqlConfig parses dsn and sets the options every imlab connection uses.
func mysqlConfig(dsn string) (*mysql.Config, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("MySQL DSN: %w", err)
	}
	if c.Net != "tcp" {
		return nil, fmt.Errorf("MySQL DSN: network %q: imlab connects over tcp only", c.Net)
	}
	c.ParseTime = true
	c.Loc = time.UTC
	c.InterpolateParams = true
	return c, nil
}

// tcpDSN is the DSN of database db as user root with no password at addr.
func tcpDSN(addr, db string) string {
	c := mysql.NewConfig()
	c.User = "root"
	c.Net = "tcp"
	c.Addr = addr
	c.DBName = db
	c.ParseTime = true
	c.Loc = time.UTC
	c.InterpolateParams = true
	return c.FormatDSN()
}

// createDatabase connects to the server of dsn without a database, creates
// dsn's database if missing (when create is set), and returns the server's
// VERSION().
func createDatabase(ctx context.Context, dsn string, create bool) (version string, err error) {
	c, err := mysqlConfig(dsn)
	if err != nil {
		return "", err
	}
	name := c.DBName
	if strings.ContainsAny(name, "`\x00") {
		return "", fmt.Errorf("MySQL database name %q not allowed", name)
	}
	c.DBName = ""
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return "", err
	}
	defer db.Close()
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return "", err
	}
	if !create {
		return version, nil
	}
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+name+"` CHARACTER SET utf8mb4"); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return version, nil
}

func pingMySQL(ctx context.Context, dsn string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}

func mysqlFlavor(version string) string {
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return "mariadb"
	}
	return "mysql"
}

func (r *run) externalMySQL(ctx context.Context) error {
	c, err := mysqlConfig(r.cfg.MySQLDSN)
	if err != nil {
		return err
	}
	if c.DBName == "" {
		c.DBName = DefaultDatabase
	}
	dsn := c.FormatDSN()
	var version string
	err = waitFor(ctx, r.cfg.StartTimeout, nil, func(ctx context.Context) error {
		v, err := createDatabase(ctx, dsn, !r.cfg.MySQLNoCreate)
		version = v
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: external MySQL at %s: %v", ErrUnavailable, c.Addr, err)
	}
	r.b.MySQLDSN = dsn
	r.b.Kinds[PartMySQL] = "external " + mysqlFlavor(version) + " " + version
	return nil
}

// mysqlServer is a MySQL-compatible server binary found on this machine.
type mysqlServer struct {
	bin     string
	version string // first line of --version
	mariadb bool
}

func findMySQLServer() (mysqlServer, error) {
	var firstErr error
	for _, name := range []string{"mariadbd", "mysqld"} {
		bin, err := lookBinary(name)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		return mysqlServer{bin: bin}, nil
	}
	return mysqlServer{}, fmt.Errorf("no MySQL server binary: %w", firstErr)
}

func (s *mysqlServer) probeVersion(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, s.bin, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %w: %s", s.bin, err, bytes.TrimSpace(out))
	}
	line := strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	s.version = line
	s.mariadb = strings.Contains(line, "MariaDB")
	return nil
}

// shortVersion extracts "10.11.19-MariaDB" from a --version line.
func (s mysqlServer) shortVersion() string {
	f := strings.Fields(s.version)
	for i, w := range f {
		if (w == "Ver" || w == "ver") && i+1 < len(f) {
			v := f[i+1]
			if j := strings.Index(v, "-0+"); j > 0 { // Debian build suffix
				v = v[:j]
			}
			return v
		}
	}
	return s.version
}

// runAsArgs is the --user option a server needs when imlab runs as root.
func runAsArgs() []string {
	if os.Geteuid() != 0 {
		return nil
	}
	name := "root"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	return []string{"--user=" + name}
}

// initMySQLDataDir creates a fresh data directory whose root user has no
// password.
func initMySQLDataDir(ctx context.Context, s mysqlServer, dataDir, logPath string) error {
	var bin string
	var args []string
	if s.mariadb {
		for _, name := range []string{"mariadb-install-db", "mysql_install_db"} {
			if p, err := lookBinary(name); err == nil {
				bin = p
				break
			}
		}
		if bin == "" {
			return fmt.Errorf("%s is MariaDB but neither mariadb-install-db nor mysql_install_db is installed", s.bin)
		}
		args = []string{"--no-defaults", "--datadir=" + dataDir, "--auth-root-authentication-method=normal",
			"--skip-test-db", "--skip-name-resolve"}
		// The install script runs the server binary from its basedir; point
		// it at the one we found.
		args = append(args, "--basedir="+filepath.Dir(filepath.Dir(s.bin)))
		args = append(args, runAsArgs()...)
	} else {
		bin = s.bin
		args = []string{"--no-defaults", "--initialize-insecure", "--datadir=" + dataDir,
			"--log-error=" + logPath}
		args = append(args, runAsArgs()...)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		name := filepath.Base(bin)
		return failedStart(fmt.Errorf("%s: %w: %s", name, err, lastLines(string(out), 15)), string(out), fmt.Sprintf("%s: %v", name, err))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// maxPortTries bounds the retries when a free port was taken between
// finding it and the server binding it.
const maxPortTries = 3

func (r *run) localMySQL(ctx context.Context) error {
	s, err := findMySQLServer()
	if err != nil {
		return fmt.Errorf("%w: local MySQL: %v", ErrUnavailable, err)
	}
	if err := s.probeVersion(ctx); err != nil {
		return fmt.Errorf("%w: local MySQL: %v", ErrUnavailable, err)
	}
	dir := filepath.Join(r.b.root, "mysql")
	dataDir := filepath.Join(dir, "data")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("%w: local MySQL: %v", ErrUnavailable, err)
	}
	logPath := filepath.Join(dir, "server.log")
	ictx, cancel := context.WithTimeout(ctx, r.cfg.StartTimeout)
	err = initMySQLDataDir(ictx, s, dataDir, logPath)
	timedOut := ictx.Err() != nil && ctx.Err() == nil
	cancel()
	if err != nil {
		err = fmt.Errorf("%w: local MySQL: init data dir: %w", ErrUnavailable, err)
		if timedOut {
			// Killed: what it printed so far is progress, not a cause.
			return &startError{Cause: fmt.Sprintf("the data directory's installer did not finish within %s", r.cfg.StartTimeout), Err: err}
		}
		return err
	}
	r.log.Info("compose: starting local MySQL", "bin", s.bin, "dir", dir)

	var lastErr error
	var lastTail string
	for try := 0; try < maxPortTries; try++ {
		port, err := freePort()
		if err != nil {
			return fmt.Errorf("%w: local MySQL: %v", ErrUnavailable, err)
		}
		args := []string{"--no-defaults",
			"--datadir=" + dataDir,
			"--port=" + strconv.Itoa(port),
			"--bind-address=127.0.0.1",
			"--socket=" + filepath.Join(dir, "mysqld.sock"),
			"--pid-file=" + filepath.Join(dir, "mysqld.pid"),
			"--log-error=" + logPath,
			"--character-set-server=utf8mb4",
			"--max-connections=1000",
		}
		if s.mariadb {
			args = append(args, "--skip-log-bin")
		} else {
			args = append(args, "--disable-log-bin", "--mysqlx=OFF")
		}
		args = append(args, runAsArgs()...)
		p, err := startProc("mysql", s.bin, args, filepath.Join(dir, "stdout.log"))
		if err != nil {
			return fmt.Errorf("%w: local MySQL: %v", ErrUnavailable, err)
		}
		grace := r.cfg.StopTimeout
		r.st.add("local MySQL", func(ctx context.Context) error { return p.stop(ctx, grace) })
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		dsn := tcpDSN(addr, DefaultDatabase)
		var version string
		err = waitFor(ctx, r.cfg.StartTimeout, p.exited, func(ctx context.Context) error {
			v, err := createDatabase(ctx, dsn, true)
			version = v
			return err
		})
		if err == nil {
			r.b.MySQLDSN = dsn
			r.b.Kinds[PartMySQL] = "local " + filepath.Base(s.bin) + " " + version
			r.b.PIDs[PartMySQL] = p.cmd.Process.Pid
			return nil
		}
		tail := tailFile(logPath, 2048)
		lastErr, lastTail = fmt.Errorf("%v\n%s", err, lastLines(tail, 10)), tail
		if !strings.Contains(tail, "already in use") && !strings.Contains(tail, "Bind on TCP/IP port") {
			// Not a port race: stop this attempt now (auto mode may fall
			// back to embedded) and give up.
			if serr := p.stop(ctx, grace); serr != nil {
				lastErr = fmt.Errorf("%v; %v", lastErr, serr)
			}
			break
		}
		// Port taken under us: stop this attempt and retry.
		if serr := p.stop(ctx, grace); serr != nil {
			return fmt.Errorf("%w: local MySQL: %v", ErrUnavailable, serr)
		}
	}
	return failedStart(fmt.Errorf("%w: local MySQL (%s): %v", ErrUnavailable, s.bin, lastErr), lastTail, firstLine(lastErr))
}

// moduleVersion is the version of a dependency compiled in, or "".
func moduleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return ""
}

const embeddedMySQLWarning = "MySQL is embedded go-mysql-server (memory engine, one transaction at a time): " +
	"correctness on a laptop, not capacity; every INSERT re-sorts its table, so it slows as tables grow " +
	"(see BenchmarkInsertOfflineMsg and BenchmarkInsertOfflineMsgPosition; scenario runs scale their rates for it); " +
	"every figure from this run is an embedded-backend figure"

func (r *run) embeddedMySQL(ctx context.Context) error {
	srv, err := gms.Start(DefaultDatabase, r.cfg.EmbeddedLockWait, r.log)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	r.st.add("embedded MySQL", func(context.Context) error { return srv.Close() })
	dsn := tcpDSN(srv.Addr(), DefaultDatabase)
	if err := waitFor(ctx, r.cfg.StartTimeout, srv.Done(), func(ctx context.Context) error { return pingMySQL(ctx, dsn) }); err != nil {
		return fmt.Errorf("%w: embedded MySQL: %v", ErrUnavailable, err)
	}
	r.b.MySQLDSN = dsn
	v := moduleVersion("github.com/dolthub/go-mysql-server")
	r.b.Kinds[PartMySQL] = strings.TrimSpace("embedded go-mysql-server " + v)
	r.b.Embedded = append(r.b.Embedded, PartMySQL)
	r.warn(embeddedMySQLWarning)
	return nil
}
