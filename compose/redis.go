package compose

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// redisVersion pings addr and returns its redis_version.
func redisVersion(ctx context.Context, addr string) (string, error) {
	// Dial first: go-redis logs every failed dial, and a server that is
	// still starting refuses a few.
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	conn.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		return "", err
	}
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "", nil // answered PING; INFO is optional
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v, nil
		}
	}
	return "", nil
}

func (r *run) externalRedis(ctx context.Context) error {
	addr := r.cfg.RedisAddr
	var version string
	err := waitFor(ctx, r.cfg.StartTimeout, nil, func(ctx context.Context) error {
		v, err := redisVersion(ctx, addr)
		version = v
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: external Redis at %s: %v", ErrUnavailable, addr, err)
	}
	r.b.RedisAddr = addr
	r.b.Kinds[PartRedis] = strings.TrimSpace("external redis " + version)
	return nil
}

func (r *run) localRedis(ctx context.Context) error {
	bin, err := lookBinary("redis-server")
	if err != nil {
		return fmt.Errorf("%w: local Redis: %v", ErrUnavailable, err)
	}
	dir := filepath.Join(r.b.root, "redis")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%w: local Redis: %v", ErrUnavailable, err)
	}
	logPath := filepath.Join(dir, "server.log")
	r.log.Info("compose: starting local Redis", "bin", bin, "dir", dir)
	var lastErr error
	var lastTail string
	for try := 0; try < maxPortTries; try++ {
		port, err := freePort()
		if err != nil {
			return fmt.Errorf("%w: local Redis: %v", ErrUnavailable, err)
		}
		args := []string{
			"--port", strconv.Itoa(port),
			"--bind", "127.0.0.1",
			"--save", "",
			"--appendonly", "no",
			"--dir", dir,
			"--daemonize", "no",
			"--logfile", "",
		}
		p, err := startProc("redis", bin, args, logPath)
		if err != nil {
			return fmt.Errorf("%w: local Redis: %v", ErrUnavailable, err)
		}
		grace := r.cfg.StopTimeout
		r.st.add("local Redis", func(ctx context.Context) error { return p.stop(ctx, grace) })
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		var version string
		err = waitFor(ctx, r.cfg.StartTimeout, p.exited, func(ctx context.Context) error {
			v, err := redisVersion(ctx, addr)
			version = v
			return err
		})
		if err == nil {
			r.b.RedisAddr = addr
			r.b.Kinds[PartRedis] = strings.TrimSpace("local redis-server " + version)
			r.b.PIDs[PartRedis] = p.cmd.Process.Pid
			return nil
		}
		tail := p.logTail()
		lastErr, lastTail = fmt.Errorf("%v\n%s", err, lastLines(tail, 10)), tail
		if !strings.Contains(tail, "already in use") {
			// Not a port race: stop this attempt now (auto mode may fall
			// back to embedded) and give up.
			if serr := p.stop(ctx, grace); serr != nil {
				lastErr = fmt.Errorf("%v; %v", lastErr, serr)
			}
			break
		}
		if serr := p.stop(ctx, grace); serr != nil {
			return fmt.Errorf("%w: local Redis: %v", ErrUnavailable, serr)
		}
	}
	return failedStart(fmt.Errorf("%w: local Redis (%s): %v", ErrUnavailable, bin, lastErr), lastTail, firstLine(lastErr))
}

const embeddedRedisWarning = "Redis is embedded miniredis: single-threaded stand-in, several times slower " +
	"than redis-server; figures from this run are embedded-backend figures"

func (r *run) embeddedRedis(ctx context.Context) error {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return fmt.Errorf("%w: embedded Redis: %v", ErrUnavailable, err)
	}
	r.st.add("embedded Redis", func(context.Context) error { m.Close(); return nil })
	addr := m.Addr()
	if err := waitFor(ctx, r.cfg.StartTimeout, nil, func(ctx context.Context) error {
		_, err := redisVersion(ctx, addr)
		return err
	}); err != nil {
		return fmt.Errorf("%w: embedded Redis: %v", ErrUnavailable, err)
	}
	r.b.RedisAddr = addr
	r.b.Kinds[PartRedis] = strings.TrimSpace("embedded miniredis " + moduleVersion("github.com/alicebob/miniredis/v2"))
	r.b.Embedded = append(r.b.Embedded, PartRedis)
	r.warn(embeddedRedisWarning)
	return nil
}
