// Package sqlin builds the composite-key predicates the reference server
// uses to look many (a, b) keys up in one statement:
// "(a = ? AND b = ?) OR (a = ? AND b = ?) ...", which both MySQL 8 and
// MariaDB serve from the composite index; constant id lists; and the
// per-group constant of a multi-row update ("CASE WHEN col IN (...) THEN d
// ... ELSE d0 END"), whose constant IN lists both servers evaluate by binary
// search.
//
// It also writes the literals of the write path's multi-row statements
// straight into the statement text (Uint, Literal), so that a batch of a few
// hundred rows costs no per-value string or argument allocation and no
// client-side interpolation pass.
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

// UintTuples appends n tuples "(a,b)" of at(i), comma-separated: the
// values of a multi-row VALUES list or of a row-constructor IN list.
func UintTuples(sb *strings.Builder, n int, at func(i int) (a, b uint64)) {
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		a, b := at(i)
		sb.WriteByte('(')
		Uint(sb, a)
		sb.WriteByte(',')
		Uint(sb, b)
		sb.WriteByte(')')
	}
}

// Uints appends ids to sb, comma-separated.
func Uints(sb *strings.Builder, ids []uint64) {
	for i, id := range ids {
		if i > 0 {
			sb.WriteByte(',')
		}
		Uint(sb, id)
	}
}

// Uint appends v in decimal without allocating (strconv.FormatUint
// allocates a string for every value >= 100).
func Uint(sb *strings.Builder, v uint64) {
	var b [20]byte
	sb.Write(strconv.AppendUint(b[:0], v, 10))
}

const hexDigits = "0123456789abcdef"

// Literal appends s as an SQL string literal that means the same bytes in
// every sql_mode (NO_BACKSLASH_ESCAPES or not) on MySQL 8 and MariaDB:
// quoted as it is when every byte is printable ASCII other than ' and \
// (nothing in it is an escape in either mode), else as a hexadecimal literal
// X'...' (a binary string: stored as these bytes in a binary column, and
// converted with the usual validation into a character column, exactly as a
// quoted string of the same bytes would be in the utf8mb4 connection
// character set).
func Literal(sb *strings.Builder, s string) {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '\'' || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		sb.WriteByte('\'')
		sb.WriteString(s)
		sb.WriteByte('\'')
		return
	}
	sb.WriteString("X'")
	var b [64]byte
	for i := 0; i < len(s); {
		n := 0
		for ; n < len(b) && i < len(s); i++ {
			b[n], b[n+1] = hexDigits[s[i]>>4], hexDigits[s[i]&0x0f]
			n += 2
		}
		sb.Write(b[:n])
	}
	sb.WriteByte('\'')
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
		Uint(sb, common)
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
		Uint(sb, v)
	}
	sb.WriteString(" ELSE ")
	Uint(sb, common)
	sb.WriteString(" END")
}
