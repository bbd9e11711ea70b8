package dashboards_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"gopkg.in/yaml.v3"

	"imlab/compose"
	"imlab/internal/testenv"
	"imlab/internal/testenv/refproc"
	"imlab/ref/pushbus"
	"imlab/ref/server"
)

// startReference starts the reference server in process with every role
// its backends allow except history (api, relay, consumer, reconciler: the
// compose topology's four), the fan-out runtime on an in-process Kafka and
// the Redis push bus (as compose runs them), on a private MySQL database
// and Redis prefix, and returns its metric registry. Everything is stopped
// and removed when the test ends.
func startReference(t *testing.T) *prometheus.Registry {
	t.Helper()
	my := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	cc := compose.DefaultConfig()
	cc.MySQLDSN, cc.RedisAddr = my.DSN, rd.Addr
	cc.WithMongo = false // the history tier registers no metric of its own
	cc.KafkaPartitions = 2
	cb := refproc.Backends(t, cc)

	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Auth.Secret = "dashboards-test-secret-0123456789"
	cfg.Redis.KeyPrefix = rd.Keys.Prefix
	cfg.PushBus.Mode = pushbus.ModeRedis
	cfg.Fanout.Relay.LockName = "imlab_relay_" + my.Name // GET_LOCK names are server-wide
	cfg.ShutdownTimeout = 10 * time.Second
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	p := refproc.Start(t, cfg, server.Backends{MySQLDSN: my.DSN, RedisAddr: rd.Addr, KafkaBrokers: cb.KafkaBrokers}, server.DefaultRoles())
	for _, r := range []string{server.RoleAPI, server.RoleRelay, server.RoleConsumer, server.RoleReconciler} {
		if !p.Runs(r) {
			t.Fatalf("the reference server runs %v, not %s", p.RoleNames(), r)
		}
	}
	return p.Registry
}

// descTail is the end of prometheus.Desc.String(): const labels and
// variable labels (the help text before it may hold anything).
var (
	descName = regexp.MustCompile(`^Desc\{fqName: "([^"]*)"`)
	descTail = regexp.MustCompile(`, constLabels: \{([^}]*)\}, variableLabels: \{([^}]*)\}\}$`)
	constKey = regexp.MustCompile(`(?:^|,)([a-zA-Z_][a-zA-Z0-9_]*)=`)
)

// registryCatalog lists every metric of reg from its collectors'
// descriptors (vectors without a series yet included), with the label
// names of each, and its type: from the gathered families where a series
// exists, else from the ref/ source that declares it (the Opts type of
// the constructor); the two must agree.
func registryCatalog(t *testing.T, reg *prometheus.Registry, sourceKinds map[string]string) map[string]metricDesc {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() { // ends when Describe returns
		reg.Describe(ch)
		close(ch)
	}()
	out := map[string]metricDesc{}
	for d := range ch {
		s := d.String()
		nm := descName.FindStringSubmatch(s)
		i := strings.LastIndex(s, ", constLabels: {")
		if nm == nil || i < 0 {
			t.Fatalf("unreadable descriptor %s", s)
		}
		tail := descTail.FindStringSubmatch(s[i:])
		if tail == nil {
			t.Fatalf("unreadable descriptor labels %s", s)
		}
		name := nm[1]
		if name == "" {
			continue // an invalid descriptor carries its error, not a metric
		}
		var labels []string
		for _, m := range constKey.FindAllStringSubmatch(tail[1], -1) {
			labels = append(labels, m[1])
		}
		if tail[2] != "" {
			for _, l := range strings.Split(tail[2], ",") {
				if c, ok := strings.CutPrefix(l, "c("); ok {
					l = strings.TrimSuffix(c, ")")
				}
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		if prev, dup := out[name]; dup && !slices.Equal(prev.Labels, labels) {
			t.Fatalf("metric %s described twice with labels %v and %v", name, prev.Labels, labels)
		}
		out[name] = metricDesc{Name: name, Labels: labels}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	gathered := map[string]string{}
	for _, mf := range mfs {
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			gathered[mf.GetName()] = kindCounter
		case dto.MetricType_GAUGE:
			gathered[mf.GetName()] = kindGauge
		case dto.MetricType_HISTOGRAM:
			gathered[mf.GetName()] = kindHistogram
		case dto.MetricType_SUMMARY:
			gathered[mf.GetName()] = kindSummary
		default:
			gathered[mf.GetName()] = kindUntyped
		}
	}
	for name, m := range out {
		g, src := gathered[name], sourceKinds[name]
		switch {
		case g != "" && src != "" && g != src:
			t.Errorf("%s: the registry says %s, the source declares a %s", name, g, src)
		case g != "":
			m.Kind = g
		case src != "":
			m.Kind = src
		default:
			t.Errorf("%s: no series yet and no declaration found under ref/: its type is unknown", name)
		}
		out[name] = m
	}
	return out
}

// sourceMetricKinds reads every non-test Go file under dir and returns the
// type of each metric declared there with a literal name:
// prometheus.CounterOpts{Name: "x"} is a counter, and so on.
func sourceMetricKinds(t *testing.T, dir string) map[string]string {
	t.Helper()
	kinds := map[string]string{"CounterOpts": kindCounter, "GaugeOpts": kindGauge, "HistogramOpts": kindHistogram, "SummaryOpts": kindSummary}
	out := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			sel, ok := lit.Type.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "prometheus" || kinds[sel.Sel.Name] == "" {
				return true
			}
			for _, e := range lit.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, ok := kv.Key.(*ast.Ident)
				if !ok {
					continue
				}
				switch key.Name {
				case "Namespace", "Subsystem":
					t.Errorf("%s: metric name built from %s: extend this reader", fset.Position(lit.Pos()), key.Name)
				case "Name":
					bl, ok := kv.Value.(*ast.BasicLit)
					if !ok || bl.Kind != token.STRING {
						continue // not a literal: the registry's series must tell the type
					}
					name, err := strconv.Unquote(bl.Value)
					if err != nil {
						t.Errorf("%s: %v", fset.Position(bl.Pos()), err)
						continue
					}
					if prev := out[name]; prev != "" && prev != kinds[sel.Sel.Name] {
						t.Errorf("%s: %s declared as %s and %s", fset.Position(bl.Pos()), name, prev, kinds[sel.Sel.Name])
					}
					out[name] = kinds[sel.Sel.Name]
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return out
}

// scrapeLabels are the labels Prometheus adds to every series of the imlab
// job: job and instance, and the static target labels of
// compose/prometheus.yml (role).
func scrapeLabels(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "compose", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var pc struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &pc); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	labels := []string{"instance", "job"}
	found := false
	for _, sc := range pc.ScrapeConfigs {
		if sc.JobName != "imlab" {
			continue
		}
		found = true
		for _, st := range sc.StaticConfigs {
			for l := range st.Labels {
				if !slices.Contains(labels, l) {
					labels = append(labels, l)
				}
			}
		}
	}
	if !found {
		t.Fatal("compose/prometheus.yml has no imlab job")
	}
	slices.Sort(labels)
	return labels
}
