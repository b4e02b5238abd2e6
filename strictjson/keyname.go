package strictjson

import (
	"unicode"
	"unicode/utf8"
)

// KeyIs reports whether raw, a key as written between its quotes (escapes
// not undone), names the struct field whose JSON name is field (ASCII) as
// encoding/json matches keys to fields: escapes undone, and whatever the
// case, folded as it folds them ("Vertices", "vertice\u0073" and
// "verticeſ" all name "vertices"). It allocates nothing: a scan that runs
// before any decoding uses it on every key it meets.
func KeyIs(raw []byte, field string) bool {
	k := 0
	for i := 0; i < len(raw); {
		var r rune
		switch c := raw[i]; {
		case c == '\\':
			if i+1 >= len(raw) {
				return false
			}
			switch e := raw[i+1]; e {
			case 'u':
				if i+6 > len(raw) {
					return false
				}
				r = hex4(raw[i+2 : i+6])
				// A surrogate, paired or not, is no ASCII letter, nor
				// folds to one (a pair makes a rune past U+FFFF, a lone
				// one U+FFFD).
				if r < 0 || utf8.RuneLen(r) < 0 {
					return false
				}
				i += 6
			case '"', '\\', '/':
				r = rune(e)
				i += 2
			default: // \b \f \n \r \t: no field's name holds one
				return false
			}
		case c < utf8.RuneSelf:
			r = rune(c)
			i++
		default:
			var n int
			r, n = utf8.DecodeRune(raw[i:])
			i += n
		}
		if k >= len(field) || foldRune(r) != foldRune(rune(field[k])) {
			return false
		}
		k++
	}
	return k == len(field)
}

// hex4 is the value of four hexadecimal digits, or -1.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// foldRune is the least rune of r's Unicode case-folding orbit, as
// encoding/json folds a key's characters to match it to a field ('a' and
// 'A' fold to 'A'; 'ſ' and 's' to 'S'; the Kelvin sign and 'k' to 'K').
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			r -= 'a' - 'A'
		}
		return r
	}
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return least
}
