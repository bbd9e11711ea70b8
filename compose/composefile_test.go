package compose

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// composeFile is the part of docker-compose.yml the tests read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       *composeBuild     `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
}

type composeBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

type toxiProxy struct {
	Name     string `json:"name"`
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"`
	Enabled  bool   `json:"enabled"`
}

var roleNames = []string{"api", "relay", "consumer", "history", "reconciler"}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return f
}

// TestComposeConfig validates the file with docker compose itself where the
// compose plugin is installed.
func TestComposeConfig(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("docker CLI not installed")
	}
	if out, err := exec.Command("docker", "compose", "version").CombinedOutput(); err != nil {
		t.Skipf("docker compose plugin not installed: %s", strings.TrimSpace(string(out)))
	}
	cmd := exec.Command("docker", "compose", "-f", "docker-compose.yml", "config", "--quiet")
	cmd.Env = append(os.Environ(), "IMLAB_SECRET=") // the file's defaults must suffice
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docker compose config: %v\n%s", err, out)
	}
}

func TestComposeFileServices(t *testing.T) {
	f := loadCompose(t)
	wantImages := map[string]string{
		"mysql":      "mysql:8.0",
		"redis":      "redis:7",
		"kafka":      "apache/kafka:",
		"mongo":      "mongo:7",
		"toxiproxy":  "shopify/toxiproxy:",
		"prometheus": "prom/prometheus:",
		"grafana":    "grafana/grafana:",
	}
	var names []string
	for name := range f.Services {
		names = append(names, name)
	}
	for name, prefix := range wantImages {
		s, ok := f.Services[name]
		if !ok {
			t.Errorf("service %s missing (have %v)", name, names)
			continue
		}
		if !strings.HasPrefix(s.Image, prefix) {
			t.Errorf("service %s image %q, want %s*", name, s.Image, prefix)
		}
	}
	for name, s := range f.Services {
		if s.Image == "" && s.Build == nil {
			t.Errorf("service %s has neither image nor build", name)
		}
		for dep := range s.DependsOn {
			if _, ok := f.Services[dep]; !ok {
				t.Errorf("service %s depends on unknown %s", name, dep)
			}
			if s.DependsOn[dep].Condition == "service_healthy" && f.Services[dep].Healthcheck == nil {
				t.Errorf("service %s waits for %s to be healthy, which has no healthcheck", name, dep)
			}
		}
	}
	for _, name := range []string{"mysql", "redis", "kafka", "mongo", "toxiproxy", "api", "prometheus", "grafana"} {
		if s := f.Services[name]; s.Healthcheck == nil || len(s.Healthcheck.Test) < 2 {
			t.Errorf("service %s has no healthcheck", name)
		}
	}
}

