package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	yamlv3 "gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"imlab/loadgen"
	"imlab/ref/msgid"
	"imlab/ref/server"
)

const k8sDir = "../../deploy/k8s"

// k8sObjects is every object of deploy/k8s, decoded strictly into the
// Kubernetes API types (an unknown or misspelt field fails).
type k8sObjects struct {
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
	pvcs       map[string]*corev1.PersistentVolumeClaim
	services   map[string]*corev1.Service
	deploys    map[string]*appsv1.Deployment
	sets       map[string]*appsv1.StatefulSet
	jobs       map[string]*batchv1.Job
}

// workload is a pod template with its name, replicas and selector.
type workload struct {
	name     string
	replicas int32
	selector map[string]string
	pod      *corev1.PodTemplateSpec
}

func (o *k8sObjects) workloads() []workload {
	var ws []workload
	for n, d := range o.deploys {
		ws = append(ws, workload{n, ptrOr(d.Spec.Replicas, 1), d.Spec.Selector.MatchLabels, &d.Spec.Template})
	}
	for n, s := range o.sets {
		ws = append(ws, workload{n, ptrOr(s.Spec.Replicas, 1), s.Spec.Selector.MatchLabels, &s.Spec.Template})
	}
	for n, j := range o.jobs {
		ws = append(ws, workload{n, ptrOr(j.Spec.Parallelism, 1), nil, &j.Spec.Template})
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].name < ws[j].name })
	return ws
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func strictInto(doc []byte, out any) error { return yaml.UnmarshalStrict(doc, out) }

// decodeAs decodes doc strictly into a new T and files it by name.
func decodeAs[T any, P interface {
	*T
	GetName() string
}](doc []byte, into map[string]*T) (string, error) {
	x := P(new(T))
	err := strictInto(doc, x)
	into[x.GetName()] = x
	return x.GetName(), err
}

func loadK8s(t *testing.T) *k8sObjects {
	t.Helper()
	o := &k8sObjects{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		pvcs: map[string]*corev1.PersistentVolumeClaim{}, services: map[string]*corev1.Service{},
		deploys: map[string]*appsv1.Deployment{}, sets: map[string]*appsv1.StatefulSet{}, jobs: map[string]*batchv1.Job{}}
	var kust struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	b, err := os.ReadFile(filepath.Join(k8sDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := strictInto(b, &kust); err != nil || kust.Kind != "Kustomization" {
		t.Fatalf("kustomization.yaml: %v (kind %q)", err, kust.Kind)
	}
	files, _ := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	var want []string
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			want = append(want, filepath.Base(f))
		}
	}
	sort.Strings(want)
	got := slices.Sorted(slices.Values(kust.Resources))
	if !slices.Equal(got, want) {
		t.Fatalf("kustomization.yaml lists %v, the directory holds %v", got, want)
	}
	for _, name := range want {
		b, err := os.ReadFile(filepath.Join(k8sDir, name))
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(b, []byte("\n---\n")) {
			if err := o.add(doc); err != nil {
				t.Fatalf("%s document %d: %v", name, i+1, err)
			}
		}
	}
	return o
}

func (o *k8sObjects) add(doc []byte) error {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	var err error
	var name string
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 ConfigMap":
		name, err = decodeAs(doc, o.configMaps)
	case "v1 Secret":
		name, err = decodeAs(doc, o.secrets)
	case "v1 PersistentVolumeClaim":
		name, err = decodeAs(doc, o.pvcs)
	case "v1 Service":
		name, err = decodeAs(doc, o.services)
	case "apps/v1 Deployment":
		name, err = decodeAs(doc, o.deploys)
	case "apps/v1 StatefulSet":
		name, err = decodeAs(doc, o.sets)
	case "batch/v1 Job":
		name, err = decodeAs(doc, o.jobs)
	default:
		return fmt.Errorf("unexpected %s %s", tm.APIVersion, tm.Kind)
	}
	if err == nil && name == "" {
		err = fmt.Errorf("%s without a name", tm.Kind)
	}
	return err
}

// knownEnv is every IMLAB_* variable the binary reads (named in its
// non-test sources).
func knownEnv(t *testing.T) map[string]bool {
	t.Helper()
	re := regexp.MustCompile(`"(IMLAB_[A-Z0-9_]+)"`)
	out := map[string]bool{}
	for _, pat := range []string{"*.go", "../../compose/*.go"} {
		files, _ := filepath.Glob(pat)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range re.FindAllSubmatch(b, -1) {
				out[string(m[1])] = true
			}
		}
	}
	return out
}

