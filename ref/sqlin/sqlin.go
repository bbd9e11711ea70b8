// Package sqlin builds the composite-key predicates the reference server
// uses to look many (a, b) keys up in one statement:
// "(a = ? AND b = ?) OR (a = ? AND b = ?) ...", which both MySQL 8 and
// MariaDB serve from the composite index; constant id lists; and the
// per-group constant of a multi-row update ("CASE WHEN col IN (...) THEN d
// ... ELSE d0 END"), whose constant IN lists both servers evaluate by binary
// search.
//
// It builds SQL text and argument lists only; it must not execute anything
// or know any table.
package sqlin

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

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

// Uints appends ids to sb, comma-separated.
func Uints(sb *strings.Builder, ids []uint64) {
	for i, id := range ids {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.FormatUint(id, 10))
	}
}

// StepCase appends to sb the value each row of col gets from steps (a
// value -> the ids that take it; every id in exactly one list): the value
// itself when there is one, else "CASE WHEN col IN (ids) THEN value ... ELSE
// v0 END" with v0 the value of most ids (the smallest on a tie), so that
// the common case costs no comparison list. col is a trusted column name.
func StepCase(sb *strings.Builder, col string, steps map[uint64][]uint64) {
	var common uint64
	first := true
	for v, ids := range steps {
		if first || len(ids) > len(steps[common]) || (len(ids) == len(steps[common]) && v < common) {
			common, first = v, false
		}
	}
	if len(steps) == 1 {
		sb.WriteString(strconv.FormatUint(common, 10))
		return
	}
	sb.WriteString("CASE")
	for _, v := range slices.Sorted(maps.Keys(steps)) {
		if v == common {
			continue
		}
		ids := slices.Sorted(slices.Values(steps[v]))
		sb.WriteString(" WHEN ")
		sb.WriteString(col)
		sb.WriteString(" IN (")
		Uints(sb, ids)
		sb.WriteString(") THEN ")
		sb.WriteString(strconv.FormatUint(v, 10))
	}
	sb.WriteString(" ELSE ")
	sb.WriteString(strconv.FormatUint(common, 10))
	sb.WriteString(" END")
}
