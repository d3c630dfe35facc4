package main

// Parsing of the flag values both workloads share, with the same grammar as threads-rs/src/units.rs:
// whole numbers, durations with a unit, and byte sizes with an optional binary suffix. The cases
// both must pass are schema/units.tsv.

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// parseCount accepts a whole number in [min, max], digits only (no sign, exponent or separators).
func parseCount(text string, min, max uint64) (uint64, error) {
	rangeErr := fmt.Errorf("must be a whole number from %d to %d", min, max)
	if text == "" || strings.TrimLeft(text, "0123456789") != "" {
		return 0, rangeErr
	}
	v, err := strconv.ParseUint(text, 10, 64)
	if err != nil || v < min || v > max {
		return 0, rangeErr
	}
	return v, nil
}

// minU64 and maxU64 stand in for the min and max builtins, which need Go 1.21: the module builds
// with Go 1.19, the version Debian 12 ships.
func minU64(a, b uint64) uint64 {
	if a < b {
		return a
	}
	return b
}

func maxU64(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

var durationUnits = map[string]uint64{
	"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000,
	"s": 1_000_000_000, "m": 60_000_000_000, "h": 3_600_000_000_000,
}

func isDigitOrDot(r rune) bool { return (r >= '0' && r <= '9') || r == '.' }

// parseDurationNs accepts one or more <number><unit> groups (ns, us, µs, ms, s, m, h), like 500ms,
// 1.5s or 1m30s. A bare number is refused: the unit is never guessed.
func parseDurationNs(text string) (uint64, error) {
	want := fmt.Errorf("must be a duration with a unit (ns, us, ms, s, m, h), like 500ms, 1s or 1m30s")
	tooLarge := fmt.Errorf("is too large")
	if text == "" {
		return 0, want
	}
	total := new(big.Int)
	rest := text
	for rest != "" {
		numberLen := strings.IndexFunc(rest, func(r rune) bool { return !isDigitOrDot(r) })
		if numberLen < 0 {
			numberLen = len(rest)
		}
		number, tail := rest[:numberLen], rest[numberLen:]
		unitLen := strings.IndexFunc(tail, isDigitOrDot)
		if unitLen < 0 {
			unitLen = len(tail)
		}
		unit, next := tail[:unitLen], tail[unitLen:]
		unitNs, ok := durationUnits[unit]
		if !ok {
			return 0, want
		}
		whole, frac, hasDot := strings.Cut(number, ".")
		digitsOnly := func(s string) bool { return strings.TrimLeft(s, "0123456789") == "" }
		if whole == "" || !digitsOnly(whole) || !digitsOnly(frac) || (hasDot && frac == "") {
			return 0, want
		}
		group, ok := new(big.Int).SetString(whole, 10)
		if !ok {
			return 0, want
		}
		group.Mul(group, new(big.Int).SetUint64(unitNs))
		// Fractions are exact to the nanosecond: digits beyond that are dropped.
		scale := unitNs
		for _, d := range frac {
			scale /= 10
			group.Add(group, new(big.Int).SetUint64(uint64(d-'0')*scale))
		}
		total.Add(total, group)
		if total.Cmp(new(big.Int).SetUint64(math.MaxUint64)) > 0 {
			return 0, tooLarge
		}
		rest = next
	}
	return total.Uint64(), nil
}

var byteSuffixes = map[string]uint64{
	"": 1, "k": 1 << 10, "K": 1 << 10, "KiB": 1 << 10, "m": 1 << 20, "M": 1 << 20, "MiB": 1 << 20,
	"g": 1 << 30, "G": 1 << 30, "GiB": 1 << 30,
}

// parseBytes accepts digits with an optional k/K/KiB, m/M/MiB or g/G/GiB suffix (powers of 1024).
func parseBytes(text string, max uint64) (uint64, error) {
	want := fmt.Errorf("must be a byte count like 65536, 64K or 2MiB")
	digitsLen := strings.IndexFunc(text, func(r rune) bool { return r < '0' || r > '9' })
	if digitsLen < 0 {
		digitsLen = len(text)
	}
	digits, suffix := text[:digitsLen], text[digitsLen:]
	multiplier, ok := byteSuffixes[suffix]
	if !ok || digits == "" {
		return 0, want
	}
	tooLarge := fmt.Errorf("is larger than %d bytes", max)
	value, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || value > max/multiplier {
		return 0, tooLarge
	}
	return value * multiplier, nil
}