// flagValue returns the value of --name in args (--name=v or --name v).
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// TestK8sManifests decodes every manifest strictly and checks what the API
// server cannot: that each container runs a real imlab command with real
// flags, every reference (ConfigMap, Secret key, volume, claim, port,
// selector, service) resolves, the roles are all there with distinct msg_id
// nodes, and the load Job, its segments and the check Job agree.
func TestK8sManifests(t *testing.T) {
	o := loadK8s(t)
	env := knownEnv(t)
	for _, cm := range o.configMaps {
		for k := range cm.Data {
			if !env[k] {
				t.Errorf("ConfigMap %s: %s is not a variable imlab reads", cm.Name, k)
			}
		}
	}
	for _, s := range o.secrets {
		for k := range s.StringData {
			if !env[k] {
				t.Errorf("Secret %s: %s is not a variable imlab reads", s.Name, k)
			}
		}
	}
	roles := map[string]int32{}
	nodes := map[int]string{}
	var image string
	for _, w := range o.workloads() {
		spec := &w.pod.Spec
		if w.selector != nil && !labelsMatch(w.selector, w.pod.Labels) {
			t.Errorf("%s: selector %v does not select its own pods %v", w.name, w.selector, w.pod.Labels)
		}
		vols := map[string]corev1.Volume{}
		for _, v := range spec.Volumes {
			vols[v.Name] = v
			if c := v.PersistentVolumeClaim; c != nil && o.pvcs[c.ClaimName] == nil {
				t.Errorf("%s: volume %s claims %s, which is not defined", w.name, v.Name, c.ClaimName)
			}
		}
		for _, c := range spec.Containers {
			if image == "" {
				image = c.Image
			} else if c.Image != image {
				t.Errorf("%s/%s: image %s, the others %s", w.name, c.Name, c.Image, image)
			}
			o.checkEnvRefs(t, w.name, c)
			for _, m := range c.VolumeMounts {
				if _, ok := vols[m.Name]; !ok {
					t.Errorf("%s/%s: mounts volume %s, which the pod does not have", w.name, c.Name, m.Name)
				}
			}
			checkCommand(t, w.name, c.Args)
			checkProbes(t, w.name, c)
			if len(c.Args) > 0 && c.Args[0] == "ref" {
				role, _ := flagValue(c.Args, "role")
				roles[role] += w.replicas
				checkListen(t, w.name, c)
				checkNodes(t, w, c, nodes)
			}
		}
	}
	for _, r := range server.DefaultRoles() {
		if roles[r.Name] == 0 {
			t.Errorf("no workload runs the %s role", r.Name)
		}
	}
	if parts, err := strconv.Atoi(o.configMaps["imlab-config"].Data["IMLAB_PARTITIONS"]); err != nil || roles[server.RoleConsumer] > int32(parts) {
		t.Errorf("%d consumer replicas on %q partitions: replicas beyond the partitions sit idle", roles[server.RoleConsumer], o.configMaps["imlab-config"].Data["IMLAB_PARTITIONS"])
	}
	o.checkServices(t)
	o.checkLoadAndCheckJobs(t)
}

func labelsMatch(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

func (o *k8sObjects) checkEnvRefs(t *testing.T, w string, c corev1.Container) {
	t.Helper()
	for _, ef := range c.EnvFrom {
		if r := ef.ConfigMapRef; r != nil && o.configMaps[r.Name] == nil {
			t.Errorf("%s/%s: envFrom ConfigMap %s is not defined", w, c.Name, r.Name)
		}
		if r := ef.SecretRef; r != nil && o.secrets[r.Name] == nil {
			t.Errorf("%s/%s: envFrom Secret %s is not defined", w, c.Name, r.Name)
		}
	}
	for _, e := range c.Env {
		if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil {
			s := o.secrets[r.SecretKeyRef.Name]
			if s == nil {
				t.Errorf("%s/%s: env %s from Secret %s, which is not defined", w, c.Name, e.Name, r.SecretKeyRef.Name)
			} else if _, ok := s.StringData[r.SecretKeyRef.Key]; !ok {
				t.Errorf("%s/%s: env %s from key %s, which Secret %s does not have", w, c.Name, e.Name, r.SecretKeyRef.Key, s.Name)
			}
		}
	}
}

// checkCommand parses a container's args with the binary's own command tree.
func checkCommand(t *testing.T, w string, args []string) {
	t.Helper()
	if len(args) == 0 {
		t.Errorf("%s: no args: the image's default command is not a role", w)
		return
	}
	root := newRootCmd()
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == root {
		t.Errorf("%s: %q is not an imlab command: %v", w, args[0], err)
		return
	}
	// $(VAR) is expanded by the kubelet; give the parser a value.
	expanded := make([]string, len(rest))
	for i, a := range rest {
		expanded[i] = regexp.MustCompile(`\$\([A-Z_]+\)`).ReplaceAllString(a, "x")
	}
	if err := cmd.ParseFlags(expanded); err != nil {
		t.Errorf("%s: imlab %s %v: %v", w, cmd.Name(), rest, err)
	}
}

func checkProbes(t *testing.T, w string, c corev1.Container) {
	t.Helper()
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil {
			continue
		}
		if !containerHasPort(c, p.HTTPGet.Port) {
			t.Errorf("%s/%s: probe on port %s, which the container does not declare", w, c.Name, p.HTTPGet.Port.String())
		}
		if p.HTTPGet.Path != "/healthz" {
			t.Errorf("%s/%s: probe path %s, want /healthz", w, c.Name, p.HTTPGet.Path)
		}
	}
}

