// Package elfnote reads the GNU build ID note of an ELF file. It is the one
// note walker of ptjit: the recorder stores build IDs of mapped files
// (snapshot) and the decoder checks them against the files it opens
// (recording).
//
// Must not import: any ptjit package. It imports only the standard
// library.
package elfnote
