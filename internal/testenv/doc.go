// Package testenv holds helpers that several packages' tests share: where
// to find system files and the repository's test data, the tools a test
// needs (missing: a skip that says so, a failure under CI), C programs
// built for a test and the testdata programs, libipt's helper and the
// corpus's synthetic traces.
//
// Must not import: any ptjit package. It imports only the standard
// library, so that any package's tests may use it.
package testenv
