package strictjson

import (
	"reflect"
	"strings"
)

// SuggestField is the JSON field name of v's type (a struct, or a pointer
// to one) nearest to name (a misspelling: at most two edits, case aside),
// or "" if none is that near. Only v's own fields are candidates, not
// those of the structs within it; a name longer than any field by more
// than two is no misspelling of one, and is not compared (the comparison
// costs the product of the lengths, and a request may send a long name).
func SuggestField(v any, name string) string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct || len(name) > maxSuggestedName {
		return ""
	}
	best, bestDist := "", 3
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" || !f.IsExported() {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if d := EditDistance(strings.ToLower(name), strings.ToLower(tag)); d < bestDist && tag != name {
			best, bestDist = tag, d
		}
	}
	return best
}

// maxSuggestedName is the longest unknown name a suggestion is looked for:
// every field name is far shorter.
const maxSuggestedName = 32

// EditDistance is the Levenshtein distance of a and b (bytes): the fewest
// bytes inserted, deleted or replaced to make one the other. It costs the
// product of the lengths: bound what a peer sends before asking.
func EditDistance(a, b string) int {
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
