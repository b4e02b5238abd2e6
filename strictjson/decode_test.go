package strictjson

import (
	"testing"

	"github.com/stretchr/testify/require"
)

type request struct {
	Deadline string `json:"deadline"`
	Count    int    `json:"count"`
	Inner    *struct {
		Flag bool `json:"flag"`
	} `json:"inner"`
}

// Each way a body can be wrong is said in words that name the field, never
// in encoding/json's (Go types, struct names).
func TestBodyErrorsNameTheField(t *testing.T) {
	for body, want := range map[string]string{
		`{"deadline":30}`:                     "deadline: want a string, got JSON number",
		`{"inner":{"flag":"yes"}}`:            "inner.flag: want true or false, got JSON string",
		`{"deadlin":"1s"}`:                    `deadlin: unknown field (did you mean "deadline"?)`,
		`{"deadline":"1s"} {}`:                "malformed JSON: unexpected data after the value",
		`{"deadline":"1s","DEADLINE":"2s"}`:   "DEADLINE: given twice: an object holds a key once",
		`{"inner":{"flag":true,"flag":true}}`: "inner.flag: given twice: an object holds a key once",
		`null`:                                "a drain request is a JSON object, got JSON null",
		`[1]`:                                 "a drain request is a JSON object, got JSON array",
		``:                                    "malformed JSON: empty body, want a drain request",
		"{\n \"count\": 1,\n \"x\" 2}":        "malformed JSON at line 3, column 6: invalid character '2' after object key",
		"\uFEFF{}":                            "malformed JSON: the drain request starts with a byte-order mark (U+FEFF); save it as UTF-8 without one",
		"{\n\"deadline\":\"a\xffb\"}":         "malformed JSON at line 2, column 14: not UTF-8 (JSON text is UTF-8)",
	} {
		var r request
		err := Body([]byte(body), &r, "drain request")
		require.Error(t, err, "%q", body)
		require.IsType(t, &Error{}, err)
		require.Equal(t, want, err.Error(), "%q", body)
	}
	var r request
	require.NoError(t, Body([]byte(`{"deadline":"1s","count":2,"inner":{"flag":true}}`), &r, "drain request"))
	require.Equal(t, "1s", r.Deadline)
}

// A name a client sent is echoed cut, on a character's boundary.
func TestShortCutsOnACharacter(t *testing.T) {
	require.Equal(t, "abc", Short("abc"))
	long := "a" + "ééééééééééééééééééééééééééééééééééééééééééé"
	got := Short(long)
	require.Equal(t, "aééééééééééééééééééééééééééééééé...(87 bytes)", got)
}
