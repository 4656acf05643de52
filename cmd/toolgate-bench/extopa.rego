# The rules table of toolgate-bench, decided the way toolgate's shipped
# library decides a call with one target (the bench's calls have one), for
# a standalone OPA server queried over HTTP.
package bench

candidates := array.concat(
	object.get(data.bench.rules_index.by_tool, input.tool.name, []),
	data.bench.rules_index.wild,
)

deny contains r.id if {
	some r in candidates
	r.effect == "deny"
	row_matches(r)
}

ask contains r.id if {
	some r in candidates
	r.effect == "ask"
	row_matches(r)
}

allow contains r.id if {
	some r in candidates
	r.effect == "allow"
	row_matches(r)
}

decision := {"deny": deny, "ask": ask, "allow": allow}

row_matches(r) if {
	tool_matches(r.tool, r.tool_glob)
	target_matches(r.target, r.target_glob)
}

tool_matches("*", _) if input.tool.name

tool_matches(pattern, false) if pattern == input.tool.name

tool_matches(pattern, true) if glob.match(pattern, null, input.tool.name)

target_matches("*", _) if input.tool.name

target_matches(pattern, false) if pattern == input.tool.target

target_matches(pattern, true) if {
	is_string(input.tool.target)
	glob.match(regex.replace(pattern, `(^|/)(\*\*/)+`, "${1}{**/,}"), ["/"], input.tool.target)
}
