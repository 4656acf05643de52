package policy

// NativeInUse reports whether e evaluates the shipped library in Go for the
// policy in force.
func NativeInUse(e *Engine) bool { return e.current.Load().native != nil }
