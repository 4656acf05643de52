package policy

// NativeInUse reports whether e evaluates the shipped library in Go for the
// policy in force.
func NativeInUse(e *Engine) bool { return e.current.Load().native != nil }

// WatchCounts reports whether Watch(dirs) of an engine with this rules
// file reloads on an event on path p, not a directory.
func WatchCounts(dirs []string, rulesFile, p string) bool {
	return newWatchFilter(dirs, rulesFile).counts(p, false)
}

// RefusedBuiltins are the built-ins refused unless Options.Capabilities
// lists them.
func RefusedBuiltins() map[string]string { return refusedBuiltins }

// MCPMethods are the MCP methods the native library lets through.
func MCPMethods() map[string]bool { return mcpMethods }

// WithoutGoRules returns o with package toolgate's rules left to OPA.
func WithoutGoRules(o Options) Options { o.noGoRules = true; return o }

// GoRulesInUse reports whether e evaluates package toolgate's rules in Go
// for the policy in force.
func GoRulesInUse(e *Engine) bool { return e.current.Load().userGo != nil }
