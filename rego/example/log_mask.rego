# METADATA
# title: decision-log masks of the example policy
# description: |
#   With log.arguments: true the decision log keeps tool arguments, masked
#   the way OPA masks its own decision logs (data.system.log.mask). The
#   input here is the decision-log event: the call's policy input is
#   input.input. A note's text is erased; an argument named like a secret
#   keeps its key with a placeholder value.
package system.log

mask contains "/input/tool/arguments/content" if input.input.tool.name == "write_note"

mask contains {"op": "upsert", "path": concat("/", ["/input/tool/arguments", name]), "value": "[masked]"} if {
	some name, _ in input.input.tool.arguments
	lower(name) in {"password", "token", "api_key", "secret"}
}
