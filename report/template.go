package report

// pageTemplate is the whole page: inline CSS, inline SVG, no scripts and no
// external references. Every value comes from the page model; text is
// escaped by html/template, numbers are pre-formatted with strconv.
const pageTemplate = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
{{.Style}}
</style>
</head>
<body>
<main>
{{template "header" .}}
<section id="charts">
<h2>Charts</h2>
{{if .MarkerNotes}}<ul class="marker-notes"><li class="lead">Markers on every chart with no room for a label, by tag:</li>{{range .MarkerNotes}}<li><b class="tag mk-{{.Kind}}">{{.Tag}}</b> {{range $i, $e := .Items}}{{if $i}}; {{end}}<span class="mk-{{.Kind}}">{{.Text}}</span>{{end}}</li>{{end}}</ul>
{{end}}{{range .Charts}}{{template "chart" .}}{{else}}<p class="empty">{{.NoCharts}}</p>{{end}}
</section>

<section id="checks">
<h2>Checks <small>{{.ChecksPassed}} of {{len .Checks}} passed</small></h2>
{{if .Checks}}<table class="checks">
<thead><tr><th>check</th><th>want</th><th>got</th><th>result</th></tr></thead>
<tbody>
{{range .Checks}}<tr class="{{if .OK}}ok{{else}}fail{{end}}"><td>{{.Name}}</td><td>{{.Want}}</td><td>{{.Got}}</td><td>{{if .OK}}pass{{else}}FAIL{{end}}</td></tr>
{{end}}</tbody>
</table>{{else}}<p class="empty">no checks</p>{{end}}
</section>

<section id="verdict">
<h2>Safety verdict <span class="verdict {{.VerdictClass}}">{{if .Verdict}}{{.Verdict}}{{else}}none{{end}}</span></h2>
{{if .Findings}}<table class="findings">
<thead><tr><th>finding</th><th>count</th><th>examples</th></tr></thead>
<tbody>
{{range .Findings}}<tr class="{{.Class}}"><td>{{.Name}}</td><td class="num">{{.Shown}}</td><td>{{if eq .Class "warn"}}<div class="more">allowed: does not decide the verdict (the same message stored again, recognisable by its msg_id)</div>{{end}}{{if .Examples}}<ul class="examples">{{range .Examples}}<li><code>{{.}}</code></li>{{end}}</ul>{{end}}{{if .More}}<span class="more">+{{.More}} more</span>{{end}}{{if .MsgIDs}}<div class="ids">msg_ids: {{range .MsgIDs}}<code>{{.}}</code>{{end}}{{if .MoreIDs}}<span class="more">+{{.MoreIDs}} more</span>{{end}}</div>{{end}}</td></tr>
{{end}}</tbody>
</table>{{else}}<p class="empty">no findings</p>{{end}}
</section>

