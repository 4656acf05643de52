# METADATA
# title: example policy of toolgate quickstart
# description: |
#   The notes tool server (read_file, write_note, delete_file) guarded the
#   way a careful team would: reading the book is fine, secrets never leave,
#   notes need a human, nothing is deleted.
package toolgate

# A call's targets are every argument named in the upstream's target_args
# (input.tool.targets), not only the first (input.tool.target): a tool that
# reads "file" may be sent a decoy "path". So an allow checks every target,
# and a deny any one. An argument toolgate cannot read as a path (an object,
# a number) is opaque: it could name anything, so nothing allows it. A
# document without tool.targets (written by hand, or logged by an older
# toolgate) has its one tool.target.
targets := [x.target | some x in input.tool.targets; is_string(x.target)] if {
	input.tool.targets
} else := [input.tool.target] if {
	is_string(input.tool.target)
} else := []

opaque if {
	some x in input.tool.targets
	x.opaque
}

# Reading the README and the chapters is allowed.
allow contains {"id": "example.read_book", "message": "reading the book is allowed"} if {
	input.tool.name == "read_file"
	count(targets) > 0
	not opaque
	every t in targets {
		book(t)
	}
}

book("README.md")

book(target) if startswith(target, "chapters/")

# Secrets and the repository's internals are denied to every tool.
deny contains {"id": "example.secrets", "message": sprintf("%s holds secrets", [t])} if {
	some t in targets
	secret(t)
}

secret(target) if base(target) == ".env"

secret(target) if base(target) == ".git"

secret(target) if contains(concat("", ["/", target, "/"]), "/.git/")

base(target) := b if {
	parts := split(target, "/")
	b := parts[count(parts) - 1]
}

# Writing a note asks a human first; writing anywhere else is denied.
ask contains {"id": "example.write_note", "message": sprintf("write to %s needs approval", [concat(", ", targets)])} if {
	input.tool.name == "write_note"
	in_notes
}

# A call without a target is not in notes/ either: a helper rule, because
# "not startswith(input.tool.target, ...)" would be undefined, not true,
# when the target is missing.
deny contains {"id": "example.write_elsewhere", "message": "notes may only be written under notes/"} if {
	input.tool.name == "write_note"
	not listing
	not in_notes
}

in_notes if {
	count(targets) > 0
	not opaque
	every t in targets {
		startswith(t, "notes/")
	}
}

# Listing tools (MCP tools/list, phase "list": no arguments yet): a tool is
# shown when some call of it could run, and marked as one that may ask when
# those calls ask. read_file is shown; write_note is shown as asking, every
# write that can run does (so mode dont_ask, which refuses asks, hides it);
# delete_file stays hidden: its deny below fires in every phase.
allow contains {"id": "example.listed", "message": "some calls of this tool can run"} if {
	listing
	input.tool.name == "read_file"
}

ask contains {"id": "example.listed_ask", "message": "the calls of this tool that can run need approval"} if {
	listing
	input.tool.name == "write_note"
}

listing if input.phase == "list"

# Nothing is ever deleted.
deny contains {"id": "example.no_delete", "message": "delete_file is never allowed"} if {
	input.tool.name == "delete_file"
}
