// Package x86test holds the instruction table that the length decoder's
// and the AT&T formatter's tests share.
//
// Must not import: any ptjit package but x86.
package x86test
