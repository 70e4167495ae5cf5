package platform

// Supported reports that this build is for linux/amd64.
const Supported = true
