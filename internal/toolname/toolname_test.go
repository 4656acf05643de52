package toolname

import "testing"

func TestWithoutFormat(t *testing.T) {
	for name, want := range map[string]string{
		"delete_file.json": "delete_file",
		"Delete_File.XML":  "Delete_File",
		"fs.read":          "fs.read",
		"delete_file.v2":   "delete_file.v2",
		".json":            ".json",
		"plain":            "plain",
	} {
		got, cut := WithoutFormat(name)
		if got != want || cut != (got != name) {
			t.Errorf("WithoutFormat(%q) = %q, %v; want %q", name, got, cut, want)
		}
	}
}
