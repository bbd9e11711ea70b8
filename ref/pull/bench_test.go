package pull_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"imlab/internal/testenv"
	"imlab/ref/hotcache"
	"imlab/ref/model"
	"imlab/ref/pull"
)

const (
	benchUsers   = 200
	benchPerUser = 400
)

// seedBench bulk-loads benchUsers inboxes of benchPerUser messages each
// (seqs 1..benchPerUser, 60-byte bodies) with their fences, and returns the
// database.
func seedBench(b *testing.B, m *testenv.MySQL) {
	b.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	body := strings.Repeat("x", 60)
	var msgID uint64 = 1 << 40
	for uid := uint64(1); uid <= benchUsers; uid++ {
		var cb, ob strings.Builder
		cb.WriteString(`INSERT INTO msg_content (msg_id, conv_id, conv_type, conv_seq, sender_uid, client_msg_id, content, created_at) VALUES `)
		ob.WriteString(`INSERT INTO offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at) VALUES `)
		var ca, oa []any
		for seq := uint64(1); seq <= benchPerUser; seq++ {
			msgID++
			if seq > 1 {
				cb.WriteByte(',')
				ob.WriteByte(',')
			}
			cb.WriteString(`(?,?,?,?,?,?,?,?)`)
			ob.WriteString(`(?,?,?,?,?,?,?)`)
			conv := 1000 + seq%5
			ca = append(ca, msgID, conv, model.ConvGroup, msgID, 7, fmt.Sprint("c", msgID), body, now)
			oa = append(oa, uid, seq, msgID, conv, model.ConvGroup, 7, now)
		}
		if _, err := m.DB.ExecContext(ctx, cb.String(), ca...); err != nil {
			b.Fatal(err)
		}
		if _, err := m.DB.ExecContext(ctx, ob.String(), oa...); err != nil {
			b.Fatal(err)
		}
		if _, err := m.DB.ExecContext(ctx, `INSERT INTO seq_fence (uid, max_seq, updated_at) VALUES (?, ?, ?)`, uid, benchPerUser, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPull compares a pull page answered from the hot cache with the
// same page answered from MySQL, and with the seed's raw pull statement on
// the same data. Every Pull includes the rate-limit check and the
// sync_served upsert (the served mark is part of a pull's cost).
//
//	page100: cursor 250 of 400, limit 100 (has_more; the cache needs no fence read)
//	tail50:  cursor 350 of 400, limit 100 (reaches the top; the cache reads seq_fence)
func BenchmarkPull(b *testing.B) {
	m := testenv.NewMySQL(b)
	r := testenv.NewRedis(b)
	seedBench(b, m)
	ctx := context.Background()
	pcfg := pull.DefaultConfig()
	pcfg.RateLimit, pcfg.RateBurst = 1e6, 1e6
	cache, err := hotcache.New(r.Client, r.Keys, hotcache.DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	withCache, err := pull.New(m.DB, cache, pcfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	noCache, err := pull.New(m.DB, nil, pcfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	// Warm: a tail pull per uid rebuilds its ZSet (newest 200, floor 200).
	for uid := uint64(1); uid <= benchUsers; uid++ {
		if _, err := withCache.Pull(ctx, uid, "warm", ptr(benchPerUser-1), 10, true); err != nil {
			b.Fatal(err)
		}
	}

	run := func(b *testing.B, svc *pull.Service, cursor uint64, wantSource string, wantLen int) {
		b.SetParallelism(8)
		start := time.Now()
		b.ResetTimer()
		pullParallel(b, svc, "bench", ptr(cursor), wantSource, wantLen)
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
	}
	b.Run("cache/page100", func(b *testing.B) { run(b, withCache, 250, pull.SourceCache, 100) })
	b.Run("mysql/page100", func(b *testing.B) { run(b, noCache, 250, pull.SourceMySQL, 100) })
	b.Run("cache/tail50", func(b *testing.B) { run(b, withCache, 350, pull.SourceCache, 50) })
	b.Run("mysql/tail50", func(b *testing.B) { run(b, noCache, 350, pull.SourceMySQL, 50) })

	raw := func(b *testing.B, query string, cursor uint64, wantLen int) {
		b.SetParallelism(8)
		start := time.Now()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
			for pb.Next() {
				uid := 1 + uint64(rng.IntN(benchUsers))
				rows, err := m.DB.QueryContext(ctx, query, uid, cursor)
				if err != nil {
					b.Error(err)
					return
				}
				n := 0
				for rows.Next() {
					var seq, msgID, convID, sender uint64
					var ct uint8
					var at time.Time
					if err := rows.Scan(&seq, &msgID, &convID, &ct, &sender, &at); err != nil {
						b.Error(err)
						rows.Close()
						return
					}
					n++
				}
				rows.Close()
				if n != wantLen {
					b.Errorf("%d rows, want %d", n, wantLen)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
	}
	// The seed's statement, index only (no body), as a ceiling for MySQL.
	b.Run("raw_sql/limit500", func(b *testing.B) {
		raw(b, `SELECT seq, msg_id, conv_id, conv_type, sender_uid, created_at FROM offline_msg
			WHERE uid = ? AND seq > ? ORDER BY seq LIMIT 500`, 0, benchPerUser)
	})
	// The read alone, without rate limit and served mark: the hot layer's
	// page (ZSet range + bodies) against the same page joined in MySQL.
	b.Run("read_only/hotcache_range100", func(b *testing.B) {
		b.SetParallelism(8)
		start := time.Now()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
			for pb.Next() {
				uid := 1 + uint64(rng.IntN(benchUsers))
				page, ok, err := cache.Range(ctx, uid, 250, 100)
				if err != nil || !ok || len(page) != 100 {
					b.Errorf("range: %d %v %v", len(page), ok, err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
	})
	b.Run("read_only/mysql_join100", func(b *testing.B) {
		b.SetParallelism(8)
		start := time.Now()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4))
			for pb.Next() {
				uid := 1 + uint64(rng.IntN(benchUsers))
				rows, err := m.DB.QueryContext(ctx, `SELECT o.seq, o.msg_id, o.conv_id, o.conv_type, o.sender_uid,
					COALESCE(c.created_at, o.created_at), c.conv_seq, c.content
					FROM offline_msg o LEFT JOIN msg_content c ON c.msg_id = o.msg_id
					WHERE o.uid = ? AND o.seq > ? ORDER BY o.seq LIMIT 100`, uid, 250)
				if err != nil {
					b.Error(err)
					return
				}
				n := 0
				for rows.Next() {
					var seq, msgID, convID, sender, convSeq uint64
					var ct uint8
					var at time.Time
					var content []byte
					if err := rows.Scan(&seq, &msgID, &convID, &ct, &sender, &at, &convSeq, &content); err != nil {
						b.Error(err)
						rows.Close()
						return
					}
					n++
				}
				rows.Close()
				if n != 100 {
					b.Errorf("%d rows", n)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
	})
	b.Run("raw_sql/limit100", func(b *testing.B) {
		raw(b, `SELECT seq, msg_id, conv_id, conv_type, sender_uid, created_at FROM offline_msg
			WHERE uid = ? AND seq > ? ORDER BY seq LIMIT 100`, 250, 100)
	})
}

// pullParallel pulls pages of 100 for random uids of the seed on b's
// parallel goroutines, each answer checked for its source and length.
func pullParallel(b *testing.B, svc *pull.Service, did string, cursor *uint64, wantSource string, wantLen int) {
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
		for pb.Next() {
			uid := 1 + uint64(rng.IntN(benchUsers))
			res, err := svc.Pull(ctx, uid, did, cursor, 100, false)
			if err != nil {
				b.Error(err)
				return
			}
			if res.Source != wantSource || len(res.Msgs) != wantLen {
				b.Errorf("source %s len %d, want %s %d", res.Source, len(res.Msgs), wantSource, wantLen)
				return
			}
		}
	})
}
