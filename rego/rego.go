// Package rego holds toolgate's shipped Rego: the library every policy is
// loaded with (lib/, package toolgate.lib) and the example policy used by
// `toolgate quickstart` (example/, package toolgate), each with its
// _test.rego files. It only embeds them; package policy compiles them.
package rego

import (
	"embed"
	"io/fs"
)

//go:embed lib example
var files embed.FS

// Library returns the shipped library, always loaded.
func Library() fs.FS { return sub("lib") }

// Example returns the example policy of the quickstart.
func Example() fs.FS { return sub("example") }

func sub(dir string) fs.FS {
	f, err := fs.Sub(files, dir)
	if err != nil {
		panic(err) // unreachable: dir is embedded above
	}
	return f
}
