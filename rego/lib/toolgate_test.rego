package toolgate.lib_test

import data.toolgate.lib

# A seed table (allow Read, deny Read of secrets.txt, ask for every Write) with
# glob and exact-name rows, as toolgate serves it (tool_glob and target_glob set).
seed := [
	{"id": "r1", "effect": "allow", "tool": "Read", "target": "*", "tool_glob": false, "target_glob": false},
	{"id": "r2", "effect": "deny", "tool": "Read", "target": "secrets.txt", "tool_glob": false, "target_glob": false},
	{"id": "r3", "effect": "ask", "tool": "Write", "target": "*", "tool_glob": false, "target_glob": false},
	{"id": "g1", "effect": "allow", "tool": "fs.*", "target": "src/**", "tool_glob": true, "target_glob": true},
	{"id": "g2", "effect": "deny", "tool": "fs.write", "target": "src/*.lock", "tool_glob": false, "target_glob": true},
	{"id": "n1", "effect": "deny", "tool": "Edit", "target": "notes.txt", "tool_glob": false, "target_glob": false},
]

call(tool, target) := {"kind": "rest", "phase": "call", "tool": {"name": tool, "arguments": {"path": target}, "target": target}}

ids(set) := {r.id | some r in set}

test_allow_star_target if {
	ids(lib.allow) == {"r1"} with input as call("Read", "readme.txt") with data.toolgate.rules as seed
}

test_star_target_matches_without_target if {
	ids(lib.allow) == {"r1"} with input as {"kind": "rest", "tool": {"name": "Read", "arguments": {}}} with data.toolgate.rules as seed
}

test_deny_row_fires_beside_allow if {
	ids(lib.deny) == {"r2"} with input as call("Read", "secrets.txt") with data.toolgate.rules as seed
	ids(lib.allow) == {"r1"} with input as call("Read", "secrets.txt") with data.toolgate.rules as seed
}

test_ask_row if {
	ids(lib.ask) == {"r3"} with input as call("Write", "x") with data.toolgate.rules as seed
}

test_exact_never_matches_longer if {
	count(lib.deny) == 0 with input as call("Edit", "notes.txt.bak") with data.toolgate.rules as seed
	ids(lib.deny) == {"n1"} with input as call("Edit", "notes.txt") with data.toolgate.rules as seed
}

test_glob_any_depth if {
	ids(lib.allow) == {"g1"} with input as call("fs.read", "src/a/b/c.go") with data.toolgate.rules as seed
}

test_glob_one_segment if {
	ids(lib.deny) == {"g2"} with input as call("fs.write", "src/go.lock") with data.toolgate.rules as seed
	count(lib.deny) == 0 with input as call("fs.write", "src/a/go.lock") with data.toolgate.rules as seed
}

# A leading "**/" (or one after a "/") stands for no directory as well as
# some: "**/.env" denies the root .env.
test_glob_any_depth_none_included if {
	rows := [{"id": "env", "effect": "deny", "tool": "Read", "target": "**/.env", "tool_glob": false, "target_glob": true}]
	ids(lib.deny) == {"env"} with input as call("Read", ".env") with data.toolgate.rules as rows
	ids(lib.deny) == {"env"} with input as call("Read", "a/b/.env") with data.toolgate.rules as rows
	count(lib.deny) == 0 with input as call("Read", "a.env") with data.toolgate.rules as rows
}

test_glob_needs_target if {
	count(lib.allow) == 0 with input as {"kind": "rest", "tool": {"name": "fs.read", "arguments": {}}} with data.toolgate.rules as seed
}

test_no_rule_for_tool if {
	count(lib.allow) == 0 with input as call("Delete", "x") with data.toolgate.rules as seed
	count(lib.deny) == 0 with input as call("Delete", "x") with data.toolgate.rules as seed
	count(lib.ask) == 0 with input as call("Delete", "x") with data.toolgate.rules as seed
}

test_no_table if {
	count(lib.allow) == 0 with input as call("Read", "x")
}

test_target_escapes_denied if {
	ids(lib.deny) == {"toolgate.target_escapes"} with input as {"kind": "rest", "tool": {"name": "Read", "target": "../etc/passwd", "target_raw": "./../etc/passwd", "target_escapes": true}}
}

test_list_phase_allow_whatever_target if {
	ids(lib.allow) == {"g1"} with input as {"kind": "mcp", "phase": "list", "tool": {"name": "fs.read"}} with data.toolgate.rules as seed
}

test_list_phase_deny_only_whole_tool if {
	count(lib.deny) == 0 with input as {"kind": "mcp", "phase": "list", "tool": {"name": "Read"}} with data.toolgate.rules as seed
	hide := array.concat(seed, [{"id": "h", "effect": "deny", "tool": "Drop", "target": "*", "tool_glob": false, "target_glob": false}])
	ids(lib.deny) == {"h"} with input as {"kind": "mcp", "phase": "list", "tool": {"name": "Drop"}} with data.toolgate.rules as hide
}

