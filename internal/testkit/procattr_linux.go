package testkit

import "syscall"

// ChildAttr makes a child process die with the test process (SIGKILL when
// it exits, however it exits), so that a test killed half-way leaves no
// servers behind.
func ChildAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
