#!/usr/bin/env bash
# Runs the project's benchmarks one after another (never in parallel, so no
# benchmark shares the cores with another) against the real MariaDB and Redis
# on this machine, and writes everything to runs/bench-<UTC time>.txt.
# Each benchmark runs its reference (raw INSERTs, raw kfake consume, raw SQL,
# vegeta, one-document-per-message, the in-process service beside HTTP, the
# uniform case beside hot inboxes) in the same run, so compare ratios. The
# send and ack benchmarks also report the per-batch budget (rt/batch,
# stmts/msg, msgs/batch, redis-rt/batch, go-µs/msg, db-µs/msg).
#
#   scripts/bench.sh            # all
#   scripts/bench.sh send pull  # only the named groups
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p runs
out="runs/bench-$(date -u +%Y%m%dT%H%M%SZ).txt"

declare -A groups=(
	[send]="./ref/send/|BenchmarkSendStrict1to1|BenchmarkRawBatchedInsert,BenchmarkRawWithCounters|-benchtime=40000x -count=3"
	[hot]="./ref/send/|BenchmarkSendStrictHot||-benchtime=20000x -count=3"
	[ack]="./ref/reconcile/|BenchmarkSendAck|BenchmarkRawContentInsert|-benchtime=100000x -count=3"
	[e2e]="./ref/server/|BenchmarkE2ESend1to1||-benchtime=20000x -count=3"
	[fanout]="./ref/fanout/|BenchmarkFanout||-benchtime=200000x -count=3"
	[pull]="./ref/pull/|BenchmarkPull||-benchtime=2s -count=2"
	[history]="./ref/history/|BenchmarkHistory||-benchtime=2s -count=1"
	[loadgen]="./loadgen/|BenchmarkVsVegeta||-benchtime=1x -count=1"
	[api]="./ref/api/|BenchmarkAPI||-benchtime=2s -count=2"
	[compose]="./compose/|BenchmarkInsertOfflineMsg||-benchtime=200x -count=1"
)
order=(send hot ack e2e fanout pull history loadgen api compose)
[ $# -gt 0 ] && order=("$@")

{
	echo "# imlab benchmarks $(date -u +%FT%TZ)"
	echo "# commit $(git rev-parse --short HEAD) $(git diff --quiet || echo '(dirty tree)')"
	echo "# $(go version); $(nproc) cores; $(free -g | awk '/Mem:/{print $2" GiB"}'); $(uname -r)"
	echo "# mariadb: $(mariadb -N -h127.0.0.1 -uroot -e 'select version()' 2>/dev/null || echo '?'); redis: $(redis-server --version | awk '{print $3}')"
} | tee "$out"

for g in "${order[@]}"; do
	IFS='|' read -r pkg b1 b2 flags <<<"${groups[$g]}"
	pat="$b1"
	# b2 lists the references, comma-separated.
	[ -n "$b2" ] && pat="$b1|${b2//,/|}"
	# -count=N runs as N passes of -count=1, each pass running the
	# benchmark and its references one after another: run i of a
	# benchmark and run i of its reference are then seconds apart, not
	# minutes (with -count=N the machine's drift between the first and
	# the last run of one benchmark lands between it and its reference).
	passes=1
	if [[ "$flags" =~ -count=([0-9]+) ]]; then
		passes=${BASH_REMATCH[1]}
		flags="${flags/-count=$passes/-count=1}"
	fi
	for ((pass = 1; pass <= passes; pass++)); do
		echo "## $g (pass $pass of $passes): go test -run '^\$' -bench '$pat' $flags $pkg   (load average before: $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$out"
		# A failed group (e.g. the shared MySQL out of connections) is
		# marked and the next pass still runs.
		# shellcheck disable=SC2086
		go test -run '^$' -bench "$pat" $flags -timeout 20m "$pkg" 2>&1 | tee -a "$out" ||
			echo "## $g: FAILED (exit ${PIPESTATUS[0]})" | tee -a "$out"
	done
done
echo "written: $out"
