package main

import (
	"strings"
	"testing"
)

// TestUnitsTable checks every row of schema/units.tsv, which threads-rs/src/units.rs checks too.
func TestUnitsTable(t *testing.T) {
	for _, row := range tableRows(t, "units.tsv", 5, 60) {
		parser, input, bound, outcome, value := row[0], row[1], row[2], row[3], row[4]
		var got uint64
		var err error
		switch parser {
		case "count":
			min, max, ok := strings.Cut(bound, "..")
			if !ok {
				t.Fatalf("count bound %q is not MIN..MAX", bound)
			}
			got, err = parseCount(input, tableUint(t, min), tableUint(t, max))
		case "duration":
			got, err = parseDurationNs(input)
		case "bytes":
			got, err = parseBytes(input, tableUint(t, bound))
		default:
			t.Fatalf("units.tsv: unknown parser %q", parser)
		}
		switch outcome {
		case "ok":
			if err != nil || got != tableUint(t, value) {
				t.Errorf("%s %q (%s): %d, %v; want %s", parser, input, bound, got, err, value)
			}
		case "err":
			if err == nil || err.Error() != value {
				t.Errorf("%s %q (%s): %d, %v; want the error %q", parser, input, bound, got, err, value)
			}
		default:
			t.Fatalf("units.tsv: unknown outcome %q", outcome)
		}
	}
}