func containerHasPort(c corev1.Container, p intstr.IntOrString) bool {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return true
		}
	}
	return false
}

// checkListen: a server listens on the port its container declares, on every
// interface.
func checkListen(t *testing.T, w string, c corev1.Container) {
	t.Helper()
	l, ok := flagValue(c.Args, "listen")
	host, port, _ := strings.Cut(l, ":")
	n, err := strconv.Atoi(port)
	if !ok || host != "0.0.0.0" || err != nil || !containerHasPort(c, intstr.FromInt32(int32(n))) {
		t.Errorf("%s/%s: --listen %q: want 0.0.0.0:<a declared container port>", w, c.Name, l)
	}
}

// checkNodes: processes sharing the database need distinct msg_id nodes: a
// role with several replicas gets them from its ordinal, or allocates none.
func checkNodes(t *testing.T, w workload, c corev1.Container, nodes map[int]string) {
	t.Helper()
	role, _ := flagValue(c.Args, "role")
	claim := func(n int) {
		if n < 0 || n > msgid.MaxNode {
			t.Errorf("%s: node %d out of range", w.name, n)
		} else if other, dup := nodes[n]; dup {
			t.Errorf("%s and %s share msg_id node %d", w.name, other, n)
		}
		nodes[n] = w.name
	}
	if b, ok := flagValue(c.Args, "node-from-ordinal"); ok {
		base, err := strconv.Atoi(b)
		if err != nil {
			t.Errorf("%s: --node-from-ordinal %q", w.name, b)
		}
		for k := range int(w.replicas) {
			claim(base + k)
		}
		return
	}
	if role == server.RoleAPI && w.replicas > 1 {
		t.Errorf("%s: %d api replicas with one --node would allocate colliding msg_ids", w.name, w.replicas)
	}
	n, _ := flagValue(c.Args, "node")
	v, err := strconv.Atoi(n)
	if err != nil {
		t.Errorf("%s: no --node", w.name)
		return
	}
	claim(v)
}

func (o *k8sObjects) checkServices(t *testing.T) {
	t.Helper()
	for _, s := range o.services {
		var pods []workload
		for _, w := range o.workloads() {
			if labelsMatch(s.Spec.Selector, w.pod.Labels) {
				pods = append(pods, w)
			}
		}
		if len(pods) == 0 {
			t.Errorf("Service %s selects no pods", s.Name)
			continue
		}
		for _, p := range s.Spec.Ports {
			for _, w := range pods {
				if !containerHasPort(w.pod.Spec.Containers[0], p.TargetPort) {
					t.Errorf("Service %s: targetPort %s is not a port of %s", s.Name, p.TargetPort.String(), w.name)
				}
			}
		}
	}
	for _, st := range o.sets {
		if s := o.services[st.Spec.ServiceName]; s == nil || s.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("StatefulSet %s: serviceName %s is not a headless Service", st.Name, st.Spec.ServiceName)
		}
	}
}

