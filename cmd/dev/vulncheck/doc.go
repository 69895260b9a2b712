// Command vulncheck runs govulncheck on agentbus and decides whether its
// findings pass: `make check` runs it.
//
//	vulncheck -db file:///…/.cache/vulndb/db [-allow allowed.txt] [-C ../..] [packages]
//
// It runs the development module's govulncheck (`go tool govulncheck`)
// with -format json on the packages (default ./...) in the directory of
// -C, and fails when the code calls a vulnerable symbol whose advisory is
// not in the allow list. A listed advisory that is no longer found fails
// too, so the list only holds what still applies. Vulnerabilities in
// packages or modules the code requires but does not call are printed and
// do not fail, as govulncheck itself treats them.
//
// The allow list has one advisory a line, its id then why it does not
// apply to agentbus (what prevents the vulnerable path, and where a test
// shows it); "#" starts a comment. An advisory goes there only when no
// fixed version exists.
package main
