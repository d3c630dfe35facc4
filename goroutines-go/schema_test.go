package main

// A JSON Schema validator for the keywords schema/workload-events.schema.json uses. The module is
// standard-library only (it is what is measured), so no validator module can be imported; this one
// refuses any keyword it does not implement rather than silently ignoring it, and
// TestValidatorRejects proves it rejects what it must.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type schemaValidator struct{ root map[string]any }

func loadSchema(t *testing.T) *schemaValidator {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "schema", "workload-events.schema.json"))
	if err != nil {
		t.Fatalf("reading the schema: %v", err)
	}
	var root map[string]any
	if err := json.Unmarshal(data, &root); err != nil {
		t.Fatalf("the schema is not JSON: %v", err)
	}
	return &schemaValidator{root}
}

// decode parses one JSON document keeping numbers exact, so integers can be told from floats.
func decode(line string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func (s *schemaValidator) validateLine(line string) error {
	v, err := decode(line)
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	return s.validate(s.root, v, "$")
}

var annotations = map[string]bool{"$schema": true, "$id": true, "$defs": true, "title": true, "description": true}

func typeOf(v any) []string {
	switch x := v.(type) {
	case nil:
		return []string{"null"}
	case bool:
		return []string{"boolean"}
	case string:
		return []string{"string"}
	case []any:
		return []string{"array"}
	case map[string]any:
		return []string{"object"}
	case json.Number:
		if strings.ContainsAny(x.String(), ".eE") {
			return []string{"number"}
		}
		return []string{"integer", "number"}
	}
	return []string{"unknown"}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func (s *schemaValidator) resolve(ref string) (map[string]any, error) {
	name, ok := strings.CutPrefix(ref, "#/$defs/")
	if !ok {
		return nil, fmt.Errorf("unsupported $ref %q", ref)
	}
	def, ok := s.root["$defs"].(map[string]any)[name].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("$ref %q names no definition", ref)
	}
	return def, nil
}

func (s *schemaValidator) validate(schema map[string]any, v any, path string) error {
	for key, rule := range schema {
		if annotations[key] {
			continue
		}
		if err := s.check(key, rule, schema, v, path); err != nil {
			return err
		}
	}
	return nil
}

func (s *schemaValidator) check(key string, rule any, schema map[string]any, v any, path string) error {
	switch key {
	case "$ref":
		def, err := s.resolve(rule.(string))
		if err != nil {
			return err
		}
		return s.validate(def, v, path)
	case "oneOf":
		matched := 0
		var firstErr error
		for _, option := range rule.([]any) {
			if err := s.validate(option.(map[string]any), v, path); err == nil {
				matched++
			} else if firstErr == nil {
				firstErr = err
			}
		}
		if matched != 1 {
			return fmt.Errorf("%s: matches %d of the oneOf options (first mismatch: %v)", path, matched, firstErr)
		}
	case "type":
		wanted := []any{rule}
		if list, ok := rule.([]any); ok {
			wanted = list
		}
		for _, w := range wanted {
			for _, t := range typeOf(v) {
				if w == t {
					return nil
				}
			}
		}
		return fmt.Errorf("%s: %v is not of type %v", path, v, rule)
	case "const":
		if !jsonEqual(v, rule) {
			return fmt.Errorf("%s: %v is not %v", path, v, rule)
		}
	case "enum":
		for _, option := range rule.([]any) {
			if jsonEqual(v, option) {
				return nil
			}
		}
		return fmt.Errorf("%s: %v is not one of %v", path, v, rule)
	case "minimum":
		if n, ok := v.(json.Number); ok {
			f, _ := n.Float64()
			if f < rule.(float64) {
				return fmt.Errorf("%s: %v is below the minimum %v", path, v, rule)
			}
		}
	case "required":
		if obj, ok := v.(map[string]any); ok {
			for _, name := range rule.([]any) {
				if _, present := obj[name.(string)]; !present {
					return fmt.Errorf("%s: missing %q", path, name)
				}
			}
		}
	case "properties":
		if obj, ok := v.(map[string]any); ok {
			for name, sub := range rule.(map[string]any) {
				if value, present := obj[name]; present {
					if err := s.validate(sub.(map[string]any), value, path+"."+name); err != nil {
						return err
					}
				}
			}
		}
	case "additionalProperties":
		obj, ok := v.(map[string]any)
		if !ok || rule != false {
			return nil
		}
		props, _ := schema["properties"].(map[string]any)
		for name := range obj {
			if _, declared := props[name]; !declared {
				return fmt.Errorf("%s: unexpected key %q", path, name)
			}
		}
	case "items":
		if list, ok := v.([]any); ok {
			for i, item := range list {
				if err := s.validate(rule.(map[string]any), item, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	default:
		return fmt.Errorf("the test validator does not implement the schema keyword %q", key)
	}
	return nil
}

// TestValidatorRejects proves the validator can fail: each document breaks one rule.
func TestValidatorRejects(t *testing.T) {
	s := loadSchema(t)
	good := `{"event":"phase","name":"spawn","t_ns":5}`
	if err := s.validateLine(good); err != nil {
		t.Fatalf("a valid phase event was rejected: %v", err)
	}
	bad := map[string]string{
		"unknown event":   `{"event":"nap","t_ns":5}`,
		"missing key":     `{"event":"phase","name":"spawn"}`,
		"wrong type":      `{"event":"phase","name":"spawn","t_ns":"5"}`,
		"float for int":   `{"event":"phase","name":"spawn","t_ns":5.5}`,
		"negative":        `{"event":"phase","name":"spawn","t_ns":-1}`,
		"bad enum":        `{"event":"phase","name":"warmup","t_ns":5}`,
		"extra key":       `{"event":"phase","name":"spawn","t_ns":5,"extra":1}`,
		"nested mismatch": `{"event":"peak","t_ns":1,"alive":1,"expected":1,"status":{"vm_size_kb":1}}`,
		"not json":        `{"event":`,
	}
	for name, line := range bad {
		if err := s.validateLine(line); err == nil {
			t.Errorf("%s: %s was accepted", name, line)
		}
	}
}
