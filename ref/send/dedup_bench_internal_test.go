package send

import (
	"strconv"
	"testing"
	"time"

	"imlab/ref/model"
)

// BenchmarkDedupClaimFinish: one send's claim and finish (a fresh key, its
// answer remembered) on a full cache of the default size.
func BenchmarkDedupClaimFinish(b *testing.B) {
	d := newDedup(10*time.Minute, DefaultConfig().DedupCacheSize)
	now := time.Now()
	keys := make([]dupKey, 1<<18)
	for i := range keys {
		keys[i] = dupKey{uint64(i%1024 + 1), "b-" + strconv.Itoa(i)}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i&(len(keys)-1)]
		i++
		_, _, f, _ := d.claim(k, now)
		d.finish(k, f, outcome{res: model.SendResult{MsgID: uint64(i)}})
	}
}
