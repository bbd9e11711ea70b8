// Package dashboards holds the Grafana dashboards of the lab: hand-written
// dashboard JSON models (imlab-send.json, imlab-fanout.json,
// imlab-pull-push.json) that compose/docker-compose.yml mounts read-only
// into Grafana, where compose/grafana/provisioning/dashboards/imlab.yml
// loads them against the provisioned Prometheus datasource (uid
// imlab-prometheus).
//
// It owns those JSON files and their test, which parses every dashboard,
// checks its structure (unique uid and title, the provisioned datasource on
// every panel, target and template variable, units, legends, layout) and
// checks every PromQL expression against the reference server's real
// metric registry: the server is started in process (ref/server, on a
// private MySQL database and Redis prefix from internal/testenv and an
// in-process Kafka), its registry's descriptors give every metric name and
// label, and a query may use only those, plus the labels Prometheus
// attaches at scrape time (compose/prometheus.yml). Counters must go
// through rate()/increase(), histogram buckets through histogram_quantile,
// and gauges are shown as they are.
//
// It must not touch anything else: no Go code here is imported by the
// server or the lab, metric names are never defined here (ref/... defines
// them; a dashboard follows), and the test changes no data outside the
// database and key prefix testenv gives it.
package dashboards