listed(tool, mode) := {"kind": "mcp", "phase": "list", "mode": mode, "tool": {"name": tool}}

# Under dont_ask a listed tool's ask rows read as deny rows: only one on
# every target fires; in another mode each fires whatever its target.
test_list_phase_dont_ask_asks_only_whole_tool if {
	asks := array.concat(seed, [{"id": "w2", "effect": "ask", "tool": "fs.write", "target": "notes/*", "tool_glob": false, "target_glob": true}])
	count(lib.ask) == 0 with input as listed("fs.write", "dont_ask") with data.toolgate.rules as asks
	ids(lib.allow) == {"g1"} with input as listed("fs.write", "dont_ask") with data.toolgate.rules as asks
	ids(lib.ask) == {"w2"} with input as listed("fs.write", "default") with data.toolgate.rules as asks
	ids(lib.ask) == {"r3"} with input as listed("Write", "dont_ask") with data.toolgate.rules as asks
	ids(lib.ask) == {"w2"} with input as object.union(call("fs.write", "notes/a"), {"mode": "dont_ask"}) with data.toolgate.rules as asks
}

mcp(method) := {"kind": "mcp", "mcp": {"method": method}}

test_mcp_plumbing_allowed if {
	ids(lib.allow) == {"toolgate.mcp_plumbing"} with input as mcp("initialize")
	count(lib.deny) == 0 with input as mcp("initialize")
}

test_mcp_protocol_methods_allowed if {
	every m in [
		"initialize", "ping", "tools/list", "resources/list", "resources/templates/list", "prompts/list",
		"logging/setLevel", "server/discover", "subscriptions/listen",
		"tasks/get", "tasks/result", "tasks/list", "tasks/cancel", "tasks/update",
		"notifications/initialized", "notifications/cancelled", "notifications/progress",
		"notifications/roots/list_changed", "notifications/message", "notifications/resources/updated",
		"notifications/resources/list_changed", "notifications/tools/list_changed",
		"notifications/prompts/list_changed", "notifications/elicitation/complete", "notifications/tasks/status",
	] {
		ids(lib.allow) == {"toolgate.mcp_plumbing"} with input as mcp(m)
		count(lib.deny) == 0 with input as mcp(m)
	}
}

# A response (the client's answer to a server request), a batch, GET and
# DELETE carry no method and are plumbing, as before.
test_mcp_without_method_allowed if {
	ids(lib.allow) == {"toolgate.mcp_plumbing"} with input as mcp("")
	ids(lib.allow) == {"toolgate.mcp_plumbing"} with input as {"kind": "mcp", "http": {"method": "GET"}}
	count(lib.deny) == 0 with input as {"kind": "mcp", "http": {"method": "DELETE"}}
}

test_mcp_other_methods_denied if {
	every m in [
		"Tools/Call", "tools/call ", "tools/List", "TOOLS/LIST", " ping", "Initialize",
		"resources/subscribe", "sampling/createMessage", "roots/list", "elicitation/create",
		"notifications/", "notifications/other", "tasks/", "tasks/*", "x",
		# decided as tool calls, so never plumbing without their tool
		"tools/call", "resources/read", "prompts/get", "completion/complete",
	] {
		ids(lib.deny) == {"toolgate.mcp_method"} with input as mcp(m)
		count(lib.allow) == 0 with input as mcp(m)
	}
}

# subscriptions/listen that subscribes to resources is resources/subscribe
# by another name, denied as that is; list changes alone stay plumbing.
listen(params) := {"kind": "mcp", "mcp": {"method": "subscriptions/listen", "params": params}}

test_mcp_resource_subscriptions_denied if {
	every subs in [["file:///secrets/key"], "file:///secrets/key", {}] {
		ids(lib.deny) == {"toolgate.mcp_subscribe"} with input as listen({"notifications": {"resourceSubscriptions": subs}})
	}
	every params in [{}, {"notifications": {"toolsListChanged": true}}, {"notifications": {"resourceSubscriptions": []}}, {"notifications": {"resourceSubscriptions": null}}] {
		count(lib.deny) == 0 with input as listen(params)
		ids(lib.allow) == {"toolgate.mcp_plumbing"} with input as listen(params)
	}
}

# resources/read, prompts/get and completion/complete are calls of
# pseudo-tools, for the table.
pseudo_rows := [
	{"id": "res", "effect": "allow", "tool": "mcp:resources/read", "target": "file:///docs/**", "tool_glob": false, "target_glob": true},
	{"id": "pr", "effect": "allow", "tool": "mcp:prompts/get", "target": "summary", "tool_glob": false, "target_glob": false},
]

read_resource(uri) := {"kind": "mcp", "mcp": {"method": "resources/read"}, "tool": {"name": "mcp:resources/read", "arguments": {"uri": uri}, "target": uri}}

