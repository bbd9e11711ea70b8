// Package sqlin builds the composite-key predicates the reference server
// uses to look many (a, b) keys up in one statement:
// "(a = ? AND b = ?) OR (a = ? AND b = ?) ...", which both MySQL 8 and
// MariaDB serve from the composite index.
//
// It builds SQL text and argument lists only; it must not execute anything
// or know any table.
package sqlin

import "strings"

// Pairs appends to sb a predicate matching any of n (colA, colB) pairs and
// returns args with each pair's two values, from at(i), appended in order.
// colA and colB are trusted column names, never user input.
func Pairs(sb *strings.Builder, colA, colB string, n int, args []any, at func(i int) (a, b any)) []any {
	for i := range n {
		if i > 0 {
			sb.WriteString(" OR ")
		}
		sb.WriteString("(")
		sb.WriteString(colA)
		sb.WriteString(" = ? AND ")
		sb.WriteString(colB)
		sb.WriteString(" = ?)")
		a, b := at(i)
		args = append(args, a, b)
	}
	return args
}