<section id="faults">
<h2>Fault schedule</h2>
{{if .Markers}}<table class="faults">
<thead><tr><th>t</th><th>kind</th><th>label</th></tr></thead>
<tbody>
{{range .Markers}}<tr class="mk-{{.Kind}}"><td class="num">{{.T}}</td><td>{{.Kind}}</td><td>{{.Label}}</td></tr>
{{end}}</tbody>
</table>{{else}}<p class="empty">no faults injected</p>{{end}}
</section>
{{range .Tables}}{{template "table" .}}{{end}}
{{if .Settings}}<section id="settings">
<h2>Settings</h2>
<table class="settings">
{{range .Settings}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>
{{end}}</table>
</section>
{{end}}
<section id="notes">
<h2>Notes</h2>
{{if .Notes}}<ul class="notes">{{range .Notes}}<li>{{.}}</li>
{{end}}</ul>{{else}}<p class="empty">none</p>{{end}}
</section>
<footer>imlab scenario report</footer>
</main>
</body>
</html>
`

// chartStyle is the CSS of a chart figure (chartTemplate), on the report
// page and wherever FigureStyle brings it.
const chartStyle = `figure.chart{background:#fff;border:1px solid #ddd;margin:14px 0;padding:8px 10px}
figure.chart figcaption{font-weight:bold;margin-bottom:4px}
figure.chart figcaption small{font-weight:normal;color:#666}
svg.plot{display:block;width:100%;height:auto;max-width:900px}
ul.legend{list-style:none;padding:0;margin:4px 0 0;display:flex;flex-wrap:wrap;gap:4px 16px;font-size:.85em}
ul.legend li.empty{color:#888}
ul.legend small{color:#666}
ul.marker-notes{list-style:none;padding:0;margin:6px 0 0;display:flex;flex-wrap:wrap;gap:2px 14px;font-size:.85em}
p.gap-note{font-size:.85em;color:#555;margin:4px 0}
ul.marker-notes li.lead{color:#666}
ul.marker-notes .mk-inject{color:#d62728}
ul.marker-notes .mk-heal{color:#2ca02c}
ul.marker-notes .mk-align{color:#7f7f7f}
ul.marker-notes .mk-error{color:#222}
.sw{display:inline-block;width:14px;height:3px;vertical-align:middle;margin-right:5px}
`

// chartTemplate is one chart's figure: caption, inline SVG, legend and
// notes, from a chartView.
const chartTemplate = `<figure class="chart" id="{{.ID}}">
<figcaption>{{.Title}}{{if .Unit}} <small>({{.Unit}})</small>{{end}}</figcaption>
<svg class="plot" viewBox="0 0 {{.Width}} {{.Height}}" width="{{.Width}}" height="{{.Height}}" role="img" aria-label="{{.Title}}" font-family="sans-serif" font-size="11" fill="#333333">
<rect class="frame" x="{{.Left}}" y="{{.Top}}" width="{{.PlotW}}" height="{{.PlotH}}" fill="#ffffff" stroke="#bbbbbb"/>
<g class="yaxis">{{$c := .}}{{range .YTicks}}<line class="grid" x1="{{$c.Left}}" y1="{{.Pos}}" x2="{{$c.Right}}" y2="{{.Pos}}" stroke="#eeeeee"/><text x="{{$c.YTickTextX}}" y="{{.Pos}}" text-anchor="end" dominant-baseline="middle">{{.Label}}</text>{{end}}</g>
<g class="xaxis">{{range .XTicks}}<line class="tick" x1="{{.Pos}}" y1="{{$c.Bottom}}" x2="{{.Pos}}" y2="{{$c.TickEnd}}" stroke="#bbbbbb"/><line class="grid" x1="{{.Pos}}" y1="{{$c.Top}}" x2="{{.Pos}}" y2="{{$c.Bottom}}" stroke="#f3f3f3"/><text x="{{.Pos}}" y="{{$c.XTickTextY}}" text-anchor="middle">{{.Label}}</text>{{end}}</g>
<text class="unit" transform="translate(14 {{.MidY}}) rotate(-90)" text-anchor="middle">{{.Unit}}</text>
<text class="caption" x="{{.Right}}" y="{{.CaptionY}}" text-anchor="end" fill="#666666">{{.XCaption}}</text>
{{range .Lines}}{{range .Gaps}}<rect class="gap" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" fill="{{.Color}}" fill-opacity="0.10"><title>{{.Title}}</title></rect>{{end}}{{end}}
{{with .Threshold}}<g class="threshold"><title>{{.Title}}</title><line class="threshold-line" x1="{{.X1}}" y1="{{.Y}}" x2="{{.X2}}" y2="{{.Y}}" stroke="#555555" stroke-width="1.5" stroke-dasharray="{{if .OffScale}}2 3{{else}}6 4{{end}}"/>{{if .Label}}<text x="{{.TextX}}" y="{{.TextY}}" text-anchor="end" fill="#555555" stroke="#ffffff" stroke-width="3" stroke-linejoin="round" paint-order="stroke">{{.Label}}</text>{{end}}</g>{{end}}
{{range .Lines}}{{$l := .}}{{range .Segments}}<polyline class="series" points="{{.}}" fill="none" stroke="{{$l.Color}}" stroke-width="1.5" stroke-linejoin="round"><title>{{$l.Name}}</title></polyline>{{end}}{{range .Dots}}<circle class="dot" cx="{{.CX}}" cy="{{.CY}}" r="3" fill="{{.Color}}"><title>{{$l.Name}}</title></circle>{{end}}{{range .Ends}}<circle class="gap-end" cx="{{.CX}}" cy="{{.CY}}" r="4" fill="none" stroke="{{.Color}}" stroke-width="1.2"/>{{end}}{{range .Points}}<circle class="point{{if .Hollow}} hollow{{end}}" cx="{{.CX}}" cy="{{.CY}}" r="3.5" fill="{{.Fill}}" stroke="{{.Color}}" stroke-width="1.5"><title>{{.Title}}</title></circle>{{end}}
{{end}}{{range .Markers}}<g class="marker {{.Kind}}"><title>{{.Title}}</title><line class="marker-line" x1="{{.X}}" y1="{{.Y1}}" x2="{{.X}}" y2="{{.Y2}}" stroke="{{.Stroke}}" stroke-width="{{.Width}}"{{if .Dash}} stroke-dasharray="{{.Dash}}"{{end}}/><line class="marker-hit" x1="{{.X}}" y1="{{.Y1}}" x2="{{.X}}" y2="{{.Y2}}" stroke="#000000" stroke-opacity="0" stroke-width="8"/></g>
{{end}}<g class="marker-labels">{{range .Markers}}{{if .BoxW}}<rect class="marker-box" x="{{.BoxX}}" y="{{.BoxY}}" width="{{.BoxW}}" height="{{.BoxH}}" fill="#ffffff"/>{{end}}<text class="marker-label {{.Kind}}" x="{{.TextX}}" y="{{.TextY}}" text-anchor="{{.Anchor}}" fill="{{.Stroke}}" stroke="#ffffff" stroke-width="3" stroke-linejoin="round" paint-order="stroke"><title>{{.Title}}</title>{{.Short}}</text>{{end}}</g>
{{if .NoData}}<text class="nodata" x="{{.MidX}}" y="{{.MidY}}" text-anchor="middle" dominant-baseline="middle" font-size="16" fill="#888888">no data</text>{{end}}
</svg>
<ul class="legend">{{range .Legend}}<li{{if .Empty}} class="empty"{{end}}><span class="sw" style="{{.Swatch}}"></span>{{.Name}} <small>{{.Summary}}</small></li>{{end}}</ul>
{{if .MarkNotes}}<ul class="marker-notes"><li class="lead">Marks with no room for a label, by tag:</li>{{range .MarkNotes}}<li><b class="tag mk-{{.Kind}}">{{.Tag}}</b> {{range $i, $e := .Items}}{{if $i}}; {{end}}<span class="mk-{{.Kind}}">{{.Text}}</span>{{end}}</li>{{end}}</ul>
{{end}}{{if .Hollow}}<p class="gap-note">open point: {{.Hollow}}</p>
{{end}}{{with .Threshold}}{{if .Note}}<p class="gap-note threshold-note">{{.Note}}</p>
{{end}}{{end}}</figure>
`

// pageStyle is the CSS of a page's header, sections and tables (the
// charts bring chartStyle).
const pageStyle = `body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:#222;background:#f6f7f9;margin:0}
main{max-width:960px;margin:0 auto;padding:16px 20px 40px}
h1{font-size:1.5em;margin:.3em 0}
h2{font-size:1.15em;margin:1.4em 0 .5em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h2 small{font-weight:normal;color:#666}
table{border-collapse:collapse;background:#fff;margin:.3em 0;font-size:.92em;max-width:100%}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
td{overflow-wrap:break-word}
div.scroll{overflow-x:auto;max-width:100%}
table.meta th{min-width:8em}
thead th{background:#eef0f3}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:2px 10px;border-radius:4px;color:#fff;font-size:.75em;vertical-align:middle;letter-spacing:.05em}
.badge.pass{background:#2e7d32}
.badge.fail{background:#c62828}
.badge.within{background:#546e7a}
.badge.unmeasured{background:#757575}
.badge.overloaded{background:#b26a00}
.load.overloaded{color:#8a5200}
.findings-line.bad{color:#c62828}
.verdict{font-weight:bold}
.verdict.valid{color:#2e7d32}
.verdict.invalid{color:#c62828}
tr.fail td{background:#fdecea;color:#8e0000;font-weight:bold}
tr.bad td{background:#fdecea;color:#8e0000}
tr.warn td{background:#fff6e0}
tr.mk-inject td:nth-child(2){color:#d62728}
tr.mk-heal td:nth-child(2){color:#2ca02c}
tr.mk-error td:nth-child(2){color:#222;font-weight:bold}
ul.examples{margin:0;padding-left:1.1em}
code{font-size:.9em;background:#f0f1f3;padding:0 3px;border-radius:2px;margin-right:3px;display:inline-block}
.more{color:#666;font-style:italic}
.ids{margin-top:2px;color:#555}
.empty{color:#777;font-style:italic}
.description{color:#444}
table.meta small{color:#555}
tr.latency.unknown b{color:#8a5a00}
p.glossary{font-size:.85em;color:#444}
p.glossary dfn{font-style:normal;font-weight:bold}
`

// headerTemplate is a page's header: title with the PASS / FAIL and load
// badges, description, the meta table (started, duration, verdict, the
// machine's warning, findings, load, latencies, backends), glossary.
const headerTemplate = `<header>
<h1>{{.Title}} {{if .Unmeasured}}<span class="badge unmeasured">{{.Unmeasured}}</span>{{else}}<span class="badge {{if .Passed}}pass{{else}}fail{{end}}">{{if .Passed}}PASS{{else}}FAIL{{end}}</span>{{end}}{{with .Load}} <span class="badge {{.Class}}" title="the load verdict, beside the safety verdict">{{.Label}}</span>{{end}}</h1>
{{if .Scenario}}<p class="scenario">Scenario <b>{{.Scenario}}</b></p>{{end}}
{{if .Description}}<p class="description">{{.Description}}</p>{{end}}
<table class="meta">
<tr><th>Started</th><td>{{if .StartedAt}}{{.StartedAt}}{{else}}unknown{{end}}</td></tr>
<tr><th>{{.DurationName}}</th><td>{{.Duration}}</td></tr>
<tr><th>{{.VerdictName}}</th><td><span class="verdict {{.VerdictClass}}">{{if .Verdict}}{{.Verdict}}{{else}}none{{end}}</span></td></tr>
{{with .Machine}}<tr class="warn machine"><th>Machine</th><td>{{.}}</td></tr>
{{end}}{{if .FindingsLine}}<tr><th>Findings</th><td><span class="findings-line {{.FindingsClass}}">{{.FindingsLine}}</span></td></tr>
{{end}}{{with .Load}}<tr class="load-row"><th>Load</th><td><b class="load {{.Class}}">{{.Label}}</b>{{if .Cause}}: {{.Cause}}{{end}}{{if .Detail}} <small>{{.Detail}}</small>{{end}}</td></tr>
{{end}}{{range .Latencies}}<tr class="latency{{if .Unknown}} unknown{{end}}"><th>{{.Name}}</th><td><b>{{.Figures}}</b> <small>{{.Detail}}</small></td></tr>
{{end}}<tr><th>Backends</th><td>{{if .Backends}}{{.Backends}}{{else}}unknown{{end}}</td></tr>
</table>
{{if .Glossary}}<p class="glossary">Design documents named on this page (the specification the lab is built from):{{range .Glossary}} <dfn>{{.Term}}</dfn>: {{.Means}}.{{end}}</p>
{{end}}</header>
`

// tableTemplate is one extra table's section.
const tableTemplate = `<section class="extra">
<h2>{{.Title}}</h2>
<div class="scroll"><table class="extra">
<thead><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</tbody>
</table></div>{{if .More}}<p class="more">+{{.More}} more rows</p>{{end}}
</section>
`
