package skills

import "testing"

func TestApprovalMode(t *testing.T) {
	yes, no := true, false
	cases := []struct {
		name string
		m    Manifest
		want string
	}{
		{"no annotations", Manifest{Name: "echo"}, ModeNetwork},
		{"read-only", Manifest{Name: "get_outlets", Annotations: &Annotations{ReadOnlyHint: &yes}}, ModeReadOnly},
		{"destructive hint", Manifest{Name: "reset", Annotations: &Annotations{ReadOnlyHint: &no, DestructiveHint: &yes}}, ModeDestructive},
		{"delete in the name, no annotations", Manifest{Name: "delete_record"}, ModeDestructive},
		{"closed-world write", Manifest{Name: "save_note", Annotations: &Annotations{ReadOnlyHint: &no, OpenWorldHint: &no}}, ModeLocalWrite},
		{"open-world write", Manifest{Name: "send_mail", Annotations: &Annotations{ReadOnlyHint: &no, OpenWorldHint: &yes}}, ModeNetwork},
		{"declared by the Skill Service", Manifest{Name: "book_flight", Mode: ModeDelegated}, ModeDelegated},
		{"declared mode wins over the name", Manifest{Name: "delete_draft", Mode: ModeLocalWrite}, ModeLocalWrite},
		{"unknown declared mode is ignored", Manifest{Name: "drop_table", Mode: "whatever"}, ModeDestructive},
	}
	for _, tc := range cases {
		if got := tc.m.ApprovalMode(); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
