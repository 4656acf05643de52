# METADATA
# title: decision-log masks of the example policy
# description: |
#   With log.arguments: true the decision log keeps tool arguments, masked
#   the way OPA masks its own decision logs (data.system.log.mask). The
#   input here is the decision-log event: the call's policy input is
#   input.input. A note's text is erased; an argument named like a secret,
#   at any depth, keeps its key with a placeholder value.
package system.log

mask contains "/input/tool/arguments/content" if input.input.tool.name == "write_note"

mask contains {"op": "upsert", "path": concat("/", ["/input/tool/arguments", segments(p)]), "value": "[masked]"} if {
	some p in secret_paths
	addressable(p)
}

# OPA's mask paths split at "/" and escape other characters (a space, "!"),
# so a path through such a key would upsert a key beside the secret: then
# no argument is logged.
mask contains "/input/tool/arguments" if {
	some p in secret_paths
	not addressable(p)
}

# secret_paths are the paths, within the arguments, of the values whose key
# is named like a secret, but for those under another such key (masked with
# it).
secret_paths contains p if {
	walk(input.input.tool.arguments, [p, _])
	count(p) > 0
	secret_name(p[count(p) - 1])
	not secret_above(p)
}

secret_above(p) if {
	some i, k in p
	i < count(p) - 1
	secret_name(k)
}

# secret_words, within a key lower-cased and without "_" and "-", mark a
# secret: password, client_secret, access_token, refresh_token, apiKey,
# X-Api-Key, authorization, private_key, credentials and their kind.
secret_words := {
	"passw", "passphrase", "pwd", "secret", "token", "apikey", "accesskey",
	"privatekey", "authorization", "credential", "cookie", "jwt",
}

secret_name(k) if {
	is_string(k)
	n := replace(replace(lower(k), "_", ""), "-", "")
	some w in secret_words
	contains(n, w)
}

addressable(p) if {
	every k in p {
		plain(k)
	}
}

# plain keys are those OPA's mask paths keep as they are: array indexes,
# and keys of the characters a URL path segment takes unescaped.
plain(k) if is_number(k)

plain(k) if {
	is_string(k)
	regex.match(`^[A-Za-z0-9_.~$&+:=@-]+$`, k)
}

segments(p) := concat("/", [format(k) | some k in p])

format(k) := k if is_string(k)

format(k) := format_int(k, 10) if is_number(k)