func TestComposeFileRoles(t *testing.T) {
	f := loadCompose(t)
	proxies := loadToxiproxy(t, f)
	nodes := map[string]string{}
	for _, role := range roleNames {
		s, ok := f.Services[role]
		if !ok {
			t.Errorf("role service %s missing", role)
			continue
		}
		if s.Build == nil || s.Build.Context != ".." || s.Build.Dockerfile != "Dockerfile" {
			t.Errorf("%s: build %+v, want the repository root's Dockerfile", role, s.Build)
		}
		cmd := strings.Join(s.Command, " ")
		if !strings.HasPrefix(cmd, "ref --role "+role+" --backends external") {
			t.Errorf("%s: command %q, want ref --role %s --backends external ...", role, cmd, role)
		}
		if i := slices.Index(s.Command, "--node"); i < 0 || i+1 >= len(s.Command) {
			t.Errorf("%s: no --node: processes sharing the database need distinct msg_id nodes", role)
		} else if other, dup := nodes[s.Command[i+1]]; dup {
			t.Errorf("%s and %s share --node %s", role, other, s.Command[i+1])
		} else {
			nodes[s.Command[i+1]] = role
		}
		for _, dep := range []string{"toxiproxy", "mysql", "redis", "kafka", "mongo"} {
			if s.DependsOn[dep].Condition != "service_healthy" {
				t.Errorf("%s: does not wait for %s to be healthy", role, dep)
			}
		}

		env := s.Environment
		for _, k := range []string{EnvBackends, EnvMySQLDSN, EnvRedisAddr, EnvKafkaBrokers, EnvMongoURI, "IMLAB_SECRET", "IMLAB_LISTEN"} {
			if strings.TrimSpace(env[k]) == "" {
				t.Errorf("%s: %s not set", role, k)
			}
		}
		// The role's environment is a valid external config for Start.
		cfg := DefaultConfig()
		if err := cfg.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
			t.Errorf("%s: %v", role, err)
		}
		if cfg.Mode != ModeExternal {
			t.Errorf("%s: %s = %q", role, EnvBackends, cfg.Mode)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: environment is not a valid external config: %v", role, err)
		}
		// Every backend address goes through a toxiproxy proxy whose
		// upstream is the matching service.
		my, err := mysqlConfig(env[EnvMySQLDSN])
		if err != nil {
			t.Errorf("%s: %v", role, err)
			continue
		}
		if my.DBName == "" || !strings.Contains(env[EnvMySQLDSN], "parseTime=true") ||
			!strings.Contains(env[EnvMySQLDSN], "loc=UTC") || !strings.Contains(env[EnvMySQLDSN], "interpolateParams=true") {
			t.Errorf("%s: MySQL DSN %q lacks a database or the required options", role, env[EnvMySQLDSN])
		}
		mongoHost, err := url2host(env[EnvMongoURI])
		if err != nil {
			t.Errorf("%s: %v", role, err)
		}
		for backend, addr := range map[string]string{
			"mysql": my.Addr, "redis": env[EnvRedisAddr], "kafka": env[EnvKafkaBrokers], "mongo": mongoHost,
		} {
			host, port, ok := strings.Cut(addr, ":")
			if !ok || host != "toxiproxy" {
				t.Errorf("%s: %s address %q does not go through toxiproxy", role, backend, addr)
				continue
			}
			p, ok := proxies[port]
			if !ok {
				t.Errorf("%s: %s port %s is not a toxiproxy listener", role, backend, port)
				continue
			}
			if up, _, _ := strings.Cut(p.Upstream, ":"); up != backend {
				t.Errorf("%s: %s goes to proxy %s with upstream %s", role, backend, p.Name, p.Upstream)
			}
		}
	}
}

// loadToxiproxy reads toxiproxy.json, checks it is the file mounted into the
// toxiproxy service, that every upstream is a service, and returns the
// proxies by listen port.
func loadToxiproxy(t *testing.T, f composeFile) map[string]toxiProxy {
	t.Helper()
	tp := f.Services["toxiproxy"]
	if !slices.Contains(tp.Volumes, "./toxiproxy.json:/config/toxiproxy.json:ro") ||
		!slices.Contains(tp.Command, "-config=/config/toxiproxy.json") || !slices.Contains(tp.Command, "-host=0.0.0.0") {
		t.Errorf("toxiproxy service does not load ./toxiproxy.json on all interfaces: %v %v", tp.Volumes, tp.Command)
	}
	b, err := os.ReadFile("toxiproxy.json")
	if err != nil {
		t.Fatal(err)
	}
	var list []toxiProxy
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatalf("toxiproxy.json: %v", err)
	}
	out := map[string]toxiProxy{}
	for _, p := range list {
		_, port, ok := strings.Cut(p.Listen, ":")
		if !ok || !p.Enabled {
			t.Errorf("proxy %s: listen %q enabled %v", p.Name, p.Listen, p.Enabled)
			continue
		}
		up, _, _ := strings.Cut(p.Upstream, ":")
		if _, ok := f.Services[up]; !ok {
			t.Errorf("proxy %s: upstream %s is not a service", p.Name, p.Upstream)
		}
		out[port] = p
	}
	for _, want := range []string{"mysql", "redis", "kafka", "mongo"} {
		found := false
		for _, p := range out {
			found = found || p.Name == want
		}
		if !found {
			t.Errorf("toxiproxy.json has no %s proxy", want)
		}
	}
	return out
}

