// Package compare is the lab's regression gate: it reads two sets of run
// results (a scenario's result.json, a capacity search's result.json, or
// a load run's summary.json), extracts the same named metrics from each
// run, and decides metric by metric whether the new side is worse than
// the base beyond noise and beyond a tolerance.
//
// The model:
//   - A metric has a direction (lower or higher is better), a unit and a
//     default tolerance: an allowed worsening, relative to the base median
//     and/or absolute in the metric's unit (the larger of the two applies).
//   - With at least two runs on each side the centres are medians and the
//     difference must also be significant: a two-sided Mann-Whitney U test
//     (golang.org/x/perf/benchmath's AssumeNothing, benchstat's own
//     statistics) at alpha 0.05. A difference beyond tolerance that the
//     test cannot tell from noise is "~" (no significant difference).
//     When the sample sizes are too small for the test ever to reach alpha
//     (fewer than 4 runs per side), or with one run per side, there is no
//     noise test: the verdict is decided by tolerance alone and says so.
//   - Safety metrics (the checker's lost, duplicated, reordered, skipped,
//     unexpected) are never noise: a new run with a finding where every
//     base run had none is a regression whatever the statistics say.
//   - Must-hold metrics (a scenario's verdict check, its passed flag) fail
//     the gate whenever a new run does not hold them.
//   - A metric the base measured and no new run did is MISSING: a failed
//     measurement is unknown, never zero, and an unknown does not pass.
//   - Unlike sides: when the base and new runs were measured on different
//     backends (a scenario result's backends: embedded or external, their
//     versions), machines (CPU count, host), generators (GOMAXPROCS; a
//     capacity search's pacer) or under machine loads more
//     than LoadGap per CPU apart (the 1-minute load average at each run's
//     start), every report form says so at the top (text, Markdown, the
//     JSON's unlike_sides, JUnit's output), and each measured row (latency,
//     rate, lag, recovery) carries it in its note. A measured metric worse
//     beyond tolerance is then REGRESSED (unlike sides), and it still fails
//     the gate: the gate cannot tell the change's cost from the machine's,
//     and a figure it cannot attribute is not a pass (as an unknown is
//     not), so the way to clear it is a like-for-like run, which the label
//     asks for. Safety and must-hold metrics do not depend on the machine
//     and are gated as always.
//
// Read does not trust a figure a run did not measure: a latency quantile
// with no samples, a lag with no polls (a run with no queue in its topology says so, one whose
// polls all failed says that), a rate of a run that sent nothing
// is left out of the run's metrics (and so compares as missing).
//
// The package reads result files as JSON (the lab's published formats); it
// must not run anything, import the scenario runner (which gates on it) or
// talk to a server.
package compare