// checkLoadAndCheckJobs: the load Job is Indexed with one pod per segment,
// it targets the api Service, and the check Job reads exactly the
// directories the segments write.
func (o *k8sObjects) checkLoadAndCheckJobs(t *testing.T) {
	t.Helper()
	load, check := o.jobs["imlab-load"], o.jobs["imlab-check"]
	if load == nil || check == nil {
		t.Fatal("want Jobs imlab-load and imlab-check")
	}
	if load.Spec.CompletionMode == nil || *load.Spec.CompletionMode != batchv1.IndexedCompletion {
		t.Error("imlab-load: not an Indexed Job: its pods would not know their segment")
	}
	args := load.Spec.Template.Spec.Containers[0].Args
	segSpec, _ := flagValue(args, "segment")
	seg, err := loadgen.ParseSegment(segSpec, func(string) (string, bool) { return "0", true })
	if err != nil {
		t.Fatalf("imlab-load: --segment %q: %v", segSpec, err)
	}
	if !strings.HasPrefix(segSpec, "index/") {
		t.Errorf("imlab-load: --segment %q: want index/N (the completion index selects the segment)", segSpec)
	}
	if c, p := ptrOr(load.Spec.Completions, 1), ptrOr(load.Spec.Parallelism, 1); int(c) != seg.Count || int(p) != seg.Count {
		t.Errorf("imlab-load: completions %d, parallelism %d, segments %d: want all equal", c, p, seg.Count)
	}
	target, _ := flagValue(args, "target")
	svc := o.services["imlab-api"]
	if svc == nil || target != fmt.Sprintf("http://%s:%d", svc.Name, svc.Spec.Ports[0].Port) {
		t.Errorf("imlab-load: --target %q is not the api Service", target)
	}
	runDir, _ := flagValue(args, "run-dir")
	if !strings.Contains(runDir, "{segment}") {
		t.Fatalf("imlab-load: --run-dir %q: segments need {segment} to write apart", runDir)
	}
	var want []string
	for i := 1; i <= seg.Count; i++ {
		want = append(want, strings.ReplaceAll(runDir, "{segment}", strconv.Itoa(i)))
	}
	cargs := check.Spec.Template.Spec.Containers[0].Args
	var dirs []string
	for _, a := range cargs[1:] {
		if !strings.HasPrefix(a, "-") {
			dirs = append(dirs, a)
		}
	}
	if !slices.Equal(dirs, want) {
		t.Errorf("imlab-check reads %v, the segments write %v", dirs, want)
	}
	if _, ok := flagValue(cargs, "wait"); !ok {
		t.Error("imlab-check: no --wait: it would judge segments still running")
	}
	mount := func(j *batchv1.Job) string {
		for _, v := range j.Spec.Template.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				return v.PersistentVolumeClaim.ClaimName
			}
		}
		return ""
	}
	if mount(load) == "" || mount(load) != mount(check) {
		t.Errorf("imlab-load writes to claim %q, imlab-check reads claim %q", mount(load), mount(check))
	}
	if pvc := o.pvcs[mount(load)]; pvc != nil && !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
		t.Errorf("claim %s: segments on several nodes need ReadWriteMany", pvc.Name)
	}
}

// TestComposeLoadSplit: the compose file's split load (replicas of one
// service claiming segments) and its merged check run real imlab commands
// with real flags once compose has put in the variables' defaults, share
// the results volume, and the check reads where the segments write; every
// role service's command parses too.
func TestComposeLoadSplit(t *testing.T) {
	b, err := os.ReadFile("../../compose/docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]struct {
			Command  []string `yaml:"command"`
			Volumes  []string `yaml:"volumes"`
			Profiles []string `yaml:"profiles"`
		} `yaml:"services"`
		Volumes map[string]any `yaml:"volumes"`
	}
	if err := yamlv3.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	defaults := regexp.MustCompile(`\$\{[A-Z_]+:-([^}]*)\}`)
	expand := func(args []string) []string {
		out := make([]string, len(args))
		for i, a := range args {
			out[i] = defaults.ReplaceAllString(a, "$1")
		}
		return out
	}
	for name, s := range f.Services {
		if len(s.Command) > 0 && (s.Command[0] == "ref" || s.Command[0] == "load" || s.Command[0] == "check") {
			checkCommand(t, "compose "+name, expand(s.Command))
		}
	}
	load, check := f.Services["loadgen"], f.Services["check"]
	if !slices.Contains(load.Profiles, "load") || !slices.Contains(check.Profiles, "load") {
		t.Error("loadgen and check must be in the load profile, apart from a plain up")
	}
	la, ca := expand(load.Command), expand(check.Command)
	seg, _ := flagValue(la, "segment")
	if !strings.HasPrefix(seg, "claim/") {
		t.Errorf("loadgen --segment %q: replicas of one service claim their segment (claim/N)", seg)
	}
	runDir, _ := flagValue(la, "run-dir")
	claims, _ := flagValue(la, "claim-dir")
	under, _ := flagValue(ca, "segments-in")
	if !strings.Contains(runDir, "{segment}") || filepath.Dir(runDir) != under || filepath.Dir(claims) != under {
		t.Errorf("loadgen writes %s (claims in %s), check reads below %s", runDir, claims, under)
	}
	if _, ok := flagValue(ca, "wait"); !ok {
		t.Error("check: no --wait")
	}
	vol := func(vs []string) string {
		for _, v := range vs {
			if src, dst, ok := strings.Cut(v, ":"); ok && strings.HasPrefix(under, dst) {
				return src
			}
		}
		return ""
	}
	v := vol(load.Volumes)
	if _, named := f.Volumes[v]; v == "" || v != vol(check.Volumes) || !named {
		t.Errorf("loadgen and check do not share a named volume at %s: %v vs %v", under, load.Volumes, check.Volumes)
	}
}
