# METADATA
# title: toolgate shipped library
# description: |
#   Always loaded with every policy. It contributes to the same three rules as
#   hand-written policies (deny, ask, allow), here under package toolgate.lib;
#   toolgate applies deny > ask > allow across both packages in Go.
#   - the rules table (data.toolgate.rules) matched by tool and target, and a
#     call that reads a row the library cannot use denied;
#   - calls whose target climbs above its root are denied;
#   - MCP protocol plumbing (the protocol's own methods, JSON-RPC responses,
#     GET and DELETE) is allowed, any other MCP method denied, and so is a
#     subscriptions/listen that subscribes to resources; resources/read,
#     prompts/get and completion/complete arrive as calls of the pseudo-tools
#     mcp:resources/read, mcp:prompts/get and mcp:completion/prompt or
#     mcp:completion/resource, for the rules table to allow;
#   - plain HTTP calls fire nothing here, so they are denied unless a rule allows them.
package toolgate.lib

# The rules table, served from policy.rules_file. Each row also carries
# tool_glob and target_glob, computed when the table is loaded.
default rules := []

rules := data.toolgate.rules

# A row's tool_glob and target_glob: as the loader of policy.rules_file
# computed them, or, for a row a data file or a test gave without them,
# computed here the same way (policy/rules.go, isGlob), so that its globs
# match as written rather than never.
row_tool_glob(r) := object.get(r, "tool_glob", is_glob(r.tool))

row_target_glob(r) := object.get(r, "target_glob", is_glob(r.target))

is_glob(p) if {
	p != "*"
	regex.match(`[*?\[{]`, p)
} else := false

# Candidate rows for this call's tool. toolgate serves an index beside the
# table (data.toolgate.rules_index: rows by exact tool name, plus the rows
# whose tool is "*" or a glob), so a call visits only the rows that can
# concern its tool, however long the table. Without the index (a test that
# sets data.toolgate.rules alone) every row is a candidate.
candidates := array.concat(
	object.get(data.toolgate.rules_index.by_tool, input.tool.name, []),
	data.toolgate.rules_index.wild,
) if {
	data.toolgate.rules_index
}

candidates := rules if not data.toolgate.rules_index

# The phase of the decision; a document without one is a call.
list_phase if input.phase == "list"

call_phase if not list_phase

# deny: rules-table deny rows that match the call.
deny contains table_reason(r) if {
	some r in candidates
	r.effect == "deny"
	deny_row_matches(r)
}

# A row the library cannot read as a row of the table (a key it does not
# know, an effect other than allow, deny or ask, a value of another type)
# denies the call: skipped, a deny row with a typo would let through what
# it was written to stop. A table toolgate checked whole as the policy
# loaded, and that cannot change until the next load (a rules file's, a
# data file's), says so (data.toolgate.rules_checked), and is not checked
# again: this holds for the rows of a table your Rego builds, which may
# change with the call, the clock or a service it fetches.
deny contains {
	"id": "toolgate.bad_row",
	"message": sprintf("rules table row %v cannot be read: it has a key, effect or value the table does not take", [row_name(r)]),
} if {
	not data.toolgate.rules_checked
	some r in candidates
	not well_formed_row(r)
}

well_formed_row(r) if {
	is_object(r)
	every k, _ in r {
		k in row_keys
	}
	is_string(r.id)
	r.effect in {"allow", "deny", "ask"}
	is_string(r.tool)
	is_string(r.target)
	every k in {"read_only", "must_ask", "tool_glob", "target_glob"} {
		is_boolean(object.get(r, k, false))
	}
	is_string(object.get(r, "message", ""))
	row_approvers_ok(r)
}

# approvers: absent, null (no approvers, as the loader reads it), or an
# object.
row_approvers_ok(r) if object.get(r, "approvers", null) == null

row_approvers_ok(r) if is_object(r.approvers)

row_name(r) := object.get(r, "id", "without an id") if {
	is_object(r)
} else := "that is not an object"

row_keys := {"id", "effect", "tool", "target", "read_only", "message", "must_ask", "approvers", "tool_glob", "target_glob"}

# The target is not quoted: it is an argument's value, which may hold
# anything (a token in a URL's query), and reasons are logged when the
# arguments are not.
deny contains {
	"id": "toolgate.target_escapes",
	"message": "a target climbs above its root",
} if {
	call_phase
	escaping
}

