package main

// The tables under schema/ that the Go and Rust tests both check every row of.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// tableRows reads schema/<name>: every line that is neither empty nor a # comment, split at tabs.
// Each row must have columns columns, and there must be at least atLeast rows.
func tableRows(t *testing.T, name string, columns, atLeast int) [][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "schema", name))
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) != columns {
			t.Fatalf("%s: malformed row %q", name, line)
		}
		rows = append(rows, cols)
	}
	if len(rows) < atLeast {
		t.Fatalf("%s: only %d rows, want at least %d", name, len(rows), atLeast)
	}
	return rows
}

// unescape turns a table's \n into a newline.
func unescape(text string) string { return strings.ReplaceAll(text, `\n`, "\n") }

// tableUint parses a number a table gives.
func tableUint(t *testing.T, text string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		t.Fatalf("%q is not a number", text)
	}
	return v
}

// tableOptional parses a number, or - for none.
func tableOptional(t *testing.T, text string) *uint64 {
	t.Helper()
	if text == "-" {
		return nil
	}
	return opt(tableUint(t, text), true)
}

// show writes an optional number as the tables do.
func show(v *uint64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatUint(*v, 10)
}
