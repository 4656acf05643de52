package config

import (
	"errors"
	"strconv"
	"strings"
)

// leafFromString reads a value for leaf n from text: an environment
// variable, a flag given as a string, or a file value produced by ${}
// expansion. Booleans, whole numbers, durations and sizes are parsed, lists
// are comma-separated; strings stay as they are.
func leafFromString(n *node, s string) (any, error) {
	switch n.leaf {
	case leafBool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return nil, errors.New("expected true or false")
		}
		return b, nil
	case leafDuration:
		return ParseDuration(s)
	case leafByteSize:
		return ParseByteSize(s)
	case leafInt:
		s = strings.TrimSpace(s)
		if n, err := strconv.Atoi(s); err == nil {
			return n, nil
		}
		// As in the file, where YAML reads 1e4 as a float: a float with
		// no fractional part is a whole number.
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, errors.New("expected a whole number")
		}
		return intFrom(f)
	case leafStrings:
		return splitList(s), nil
	case leafMap:
		return splitPairs(s)
	}
	return s, nil
}

// checkLeaf checks a decoded value against leaf n and returns it in the form
// the decoder expects. Its errors describe the value's type, never the value.
func checkLeaf(n *node, v any) (any, error) {
	switch n.leaf {
	case leafString, leafSecret:
		switch v := v.(type) {
		case string:
			return v, nil
		case Secret:
			return string(v), nil
		}
		return nil, errors.New("expected a string, got " + describe(v))
	case leafBool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return nil, errors.New("expected true or false, got " + describe(v))
	case leafDuration:
		return durationFrom(v)
	case leafByteSize:
		return byteSizeFrom(v)
	case leafInt:
		return intFrom(v)
	case leafStrings:
		switch v := v.(type) {
		case []string:
			return v, nil
		case []any:
			out := make([]string, len(v))
			for i, e := range v {
				s, ok := e.(string)
				if !ok {
					return nil, errors.New("expected a list of strings, but entry " + strconv.Itoa(i) + " is " + describe(e))
				}
				out[i] = s
			}
			return out, nil
		}
		return nil, errors.New("expected a list, got " + describe(v))
	case leafMap:
		m, ok := asMapping(v)
		if !ok {
			if sm, isMap := v.(map[string]string); isMap {
				return sm, nil
			}
			return nil, errors.New("expected a mapping, got " + describe(v))
		}
		out := make(map[string]any, len(m))
		for k, e := range m {
			s, ok := e.(string)
			if !ok {
				return nil, errors.New("expected a mapping of strings, but the value of " + strconv.Quote(k) + " is " + describe(e))
			}
			out[k] = s
		}
		return out, nil
	}
	return nil, errors.New("not a value")
}

// fixFor says how to write a value of n.
func fixFor(n *node) string {
	switch {
	case n.list:
		return "write a list of mappings, one entry per line starting with -"
	case n.leaf == notLeaf:
		return "write the keys of " + n.path + " indented below it"
	case n.leaf == leafString, n.leaf == leafSecret:
		return "write a string; put numbers and true/false in quotes"
	case n.leaf == leafBool:
		return "write true or false"
	case n.leaf == leafDuration:
		return "write a duration such as 25s, 1h30m or 500ms; a bare number means seconds"
	case n.leaf == leafByteSize:
		return "write a size such as 1MiB, 512KiB, 64kB or 1048576"
	case n.leaf == leafInt:
		return "write a whole number such as 100, without quotes"
	case n.leaf == leafStrings:
		return "write a list such as [a, b]; in the environment, a comma-separated string"
	case n.leaf == leafMap:
		return "write a mapping of strings such as {U012ABC: alice@example.com}; in the environment, KEY=VALUE pairs separated by commas"
	}
	return ""
}

// intFrom converts a decoded YAML or flag value to an int: an integer of any
// Go type, or a float with no fractional part (YAML reads 1e4 as a float).
// Text is refused: a quoted number in the file is a string, as a quoted
// true is.
func intFrom(v any) (int, error) {
	n, ok := wholeNumber(v)
	switch {
	case !ok:
		return 0, errors.New("expected a whole number, got " + describe(v))
	case int64(int(n)) != n:
		return 0, errors.New("expected a whole number, got one too large")
	}
	return int(n), nil
}

// splitList splits a comma-separated list, trimming spaces and dropping
// empty items, so "a, b," is [a b].
func splitList(s string) []string {
	out := []string{}
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// splitPairs reads a mapping written as comma-separated KEY=VALUE pairs,
// trimming spaces: "U1=alice, U2=bob" is {U1: alice, U2: bob}.
func splitPairs(s string) (map[string]any, error) {
	out := map[string]any{}
	for _, item := range splitList(s) {
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return nil, errors.New("expected KEY=VALUE pairs separated by commas")
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}