# escaping: the first of the call's targets that climbs above its root, as
# sent: the target itself, or else the first other target argument that does
# (defined when any does).
escaping := input.tool.target_raw if {
	input.tool.target_escapes == true
} else := raws[0] if {
	raws := [object.get(t, "raw", "") | some t in input.tool.targets; t.escapes == true]
	count(raws) > 0
}

# ask: rules-table ask rows that match the call.
ask contains reason if {
	some r in candidates
	r.effect == "ask"
	ask_row_matches(r)
	reason := object.union(table_reason(r), ask_extras(r))
}

# Under mode dont_ask an ask is refused, so a tool being listed reads its
# ask rows as deny rows: one hides the tool only when it covers every call
# of it, and a tool an allow row covers some calls of stays listed.
ask_row_matches(r) if {
	not listed_without_asks
	row_matches_any(r)
}

ask_row_matches(r) if {
	listed_without_asks
	deny_row_matches(r)
}

listed_without_asks if {
	list_phase
	input.mode == "dont_ask"
}

# ask_extras: what an ask row adds to its reason (must_ask, and its
# approvers when it names them).
ask_extras(r) := {"must_ask": object.get(r, "must_ask", false), "approvers": r.approvers} if is_object(r.approvers)

else := {"must_ask": object.get(r, "must_ask", false)}

# allow: rules-table allow rows, and MCP protocol plumbing.
allow contains table_reason(r) if {
	some r in candidates
	r.effect == "allow"
	row_matches_every(r)
}

allow contains {"id": "toolgate.mcp_plumbing", "message": "MCP protocol message"} if {
	mcp_plumbing
	mcp_method_allowed
}

deny contains {
	"id": "toolgate.mcp_method",
	"message": sprintf("MCP method %q is not one of the protocol's methods that toolgate lets through", [mcp_method]),
} if {
	mcp_plumbing
	not mcp_method_allowed
}

# subscriptions/listen with notifications.resourceSubscriptions is the
# 2026-07-28 form of resources/subscribe, which is not one of the methods
# let through: the server would watch resources no rule allowed.
deny contains {
	"id": "toolgate.mcp_subscribe",
	"message": "MCP resource subscriptions are not let through: subscriptions/listen with notifications.resourceSubscriptions, as resources/subscribe",
} if {
	mcp_plumbing
	mcp_method == "subscriptions/listen"
	subs := input.mcp.params.notifications.resourceSubscriptions
	subs != null
	subs != []
}

# An MCP message that is not a tool call: its method decides.
mcp_plumbing if {
	input.kind == "mcp"
	not input.tool
}

# The method of an MCP message: "" for a JSON-RPC response (the client's
# answer to a server request), a batch, and GET or DELETE on mcp_path.
mcp_method := object.get(input, ["mcp", "method"], "")

mcp_method_allowed if mcp_method == ""

mcp_method_allowed if mcp_method in mcp_methods

# The protocol's own methods of the MCP revisions toolgate speaks (2025-03-26
# to 2026-07-28), as the client sends them. tools/call, resources/read,
# prompts/get and completion/complete are decided as tool calls; any other
# method, misspelt or in another case, is denied. policy/mcp.go holds the
# same list.
mcp_methods := {
	"initialize",
	"ping",
	"tools/list",
	"resources/list",
	"resources/templates/list",
	"prompts/list",
	"logging/setLevel",
	"server/discover",
	"subscriptions/listen",
	"tasks/get",
	"tasks/result",
	"tasks/list",
	"tasks/cancel",
	"tasks/update",
	"notifications/initialized",
	"notifications/cancelled",
	"notifications/progress",
	"notifications/roots/list_changed",
	"notifications/message",
	"notifications/resources/updated",
	"notifications/resources/list_changed",
	"notifications/tools/list_changed",
	"notifications/prompts/list_changed",
	"notifications/elicitation/complete",
	"notifications/tasks/status",
}

# read_only: calls that only read, for the plan mode.
read_only contains r.id if {
	some r in candidates
	r.effect != "deny"
	object.get(r, "read_only", false) == true
	row_matches_every(r)
}

# MCP protocol plumbing (initialize, the lists, notifications, the SSE
# stream) moves no tool: without it plan mode would refuse an MCP client
# its session before it could call the read-only tools plan lets run.
read_only contains "toolgate.mcp_plumbing" if {
	mcp_plumbing
	mcp_method_allowed
}

read_only contains "toolgate.mcp_read_only_hint" if {
	input.kind == "mcp"
	input.tool.annotations.readOnlyHint == true
}

