// Package runpage makes the HTML pages of scenario runs from their
// results: one run's report (verdict, checks, findings, charts on one time
// axis with fault markers and thresholds) and the review page that sets
// several runs side by side. Package report draws them.
//
// It must not run anything or read run directories (its callers read the
// results).
package runpage
