package report

import (
	"bytes"
	"fmt"
	"html/template"
)

// Figures draws charts for a page of its own (e.g. the capacity page): one
// figure each (caption, inline SVG, legend, notes) drawn exactly as on the
// report page, with FigureStyle for their CSS. Charts drawn on time share
// one time axis; a chart with an XAxis is drawn on it with its Marks. The
// notes say what was dropped or decimated. It validates as WriteHTML does
// (at most MaxCharts charts, see Chart) and returns an error wrapping
// ErrInvalid for what cannot be drawn, and no figure then.
func Figures(charts []Chart) ([]template.HTML, []string, error) {
	if len(charts) > MaxCharts {
		return nil, nil, fmt.Errorf("%w: %d charts, at most %d (MaxCharts)", ErrInvalid, len(charts), MaxCharts)
	}
	clean := make([]cleanChart, 0, len(charts))
	var notes []string
	for ci := range charts {
		c, n, err := cleanChartOf(ci, &charts[ci])
		if err != nil {
			return nil, nil, err
		}
		clean = append(clean, c)
		notes = append(notes, n...)
	}
	views, _, err := drawCharts(clean, nil, "")
	if err != nil {
		return nil, nil, err
	}
	tmpl, err := parseTemplates()
	if err != nil {
		return nil, nil, err
	}
	out := make([]template.HTML, 0, len(views))
	for _, cv := range views {
		var buf bytes.Buffer
		if err := tmpl.ExecuteTemplate(&buf, "chart", cv); err != nil {
			return nil, nil, fmt.Errorf("report: render chart %q: %w", cv.Title, err)
		}
		out = append(out, template.HTML(buf.String())) // rendered by html/template: every text escaped
	}
	return out, notes, nil
}

// FigureStyle is the CSS the figures of Figures need, for the page's
// style element.
func FigureStyle() template.CSS { return template.CSS(chartStyle) }

// PageStyle is the CSS of a whole page: header, sections, tables and
// charts, as the report page has it.
func PageStyle() template.CSS {
	return template.CSS(pageStyle + chartStyle + "footer{color:#888;font-size:.8em;margin-top:2em}\n")
}

// Pieces are a page's header and extra tables drawn exactly as on the
// report page, for a page of its own (capacity's), with PageStyle for
// their CSS.
type Pieces struct {
	Header template.HTML
	Tables []template.HTML
}

// PiecesOf draws r's header (title and badges, description, the meta
// table) and its Tables. It validates r as WriteHTML does and returns an
// error wrapping ErrInvalid for what cannot be drawn.
func PiecesOf(r *Report) (*Pieces, error) {
	p, err := buildPage(r)
	if err != nil {
		return nil, err
	}
	tmpl, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := tmpl.ExecuteTemplate(&buf, "header", p); err != nil {
		return nil, fmt.Errorf("report: render header %q: %w", r.Title, err)
	}
	out := &Pieces{Header: template.HTML(buf.String())} // rendered by html/template: every text escaped
	for _, t := range p.Tables {
		buf.Reset()
		if err := tmpl.ExecuteTemplate(&buf, "table", t); err != nil {
			return nil, fmt.Errorf("report: render table %q: %w", t.Title, err)
		}
		out.Tables = append(out.Tables, template.HTML(buf.String()))
	}
	return out, nil
}
