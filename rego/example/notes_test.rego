package toolgate_test

import data.toolgate

call(tool, target) := {"kind": "rest", "phase": "call", "tool": {
	"name": tool, "arguments": {"path": target}, "target": target,
	"targets": [{"arg": "path", "target": target, "raw": target, "escapes": false}],
}}

# call2 is a call of tool whose path is first and whose file is second.
call2(tool, first, second) := {"kind": "rest", "phase": "call", "tool": {
	"name": tool, "arguments": {"path": first, "file": second}, "target": first,
	"targets": [
		{"arg": "path", "target": first, "raw": first, "escapes": false},
		{"arg": "file", "target": second, "raw": second, "escapes": false},
	],
}}

# A decoy path does not hide the file a tool reads.
test_decoy_target if {
	some r in toolgate.deny with input as call2("read_file", "README.md", ".env")
	r.id == "example.secrets"
	count(toolgate.allow) == 0 with input as call2("read_file", "README.md", ".env")
	count(toolgate.allow) == 0 with input as call2("read_file", "README.md", "notes/x")
	count(toolgate.allow) == 1 with input as call2("read_file", "README.md", "chapters/01.md")
	count(toolgate.ask) == 0 with input as call2("write_note", "notes/a", "other/b")
	some d in toolgate.deny with input as call2("write_note", "notes/a", "other/b")
	d.id == "example.write_elsewhere"
}

# An argument toolgate cannot read as a path is allowed by nothing, not
# even beside a target that would be.
test_opaque_target if {
	opaque := {"kind": "rest", "phase": "call", "tool": {"name": "read_file", "arguments": {"path": {"p": "README.md"}}, "targets": [{"arg": "path", "opaque": true}]}}
	count(toolgate.allow) == 0 with input as opaque
	beside := {"kind": "rest", "phase": "call", "tool": {
		"name": "read_file", "arguments": {"path": "README.md", "file": {"x": ".env"}}, "target": "README.md",
		"targets": [{"arg": "path", "target": "README.md", "raw": "README.md", "escapes": false}, {"arg": "file", "opaque": true}],
	}}
	count(toolgate.allow) == 0 with input as beside
	notes := {"kind": "rest", "phase": "call", "tool": {
		"name": "write_note", "arguments": {"path": "notes/a", "file": {"x": "b"}}, "target": "notes/a",
		"targets": [{"arg": "path", "target": "notes/a", "raw": "notes/a", "escapes": false}, {"arg": "file", "opaque": true}],
	}}
	count(toolgate.ask) == 0 with input as notes
}

# A document with only tool.target (logged by an older toolgate) is read
# as that one target.
test_without_targets if {
	old := {"kind": "rest", "phase": "call", "tool": {"name": "read_file", "arguments": {"path": "README.md"}, "target": "README.md"}}
	count(toolgate.allow) == 1 with input as old
	some r in toolgate.deny with input as {"kind": "rest", "phase": "call", "tool": {"name": "read_file", "target": ".env"}}
	r.id == "example.secrets"
}

test_read_readme_allowed if {
	some r in toolgate.allow with input as call("read_file", "README.md")
	r.id == "example.read_book"
}

test_read_chapter_allowed if {
	count(toolgate.allow) == 1 with input as call("read_file", "chapters/01.md")
}

test_read_other_not_allowed if {
	count(toolgate.allow) == 0 with input as call("read_file", "notes/today.txt")
}

test_env_denied_for_every_tool if {
	every tool in ["read_file", "write_note", "delete_file"] {
		some r in toolgate.deny with input as call(tool, ".env")
		r.id == "example.secrets"
	}
}

test_nested_env_denied if {
	some r in toolgate.deny with input as call("read_file", "config/.env")
	r.id == "example.secrets"
}

test_git_denied if {
	some r in toolgate.deny with input as call("read_file", ".git/config")
	r.id == "example.secrets"
}

test_gitignore_not_a_secret if {
	count(toolgate.deny) == 0 with input as call("read_file", ".gitignore")
}

test_write_note_asks if {
	some r in toolgate.ask with input as call("write_note", "notes/today.txt")
	r.id == "example.write_note"
	count(toolgate.deny) == 0 with input as call("write_note", "notes/today.txt")
}

test_write_elsewhere_denied if {
	some r in toolgate.deny with input as call("write_note", "chapters/01.md")
	r.id == "example.write_elsewhere"
}

test_write_without_target_denied if {
	some r in toolgate.deny with input as {"kind": "rest", "tool": {"name": "write_note", "arguments": {}}}
	r.id == "example.write_elsewhere"
}

test_delete_always_denied if {
	some r in toolgate.deny with input as call("delete_file", "notes/today.txt")
	r.id == "example.no_delete"
}

test_list_phase_shows_runnable_tools if {
	every tool in ["read_file", "write_note"] {
		count(toolgate.deny) == 0 with input as {"kind": "mcp", "phase": "list", "tool": {"name": tool}}
	}
	count(toolgate.allow) > 0 with input as {"kind": "mcp", "phase": "list", "tool": {"name": "read_file"}}
	count(toolgate.ask) == 0 with input as {"kind": "mcp", "phase": "list", "tool": {"name": "read_file"}}
}

# Every write that can run asks, so write_note is listed as asking (marked,
# and hidden by mode dont_ask).
test_list_phase_marks_write_note if {
	some r in toolgate.ask with input as {"kind": "mcp", "phase": "list", "tool": {"name": "write_note"}}
	r.id == "example.listed_ask"
}

test_list_phase_hides_delete if {
	some r in toolgate.deny with input as {"kind": "mcp", "phase": "list", "tool": {"name": "delete_file"}}
	r.id == "example.no_delete"
}
