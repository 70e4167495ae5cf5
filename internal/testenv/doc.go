// Package testenv holds helpers that several packages' tests share: where
// to find system files the tests read.
//
// Must not import: any ptjit package. It imports only the standard
// library, so that any package's tests may use it.
package testenv
