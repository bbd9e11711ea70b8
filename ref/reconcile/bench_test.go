package reconcile_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"imlab/ref/fanout"
	"imlab/ref/model"
)

// BenchmarkSendAck measures ACKed 1:1 sends per second under the store and
// outbox policies (send service with group commit, content committed, the
// store publish queued / the outbox row in the same transaction), 256
// concurrent senders, no consumer running.
func BenchmarkSendAck(b *testing.B) {
	for _, policy := range []string{fanout.PolicyStore, fanout.PolicyOutbox} {
		b.Run(policy, func(b *testing.B) {
			p := newPipelineB(b, policy)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			const senders = 256
			var next atomic.Int64
			var wg sync.WaitGroup
			var failed atomic.Int64
			b.ResetTimer()
			t0 := time.Now()
			for s := 1; s <= senders; s++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						req := model.SendRequest{SenderUID: uint64(s), ConvType: model.ConvSingle, ToUID: uint64(s + 1000),
							ClientMsgID: fmt.Sprintf("b-%d", i), Content: "hello"}
						if _, err := p.svc.Send(ctx, req); err != nil {
							failed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			el := time.Since(t0)
			b.StopTimer()
			if f := failed.Load(); f > 0 {
				b.Fatalf("%d sends failed", f)
			}
			b.ReportMetric(float64(b.N)/el.Seconds(), "acks/s")
		})
	}
}
