package launch

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeValue is a flag of bytes bound to an int64: a plain number of bytes
// or a number with a unit, B, KB, MB, GB, TB (powers of 1000) or KiB, MiB,
// GiB, TiB (powers of 1024); "0" is zero. It renders as a plain number.
type sizeValue struct{ p *int64 }

func newSizeValue(p *int64, def int64) *sizeValue {
	*p = def
	return &sizeValue{p: p}
}

func (v *sizeValue) Set(s string) error {
	n, err := ParseSize(s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

func (v *sizeValue) String() string { return strconv.FormatInt(*v.p, 10) }

func (v *sizeValue) Type() string { return "size" }

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

// ParseSize reads a size in bytes: "1048576", "512MiB", "10GB".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if num, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(num), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want a non-negative number of bytes, optionally with a unit (KiB, MiB, GiB, TiB, KB, MB, GB, TB)", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n * mult, nil
}
