package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// DuplicateKey agrees with a reading of the same JSON through
// encoding/json's tokens: on generated documents (objects, arrays,
// strings with escaped quotes, keys written with escapes, numbers,
// literals, whitespace), it finds a
// key given twice exactly when some object holds one (whatever its case,
// but for an env object's).
func TestDuplicateKeyAgreesWithTheTokens(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		keys := []string{"a", "A", "b", "env", "Env", "x", `\u0061`, `\u0045nv`}
		var gen func(depth int) any
		gen = func(depth int) any {
			switch k := rapid.IntRange(0, 5).Draw(t, "kind"); {
			case k == 0 && depth < 4:
				n := rapid.IntRange(0, 4).Draw(t, "len")
				var obj [][2]any
				for range n {
					obj = append(obj, [2]any{rapid.SampledFrom(keys).Draw(t, "key"), gen(depth + 1)})
				}
				return obj
			case k == 1 && depth < 4:
				n := rapid.IntRange(0, 3).Draw(t, "len")
				arr := make([]any, n)
				for i := range arr {
					arr[i] = gen(depth + 1)
				}
				return arr
			case k == 2:
				return rapid.SampledFrom([]string{`"s"`, `"q\"uo{te}"`, `"[,]"`, `"a"`}).Draw(t, "string")
			case k == 3:
				return rapid.SampledFrom([]string{"1", "-2.5e3", "true", "false", "null"}).Draw(t, "literal")
			}
			return `"v"`
		}
		var write func(b *strings.Builder, v any)
		write = func(b *strings.Builder, v any) {
			ws := rapid.SampledFrom([]string{"", " ", "\n\t"}).Draw(t, "ws")
			switch v := v.(type) {
			case [][2]any:
				b.WriteString("{" + ws)
				for i, kv := range v {
					if i > 0 {
						b.WriteString("," + ws)
					}
					b.WriteString(`"` + kv[0].(string) + `"` + ws + ":" + ws)
					write(b, kv[1])
				}
				b.WriteString(ws + "}")
			case []any:
				b.WriteString("[" + ws)
				for i, x := range v {
					if i > 0 {
						b.WriteString("," + ws)
					}
					write(b, x)
				}
				b.WriteString(ws + "]")
			case string:
				b.WriteString(v)
			}
		}
		var b strings.Builder
		root := gen(0)
		if _, ok := root.([][2]any); !ok {
			root = [][2]any{{"x", root}}
		}
		write(&b, root)
		data := []byte(b.String())
		if !json.Valid(data) {
			t.Fatalf("generated invalid JSON: %s", data)
		}
		if got, want := DuplicateKey(data, isEnv) != "", duplicatedByTokens(data); got != want {
			t.Fatalf("DuplicateKey(%s) = %q, the tokens say duplicated: %v", data, DuplicateKey(data, isEnv), want)
		}
	})
}

// duplicatedByTokens reads data's tokens and reports whether an object
// holds a key twice (case folded, but in an object under a key "env").
func duplicatedByTokens(data []byte) bool {
	type obj struct {
		keys     map[string]bool
		fold     bool
		last     string
		wantsKey bool
	}
	var stack []*obj // nil entries: arrays
	dec := json.NewDecoder(bytes.NewReader(data))
	valueEnded := func() {
		if n := len(stack); n > 0 && stack[n-1] != nil {
			stack[n-1].wantsKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				fold := !(len(stack) > 0 && stack[len(stack)-1] != nil && strings.EqualFold(stack[len(stack)-1].last, "env"))
				stack = append(stack, &obj{keys: map[string]bool{}, fold: fold, wantsKey: true})
			case '[':
				stack = append(stack, nil)
			default:
				stack = stack[:len(stack)-1]
				valueEnded()
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1] != nil && stack[n-1].wantsKey {
				o := stack[n-1]
				k := t
				if o.fold {
					k = strings.ToLower(k)
				}
				if o.keys[k] {
					return true
				}
				o.keys[k], o.last, o.wantsKey = true, t, false
				continue
			}
			valueEnded()
		default:
			valueEnded()
		}
	}
}

// Keys are compared as the decoder reads them, in objects of any size.
func TestDuplicateKeysWrittenOtherwiseOrLate(t *testing.T) {
	require := func(want string, data string) {
		t.Helper()
		if got := DuplicateKey([]byte(data), isEnv); got != want {
			t.Fatalf("DuplicateKey(%.80s...) = %q, want %q", data, got, want)
		}
	}
	require("vertices[0].env.PAT\\u0048", `{"vertices":[{"env":{"PATH":"1","PAT\u0048":"2"}}]}`)
	require("n\\u0061me", `{"name":"a","n\u0061me":"b"}`)
	require("verticeſ", `{"vertices":1,"verticeſ":2}`) // encoding/json folds ſ to s
	require(`\u212aey`, `{"key":1,"\u212aey":2}`)      // and the Kelvin sign to k
	require("", `{"env":{"key":1,"\u212aey":2}}`)      // but for an env's variables
	var b strings.Builder
	b.WriteString(`{"env":{`)
	for i := range 10_000 {
		fmt.Fprintf(&b, `"V%d":"x",`, i)
	}
	b.WriteString(`"V1":"again"}}`)
	require("env.V1", b.String())
	require("", strings.Replace(b.String(), `"V1":"again"`, `"v1":"other case"`, 1))
}

// isEnv is the job spec's exception: an env object is a map, whose keys
// are compared as written.
func isEnv(key string) bool { return strings.EqualFold(key, "env") }
