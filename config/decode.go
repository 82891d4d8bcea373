package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// decodeYAML reads a YAML document over cfg, keeping the values the
// document leaves out. Unlike yaml's KnownFields, which stops at the first
// unknown key, it walks the whole document and reports every unknown key
// and every ill-typed value with its dotted path, so one run of
// `herald config check` shows everything to fix.
func decodeYAML(data []byte, file string, cfg *Config) Problems {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Problems{{Msg: file + ": " + err.Error()}}
	}
	if doc.Kind == 0 { // an empty file
		return nil
	}
	var d decoder
	d.value(&doc, reflect.ValueOf(cfg).Elem(), "")
	return d.problems
}

type decoder struct {
	problems Problems
}

func (d *decoder) add(n *yaml.Node, key, format string, args ...any) {
	d.problems = append(d.problems, Problem{Key: key, Line: n.Line, Msg: fmt.Sprintf(format, args...)})
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	freeMapType  = reflect.TypeFor[map[string]any]()
)

// value decodes n into v; key is v's dotted path.
func (d *decoder) value(n *yaml.Node, v reflect.Value, key string) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) > 0 {
			d.value(n.Content[0], v, key)
		}
		return
	case yaml.AliasNode:
		d.value(n.Alias, v, key)
		return
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		// "key:" with nothing after it keeps the default rather than
		// zeroing it, so a commented-out block stays harmless.
		return
	}
	switch {
	case v.Kind() == reflect.Pointer:
		// An optional value (mcp_servers.<name>.enabled): set means given.
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.value(n, v.Elem(), key)
	case v.Kind() == reflect.Struct:
		d.mapping(n, v, key)
	case v.Type() == durationType:
		d.duration(n, v, key)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		d.list(n, v, key)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
		d.structList(n, v, key)
	case v.Type() == freeMapType:
		d.freeMap(n, v, key)
	case v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String:
		d.namedMap(n, v, key)
	case v.Kind() == reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.add(n, key, "want a string, got a %s", kindName(n))
			return
		}
		v.SetString(n.Value)
	case v.Kind() == reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
			d.add(n, key, "want true or false, got %s", describe(n))
			return
		}
		v.SetBool(b)
	case v.CanInt():
		// The tag check refuses floats, which yaml would truncate.
		var i int64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil || v.OverflowInt(i) {
			d.add(n, key, "want an integer, got %s", describe(n))
			return
		}
		v.SetInt(i)
	case v.CanFloat():
		var f float64
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") || n.Decode(&f) != nil {
			d.add(n, key, "want a number, got %s", describe(n))
			return
		}
		v.SetFloat(f)
	default:
		// A field type this decoder does not know is a bug here, not in
		// the user's file; say so rather than ignore the value.
		d.add(n, key, "cannot decode into %s", v.Type())
	}
}

// mapping decodes a YAML mapping into the struct v, field by yaml tag.
func (d *decoder) mapping(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind != yaml.MappingNode {
		// Not describe(n): a scalar here may be a credential put one
		// level too high ("model: sk-…"), and problems get printed.
		d.add(n, keyOrTop(key), "want a mapping, got a %s", kindName(n))
		return
	}
	fields := fieldsByKey(v.Type())
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Tag == "!!merge" { // "<<: *base" pulls in another mapping's keys
			d.merge(val, v, key)
			continue
		}
		path := join(key, k.Value)
		idx, ok := fields[k.Value]
		if !ok {
			d.add(k, path, "unknown key%s", suggest(k.Value, fields))
			continue
		}
		d.value(val, v.Field(idx), path)
	}
}

func (d *decoder) merge(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.SequenceNode {
		for _, m := range n.Content {
			d.merge(m, v, key)
		}
		return
	}
	d.mapping(n, v, key)
}

