package main

import (
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/judge"
)

// jsonKey is what the contract says of a key beyond its path: left out
// when it does not apply (omitempty, `?` in docs/json.md's skeletons), or,
// an object, null when it does not apply (`| null`).
type jsonKey struct {
	optional, nullable bool
}

// TestJSONDocsNameEveryKey: docs/json.md's skeleton of each JSON object
// tare marshals from Go types names every key those types marshal, and
// no other, each as optional (`?`) and as nullable (`| null`) as the
// types make it; the thresholds the verdict records are named there too;
// and every key is described outside the skeletons, in a code span of
// the prose or the tables. The failures name the key by its dotted path
// (blame.behind[].wait_pct).
func TestJSONDocsNameEveryKey(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs", "json.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	thresholds := slices.Sorted(maps.Keys(judge.DefaultThresholds().Map()))
	for _, tt := range []struct {
		schema  string
		value   any
		mapKeys map[string][]string // a map's keys the contract names, by the map's path
	}{
		{tare.SummarySchema, tare.Summary{}, map[string][]string{"thresholds": thresholds}},
		{tare.CompareSchema, tare.Comparison{}, nil},
		{tare.ABSchema, tare.AB{}, nil},
	} {
		t.Run(tt.schema, func(t *testing.T) {
			block, err := skeletonBlock(doc, tt.schema)
			if err != nil {
				t.Fatal(err)
			}
			documented, err := parseSkeleton(block)
			if err != nil {
				t.Fatalf("docs/json.md, the skeleton of %s: %v", tt.schema, err)
			}
			marshalled := jsonKeys(reflect.TypeOf(tt.value))
			for path, names := range tt.mapKeys {
				for _, name := range names {
					marshalled[path+"."+name] = jsonKey{}
				}
			}
			for _, path := range slices.Sorted(maps.Keys(marshalled)) {
				d, ok := documented[path]
				m := marshalled[path]
				switch {
				case !ok:
					t.Errorf("%s is marshalled but not in docs/json.md's skeleton of %s", path, tt.schema)
				case d.optional != m.optional:
					t.Errorf("%s: optional (omitempty) is %t, docs/json.md's skeleton says %t (`?`)", path, m.optional, d.optional)
				case d.nullable != m.nullable:
					t.Errorf("%s: an object null when it does not apply is %t, docs/json.md's skeleton says %t (`| null`)", path, m.nullable, d.nullable)
				}
			}
			for _, path := range slices.Sorted(maps.Keys(documented)) {
				if _, ok := marshalled[path]; !ok {
					t.Errorf("%s is in docs/json.md's skeleton of %s but no Go type marshals it", path, tt.schema)
				}
			}
			described := describedNames(doc)
			for _, path := range slices.Sorted(maps.Keys(marshalled)) {
				if name := lastKey(path); !described[name] {
					t.Errorf("%s: no `%s` in docs/json.md outside the skeletons: say what it is, its unit and when it is null", path, name)
				}
			}
			t.Logf("%s: %d keys", tt.schema, len(marshalled))
		})
	}
}

