package skills

import "slices"

// Approval modes (seed 004): what a call of a skill may do, which decides
// whether it needs an approval before it runs.
const (
	ModeReadOnly    = "read_only"
	ModeLocalWrite  = "local_write"
	ModeNetwork     = "network"
	ModeDelegated   = "delegated"
	ModeDestructive = "destructive"
)

// Modes are the approval modes, least consequential first.
var Modes = []string{ModeReadOnly, ModeLocalWrite, ModeNetwork, ModeDelegated, ModeDestructive}

// ValidMode reports whether mode is an approval mode.
func ValidMode(mode string) bool { return slices.Contains(Modes, mode) }

// ApprovalMode is the skill's approval mode: the one its manifest declares
// (a Skill Service's approval_mode), else the one its MCP annotations
// imply: destructive (Destructive), read_only (ReadOnly), network when it
// has no annotations at all or may reach the open world, local_write
// otherwise.
func (m Manifest) ApprovalMode() string {
	switch {
	case ValidMode(m.Mode):
		return m.Mode
	case m.Destructive():
		return ModeDestructive
	case m.ReadOnly():
		return ModeReadOnly
	case m.Annotations == nil || m.OpenWorld():
		return ModeNetwork
	}
	return ModeLocalWrite
}
