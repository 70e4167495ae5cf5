// Package testmain is the TestMain of the packages whose tests start real
// processes under ptrace: it runs the tests, cleans up, and fails the run
// when a test left a child process behind (a tracee that outlived its
// tracer would be a bug ptjit's users meet as a stray process).
//
// Must not import: any ptjit package.
package testmain
