package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// ExitUsage is the exit code of a process started with a malformed flag
// or environment variable, as the flag package exits.
const ExitUsage = 2

// ParseFlags parses args into fs and checks the environment (CheckEnv).
// --help prints fs's usage and exits 0; a malformed flag or variable is
// printed, naming it, its value and the form expected, and the process
// exits ExitUsage. Every command parses its flags with it.
func ParseFlags(fs *flag.FlagSet, args []string) {
	switch err := CheckFlags(fs, args); {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		os.Exit(ReportUsage(os.Stderr, fs.Name(), err))
	}
}

// ReportUsage prints the configuration errors of err on w, one a line
// prefixed with the command's name, and returns ExitUsage.
func ReportUsage(w io.Writer, name string, err error) int {
	for _, e := range unjoin(err) {
		fmt.Fprintf(w, "%s: %v\n", name, e)
	}
	fmt.Fprintf(w, "%s: --help lists the flags; docs/CONFIGURATION.md every variable and its form\n", name)
	return ExitUsage
}

// unjoin returns the errors errors.Join joined, at any depth, or err
// alone.
func unjoin(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, unjoin(e)...)
	}
	return out
}

// CheckFlags parses args into fs and checks the environment. It returns
// flag.ErrHelp after printing the usage for --help, and otherwise every
// malformed flag and variable, joined; a malformed value is a *ParseError.
func CheckFlags(fs *flag.FlagSet, args []string) error {
	err := parseStrict(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		if fs.Usage != nil {
			fs.Usage()
		} else {
			fmt.Fprintf(fs.Output(), "Usage of %s:\n", fs.Name())
			fs.PrintDefaults()
		}
		return err
	}
	return errors.Join(err, CheckEnv())
}

// parseStrict parses args into fs without printing anything: a value a
// flag refuses comes back as a *ParseError with the form expected.
func parseStrict(fs *flag.FlagSet, args []string) error {
	var bad *ParseError
	fs.VisitAll(func(f *flag.Flag) { f.Value = &strictValue{Value: f.Value, name: f.Name, bad: &bad} })
	defer fs.VisitAll(func(f *flag.Flag) { f.Value = f.Value.(*strictValue).Value })
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	fs.Init(fs.Name(), flag.ContinueOnError)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(out)
	if bad != nil {
		return bad
	}
	return err
}

// strictValue wraps a flag's value while the flag set parses, to report
// which flag refused which value, in what form it wants it.
type strictValue struct {
	flag.Value
	name string
	bad  **ParseError
}

func (s *strictValue) Set(v string) error {
	err := s.Value.Set(v)
	if err == nil {
		return nil
	}
	var pe *ParseError
	if !errors.As(err, &pe) {
		pe = &ParseError{Name: "--" + s.name, Value: v, Form: flagForm(s.Value, err)}
	}
	*s.bad = pe
	return pe
}

// IsBoolFlag lets a boolean flag go without a value (--sync-always).
func (s *strictValue) IsBoolFlag() bool {
	b, ok := s.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// flagForm names the form a flag's value takes from its type; for a
// type it does not know, the flag's own error says it.
func flagForm(v flag.Value, err error) string {
	g, ok := v.(flag.Getter)
	if !ok {
		return err.Error()
	}
	switch g.Get().(type) {
	case int, int64, uint, uint64:
		return formInt
	case time.Duration:
		return formDuration
	case bool:
		return formBool
	case float64:
		return formNumber
	}
	return err.Error()
}
