package offline

import (
	"fmt"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/text"
)

// python renders the query as a Python extraction script that computes,
// in the sandbox, what apply computes in process: it reads the JSON file
// named by argv[1] and prints the answer as JSON. level narrows the
// records it prints (maxRecords), so each attempt after a rejected one is
// a different, smaller script.
func (q *query) python(level int) string {
	limit := maxRecords[min(level, len(maxRecords)-1)]
	keep := q.Keep
	if q.Narrow && level == 0 {
		limit = -1 // every record
	}
	if level > 0 {
		keep = q.essential()
	}
	if q.n > 0 && (limit < 0 || q.n < limit) {
		limit = q.n
	}
	cfg := map[string]any{
		"task": q.terms, "array": q.Array, "op": q.op, "metric": q.Metric, "subject": q.Subject,
		"match": append([]string{}, q.Match...), "keep": append([]string{}, keep...), "limit": limit, "sorted": q.sorted, "desc": q.desc,
		"bounds": append([]bound{}, q.bounds...), "question": q.question(), "max_value_terms": maxValueTerms,
		"stop": text.Stopwords(), "syn": text.Synonyms(),
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		panic(err) // plain data
	}
	return fmt.Sprintf("# agentbus offline extraction, attempt %d\nimport json, re, sys\n\nQ = json.loads(%s)\n%s",
		level+1, pyStr(string(b)), pythonBody)
}

// pyStr quotes s as a Python string literal (JSON strings are valid ones).
func pyStr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// pythonBody is the script's program; Q holds the query. terms repeats
// text.Terms, mentioned, filter and the operations repeat apply.
const pythonBody = `STOP, SYN = set(Q["stop"]), Q["syn"]


def stem(w):
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 5 and w.endswith("ing"):
        return w[:-3]
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def terms(s):
    out = []
    for f in re.findall(r"[^\W_]+", s.lower()):
        if len(f) < 2 or f in STOP:
            continue
        w = stem(f)
        out.append(SYN.get(w, w))
    return out


def contains(seq):
    t, n = Q["task"], len(seq)
    return n > 0 and any(t[i:i + n] == seq for i in range(len(t) - n + 1))


def labels(v):
    if isinstance(v, str):
        return [v]
    if isinstance(v, list):
        return [x for x in v if isinstance(x, str)]
    return []


def num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def holds(b, v):
    op, x = b["op"], b["value"]
    return v > x if op == ">" else v >= x if op == ">=" else v < x if op == "<" else v <= x


with open(sys.argv[1]) as f:
    data = json.load(f)
rows = [r for r in (data.get(Q["array"]) or []) if isinstance(r, dict)]

filters = {}
for field in Q["match"]:
    seen = set()
    for r in rows:
        for v in labels(r.get(field)):
            if v in seen:
                continue
            seen.add(v)
            t = terms(v)
            if len(t) <= Q["max_value_terms"] and contains(t):
                filters.setdefault(field, []).append(v)
where = [f + " is " + " or ".join(filters[f]) for f in sorted(filters)]
metric = Q["metric"]
for b in Q["bounds"]:
    where.append("%s %s %s" % (metric, b["op"], json.dumps(b["value"])))


def keep(r):
    return all(set(labels(r.get(f))) & set(w) for f, w in filters.items()) and all(
        num(r.get(metric)) is not None and holds(b, r.get(metric)) for b in Q["bounds"])


rows = [r for r in rows if keep(r)]
out = {"count": len(rows), "where": " and ".join(where), "question": Q["question"]}
result = {"summary": [out]}
op, subject = Q["op"], Q["subject"]
if op == "list":
    if Q["sorted"]:
        rows = sorted(rows, key=lambda r: num(r.get(metric)) or 0, reverse=Q["desc"])
    if Q["limit"] >= 0:
        rows = rows[:Q["limit"]]
    result[Q["array"]] = [{k: r[k] for k in Q["keep"] if k in r} for r in rows]
elif op in ("distinct", "group"):
    counts = {}
    for r in rows:
        for v in labels(r.get(subject)):
            counts[v] = counts.get(v, 0) + 1
    out["field"] = subject
    if op == "distinct":
        out["values"], out["count"] = list(counts), len(counts)
    else:
        out["groups"] = [{"value": v, "count": n} for v, n in counts.items()]
elif op in ("average", "range"):
    out["field"] = metric
    nums = [num(r.get(metric)) for r in rows if num(r.get(metric)) is not None]
    if nums and op == "average":
        out["average"] = round(sum(nums) / len(nums), 2)
    elif nums:
        out["min"], out["max"] = min(nums), max(nums)
print(json.dumps(result))
`
