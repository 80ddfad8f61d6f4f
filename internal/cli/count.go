package cli

import (
	"fmt"
	"strings"
)

// Count is n and the noun, singular for one and plural otherwise: "1
// message", "2 messages", "0 entries". noun is the singular; the plural
// adds "s", or replaces a "y" after a consonant with "ies".
func Count[N ~int | ~int64 | ~uint64 | ~uint32 | ~int32](n N, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %s", n, plural(noun))
}

func plural(noun string) string {
	if base, ok := strings.CutSuffix(noun, "y"); ok && base != "" && !strings.ContainsAny(base[len(base)-1:], "aeiou") {
		return base + "ies"
	}
	return noun + "s"
}
