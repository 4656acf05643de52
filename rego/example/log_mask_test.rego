package system.log_test

import data.system.log

event(tool, args) := {"path": "toolgate/decision", "input": {"tool": {"name": tool, "arguments": args}}}

test_note_content_erased if {
	"/input/tool/arguments/content" in log.mask with input as event("write_note", {"path": "notes/a.md", "content": "x"})
}

test_other_tools_keep_content if {
	count(log.mask) == 0 with input as event("read_file", {"path": "README.md", "content": "x"})
}

test_secret_arguments_upserted if {
	m := log.mask with input as event("read_file", {"path": "README.md", "Token": "t"})
	m == {{"op": "upsert", "path": "/input/tool/arguments/Token", "value": "[masked]"}}
}

test_erased_arguments_mask_nothing if {
	count(log.mask) == 0 with input as event("read_file", {})
}
