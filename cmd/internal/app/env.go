package app

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Var is one environment variable of agentbus's configuration. Every
// variable a process reads is declared once, in vars.go, through a typed
// constructor (Int, Duration, Bool, String, Secret) that records it here:
// the flag that overrides it, its default, the form its value must take
// and what it means. The processes read it through the typed handle,
// CheckEnv reports a malformed value, and docs/CONFIGURATION.md is
// generated from the same declarations (ConfigurationDoc).
type Var struct {
	Name    string // the variable, e.g. MAX_TURNS
	Section string // the part of docs/CONFIGURATION.md that lists it
	Flag    string // the flag that overrides it, "" when only the environment sets it
	Default string // the default as documented, "" for none
	Form    string // what a value must look like, e.g. "an integer"
	Usage   string // what it means
	// Secret variables are never printed: not when malformed, not as a
	// flag's default in --help. Most have no flag, which would show in a
	// process listing.
	Secret bool
	check  func(string) error // nil accepts any text
}

// registry holds every declared variable in declaration order.
var registry []*Var

// declare records v; a name declared twice is a programming error.
func declare(v *Var) *Var {
	for _, o := range registry {
		if o.Name == v.Name {
			panic("app: environment variable " + v.Name + " declared twice")
		}
	}
	registry = append(registry, v)
	return v
}

// Vars returns every declared variable, in declaration order.
func Vars() []Var {
	out := make([]Var, len(registry))
	for i, v := range registry {
		out[i] = *v
	}
	return out
}

// ParseError is a malformed value of an environment variable or a flag:
// its name (MAX_TURNS, --max-turns), the value and the form expected.
type ParseError struct {
	Name   string
	Value  string // "" for a secret
	Form   string
	Secret bool // the value is not kept
}

// newParseError is the ParseError of value, keeping it unless secret.
func newParseError(name, value, form string, secret bool) *ParseError {
	if secret {
		value = ""
	}
	return &ParseError{Name: name, Value: value, Form: form, Secret: secret}
}

// Error names the variable or flag, the value (unless secret) and the
// form expected.
func (e *ParseError) Error() string {
	v := strconv.Quote(redactUserinfo(e.Value))
	if e.Secret {
		v = "(hidden)"
	}
	return fmt.Sprintf("%s=%s: expected %s", e.Name, v, e.Form)
}

// redactUserinfo hides the user information of a URL, which may hold a
// password (nats://user:password@host).
func redactUserinfo(s string) string {
	i := strings.Index(s, "://")
	j := strings.LastIndex(s, "@")
	if i < 0 || j < i {
		return s
	}
	return s[:i+3] + "REDACTED" + s[j:]
}

// lookup returns the variable's value and whether it is set; an empty
// value counts as unset, as it always has.
func (v *Var) lookup() (string, bool) {
	s, ok := os.LookupEnv(v.Name)
	return s, ok && s != ""
}

// IsSet reports whether the environment sets the variable.
func (v *Var) IsSet() bool {
	_, ok := v.lookup()
	return ok
}

// Check reports the variable's value in the environment as a *ParseError
// when it does not have the variable's form; nil when it does or is unset.
func (v *Var) Check() error {
	s, ok := v.lookup()
	if !ok || v.check == nil {
		return nil
	}
	return v.parseError(s, v.check(s))
}

func (v *Var) parseError(s string, err error) error {
	if err == nil {
		return nil
	}
	return newParseError(v.Name, s, v.Form, v.Secret)
}

// help is the usage of the variable's flag: its meaning and the variable.
func (v *Var) help() string { return v.Usage + " (env " + v.Name + ")" }

// CheckEnv reports every declared variable whose value in the environment
// is malformed, joined; nil when there is none.
func CheckEnv() error {
	var errs []error
	for _, v := range registry {
		errs = append(errs, v.Check())
	}
	return errors.Join(errs...)
}

// Forms of the values, as the error messages and the documentation name
// them.
const (
	formInt      = "an integer"
	formDuration = "a duration such as 90s, 5m or 1h30m"
	formBool     = "a boolean: 1, true, 0 or false"
	formNumber   = "a number"
)

// IntVar is an integer variable.
type IntVar struct {
	*Var
	def int
}

// Int declares the integer variable name, overridden by flag (or "").
func Int(section, name, flag string, def int, usage string) IntVar {
	return IntVar{declare(&Var{Name: name, Section: section, Flag: flag, Default: strconv.Itoa(def), Form: formInt, Usage: usage,
		check: func(s string) error { _, err := strconv.Atoi(s); return err }}), def}
}

// Value is the variable's value, or its default when it is unset or
// malformed (CheckEnv reports the latter before a process starts).
func (v IntVar) Value() int {
	if s, ok := v.lookup(); ok {
		if n, err := strconv.Atoi(s); err == nil {
			return n
		}
	}
	return v.def
}

