// Package toolname holds what toolgate knows of how web stacks read a
// tool's name in a REST path, for the rules table's check and the hooks'
// matching to read it alike.
package toolname

// Prefixes returns what name is up to each of its dots, shortest first
// ("a" and "a.b" for "a.b.c"; "delete_file" for "delete_file."): the
// names a router that reads a suffix as a format may run it as. Rails'
// routes take an optional (.:format) of any extension, and Spring MVC's
// suffix pattern match runs /tools/delete_file for delete_file.anything,
// dots and all, so no list of formats covers them. A name that starts
// with a dot has no prefix there; a name without one, none at all.
func Prefixes(name string) []string {
	var out []string
	for i := 1; i < len(name); i++ {
		if name[i] == '.' {
			out = append(out, name[:i])
		}
	}
	return out
}