func TestComposeMonitoring(t *testing.T) {
	f := loadCompose(t)
	prom := f.Services["prometheus"]
	if !slices.Contains(prom.Volumes, "./prometheus.yml:/etc/prometheus/prometheus.yml:ro") {
		t.Errorf("prometheus does not mount ./prometheus.yml: %v", prom.Volumes)
	}
	b, err := os.ReadFile("prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var pc struct {
		ScrapeConfigs []struct {
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &pc); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	targets := map[string]bool{}
	for _, sc := range pc.ScrapeConfigs {
		if sc.MetricsPath != "/metrics" {
			t.Errorf("scrape path %q", sc.MetricsPath)
		}
		for _, st := range sc.StaticConfigs {
			for _, tg := range st.Targets {
				targets[tg] = true
			}
		}
	}
	for _, role := range roleNames {
		_, port, _ := strings.Cut(f.Services[role].Environment["IMLAB_LISTEN"], ":")
		if !targets[role+":"+port] {
			t.Errorf("prometheus does not scrape %s:%s (targets %v)", role, port, targets)
		}
	}

	// Grafana: provisioning mounted, and the dashboards provider reads the
	// path where ../dashboards is mounted.
	g := f.Services["grafana"]
	var dashMount string
	for _, v := range g.Volumes {
		if strings.HasPrefix(v, "../dashboards:") {
			dashMount = strings.Split(v, ":")[1]
		}
	}
	if dashMount == "" || !slices.Contains(g.Volumes, "./grafana/provisioning:/etc/grafana/provisioning:ro") {
		t.Fatalf("grafana volumes %v", g.Volumes)
	}
	pb, err := os.ReadFile(filepath.Join("grafana", "provisioning", "dashboards", "imlab.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var prov struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	if err := yaml.Unmarshal(pb, &prov); err != nil {
		t.Fatal(err)
	}
	if len(prov.Providers) != 1 || prov.Providers[0].Options.Path != dashMount {
		t.Errorf("dashboard provider path %+v, want %s", prov.Providers, dashMount)
	}
	if _, err := os.Stat(filepath.Join("grafana", "provisioning", "datasources", "prometheus.yml")); err != nil {
		t.Error(err)
	}
	// The mounted folder holds dashboards (package dashboards checks them).
	if dash, err := filepath.Glob(filepath.Join("..", "dashboards", "*.json")); err != nil || len(dash) == 0 {
		t.Errorf("../dashboards holds no dashboard JSON (%v): Grafana would start with none", err)
	}
}

// The roles' image is built from the repository root's Dockerfile, which
// must build cmd/imlab.
func TestDockerfileBuildsImlab(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if strings.Count(s, "FROM ") < 2 || !strings.Contains(s, "go build") || !strings.Contains(s, "./cmd/imlab") ||
		!strings.Contains(s, "COPY --from=build") {
		t.Fatalf("Dockerfile is not a multi-stage build of ./cmd/imlab:\n%s", s)
	}
	if st, err := os.Stat(filepath.Join("..", "cmd", "imlab")); err != nil || !st.IsDir() {
		t.Fatalf("cmd/imlab missing: %v", err)
	}
	// The runtime image provides what the api healthcheck calls.
	f := loadCompose(t)
	if hc := f.Services["api"].Healthcheck; hc == nil || hc.Test[1] != "curl" || !strings.Contains(s, "curl") {
		t.Errorf("api healthcheck %v needs curl in the image", hc)
	}
}
