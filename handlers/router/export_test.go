package router

// LoadPatterns reads the pattern definitions as a run's configuration
// does, for the external tests.
var LoadPatterns = loadPatterns
