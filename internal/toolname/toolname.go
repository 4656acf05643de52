// Package toolname holds what toolgate knows of how web stacks read a
// tool's name in a REST path, for the rules table's check and the hooks'
// matching to read it alike.
package toolname

import "strings"

// formatSuffixes are the extensions a router may read as a response
// format rather than part of the name: Rails' routes take an optional
// (.:format), and Spring MVC matched suffixes, so both run delete_file for
// delete_file.json.
var formatSuffixes = map[string]bool{
	"json": true, "xml": true, "html": true, "htm": true, "txt": true, "text": true,
	"csv": true, "yaml": true, "yml": true, "js": true, "atom": true, "rss": true,
}

// WithoutFormat returns name without a format suffix ("delete_file" for
// "delete_file.json", in any case), and whether it had one.
func WithoutFormat(name string) (string, bool) {
	i := strings.LastIndexByte(name, '.')
	if i <= 0 || !formatSuffixes[strings.ToLower(name[i+1:])] {
		return name, false
	}
	return name[:i], true
}
