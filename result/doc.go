// Package result owns the record of a scenario run: the Result written as
// result.json (its checks, fault events, send and lag timelines, processes,
// repairs, burst and capacity figures, the load's verdict and its cause),
// the JUnit XML of one or several results, the text table of a consumer
// matrix, and reading a stored run back (ReadRun refuses a file of another
// format).
//
// It must not run anything, judge a run (package expect does) or render
// HTML (package report does).
package result
