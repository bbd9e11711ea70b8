package expect

import (
	"path/filepath"
	"testing"

	"imlab/loadgen/clientmix"
	"imlab/loadgen/schedule"
	"imlab/scenario"
)

// TestLibraryClaims: the default glob exercises what it claims: every
// policy under at least one fault; strict under each MySQL fault and under
// a SIGKILL of an exec api process; an inbox past the hot window while
// devices are away; client retries with the same client_msg_id; every
// file that expects a valid run states the reorders it allows, and every
// one not about repair runs reconciliation late and allows no repair,
// while queue-loss-store asserts that it repaired; and every option that
// changes where a message goes runs under a fault (optionTable, the table
// README lists).
func TestLibraryClaims(t *testing.T) {
	paths, err := filepath.Glob("../scenarios/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	faulted := map[string]bool{}
	underFault := map[string][]string{}
	strictMySQL := map[string]bool{}
	apiKill, hotWindow, retries := false, false, false
	for _, p := range paths {
		f, err := scenario.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if f.Kind == scenario.KindCapacity {
			continue // a search: no load of its own (TestRunCapacitySmoke)
		}
		pol := f.Server.PolicyOr()
		if len(f.Faults) > 0 {
			faulted[pol] = true
			for _, o := range optionsOf(f) {
				underFault[o] = append(underFault[o], f.Name)
			}
		}
		for _, x := range f.Faults {
			if pol == "strict" && x.Target == scenario.TargetMySQL {
				strictMySQL[x.Kind] = true
			}
			if pol == "strict" && x.Kind == scenario.KindKill {
				for _, pr := range f.Processes() {
					if pr.Name == x.Target && pr.RunsAPI() && pr.Exec {
						apiKill = true
					}
				}
			}
		}
		l := f.Load
		perUID := MeanRate(mustShape(t, l.Rate), l.Config.Duration) * l.Config.Duration.Seconds() * 2 / float64(l.Config.Pop.Users)
		if l.Config.Pop.ComeBackEvery == 0 && perUID > 200 && f.Server.UnreadThreshold == 0 {
			hotWindow = true
		}
		if l.Config.Retries > 0 && l.Config.Timeout != scenario.LoadDefaults().Timeout && len(f.Faults) > 0 {
			retries = true
		}
		e := f.Expect
		if e.VerdictOr() != scenario.VerdictValid {
			continue
		}
		if e.MaxReordered == nil {
			t.Errorf("%s: a valid scenario must state max_reordered", p)
		}
		repair := f.Server.ReconcileGrace != 0
		if repair && e.MinRepairs == nil && f.Name == "queue-loss-store" {
			t.Errorf("%s: repair is its point: it must assert min_repairs", p)
		}
		if !repair && (e.MaxRepairs == nil || *e.MaxRepairs != 0) {
			t.Errorf("%s: reconciliation runs late here, so it must allow no repair (max_repairs: 0)", p)
		}
	}
	for _, pol := range []string{"strict", "store", "outbox", "queue"} {
		if !faulted[pol] {
			t.Errorf("no shipped scenario puts policy %s under a fault", pol)
		}
	}
	for _, k := range []string{scenario.KindLatency, scenario.KindResetPeer, scenario.KindDown} {
		if !strictMySQL[k] {
			t.Errorf("no strict scenario with MySQL fault %s", k)
		}
	}
	if !apiKill || !hotWindow || !retries {
		t.Errorf("api kill %v, hot window %v, retries %v: want all", apiKill, hotWindow, retries)
	}
	for _, o := range optionTable {
		if len(underFault[o]) == 0 {
			t.Errorf("no shipped scenario runs %s under a fault", o)
		} else {
			t.Logf("%-28s %v", o, underFault[o])
		}
	}
}

// optionTable is every option of the reference server that changes where
// a message goes, each value as optionsOf names it: README's table "Every
// option under a fault" lists the scenarios that run each.
var optionTable = []string{
	"policy strict", "policy store", "policy outbox", "policy queue",
	"allocator redis", "allocator segment",
	"dedup uk_uid_msg", "dedup mq_dedup", "dedup redis",
	"push bus local", "push bus redis",
	"history on", "history off",
	"truncation",
	"dead letters",
}

// optionsOf names the options a file runs with. The consumers' dedup
// strategy counts only where the inbox tier writes (any policy but strict,
// whose consumers see only its history feed); the push bus is redis when
// the roles run in more than one process; truncation is a lowered unread
// threshold; dead letters a file that asserts records reached the
// dead-letter topic.
func optionsOf(f *scenario.File) []string {
	s := f.Server
	out := []string{"policy " + s.PolicyOr(), "allocator " + scenario.Or(s.Allocator, scenario.DefaultAllocator)}
	if s.PolicyOr() != "strict" {
		out = append(out, "dedup "+scenario.Or(s.Dedup, scenario.DefaultDedup))
	}
	if len(f.Processes()) > 1 {
		out = append(out, "push bus redis")
	} else {
		out = append(out, "push bus local")
	}
	if s.History {
		out = append(out, "history on")
	} else {
		out = append(out, "history off")
	}
	if s.UnreadThreshold > 0 {
		out = append(out, "truncation")
	}
	if d := f.Expect.DeadLetters; d != nil && d.Min != nil && *d.Min > 0 {
		out = append(out, "dead letters")
	}
	return out
}

func mustShape(t *testing.T, rate string) schedule.Shape {
	t.Helper()
	sh, err := schedule.Parse(rate)
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

// TestLibraryClaimsMix: the default glob runs the whole pipeline the
// client mix exercises under faults: history pages, revokes and deletes
// while MongoDB is slow and down; conversation pulls across a Redis wipe;
// retention's early deletion (lab ages) with devices away and coming back;
// the default mix under a burst. The defects each of these files catches
// are README's table "The client mix's defects".
func TestLibraryClaimsMix(t *testing.T) {
	paths, err := filepath.Glob("../scenarios/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string][]string{}
	for _, p := range paths {
		f, err := scenario.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m := &f.Load.Config.Mix
		if f.Kind == scenario.KindCapacity || !m.On() {
			continue
		}
		entering := m.EnterOnOnline > 0 || m.OpenOnPush > 0
		faults := map[string]bool{}
		for _, x := range f.Faults {
			faults[x.Kind+" "+x.Target] = true
		}
		if f.Server.History && entering && m.HistoryPage > 0 && m.Revoke > 0 && m.Delete > 0 &&
			faults[scenario.KindLatency+" "+scenario.TargetMongo] && faults[scenario.KindDown+" "+scenario.TargetMongo] {
			claims["history under mongo latency and down"] = append(claims["history under mongo latency and down"], f.Name)
		}
		if entering && faults[scenario.KindRedisWipe+" "] {
			claims["conversation pulls across a redis wipe"] = append(claims["conversation pulls across a redis wipe"], f.Name)
		}
		l := f.Load
		p := l.Config.Pop
		if r := f.Server.LabRetention; r != nil && r.PulledMinAge.D() < l.Config.Duration && p.ComeBackEvery > 0 && p.DevicesPerUser > 1 && p.Online < 1 {
			claims["early deletion with devices away"] = append(claims["early deletion with devices away"], f.Name)
		}
		if _, ok := mustShape(t, l.Rate).(schedule.Burst); ok && *m == clientmix.Default() && f.Server.History {
			claims["the default mix under a burst"] = append(claims["the default mix under a burst"], f.Name)
		}
	}
	for _, c := range []string{"history under mongo latency and down", "conversation pulls across a redis wipe",
		"early deletion with devices away", "the default mix under a burst"} {
		if len(claims[c]) == 0 {
			t.Errorf("no shipped scenario runs %s", c)
		} else {
			t.Logf("%-40s %v", c, claims[c])
		}
	}
}
