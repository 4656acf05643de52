package system.log_test

import data.system.log

event(tool, args) := {"path": "toolgate/decision", "input": {"tool": {"name": tool, "arguments": args}}}

upserts(paths) := {{"op": "upsert", "path": p, "value": "[masked]"} | some p in paths}

test_note_content_erased if {
	"/input/tool/arguments/content" in log.mask with input as event("write_note", {"path": "notes/a.md", "content": "x"})
}

test_other_tools_keep_content if {
	count(log.mask) == 0 with input as event("read_file", {"path": "README.md", "content": "x"})
}

test_secret_arguments_upserted if {
	m := log.mask with input as event("read_file", {"path": "README.md", "Token": "t"})
	m == upserts({"/input/tool/arguments/Token"})
}

# The names secrets commonly go by, in every spelling, are masked; names
# that merely look alike are not.
test_secret_names if {
	args := {
		"password": "x", "client_secret": "x", "access_token": "x", "refresh_token": "x", "apiKey": "x",
		"api-key": "x", "X-Api-Key": "x", "authorization": "x", "Authorization": "x", "private_key": "x",
		"credentials": "x", "passphrase": "x", "session_cookie": "x", "id_token": "x", "aws_access_key_id": "x",
		"path": "x", "author": "x", "keyword": "x", "tokens_used": 3, "content": "x",
	}
	m := log.mask with input as event("read_file", args)
	m == upserts({
		"/input/tool/arguments/password", "/input/tool/arguments/client_secret", "/input/tool/arguments/access_token",
		"/input/tool/arguments/refresh_token", "/input/tool/arguments/apiKey", "/input/tool/arguments/api-key",
		"/input/tool/arguments/X-Api-Key", "/input/tool/arguments/authorization", "/input/tool/arguments/Authorization",
		"/input/tool/arguments/private_key", "/input/tool/arguments/credentials", "/input/tool/arguments/passphrase",
		"/input/tool/arguments/session_cookie", "/input/tool/arguments/id_token", "/input/tool/arguments/aws_access_key_id",
		"/input/tool/arguments/tokens_used",
	})
}

# Nested secrets are masked where they are; one under a masked key goes
# with it.
test_nested_secrets if {
	args := {
		"request": {"headers": {"Authorization": "Bearer x", "Accept": "*/*"}, "body": [{"user": "u"}, {"client_secret": "s"}]},
		"auth": {"token": "t"},
		"credentials": {"password": "p"},
	}
	m := log.mask with input as event("http_call", args)
	m == upserts({
		"/input/tool/arguments/request/headers/Authorization",
		"/input/tool/arguments/request/body/1/client_secret",
		"/input/tool/arguments/auth/token",
		"/input/tool/arguments/credentials",
	})
}

# A secret under a key no mask path can address takes every argument with
# it.
test_unaddressable_secret_erases_all if {
	m := log.mask with input as event("http_call", {"a b": {"token": "t"}, "path": "x"})
	m == {"/input/tool/arguments"}
}

test_erased_arguments_mask_nothing if {
	count(log.mask) == 0 with input as event("read_file", {})
}
