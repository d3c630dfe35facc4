// Command gotrace-reduce turns a Go execution trace (goroutines --go-trace, or any Go program's
// runtime/trace output) into spawnscope's raw records of goroutine state changes: BIN, laid out
// as schema/go-sched-record.tsv says, and JSON, its tables (reasons, start functions), clock and
// counts. Its own module: the workloads stay std only and never link it.
//
// Exit codes: 0 done; 1 the trace could not be read or the output written; 2 bad usage.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
)

// nopCloser: the Ps' records not asked for.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

const usage = "usage: gotrace-reduce [--max-records N] TRACE RECORDS.bin SUMMARY.json [PROCS.bin]\n"

// defaultMaxRecords bounds RECORDS.bin to 2^24 records × 40 bytes = 671 MB (0.63 GiB), whatever
// the trace's length: a pingpong of 10,000 pairs at its default 10,000 rounds changes goroutine
// state about 400 M times (16 GB of records uncut). The conductor passes its own cap (the same,
// crates/measure/src/go_trace.rs): it also draws a running slice per start into the Perfetto
// trace, which ui.perfetto.dev must open beside the kernel's packets.
const defaultMaxRecords = 1 << 24

func main() {
	flags := flag.NewFlagSet("gotrace-reduce", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	maxRecords := flags.Uint64("max-records", defaultMaxRecords,
		"write the trace's first N records (in time order); count the rest")
	if err := flags.Parse(os.Args[1:]); err == flag.ErrHelp {
		fmt.Print(usage)
		return
	} else if err != nil {
		fmt.Fprintf(os.Stderr, "gotrace-reduce: %v\n%s", err, usage)
		os.Exit(2)
	}
	args := flags.Args()
	if len(args) != 3 && len(args) != 4 {
		fmt.Fprintf(os.Stderr, "gotrace-reduce: expected 3 or 4 arguments, got %d\n%s", len(args), usage)
		os.Exit(2)
	}
	procsPath := ""
	if len(args) == 4 {
		procsPath = args[3]
	}
	if err := run(args[0], args[1], args[2], procsPath, *maxRecords); err != nil {
		fmt.Fprintf(os.Stderr, "gotrace-reduce: %v\n", err)
		os.Exit(1)
	}
}

func run(tracePath, binPath, jsonPath, procsPath string, maxRecords uint64) error {
	in, err := os.Open(tracePath)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(binPath)
	if err != nil {
		return err
	}
	var procs io.WriteCloser = nopCloser{io.Discard}
	if procsPath != "" {
		if procs, err = os.Create(procsPath); err != nil {
			out.Close()
			return err
		}
	}
	sum, err := reduceKeeping(in, out, procs, maxRecords)
	if closeErr := out.Close(); err == nil {
		err = closeErr
	}
	if closeErr := procs.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", tracePath, err)
	}
	var text bytes.Buffer
	encoder := json.NewEncoder(&text)
	encoder.SetEscapeHTML(false)
	encoder.SetIndent("", "  ")
	if err := encoder.Encode(sum); err != nil {
		return err
	}
	return os.WriteFile(jsonPath, text.Bytes(), 0o644)
}
