package x86

// Internals the external tests compare against each other.
var (
	ILD     = ild
	ILDSlow = ildSlow
)

const NumInsnClasses = numInsnClasses
