package main

// --go-trace FILE: the Go runtime's execution trace (std runtime/trace) of the run, for the
// conductor's runtime-traced runs (gotrace-reduce/ reads it). Off unless asked: the tracer adds
// memory and time to every goroutine event.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/trace"
)

// goTrace is an open trace file and the first error writing it (runtime/trace drops its writer's
// errors; a trace cut short must not pass for a whole one).
type goTrace struct {
	file     *os.File
	writeErr error
}

func (g *goTrace) Write(p []byte) (int, error) {
	n, err := g.file.Write(p)
	if err != nil && g.writeErr == nil {
		g.writeErr = err
	}
	return n, err
}

// openGoTrace opens path for the trace before anything is printed, so that an unwritable path is
// bad usage (exit 2). A dry run only checks: a file it had to create is removed again.
func openGoTrace(path string, dryRun bool) (*goTrace, error) {
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		return nil, fmt.Errorf("--go-trace '%s': is a directory", path)
	}
	_, statErr := os.Lstat(path)
	existed := statErr == nil
	mode := os.O_WRONLY | os.O_CREATE
	if !dryRun {
		mode |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, mode, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--go-trace '%s': %v", path, errors.Unwrap(err))
	}
	if dryRun {
		f.Close()
		if !existed {
			os.Remove(path)
		}
		return nil, nil
	}
	return &goTrace{file: f}, nil
}

// start starts the runtime's tracer on the file.
func (g *goTrace) start() error {
	return trace.Start(g)
}

// stop stops the tracer (runtime/trace returns once every buffer is written) and closes the
// file. The error is the first one writing or closing it.
func (g *goTrace) stop() error {
	trace.Stop()
	if err := g.file.Close(); err != nil && g.writeErr == nil {
		g.writeErr = err
	}
	return g.writeErr
}

var _ io.Writer = (*goTrace)(nil)
