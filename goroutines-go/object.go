package main

// object is a JSON object whose keys keep the order they were added in: readers expect `event`
// first, and the threads binary writes the same keys in the same order.

import (
	"bytes"
	"encoding/json"
	"math"
)

type field struct {
	key   string
	value any
}

type object []field

// with returns the object with one more key (builder style).
func (o object) with(key string, value any) object { return append(o, field{key, value}) }

func (o object) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		key, _ := json.Marshal(f.key)
		buf.Write(key)
		buf.WriteByte(':')
		// JSON has no NaN or infinity: they become null rather than invalid output.
		if x, ok := f.value.(float64); ok && (math.IsNaN(x) || math.IsInf(x, 0)) {
			buf.WriteString("null")
			continue
		}
		value, err := json.Marshal(f.value)
		if err != nil {
			return nil, err
		}
		buf.Write(value)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// optional is a value that is null when absent.
func optional(v uint64, present bool) any {
	if !present {
		return nil
	}
	return v
}
