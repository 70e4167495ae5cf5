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
// The package holds no code that ships; nothing imports it.
package layers
