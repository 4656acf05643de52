//go:build !linux

package testkit

import "syscall"

// ChildAttr is nil where a child cannot be tied to its parent's life.
func ChildAttr() *syscall.SysProcAttr { return nil }
