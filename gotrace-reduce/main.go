// Command gotrace-reduce turns a Go execution trace (goroutines --go-trace, or any Go program's
// runtime/trace output) into spawnscope's raw records of goroutine state changes: BIN, laid out
// as schema/go-sched-record.tsv says, and JSON, its tables (reasons, start functions), clock and
// counts; with PROCS.bin, the Ps' state changes too (schema/go-proc-record.tsv; without it they
// are only counted). Its own module: the workloads stay std only and never link it.
//
// Exit codes: 0 done; 1 the trace could not be read or the output written; 2 bad usage.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// nopCloser: the Ps' records not asked for.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

const usage = "usage: gotrace-reduce TRACE RECORDS.bin SUMMARY.json [PROCS.bin]\n"

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "--help" || os.Args[1] == "-h") {
		fmt.Print(usage)
		return
	}
	if len(os.Args) != 4 && len(os.Args) != 5 {
		fmt.Fprintf(os.Stderr, "gotrace-reduce: expected 3 or 4 arguments, got %d\n%s", len(os.Args)-1, usage)
		os.Exit(2)
	}
	procsPath := ""
	if len(os.Args) == 5 {
		procsPath = os.Args[4]
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3], procsPath); err != nil {
		fmt.Fprintf(os.Stderr, "gotrace-reduce: %v\n", err)
		os.Exit(1)
	}
}

func run(tracePath, binPath, jsonPath, procsPath string) error {
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
	sum, err := reduce(in, out, procs)
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
