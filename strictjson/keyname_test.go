package strictjson

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// KeyIs matches a key to a field exactly when encoding/json does: on keys
// made of a field's name or a near miss, each character written plainly,
// in another case, as a character that folds to it, or escaped.
func TestKeyIsWhatTheDecoderMatches(t *testing.T) {
	variants := map[rune][]string{
		's': {"s", "S", "ſ", `\u0073`, `\u017f`, `\u0053`},
		'k': {"k", "K", "\u212a", `\u212A`},
		'i': {"i", "I", "ı", "İ", `\u0069`},
	}
	rapid.Check(t, func(t *rapid.T) {
		field := rapid.SampledFrom([]string{"vertices", "inputs", "kind"}).Draw(t, "field")
		var raw strings.Builder
		for _, r := range field {
			vs := append([]string{string(r), strings.ToUpper(string(r)), fmt.Sprintf(`\u%04x`, r), fmt.Sprintf(`\u%04X`, r)}, variants[r]...)
			raw.WriteString(rapid.SampledFrom(vs).Draw(t, "char"))
		}
		key := raw.String()
		switch rapid.IntRange(0, 5).Draw(t, "change") {
		case 0:
			key += rapid.SampledFrom([]string{"s", `\n`, `\"`, `\\`, `\/`, "é", `\ud83d\ude00`, `\ud83d`}).Draw(t, "more")
		case 1:
			key = key[:rapid.IntRange(0, len(key)).Draw(t, "cut")]
		}
		var got struct {
			Vertices, Inputs, Kind *int
		}
		doc := `{"` + key + `":1}`
		if !json.Valid([]byte(doc)) {
			t.Skip("not a key")
		}
		require.NoError(t, json.Unmarshal([]byte(doc), &got))
		matched := map[string]bool{"vertices": got.Vertices != nil, "inputs": got.Inputs != nil, "kind": got.Kind != nil}[field]
		require.Equal(t, matched, KeyIs([]byte(key), field), "%s", key)
	})
}

func TestKeyIsAllocatesNothing(t *testing.T) {
	raw := []byte(`Verti\u0063e\u017f`)
	require.True(t, KeyIs(raw, "vertices"))
	require.Zero(t, testing.AllocsPerRun(100, func() { KeyIs(raw, "vertices") }))
}
