package offline

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/agentbus/agentbus/text"
)

// Operations an intent asks of a list of records.
const (
	opList     = "list"     // the records, filtered, maybe sorted and cut to n
	opCount    = "count"    // how many records match
	opDistinct = "distinct" // the distinct values of a field
	opGroup    = "group"    // how many records each value of a field has
	opAverage  = "average"  // the mean of a number field
	opRange    = "range"    // the least and the greatest of a number field
)

// intent is what a task asks, read from its words alone: the operation,
// how many records (n, 0 for all), in which order, and the bounds it puts
// on a number. Which fields these apply to depends on the skill that
// answers; see query.
type intent struct {
	task   string
	terms  []string // text.Terms of the task
	op     string
	n      int
	sorted bool // the records are ordered by the number field
	desc   bool // greatest first
	bounds []bound
	write  bool // the task asks to change something
}

// bound is a comparison of a number field with a value ("above 60").
type bound struct {
	Op    string  `json:"op"` // > >= < <=
	Value float64 `json:"value"`
}

var (
	boundRE = regexp.MustCompile(`(?i)\b(above|over|more than|greater than|higher than|at least|exceeding|more expensive than|` +
		`below|under|less than|lower than|fewer than|at most|cheaper than)\s+\$?(\d+(?:\.\d+)?)`)
	countRE  = regexp.MustCompile(`(?i)\b(how many|number of|count)\b`)
	eachRE   = regexp.MustCompile(`(?i)\b(each|per|every single)\b`)
	topRE    = regexp.MustCompile(`(?i)\b(top|bottom|first|last)\s+(\d+|` + numberWordsAlt + `)\b`)
	beforeRE = regexp.MustCompile(`(?i)\b(\d+|` + numberWordsAlt + `)\s+(most|least|highest|lowest|best|worst|cheapest|priciest|largest|smallest|biggest)\b`)
)

const numberWordsAlt = "one|two|three|four|five|six|seven|eight|nine|ten|twenty"

var numberWords = map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
	"eight": 8, "nine": 9, "ten": 10, "twenty": 20}

// Direction words: the greatest or the least of a number.
var (
	maxWords = map[string]bool{"most": true, "highest": true, "best": true, "top": true, "largest": true, "biggest": true,
		"maximum": true, "max": true, "priciest": true, "greatest": true}
	minWords = map[string]bool{"least": true, "lowest": true, "worst": true, "bottom": true, "minimum": true, "min": true,
		"cheapest": true, "smallest": true, "fewest": true}
	sortWords = map[string]bool{"rank": true, "ranked": true, "ranking": true, "sort": true, "sorted": true,
		"order": true, "ordered": true}
)

// writeVerbs are the verbs of a task that changes something, and the
// first word of a skill that does.
var writeVerbs = map[string]bool{
	"create": true, "write": true, "delete": true, "remove": true, "update": true, "edit": true, "move": true,
	"rename": true, "set": true, "save": true, "send": true, "trigger": true, "toggle": true, "insert": true,
	"put": true, "upload": true, "append": true, "modify": true, "change": true, "erase": true, "drop": true,
	"clear": true, "reset": true, "overwrite": true, "post": true, "destroy": true, "purge": true, "store": true,
}

// destructiveVerbs are the first words of a skill that deletes or
// overwrites: never chosen for a task that only reads.
var destructiveVerbs = map[string]bool{
	"delete": true, "remove": true, "erase": true, "drop": true, "destroy": true, "purge": true, "clear": true,
	"reset": true, "overwrite": true, "write": true, "edit": true, "move": true, "rename": true,
}

// parseIntent reads a task's intent.
func parseIntent(task string) intent {
	in := intent{task: task, terms: text.Terms(task, nil), op: opList}
	words := strings.FieldsFunc(strings.ToLower(task), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '\'')
	})
	if len(words) > 0 && writeVerbs[words[0]] {
		in.write = true
	}
	lower := strings.ToLower(task)
	switch {
	case countRE.MatchString(task) && eachRE.MatchString(task):
		in.op = opGroup
	case countRE.MatchString(task):
		in.op = opCount
	case strings.Contains(lower, "average") || hasWord(words, "mean") || hasWord(words, "avg"):
		in.op = opAverage
	case hasWord(words, "range"):
		in.op = opRange
	}
	for i, w := range words {
		switch {
		case w == "most" && i+1 < len(words) && words[i+1] == "expensive", w == "least" && i+1 < len(words) && words[i+1] == "cheap":
			in.sorted, in.desc = true, true
		case w == "least" && i+1 < len(words) && words[i+1] == "expensive":
			in.sorted, in.desc = true, false
		case maxWords[w] || minWords[w]:
			if !in.sorted {
				in.sorted, in.desc = true, maxWords[w]
			}
		case sortWords[w] && !in.sorted:
			in.sorted, in.desc = true, true
		}
	}
	if in.sorted && (strings.Contains(lower, "ascending") || strings.Contains(lower, "lowest first")) {
		in.desc = false
	}
	if m := topRE.FindStringSubmatch(task); m != nil {
		in.n = count(m[2])
		switch strings.ToLower(m[1]) {
		case "bottom", "last":
			in.sorted, in.desc = true, false
		default:
			if !in.sorted {
				in.sorted, in.desc = true, true
			}
		}
	} else if m := beforeRE.FindStringSubmatch(task); m != nil {
		in.n = count(m[1])
	} else if in.sorted && isSuperlative(words) {
		in.n = 1 // "the most expensive item": one
	}
	for _, m := range boundRE.FindAllStringSubmatch(task, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		switch w := strings.ToLower(m[1]); w {
		case "at least":
			in.bounds = append(in.bounds, bound{">=", v})
		case "at most":
			in.bounds = append(in.bounds, bound{"<=", v})
		case "below", "under", "less than", "lower than", "fewer than", "cheaper than":
			in.bounds = append(in.bounds, bound{"<", v})
		default:
			in.bounds = append(in.bounds, bound{">", v})
		}
	}
	if in.op != opList {
		in.n, in.sorted = 0, in.sorted && in.op == opList
	}
	return in
}

// isSuperlative reports a superlative that asks for one record: a
// direction word, not a sort ("rank them by engagement").
func isSuperlative(words []string) bool {
	for _, w := range words {
		if maxWords[w] || minWords[w] {
			return true
		}
	}
	return false
}

func count(s string) int {
	if n, ok := numberWords[strings.ToLower(s)]; ok {
		return n
	}
	n, _ := strconv.Atoi(s)
	return n
}

func hasWord(words []string, w string) bool {
	for _, x := range words {
		if x == w {
			return true
		}
	}
	return false
}

// userTask is the user's task in a step task: the planner writes steps as
// "<skill's job> (for: <task>)"; a loop step's task is the user's own.
func userTask(task string) string {
	if i := strings.LastIndex(task, "(for: "); i >= 0 {
		return strings.TrimSuffix(task[i+len("(for: "):], ")")
	}
	return task
}
