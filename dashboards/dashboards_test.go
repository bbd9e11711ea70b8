package dashboards_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The dashboard model, as far as the tests read it.
type dashboard struct {
	file          string
	ID            json.RawMessage `json:"id"`
	UID           string          `json:"uid"`
	Title         string          `json:"title"`
	Editable      *bool           `json:"editable"`
	SchemaVersion int             `json:"schemaVersion"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	Datasource  *datasourceRef `json:"datasource"`
	GridPos     struct {
		X int `json:"x"`
		Y int `json:"y"`
		W int `json:"w"`
		H int `json:"h"`
	} `json:"gridPos"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Options struct {
		Legend *struct {
			ShowLegend  bool   `json:"showLegend"`
			DisplayMode string `json:"displayMode"`
		} `json:"legend"`
	} `json:"options"`
	Targets []target `json:"targets"`
	Panels  []panel  `json:"panels"` // a collapsed row's panels
}

type target struct {
	RefID        string         `json:"refId"`
	Expr         string         `json:"expr"`
	LegendFormat string         `json:"legendFormat"`
	Datasource   *datasourceRef `json:"datasource"`
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Datasource *datasourceRef  `json:"datasource"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
}

// query is a query variable's PromQL: a string, or an object with a query
// field (Grafana 10+ editor form).
func (v variable) query() (string, error) {
	var s string
	if err := json.Unmarshal(v.Query, &s); err == nil {
		return s, nil
	}
	var o struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(v.Query, &o); err != nil {
		return "", fmt.Errorf("variable %s: query is neither a string nor {query}: %v", v.Name, err)
	}
	return o.Query, nil
}

// Units a panel may show, and panel types that draw queries.
var (
	allowedUnits  = []string{"s", "ops", "short", "percent", "percentunit"}
	queryPanels   = []string{"timeseries", "stat", "gauge", "bargauge", "table"}
	uidRE         = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,40}$`)
	templateVarRE = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)
	legendLabelRE = regexp.MustCompile(`\{\{\s*([^{}\s]*)\s*\}\}`)
	labelValuesRE = regexp.MustCompile(`^\s*label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)
	imlabNameRE   = regexp.MustCompile(`imlab_[a-z0-9_]+`)
)

// loadDashboards parses every *.json of the folder (at least one).
func loadDashboards(t *testing.T) []dashboard {
	t.Helper()
	files, err := filepath.Glob("*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no dashboard JSON in dashboards/")
	}
	var out []dashboard
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		dec := json.NewDecoder(bytes.NewReader(b))
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if dec.More() {
			t.Fatalf("%s: data after the dashboard object", f)
		}
		d.file = f
		out = append(out, d)
	}
	return out
}

// allPanels flattens rows (a collapsed row holds its panels).
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// provisionedDatasource is the datasource Grafana is provisioned with.
func provisionedDatasource(t *testing.T) datasourceRef {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "compose", "grafana", "provisioning", "datasources", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var prov struct {
		Datasources []struct {
			Name string `yaml:"name"`
			UID  string `yaml:"uid"`
			Type string `yaml:"type"`
		} `yaml:"datasources"`
	}
	if err := yaml.Unmarshal(b, &prov); err != nil {
		t.Fatal(err)
	}
	if len(prov.Datasources) != 1 || prov.Datasources[0].UID == "" || prov.Datasources[0].Type != "prometheus" {
		t.Fatalf("want one provisioned prometheus datasource with a uid, have %+v", prov.Datasources)
	}
	return datasourceRef{Type: "prometheus", UID: prov.Datasources[0].UID}
}

// TestDashboardModel checks each dashboard's structure: unique non-empty
// uid and title, editable, a schema Grafana 11 reads, the provisioned
// datasource everywhere, panels with a title, description, unit, legend
// and a place of their own on the grid, and template variables that are
// defined before use and used once defined.
func TestDashboardModel(t *testing.T) {
	t.Parallel()
	ds := provisionedDatasource(t)
	uids, titles := map[string]string{}, map[string]string{}
	for _, d := range loadDashboards(t) {
		t.Run(d.file, func(t *testing.T) {
			errorf := func(format string, a ...any) { t.Errorf(d.file+": "+format, a...) }
			switch {
			case !uidRE.MatchString(d.UID):
				errorf("uid %q: want 1-40 of [a-zA-Z0-9_-]", d.UID)
			case uids[d.UID] != "":
				errorf("uid %q also used by %s", d.UID, uids[d.UID])
			}
			uids[d.UID] = d.file
			switch {
			case strings.TrimSpace(d.Title) == "":
				errorf("empty title")
			case titles[d.Title] != "":
				errorf("title %q also used by %s", d.Title, titles[d.Title])
			}
			titles[d.Title] = d.file
			if id := strings.TrimSpace(string(d.ID)); id != "" && id != "null" {
				errorf("id %s: a provisioned dashboard leaves id null (the uid identifies it)", id)
			}
			if d.Editable == nil || !*d.Editable {
				errorf("editable must be true")
			}
			if d.SchemaVersion < 36 || d.SchemaVersion > 41 {
				errorf("schemaVersion %d: want 36..41 (Grafana 11)", d.SchemaVersion)
			}

			okDS := func(r *datasourceRef) bool {
				if r == nil || r.Type != ds.Type {
					return false
				}
				if r.UID == ds.UID {
					return true
				}
				for _, v := range d.Templating.List {
					if v.Type == "datasource" && (r.UID == "${"+v.Name+"}" || r.UID == "$"+v.Name) {
						return true
					}
				}
				return false
			}
			defined := map[string]bool{}
			used := map[string]bool{}
			for _, v := range d.Templating.List {
				if v.Name == "" || defined[v.Name] {
					errorf("template variable %q is unnamed or defined twice", v.Name)
				}
				if v.Type == "query" {
					if !okDS(v.Datasource) {
						errorf("variable %s: datasource %+v, want %+v", v.Name, v.Datasource, ds)
					}
					q, err := v.query()
					if err != nil {
						errorf("%v", err)
					}
					for _, m := range templateVarRE.FindAllStringSubmatch(q, -1) {
						if !defined[m[1]] && !strings.HasPrefix(m[1], "__") {
							errorf("variable %s uses $%s before it is defined", v.Name, m[1])
						}
						used[m[1]] = true
					}
				}
				defined[v.Name] = true
			}

			ids := map[int]bool{}
			cells := map[[2]int]string{}
			for _, p := range allPanels(d.Panels) {
				where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
				if p.ID <= 0 || ids[p.ID] {
					errorf("%s: id missing or repeated", where)
				}
				ids[p.ID] = true
				if strings.TrimSpace(p.Title) == "" {
					errorf("%s: no title", where)
				}
				g := p.GridPos
				if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
					errorf("%s: gridPos %+v outside the 24-column grid", where, g)
				}
				overlap := ""
				for x := g.X; x < g.X+g.W; x++ {
					for y := g.Y; y < g.Y+g.H; y++ {
						if other, taken := cells[[2]int{x, y}]; taken && overlap == "" {
							overlap = fmt.Sprintf("%s overlaps %s at (%d,%d)", where, other, x, y)
						}
						cells[[2]int{x, y}] = where
					}
				}
				if overlap != "" {
					errorf("%s", overlap)
				}
				if p.Type == "row" {
					if len(p.Targets) > 0 {
						errorf("%s: a row with queries", where)
					}
					continue
				}
				if !slices.Contains(queryPanels, p.Type) {
					errorf("%s: type %q, want one of %v", where, p.Type, queryPanels)
				}
				if strings.TrimSpace(p.Description) == "" {
					errorf("%s: no description (say what the panel shows and where the series come from)", where)
				}
				if !okDS(p.Datasource) {
					errorf("%s: datasource %+v, want %+v", where, p.Datasource, ds)
				}
				if !slices.Contains(allowedUnits, p.FieldConfig.Defaults.Unit) {
					errorf("%s: unit %q, want one of %v", where, p.FieldConfig.Defaults.Unit, allowedUnits)
				}
				if p.Type == "timeseries" {
					if l := p.Options.Legend; l == nil || !l.ShowLegend || (l.DisplayMode != "list" && l.DisplayMode != "table") {
						errorf("%s: the legend must be shown (list or table)", where)
					}
				}
				if len(p.Targets) == 0 {
					errorf("%s: no queries", where)
				}
				refs := map[string]bool{}
				for _, tg := range p.Targets {
					if tg.RefID == "" || refs[tg.RefID] {
						errorf("%s: refId %q missing or repeated", where, tg.RefID)
					}
					refs[tg.RefID] = true
					if strings.TrimSpace(tg.Expr) == "" {
						errorf("%s/%s: empty expr", where, tg.RefID)
					}
					if tg.Datasource != nil && !okDS(tg.Datasource) {
						errorf("%s/%s: datasource %+v, want %+v", where, tg.RefID, tg.Datasource, ds)
					}
					if strings.TrimSpace(tg.LegendFormat) == "" {
						errorf("%s/%s: no legendFormat", where, tg.RefID)
					}
					for _, m := range templateVarRE.FindAllStringSubmatch(tg.Expr, -1) {
						if !defined[m[1]] && !strings.HasPrefix(m[1], "__") {
							errorf("%s/%s: $%s is not a template variable of this dashboard", where, tg.RefID, m[1])
						}
						used[m[1]] = true
					}
				}
			}
			for name := range defined {
				if !used[name] {
					errorf("template variable %s is defined but no query uses it", name)
				}
			}
		})
	}
}

// TestDashboardQueries starts the reference server and checks every query
// of every dashboard against its registry: each metric exists, each label
// in a matcher, by/without, on/ignoring or legend exists on the series it
// is applied to, counters go through rate()/increase(), histogram buckets
// through histogram_quantile, gauges are not rated, and every selector of
// a dashboard applies the same template-variable filters. A subtest feeds
// known-bad queries to the same checks, so a checker that lets everything
// through fails too.
func TestDashboardQueries(t *testing.T) {
	t.Parallel()
	dashboards := loadDashboards(t) // before the server: a syntax error needs no backends
	sourceKinds := sourceMetricKinds(t, filepath.Join("..", "ref"))
	cat := &catalog{TargetLabels: scrapeLabels(t)}
	cat.Metrics = registryCatalog(t, startReference(t), sourceKinds)
	if t.Failed() {
		t.FailNow()
	}
	var imlab int
	for name := range cat.Metrics {
		if strings.HasPrefix(name, "imlab_") {
			imlab++
		}
	}
	if imlab < 20 {
		t.Fatalf("the reference registry describes only %d imlab_ metrics: the server did not start its roles", imlab)
	}

	referenced := map[string]bool{}
	for _, d := range dashboards {
		t.Run(d.file, func(t *testing.T) {
			type filter struct{ label, value string }
			type use struct {
				where string
				sel   selectorUse
			}
			check := func(where, expr, legend string, selectorOnly bool) exprResult {
				res, problems := checkQuery(cat, expr, legend, selectorOnly)
				for _, p := range problems {
					t.Errorf("%s: %s: %s\n\texpr: %s", d.file, where, p, expr)
				}
				for _, m := range res.Metrics {
					referenced[m] = true
				}
				return res
			}
			for _, v := range d.Templating.List {
				if v.Type != "query" {
					continue
				}
				q, err := v.query()
				if err != nil {
					t.Error(err)
					continue
				}
				m := labelValuesRE.FindStringSubmatch(q)
				if m == nil {
					t.Errorf("%s: variable %s: query %q, want label_values(selector, label)", d.file, v.Name, q)
					continue
				}
				res := check("variable "+v.Name, m[1], "", true)
				if !slices.Contains(res.Labels, m[2]) {
					t.Errorf("%s: variable %s: label %s is not on %s (it has %v)", d.file, v.Name, m[2], m[1], res.Labels)
				}
				if v.Definition != "" && v.Definition != q {
					t.Errorf("%s: variable %s: definition %q differs from query %q", d.file, v.Name, v.Definition, q)
				}
			}
			panelFilters := map[filter]bool{}
			var panelUses []use
			for _, p := range allPanels(d.Panels) {
				for _, tg := range p.Targets {
					where := fmt.Sprintf("panel %d %q/%s", p.ID, p.Title, tg.RefID)
					for _, s := range check(where, tg.Expr, tg.LegendFormat, false).Selectors {
						panelUses = append(panelUses, use{where, s})
					}
				}
			}
			for _, u := range panelUses {
				for _, m := range u.sel.Matchers {
					if strings.Contains(m.Value, "$") {
						panelFilters[filter{m.Label, m.Op + m.Value}] = true
					}
				}
			}
			// Every panel selector applies every template filter the
			// panels use: a panel that ignores $instance would mislead.
			for _, u := range panelUses {
				for f := range panelFilters {
					if !slices.ContainsFunc(u.sel.Matchers, func(m matcher) bool { return m.Label == f.label && m.Op+m.Value == f.value }) {
						t.Errorf("%s: %s: selector %s lacks the filter %s%s the other panels apply", d.file, u.where, u.sel.Series, f.label, f.value)
					}
				}
			}
		})
	}
	var unused []string
	for name := range cat.Metrics {
		if strings.HasPrefix(name, "imlab_") && !referenced[name] {
			unused = append(unused, name)
		}
	}
	slices.Sort(unused)
	t.Logf("%d imlab_ metrics in the registry, %d on no dashboard: %v", imlab, len(unused), unused)

	t.Run("checker rejects bad queries", func(t *testing.T) {
		for _, c := range []struct{ expr, legend, want string }{
			{`sum(rate(imlab_send_totl[5m]))`, "x", "not in the reference server's registry"},
			{`sum by (polcy) (rate(imlab_send_total[5m]))`, "{{polcy}}", "label polcy is not on"},
			{`sum(rate(imlab_send_total{polcy="strict"}[5m]))`, "x", "has no label polcy"},
			{`sum by (policy) (rate(imlab_send_total[5m]))`, "{{result}}", "legend {{result}} is not a label"},
			{`sum by (policy, result) (rate(imlab_send_total[5m]))`, "{{policy}}", "does not show it"},
			{`sum(imlab_send_total)`, "x", "through rate() or increase()"},
			{`sum(rate(imlab_outbox_backlog[5m]))`, "x", "applies to counters"},
			{`sum(rate(imlab_dlq_records_total[5m]))`, "x", "applies to counters"},
			{`histogram_quantile(0.99, sum by (policy) (rate(imlab_ack_latency_seconds_bucket[5m])))`, "{{policy}}", "without the le label"},
			{`histogram_quantile(0.99, sum by (le) (rate(imlab_ack_latency_seconds[5m])))`, "x", "is a histogram"},
			{`sum(rate(imlab_send_total_bucket[5m]))`, "x", "not in the reference server's registry"},
			{`sum by (cache) (rate(imlab_cache_requests_total[5m])) / sum(rate(imlab_cache_requests_total[5m]))`, "{{cache}}", "no series would match"},
			{`sum(rate(imlab_send_total[5m])`, "x", "parse"},
			{`sum(rat(imlab_send_total[5m]))`, "x", `unknown function with name "rat"`},
			{`max by (group) (imlab_consumer_lag_seconds{grp="inbox"})`, "{{group}}", "has no label grp"},
		} {
			_, problems := checkQuery(cat, c.expr, c.legend, false)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, c.want) }) {
				t.Errorf("%s (legend %q): want a problem containing %q, got %q", c.expr, c.legend, c.want, problems)
			}
		}
	})
}

// checkQuery analyses one query and its legend against cat: the analysis's
// problems, every imlab_ name in the text being a metric the query
// selects, and a legend that shows exactly labels of the result, all of
// them (the series must be told apart).
func checkQuery(cat *catalog, expr, legend string, selectorOnly bool) (exprResult, []string) {
	res := analyze(expr, cat, selectorOnly)
	problems := slices.Clone(res.Problems)
	for _, name := range imlabNameRE.FindAllString(expr, -1) {
		if !slices.ContainsFunc(res.Metrics, func(m string) bool {
			return name == m || name == m+"_bucket" || name == m+"_sum" || name == m+"_count"
		}) && !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, name) }) {
			problems = append(problems, name+" is not a metric the query selects (a typo, or a name inside a string?)")
		}
	}
	if selectorOnly {
		return res, problems
	}
	shown := map[string]bool{}
	for _, m := range legendLabelRE.FindAllStringSubmatch(legend, -1) {
		shown[m[1]] = true
		if !slices.Contains(res.Labels, m[1]) {
			problems = append(problems, fmt.Sprintf("legend {{%s}} is not a label of the result (it has %v)", m[1], res.Labels))
		}
	}
	for _, l := range res.Labels {
		if !shown[l] {
			problems = append(problems, fmt.Sprintf("the result has label %s, the legend %q does not show it", l, legend))
		}
	}
	return res, problems
}
