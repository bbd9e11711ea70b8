package loadgen

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"imlab/ledger"
	"imlab/loadgen/device"
	"imlab/loadgen/summary"
	"imlab/targets"
)

func (r *runner) population(ctx context.Context) error {
	p := r.cfg.Pop
	rng := mrand.New(mrand.NewPCG(r.cfg.Seed, 0x1ab))
	for i := range p.Users {
		r.users = append(r.users, p.UIDBase+uint64(i))
	}
	n := p.Users * p.DevicesPerUser
	kinds := make([]ledger.DeviceKind, n)
	nOn := int(p.Online*float64(n) + 0.5)
	nCr := int(p.Crashy*float64(n) + 0.5)
	for i := range kinds {
		switch {
		case i < nOn:
			kinds[i] = ledger.Online
		case i < nOn+nCr:
			kinds[i] = ledger.Crashy
		default:
			kinds[i] = ledger.Offline
		}
	}
	rng.Shuffle(n, func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	for i := range n {
		uid := r.users[i/p.DevicesPerUser]
		did := "d" + strconv.Itoa(i%p.DevicesPerUser)
		sess, err := r.drv.Session(ctx, uid, did)
		if err != nil {
			return err
		}
		d := r.fleet.New(uint32(i), uid, did, kinds[i], sess, r.cfg.Seed, time.Duration(rng.Int64N(int64(max(p.ComeBackEvery, 1)))))
		r.devs = append(r.devs, d)
		r.byUID[uid] = append(r.byUID[uid], d)
	}
	var total float64
	for _, sw := range p.GroupSizes {
		total += sw.Weight
	}
	for g := range p.Groups {
		x := rng.Float64() * total
		size := p.GroupSizes[len(p.GroupSizes)-1].Size
		for _, sw := range p.GroupSizes {
			if x < sw.Weight {
				size = sw.Size
				break
			}
			x -= sw.Weight
		}
		size = min(size, p.Users)
		perm := rng.Perm(p.Users)[:size]
		members := make([]uint64, size)
		for i, ix := range perm {
			members[i] = r.users[ix]
		}
		sort.Slice(members, func(i, j int) bool { return members[i] < members[j] })
		r.groups = append(r.groups, group{id: p.GroupBase + uint64(g), members: members})
	}
	r.keepSegment()
	return nil
}

// createGroups provisions the population on the target. Every segment
// creates every group (creating one again with the same members is a
// no-op): a segment's users send to groups another segment owns, and
// segments start apart, so a group left to its owner could be sent to
// before it exists (a 404, counted failed).
func (r *runner) createGroups(ctx context.Context) error {
	p := targets.Population{Prefix: r.runID, Users: r.users}
	for _, g := range r.groups {
		p.Groups = append(p.Groups, targets.Group{ID: g.id, Members: g.members, CreatorDID: r.byUID[g.members[0]][0].DID})
	}
	if err := r.drv.Provision(ctx, p); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	return nil
}

func (r *runner) writePopulation(sum *summary.Summary) {
	ps := summary.PopulationSummary{Users: len(r.users), Devices: map[string]int{}, Groups: len(r.groups),
		UIDs: [2]uint64{r.users[0], r.users[len(r.users)-1]}}
	for _, d := range r.devs {
		r.led.Shard(int(d.Idx)).Device(ledger.Device{Dev: d.Idx, UID: d.UID, Kind: d.Kind, DID: d.DID})
		ps.Devices[d.Kind.String()]++
	}
	for i, g := range r.groups {
		if err := r.led.Shard(i).Group(ledger.Group{GroupID: g.id, Members: g.members}); err != nil {
			r.fail("%v", err)
		}
	}
	sum.Population = ps
}

// splitmix64 gives each tick its own reproducible choices.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// pick chooses sender device, conversation type and target for a tick.
func (r *runner) pick(tick uint64) (sender *device.Device, convType uint8, target uint64) {
	h := splitmix64(r.cfg.Seed ^ tick*0x100000001b3)
	p := r.cfg.Pop
	if len(r.groups) > 0 && float64(h>>11)/(1<<53) < p.GroupShare {
		h = splitmix64(h)
		g := r.groups[h%uint64(len(r.groups))]
		h = splitmix64(h)
		uid := g.members[h%uint64(len(g.members))]
		ds := r.byUID[uid]
		return ds[(h>>32)%uint64(len(ds))], 2, g.id
	}
	h = splitmix64(h)
	from := h % uint64(len(r.users))
	h = splitmix64(h)
	to := h % uint64(len(r.users)-1)
	if to >= from {
		to++
	}
	ds := r.byUID[r.users[from]]
	return ds[(h>>32)%uint64(len(ds))], 1, r.users[to]
}

// content carries the run, the tick and the intended time so that a
// receiver can tell the send and the end-to-end latency.
func (r *runner) content(tick uint64, intended time.Duration) string {
	var b strings.Builder
	b.Grow(max(r.cfg.ContentSize, 48))
	b.WriteString("imlab:")
	b.WriteString(r.runID)
	b.WriteByte(':')
	b.WriteString(strconv.FormatUint(tick, 10))
	b.WriteByte(':')
	b.WriteString(strconv.FormatInt(int64(intended), 10))
	b.WriteByte(':')
	for b.Len() < r.cfg.ContentSize {
		b.WriteByte('x')
	}
	return b.String()
}

// parseContent returns the tick and intended offset of this run's content.
func (r *runner) parseContent(s string) (tick uint64, intended time.Duration, ok bool) {
	rest, found := strings.CutPrefix(s, "imlab:")
	if !found {
		return 0, 0, false
	}
	id, rest, _ := strings.Cut(rest, ":")
	if id != r.runID {
		return 0, 0, false
	}
	ts, rest, _ := strings.Cut(rest, ":")
	is, _, _ := strings.Cut(rest, ":")
	t, err1 := strconv.ParseUint(ts, 10, 64)
	in, err2 := strconv.ParseInt(is, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return t, time.Duration(in), true
}