test_mcp_pseudo_tools_by_table if {
	ids(lib.allow) == {"res"} with input as read_resource("file:///docs/a.md") with data.toolgate.rules as pseudo_rows
	count(lib.allow) == 0 with input as read_resource("file:///etc/passwd") with data.toolgate.rules as pseudo_rows
	count(lib.deny) == 0 with input as read_resource("file:///etc/passwd") with data.toolgate.rules as pseudo_rows
	get := {"kind": "mcp", "mcp": {"method": "prompts/get"}, "tool": {"name": "mcp:prompts/get", "arguments": {"name": "summary"}, "target": "summary"}}
	ids(lib.allow) == {"pr"} with input as get with data.toolgate.rules as pseudo_rows
	complete := {"kind": "mcp", "mcp": {"method": "completion/complete"}, "tool": {"name": "mcp:completion/prompt", "arguments": {"ref": {"type": "ref/prompt", "name": "summary"}}, "target": "summary"}}
	count(lib.allow) == 0 with input as complete with data.toolgate.rules as pseudo_rows
}

# A call with several target arguments (tool.targets): deny and ask rows fire
# on any of them, allow and read-only rows only when all of them match.
call2(tool, first, second) := {"kind": "rest", "phase": "call", "tool": {
	"name": tool, "target": first, "target_raw": first, "target_escapes": false,
	"targets": [
		{"arg": "path", "target": first, "raw": first, "escapes": false},
		{"arg": "file", "target": second, "raw": second, "escapes": second == "../x"},
	],
}}

test_deny_row_sees_every_target if {
	ids(lib.deny) == {"r2"} with input as call2("Read", "readme.txt", "secrets.txt") with data.toolgate.rules as seed
	ids(lib.deny) == {"n1"} with input as call2("Edit", "x", "notes.txt") with data.toolgate.rules as seed
}

test_allow_row_needs_every_target if {
	count(lib.allow) == 0 with input as call2("fs.read", "src/a.go", "etc/passwd") with data.toolgate.rules as seed
	ids(lib.allow) == {"g1"} with input as call2("fs.read", "src/a.go", "src/b/c.go") with data.toolgate.rules as seed
	ids(lib.allow) == {"r1"} with input as call2("Read", "a", "b") with data.toolgate.rules as seed
}

test_other_target_escaping_denied if {
	ids(lib.deny) == {"toolgate.target_escapes"} with input as call2("fs.read", "src/a.go", "../x") with data.toolgate.rules as seed
}

# A table a data file or a test gives as written, without tool_glob and
# target_glob: its globs match as the loaded table's do, so a deny row
# written there is never silently dead.
plain := [
	{"id": "p1", "effect": "allow", "tool": "read_file", "target": "*"},
	{"id": "p2", "effect": "deny", "tool": "read_file", "target": "secrets/**"},
	{"id": "p3", "effect": "deny", "tool": "fs.*", "target": ".env"},
]

test_plain_table_globs_match if {
	ids(lib.deny) == {"p2"} with input as call("read_file", "secrets/key") with data.toolgate.rules as plain
	ids(lib.allow) == {"p1"} with input as call("read_file", "docs/a") with data.toolgate.rules as plain
	ids(lib.deny) == {"p3"} with input as call("fs.read", ".env") with data.toolgate.rules as plain
}

# A row the library cannot read (a mistyped effect or key, a value of
# another type, not an object) denies the call rather than be skipped.
test_bad_row_denies if {
	bad := [
		[{"id": "b", "effect": "Deny", "tool": "read_file", "target": "secrets/**"}],
		[{"id": "b", "effect": "deny", "tool": "read_file", "targt": "secrets/**"}],
		[{"id": "b", "effect": "allow", "tool": "read_file", "target": "*", "read_only": "yes"}],
		["deny read_file"],
	]
	every rows in bad {
		"toolgate.bad_row" in ids(lib.deny) with input as call("read_file", "docs/a") with data.toolgate.rules as array.concat(plain, rows)
	}
	count(lib.deny) == 0 with input as call("read_file", "docs/a") with data.toolgate.rules as plain
	count(lib.deny) == 0 with input as call("read_file", "docs/a") with data.toolgate.rules as seed
}

# approvers: null is no approvers, as the loader reads it.
test_null_approvers_row_is_well_formed if {
	count(lib.deny) == 0 with input as call("read_file", "docs/a") with data.toolgate.rules as [{"id": "a", "effect": "allow", "tool": "read_file", "target": "*", "approvers": null}]
}

# A table the load checked whole (data.toolgate.rules_checked) is not
# checked again at every call.
test_checked_table_rows_not_rechecked if {
	rows := [{"id": "b", "effect": "Deny", "tool": "read_file", "target": "secrets/**"}]
	"toolgate.bad_row" in ids(lib.deny) with input as call("read_file", "docs/a") with data.toolgate.rules as rows
	count(lib.deny) == 0 with input as call("read_file", "docs/a") with data.toolgate.rules as rows with data.toolgate.rules_checked as true
}
