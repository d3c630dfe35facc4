package main

import "testing"

func TestParseCount(t *testing.T) {
	if v, err := parseCount("42", 1, 100); err != nil || v != 42 {
		t.Fatalf("42 -> %d, %v", v, err)
	}
	for _, bad := range []string{"", "0", "101", "-5", "+5", "1.5", "1e3", "4 2", "99999999999999999999999"} {
		if _, err := parseCount(bad, 1, 100); err == nil {
			t.Errorf("%q should be refused", bad)
		}
	}
}

func TestParseDuration(t *testing.T) {
	good := map[string]uint64{
		"1s": 1_000_000_000, "1.5s": 1_500_000_000, "1m30s": 90_000_000_000, "250us": 250_000,
		"0s": 0, "0.000000001s": 1,
	}
	for text, want := range good {
		if got, err := parseDurationNs(text); err != nil || got != want {
			t.Errorf("%q -> %d, %v; want %d", text, got, err, want)
		}
	}
	for _, bad := range []string{"", "5", "5x", "-1s", "s", "1.s", ".5s", "1s2", "1 s", "99999999999999999999h"} {
		if _, err := parseDurationNs(bad); err == nil {
			t.Errorf("%q should be refused", bad)
		}
	}
}

func TestParseBytes(t *testing.T) {
	good := map[string]uint64{"65536": 65536, "64K": 65536, "2MiB": 2 << 20, "1g": 1 << 30}
	for text, want := range good {
		if got, err := parseBytes(text, ^uint64(0)); err != nil || got != want {
			t.Errorf("%q -> %d, %v; want %d", text, got, err, want)
		}
	}
	for _, bad := range []string{"", "K", "2q", "-1", "1.5M", "1 M"} {
		if _, err := parseBytes(bad, ^uint64(0)); err == nil {
			t.Errorf("%q should be refused", bad)
		}
	}
	if _, err := parseBytes("2G", 1<<30); err == nil {
		t.Error("2G above a 1 GiB maximum should be refused")
	}
}