func (d *decoder) duration(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind != yaml.ScalarNode {
		d.add(n, key, "want a duration like \"30s\", got a %s", kindName(n))
		return
	}
	dur, err := time.ParseDuration(n.Value)
	if err != nil {
		if _, nerr := strconv.ParseInt(n.Value, 10, 64); nerr == nil {
			d.add(n, key, "want a duration with a unit like \"%ss\", got %s", n.Value, n.Value)
		} else {
			d.add(n, key, "want a duration like \"30s\", got %q", n.Value)
		}
		return
	}
	v.SetInt(int64(dur))
}

// list takes a sequence of scalars or, as the environment does, one comma
// separated string.
func (d *decoder) list(n *yaml.Node, v reflect.Value, key string) {
	var out []string
	switch n.Kind {
	case yaml.ScalarNode:
		out = splitList(n.Value)
	case yaml.SequenceNode:
		for i, e := range n.Content {
			if e.Kind == yaml.AliasNode {
				e = e.Alias
			}
			if e.Kind != yaml.ScalarNode {
				d.add(e, fmt.Sprintf("%s[%d]", key, i), "want a string, got a %s", kindName(e))
				continue
			}
			out = append(out, e.Value)
		}
	default:
		d.add(n, key, "want a list, got a %s", kindName(n))
		return
	}
	v.Set(reflect.ValueOf(out).Convert(v.Type()))
}

// structList takes a sequence of mappings, each decoded as a struct; it
// replaces the value whole, as a list does.
func (d *decoder) structList(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind != yaml.SequenceNode {
		d.add(n, key, "want a list, got a %s", kindName(n))
		return
	}
	out := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, e := range n.Content {
		d.value(e, out.Index(i), fmt.Sprintf("%s[%d]", key, i))
	}
	v.Set(out)
}

// freeMap takes a mapping whose keys herald does not know, as YAML has it
// (delegation.request_overrides); it replaces the value whole, as a list
// does.
func (d *decoder) freeMap(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind != yaml.MappingNode {
		d.add(n, key, "want a mapping, got a %s", kindName(n))
		return
	}
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		// Not the error's text: it may quote a value, and this one may
		// hold a credential.
		d.add(n, key, "want a mapping with plain keys")
		return
	}
	v.Set(reflect.ValueOf(stringKeys(m).(map[string]any)))
}

// namedMap decodes a mapping of names to values of one type (the lanes
// of kanban.lanes, a lane's env) into the map v, each value as its own
// key's, at key.name.
func (d *decoder) namedMap(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind != yaml.MappingNode {
		d.add(n, key, "want a mapping, got a %s", kindName(n))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		elem := reflect.New(v.Type().Elem()).Elem()
		if cur := v.MapIndex(reflect.ValueOf(k.Value)); cur.IsValid() {
			elem.Set(cur)
		}
		d.value(val, elem, join(key, k.Value))
		v.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), elem)
	}
}

// stringKeys turns the map[any]any yaml makes of a nested mapping with a
// key that is not a string ({1: x}) into map[string]any, at every depth,
// so the value can be sent as JSON.
func stringKeys(x any) any {
	switch x := x.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = stringKeys(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = stringKeys(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = stringKeys(e)
		}
		return x
	}
	return x
}

// fieldsByKey maps each yaml key of struct type t to its field index.
func fieldsByKey(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !t.Field(i).IsExported() {
			continue
		}
		m[name] = i
	}
	return m
}

// suggest names the known key closest to a misspelt one, if any is close.
func suggest(key string, fields map[string]int) string {
	best, bestDist := "", 3 // farther than two edits is a different word
	for k := range fields {
		if dist := editDistance(key, k); dist < bestDist || (dist == bestDist && k < best) {
			best, bestDist = k, dist
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func keyOrTop(key string) string {
	if key == "" {
		return "(top level)"
	}
	return key
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	default:
		return "single value"
	}
}

// describe shows a scalar's text, or the kind of a collection. It is only
// used for values of non-secret types (numbers, booleans, durations), so
// quoting the text cannot leak a credential.
func describe(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return strconv.Quote(n.Value)
	}
	return "a " + kindName(n)
}

// splitList splits a comma separated list, trimming blanks and dropping
// empty items so "a, b," is [a b].
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
