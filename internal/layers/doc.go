// Package layers declares ptjit's architecture as data and checks it: the
// pipeline is run → track → snapshot → db → decode, and imports point one
// way, from the CLI at the top down to the format libraries at the bottom.
//
// Allowed (layers.go) lists, for every package of the module, the module
// packages its non-test files may import. TestLayers (run by go test ./...,
// and so by make test) fails when a package imports one it is not allowed
// to, when a package is missing from the table, or when the table names a
// package that no longer exists. Test files may import upward (an external
// test of ptpkt may use ptfmt to parse a corpus row): only what ships is
// checked.
//
// Each package's doc.go states, in its package comment, what the package
// must not import, in one of two fixed forms that TestDocImports parses
// and checks against Allowed: a line that starts with "Must not import:
// any ptjit package" (optionally followed by " but " and the packages it
// imports, separated by commas, which must be exactly its Allowed list),
// or with "Must not import: " and package paths separated by commas, none
// of which Allowed lets it reach, directly or through another package.
// The statement ends at its first period; it may wrap, and the reason
// follows it.
//
// The package holds no code that ships; nothing imports it.
//
// Must not import: any ptjit package.
package layers
