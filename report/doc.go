// Package report owns rendering one scenario run as a self-contained HTML
// page for architecture reviews. First a summary: the header (scenario,
// PASS/FAIL badge and, beside it, the load verdict: within load or
// OVERLOADED, with its cause), the safety verdict, the non-zero findings
// in one line, the whole run's latency quantiles with what they count, or
// "unknown" when nothing was measured, and the backends. Then the charts,
// one inline SVG plot each (lag over time, throughput, latency; nice 1-2-5
// ticks, a legend, an optional dashed threshold line, fault injections and
// heals drawn as vertical lines on every plot, labelled in the plot's top
// margin on an opaque box drawn over every line, so that no line crosses a
// label: a marker with no room there for its label or its kind gets a
// numbered tag, and one footnote above the charts names it by time and
// label, so that none goes unnamed on a screenshot; a time a series has no
// measurement for is a gap in its line, shaded, never a line drawn across
// it). Then the table of the scenario's checks with the failed ones
// highlighted, the checker's verdict with its findings, examples and
// msg_ids, the fault schedule, the extra tables, the settings and the
// run's notes. A chart may instead have a numeric x axis of its own
// (XAxis: a rate, with its label and unit): it is drawn on it, off the
// shared time axis and without the run's markers, with its own labelled
// Marks (a knee), every point shown (Series.Dots), open where
// Point.Hollow (a step that broke), and its Threshold as the limit line.
// Figures draws charts, each a figure as on the page, for a page of
// another room (the capacity page), FigureStyle their CSS: every chart
// of the lab is drawn here. A page whose text names one of the design
// documents the lab is built from ("seed 000", "seed 003", "seed 004")
// says under its header, in words, what each one it names is.
//
// It owns the Report value types, their validation and the named limits
// (MaxCharts, MaxSeries, MaxPoints, MaxMarkers, MaxExamples,
// MaxMarkerLabelRunes, MaxMarkerLabelWideRunes, MaxTables, MaxTableRows, MaxTableCols,
// MaxLatencies). Points that cannot be drawn (NaN or ±Inf) are
// dropped and counted in a note, series longer than MaxPoints are decimated
// evenly and noted; anything else that cannot be drawn is an error wrapping
// ErrInvalid, and nothing is written then. The page has no external
// scripts, fonts, stylesheets or network references: CSS and SVG are
// inline, and every piece of text goes through html/template.
//
// It must not run anything, read run directories, or import other imlab
// packages: its code uses the standard library only, and the scenario
// runner (and capacity, into Charts) converts its own data into a Report.
package report