// Bind registers the variable's flag on fs, defaulting to Value.
func (v IntVar) Bind(fs *flag.FlagSet, p *int) { fs.IntVar(p, v.Flag, v.Value(), v.help()) }

// DurationVar is a duration variable in Go's syntax (90s, 5m, 1h30m).
type DurationVar struct {
	*Var
	def time.Duration
}

// Duration declares the duration variable name, overridden by flag (or "").
func Duration(section, name, flag string, def time.Duration, usage string) DurationVar {
	return DurationVar{declare(&Var{Name: name, Section: section, Flag: flag, Default: shortDuration(def), Form: formDuration, Usage: usage,
		check: func(s string) error { _, err := time.ParseDuration(s); return err }}), def}
}

// Value is the variable's value, or its default when it is unset or
// malformed.
func (v DurationVar) Value() time.Duration {
	if s, ok := v.lookup(); ok {
		if d, err := time.ParseDuration(s); err == nil {
			return d
		}
	}
	return v.def
}

// Bind registers the variable's flag on fs, defaulting to Value.
func (v DurationVar) Bind(fs *flag.FlagSet, p *time.Duration) {
	fs.DurationVar(p, v.Flag, v.Value(), v.help())
}

// shortDuration writes d without trailing zero units: 5m, not 5m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// BoolVar is a boolean variable: 1, t, true, 0, f, false (any case).
type BoolVar struct{ *Var }

// Bool declares the boolean variable name, false by default, overridden
// by flag (or "").
func Bool(section, name, flag, usage string) BoolVar {
	return BoolVar{declare(&Var{Name: name, Section: section, Flag: flag, Default: "false", Form: formBool, Usage: usage,
		check: func(s string) error { _, err := strconv.ParseBool(s); return err }})}
}

// Value is the variable's value; false when unset or malformed.
func (v BoolVar) Value() bool {
	s, _ := v.lookup()
	b, _ := strconv.ParseBool(s)
	return b
}

// Bind registers the variable's flag on fs, defaulting to Value.
func (v BoolVar) Bind(fs *flag.FlagSet, p *bool) { fs.BoolVar(p, v.Flag, v.Value(), v.help()) }

// StringVar is a text variable, of a form that may be checked (Form).
type StringVar struct {
	*Var
	def string
}

// Form is what a text variable's value must look like: its description
// and, when it is more than any text, its check.
type Form struct {
	Text  string
	Check func(string) error
}

// String declares the text variable name, of form, overridden by flag
// (or "").
func String(section, name, flag, def string, form Form, usage string) StringVar {
	return StringVar{declare(&Var{Name: name, Section: section, Flag: flag, Default: def, Form: form.Text, Usage: usage,
		check: form.Check}), def}
}

// Secret declares a secret: read from the environment only, never
// printed.
func Secret(section, name, usage string) StringVar { return SecretFlag(section, name, "", usage) }

// SecretFlag declares a secret that a flag may also set; its value is
// never printed, not even as the flag's default in --help.
func SecretFlag(section, name, flag, usage string) StringVar {
	return StringVar{declare(&Var{Name: name, Section: section, Flag: flag, Form: "text", Usage: usage, Secret: true}), ""}
}

// Value is the variable's value, or its default when it is unset or
// malformed.
func (v StringVar) Value() string { return v.Or(v.def) }

// Or is the variable's value, or def when it is unset or malformed.
func (v StringVar) Or(def string) string {
	if s, ok := v.lookup(); ok && (v.check == nil || v.check(s) == nil) {
		return s
	}
	return def
}

// Bind registers the variable's flag on fs, defaulting to Value. A flag
// of a checked form refuses a value the form does not accept; a secret's
// flag shows no default.
func (v StringVar) Bind(fs *flag.FlagSet, p *string) {
	if v.check == nil && !v.Secret {
		fs.StringVar(p, v.Flag, v.Value(), v.help())
		return
	}
	*p = v.Value()
	fs.Var(&stringValue{p: p, v: v.Var}, v.Flag, v.help())
}

// stringValue is the flag.Value of a text variable whose form is checked,
// or that is secret.
type stringValue struct {
	p *string
	v *Var
}

func (c *stringValue) String() string {
	if c == nil || c.p == nil || c.v.Secret {
		return ""
	}
	return *c.p
}

func (c *stringValue) Set(s string) error {
	if c.v.check != nil && c.v.check(s) != nil {
		return newParseError("--"+c.v.Flag, s, c.v.Form, c.v.Secret)
	}
	*c.p = s
	return nil
}

// Get returns the value, as the standard flag values do.
func (c *stringValue) Get() any { return *c.p }

// handle is any typed variable.
type handle interface{ variable() *Var }

func (v *Var) variable() *Var { return v }

// docDefault replaces h's documented default, for a default that is not a
// literal value ("MODEL's").
func docDefault[H handle](h H, text string) H {
	h.variable().Default = text
	return h
}

// hidden makes h a secret: its value is never printed.
func hidden[H handle](h H) H {
	h.variable().Secret = true
	return h
}
