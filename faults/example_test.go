package faults_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"imlab/chaos"
	"imlab/faults"
	"imlab/scenario/yamltime"
)

// A chaos fault from a file's entry: checked against the file, built
// against the run's Redis, injected, and its count read in its unit.
func Example() {
	mr, err := miniredis.Run()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mr.Close()
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rc.Close()
	ctx := context.Background()
	for _, k := range []string{"lab1:inbox:1", "lab1:inbox:2", "other:inbox:1"} {
		if err := rc.Set(ctx, k, "x", 0).Err(); err != nil {
			fmt.Println(err)
			return
		}
	}

	x := faults.Spec{At: yamltime.Duration(2 * time.Second), Kind: "redis_wipe"}
	if err := faults.Validate("faults[0]", x, faults.Context{LoadDuration: 10 * time.Second}); err != nil {
		fmt.Println(err)
		return
	}
	f, err := faults.Build(x, faults.Env{Redis: func() *redis.Client { return rc }, RedisPrefix: "lab1:"})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := f.Inject(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.Name(), f.(chaos.Impact).Affected(), faults.Unit(x.Kind))
	fmt.Println("other prefix kept:", rc.Exists(ctx, "other:inbox:1").Val() == 1)

	// An entry with a parameter its kind does not take is refused,
	// naming the key.
	bad := faults.Spec{Kind: "redis_wipe", RateKBps: 10}
	fmt.Println(faults.Validate("faults[1]", bad, faults.Context{LoadDuration: 10 * time.Second}))
	// Output:
	// redis_wipe 2 keys deleted
	// other prefix kept: true
	// faults[1].rate_kbps: not a parameter of kind redis_wipe
}