// jsonKeys are the dotted paths of every key encoding/json writes for a
// value of type typ, an array of objects marked [] (blame.behind[].owner);
// a map's keys are data, not keys of the contract, and a value that
// marshals itself (time.Time) has none.
func jsonKeys(typ reflect.Type) map[string]jsonKey {
	keys := map[string]jsonKey{}
	var walk func(typ reflect.Type, prefix string, depth int)
	walk = func(typ reflect.Type, prefix string, depth int) {
		if depth > 20 {
			panic("jsonKeys: types nested 20 deep, a cycle at " + prefix)
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			ft := f.Type
			if f.Anonymous && name == "" && elemType(ft).Kind() == reflect.Struct {
				walk(elemType(ft), prefix, depth+1) // encoding/json puts an embedded struct's keys beside the others
				continue
			}
			if !f.IsExported() || name == "-" && opts == "" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			path := prefix + name
			key := jsonKey{optional: slices.Contains(strings.Split(opts, ","), "omitempty")}
			if ft.Kind() == reflect.Pointer && isObject(ft.Elem()) {
				key.nullable = !key.optional
			}
			switch vt := elemType(ft); {
			case isObject(vt):
				keys[path] = key
				walk(vt, path+".", depth+1)
			case (vt.Kind() == reflect.Slice || vt.Kind() == reflect.Array) && isObject(elemType(vt.Elem())):
				keys[path+"[]"] = key
				walk(elemType(vt.Elem()), path+"[].", depth+1)
			default:
				keys[path] = key
			}
		}
	}
	walk(elemType(typ), "", 0)
	return keys
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// isObject says whether encoding/json writes a value of type typ as an
// object of keys: a struct that does not marshal itself.
func isObject(typ reflect.Type) bool {
	if typ.Kind() != reflect.Struct {
		return false
	}
	for _, m := range []reflect.Type{jsonMarshaler, textMarshaler} {
		if typ.Implements(m) || reflect.PointerTo(typ).Implements(m) {
			return false
		}
	}
	return true
}

func elemType(typ reflect.Type) reflect.Type {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	return typ
}

// lastKey is the key a path ends in, without [].
func lastKey(path string) string {
	return strings.TrimSuffix(path[strings.LastIndex(path, ".")+1:], "[]")
}

// skeletonBlock is the fenced block of doc that holds the skeleton of
// schema: the one with "schema": "<schema>".
func skeletonBlock(doc, schema string) (string, error) {
	for _, block := range fencedBlocks(doc) {
		if strings.Contains(block, `"schema": "`+schema+`"`) {
			return block, nil
		}
	}
	return "", fmt.Errorf("docs/json.md has no fenced block with \"schema\": %q", schema)
}

// fencedBlocks are the contents of doc's ``` blocks.
func fencedBlocks(doc string) []string {
	var blocks []string
	parts := strings.Split(doc, "\n```")
	for i := 1; i < len(parts); i += 2 {
		_, body, _ := strings.Cut(parts[i], "\n") // the fence's info string
		blocks = append(blocks, body)
	}
	return blocks
}

// describedNames are the words in doc's code spans outside its fenced
// blocks: `run_delay_pct`, `latency_ms` (`p50`, `p95`) and
// `steal_pct.mean`, `.max` name run_delay_pct, latency_ms, p50, p95,
// steal_pct, mean and max.
func describedNames(doc string) map[string]bool {
	names := map[string]bool{}
	parts := strings.Split(doc, "\n```")
	for i := 0; i < len(parts); i += 2 {
		for _, m := range codeSpan.FindAllStringSubmatch(parts[i], -1) {
			for _, w := range strings.FieldsFunc(m[1], func(r rune) bool { return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_') }) {
				names[w] = true
			}
		}
	}
	return names
}

// skelNode is one key of a skeleton: its value an object (children), an
// array of objects (array and children), the same value as the first key
// of another name written out (ref: <host>), or a leaf.
type skelNode struct {
	name     string
	key      jsonKey
	array    bool
	ref      string
	children []*skelNode
}

var skelToken = regexp.MustCompile(`"[^"]*"|<[a-z_]+>|\.\.\.|…|null|[{}\[\],:?|]|\S`)

// parseSkeleton reads a skeleton of docs/json.md into the dotted paths of
// its keys. The notation, JSON's with the values left out:
//
//	{"key", "key": "literal", "key"?, "key": {…keys…}, "key": [{…keys…}],
//	 "key": [...] (an array of values), "key": {…} | null, "key": <other>}
//
// `?` marks a key left out when it does not apply, `| null` an object
// that is null then, and <other> the value of the first key named other
// that is written out (an object or an array of objects).
func parseSkeleton(text string) (map[string]jsonKey, error) {
	p := &skelParser{tokens: skelToken.FindAllString(text, -1)}
	root := &skelNode{}
	var err error
	if root.children, err = p.object(); err != nil {
		return nil, err
	}
	if p.i < len(p.tokens) {
		return nil, fmt.Errorf("%q after the skeleton's end", p.tokens[p.i])
	}
	defs := map[string]*skelNode{}
	var index func(n *skelNode)
	index = func(n *skelNode) {
		for _, c := range n.children {
			if _, ok := defs[c.name]; !ok && c.children != nil {
				defs[c.name] = c
			}
			index(c)
		}
	}
	index(root)
	keys := map[string]jsonKey{}
	var flatten func(n *skelNode, prefix string, depth int) error
	flatten = func(n *skelNode, prefix string, depth int) error {
		if depth > 20 {
			return fmt.Errorf("references nested 20 deep at %s: a cycle", prefix)
		}
		for _, c := range n.children {
			shape := c
			if c.ref != "" {
				if shape = defs[c.ref]; shape == nil {
					return fmt.Errorf("%s%s: <%s> names no key written out", prefix, c.name, c.ref)
				}
			}
			path := prefix + c.name
			if shape.array {
				path += "[]"
			}
			if _, dup := keys[path]; dup {
				return fmt.Errorf("%s twice", path)
			}
			keys[path] = c.key
			if err := flatten(shape, path+".", depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return keys, flatten(root, "", 0)
}

type skelParser struct {
	tokens []string
	i      int
}

func (p *skelParser) peek() string {
	if p.i < len(p.tokens) {
		return p.tokens[p.i]
	}
	return ""
}

func (p *skelParser) next() string {
	t := p.peek()
	p.i++
	return t
}

func (p *skelParser) expect(want string) error {
	if got := p.next(); got != want {
		return fmt.Errorf("want %q, got %q (token %d)", want, got, p.i)
	}
	return nil
}

// object reads {"key"…, …} into its keys.
func (p *skelParser) object() ([]*skelNode, error) {
	if err := p.expect("{"); err != nil {
		return nil, err
	}
	nodes := []*skelNode{}
	for p.peek() != "}" {
		if p.peek() == "" {
			return nil, fmt.Errorf("a { left open")
		}
		name := p.next()
		if len(name) < 2 || name[0] != '"' {
			return nil, fmt.Errorf("want a key in quotes, got %q (token %d)", name, p.i)
		}
		n := &skelNode{name: strings.Trim(name, `"`)}
		if p.peek() == "?" {
			p.next()
			n.key.optional = true
		}
		if p.peek() == ":" {
			p.next()
			if err := p.value(n); err != nil {
				return nil, fmt.Errorf("%s: %w", n.name, err)
			}
		}
		nodes = append(nodes, n)
		if p.peek() != "}" && p.peek() != "" {
			if err := p.expect(","); err != nil {
				return nil, fmt.Errorf("after %s: %w", n.name, err)
			}
		}
	}
	p.next()
	return nodes, nil
}

// value reads a key's value into n.
func (p *skelParser) value(n *skelNode) error {
	var err error
	switch t := p.peek(); {
	case t == "{":
		n.children, err = p.object()
	case t == "[":
		p.next()
		if p.peek() == "{" {
			n.array = true
			if n.children, err = p.object(); err != nil {
				return err
			}
		} else if v := p.next(); v != "..." && v != "…" {
			return fmt.Errorf("want [{…keys…}] or [...], got [%s", v)
		}
		err = p.expect("]")
	case strings.HasPrefix(t, "<"):
		n.ref = strings.Trim(p.next(), "<>")
	case strings.HasPrefix(t, `"`):
		p.next() // a literal value
	default:
		return fmt.Errorf("want a value, got %q (token %d)", t, p.i)
	}
	if err != nil {
		return err
	}
	if p.peek() == "|" {
		p.next()
		if err := p.expect("null"); err != nil {
			return err
		}
		n.key.nullable = true
	}
	return nil
}

// TestParseSkeleton: the notation of docs/json.md's skeletons, read into
// key paths, and its mistakes refused.
func TestParseSkeleton(t *testing.T) {
	tests := []struct {
		name, skeleton string
		want           map[string]jsonKey
		err            string
	}{
		{"keys", `{"schema": "tare.x/v1", "a", "b"?}`,
			map[string]jsonKey{"schema": {}, "a": {}, "b": {optional: true}}, ""},
		{"objects and arrays", `{"run": {"id", "pids": [...]}, "behind"?: [{"owner", "pids"}], "q": {"n"} | null}`,
			map[string]jsonKey{"run": {}, "run.id": {}, "run.pids": {}, "behind[]": {optional: true}, "behind[].owner": {}, "behind[].pids": {}, "q": {nullable: true}, "q.n": {}}, ""},
		{"references", `{"host": {"cpu_by": {"idle"} | null}, "shards"?: [{"host": <host>, "other": <cpu_by> | null}]}`,
			map[string]jsonKey{"host": {}, "host.cpu_by": {nullable: true}, "host.cpu_by.idle": {}, "shards[]": {optional: true},
				"shards[].host": {}, "shards[].host.cpu_by": {nullable: true}, "shards[].host.cpu_by.idle": {}, "shards[].other": {nullable: true}, "shards[].other.idle": {}}, ""},
		{"unknown reference", `{"a": <nothing>}`, nil, "<nothing> names no key"},
		{"twice", `{"a", "a"}`, nil, "a twice"},
		{"no comma", `{"a" "b"}`, nil, `want ","`},
		{"bare word", `{a}`, nil, "want a key in quotes"},
		{"unclosed", `{"a": {"b"}`, nil, "a { left open"},
		{"no value", `{"a": }`, nil, "want a value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSkeleton(tt.skeleton)
			switch {
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("error %v; want one with %q", err, tt.err)
				}
			case err != nil:
				t.Fatal(err)
			case !reflect.DeepEqual(got, tt.want):
				t.Errorf("got  %v\nwant %v", got, tt.want)
			}
		})
	}
}

// TestJSONKeys: the paths of a type as encoding/json writes it, embedded
// structs' keys beside the others', a map and a time a key each.
func TestJSONKeys(t *testing.T) {
	type inner struct {
		N int `json:"n"`
	}
	type embedded struct {
		E string `json:"e"`
	}
	type outer struct {
		embedded
		Plain   string         `json:"plain"`
		Skip    string         `json:"-"`
		Opt     *inner         `json:"opt,omitempty"`
		Null    *inner         `json:"null"`
		List    []inner        `json:"list"`
		PtrList []*inner       `json:"ptr_list,omitempty"`
		Values  []int          `json:"values"`
		Map     map[string]int `json:"map"`
		At      time.Time      `json:"at"`
	}
	got := jsonKeys(reflect.TypeFor[outer]())
	want := map[string]jsonKey{"e": {}, "plain": {}, "opt": {optional: true}, "opt.n": {}, "null": {nullable: true}, "null.n": {},
		"list[]": {}, "list[].n": {}, "ptr_list[]": {optional: true}, "ptr_list[].n": {}, "values": {}, "map": {}, "at": {}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}
