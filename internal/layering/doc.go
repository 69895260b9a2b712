// Package layering checks agentbus's import graph against its table of
// allowed imports: the "may import" column of the package table in
// docs/ARCHITECTURE.md. Its test reads the module's real graph with
// `go list` and fails on any edge the table does not allow, and on any
// package the table does not name.
package layering
