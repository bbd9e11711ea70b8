// Package htmltest walks a parsed HTML page for the tests of the packages
// that write pages (capacity, report/runpage): the elements of a tag with
// given classes, an element's text and its attributes. It owns no page
// and holds no state; nothing outside tests imports it.
package htmltest

import (
	"strings"

	"golang.org/x/net/html"
)

// FindAll returns the elements under n (n included) named tag that have
// every class given, in document order.
func FindAll(n *html.Node, tag string, classes ...string) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == tag && hasClasses(n, classes) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func hasClasses(n *html.Node, classes []string) bool {
	for _, c := range classes {
		if !HasClass(n, c) {
			return false
		}
	}
	return true
}

// HasClass says whether class is one of n's classes.
func HasClass(n *html.Node, class string) bool {
	return strings.Contains(" "+Attr(n, "class")+" ", " "+class+" ")
}

// Attr is n's attribute key ("" when it has none).
func Attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// Text is the text of every text node under n, in document order.
func Text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}
