package toolname

import (
	"slices"
	"testing"
)

func TestPrefixes(t *testing.T) {
	for name, want := range map[string][]string{
		"delete_file.json":     {"delete_file"},
		"Delete_File.XML":      {"Delete_File"},
		"delete_file.v2":       {"delete_file"},
		"delete_file.":         {"delete_file"},
		"delete_file.json.zzz": {"delete_file", "delete_file.json"},
		"fs.read":              {"fs"},
		".json":                nil,
		"plain":                nil,
		"":                     nil,
	} {
		if got := Prefixes(name); !slices.Equal(got, want) {
			t.Errorf("Prefixes(%q) = %q, want %q", name, got, want)
		}
	}
}