# A row's reason: its own message, or one that names the row.
table_reason(r) := {"id": r.id, "message": object.get(r, "message", default_message)} if {
	default_message := sprintf("rules table %s: %s %s on %s", [r.id, r.effect, r.tool, r.target])
}

# In the call phase a row matches when its tool matches and its target
# matches the call's targets: any one of them for a deny or ask row, every
# one for an allow or read-only row, so that a decoy argument can neither
# hide a target a deny row refuses nor borrow an allow for another target.
# In the list phase (a tool being listed, no arguments yet) an allow or ask
# row matches whatever its target, since some target could match.
row_matches_any(r) if {
	call_phase
	tool_matches(r.tool, row_tool_glob(r))
	target_matches_any(r.target, row_target_glob(r))
}

row_matches_any(r) if {
	list_phase
	tool_matches(r.tool, row_tool_glob(r))
}

row_matches_every(r) if {
	call_phase
	tool_matches(r.tool, row_tool_glob(r))
	target_matches_every(r.target, row_target_glob(r))
}

row_matches_every(r) if {
	list_phase
	tool_matches(r.tool, row_tool_glob(r))
}

# A deny row hides a listed tool only when it covers every call of the tool.
deny_row_matches(r) if {
	call_phase
	row_matches_any(r)
}

deny_row_matches(r) if {
	list_phase
	r.target == "*"
	tool_matches(r.tool, row_tool_glob(r))
}

tool_matches("*", _) if input.tool.name

tool_matches(pattern, false) if pattern == input.tool.name

# A glob with two stars or more is matched by the regular expression
# toolgate serves for it (rules_index.tool_regex and target_regex), which
# matches the same names in time linear in their length where glob.match
# backtracks; any other glob (or one of a table a test sets) by glob.match.
tool_matches(pattern, true) if regex.match(data.toolgate.rules_index.tool_regex[pattern], input.tool.name)

tool_matches(pattern, true) if {
	not data.toolgate.rules_index.tool_regex[pattern]
	glob.match(pattern, null, input.tool.name)
}

# The call's targets: tool.targets, each as its normalised value, or null
# for an opaque one (an argument that holds something other than strings,
# which could name anything); or, for a document that has only tool.target
# (a hand-written test input), that one.
default call_targets := []

has_targets if is_array(input.tool.targets)

call_targets := [target_of(t) | some t in input.tool.targets] if has_targets

call_targets := [input.tool.target] if {
	not has_targets
	is_string(input.tool.target)
}

target_of(t) := null if {
	t.opaque == true
} else := t.target

target_matches_any("*", _) if input.tool.name

# Deny and ask rows also see a rooted target in its relative spelling
# ("/secrets/key" as "secrets/key"): many tools join even a rooted path to
# their root.
any_targets := array.concat(call_targets, [t.relative | some t in input.tool.targets; is_string(t.relative)])

target_matches_any(_, _) if {
	some t in any_targets
	t == null
}

target_matches_any(pattern, is_glob) if {
	some t in any_targets
	target_matches_one(pattern, is_glob, t)
}

target_matches_every("*", _) if input.tool.name

target_matches_every(pattern, is_glob) if {
	count(call_targets) > 0
	every t in call_targets {
		target_matches_one(pattern, is_glob, t)
	}
}

target_matches_one(pattern, false, t) if pattern == t

target_matches_one(pattern, true, t) if {
	is_string(t)
	regex.match(data.toolgate.rules_index.target_regex[pattern], t)
}

target_matches_one(pattern, true, t) if {
	is_string(t)
	not data.toolgate.rules_index.target_regex[pattern]
	glob.match(target_pattern(pattern), ["/"], t)
}

# A run of "**/" at the start of a target glob or after a "/" stands for
# any number of directories, none included, as in a .gitignore:
# "**/.env" matches the root ".env" too. glob.match alone would need a "/"
# in the target for it. toolgate's Go matcher rewrites a row's glob the
# same way (policy.TargetPattern).
target_pattern(pattern) := regex.replace(pattern, `(^|/)(\*\*/)+`, "${1}{**/,}")

# row_matches and target_matches are the names these tests had when a call
# had one target; kept for policies that read them, with the deny and ask
# rows' meaning (any target).
row_matches(r) if row_matches_any(r)

target_matches(pattern, is_glob) if target_matches_any(pattern, is_glob)
