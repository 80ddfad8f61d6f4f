package rpc

// maxJSONDepth is how deeply arrays and objects may nest: encoding/json's
// limit, which validJSON keeps.
const maxJSONDepth = 10000

// validJSON reports whether s is one JSON value with optional white space
// around it, exactly as encoding/json.Valid does (FuzzValidJSON compares
// them): RFC 8259's grammar, containers nested at most maxJSONDepth deep,
// and any byte from 0x20 up inside a string (a request's strings are
// checked as UTF-8 when they are decoded). It reads s once without
// allocating, and skips eight plain bytes of a string at a time, which
// makes it several times faster than encoding/json's scanner on an agent's
// messages, where strings are nearly all of the text.
func validJSON(s string) bool {
	var buf [32]byte
	open := buf[:0] // the containers open, innermost last: '{' or '['
	i := skipSpace(s, 0)
	for {
		// A value starts at i.
		if i >= len(s) {
			return false
		}
		var ok bool
		switch c := s[i]; {
		case c == '"':
			i, ok = scanString(s, i+1)
		case c == '-' || c >= '0' && c <= '9':
			i, ok = scanNumber(s, i)
		case c == 't':
			i, ok = scanLiteral(s, i, "true")
		case c == 'f':
			i, ok = scanLiteral(s, i, "false")
		case c == 'n':
			i, ok = scanLiteral(s, i, "null")
		case c == '[' || c == '{':
			if len(open) == maxJSONDepth {
				return false
			}
			open = append(open, c)
			if i = skipSpace(s, i+1); i < len(s) && s[i] == c+2 { // ']' or '}'
				open, i, ok = open[:len(open)-1], i+1, true
				break
			}
			if c == '{' {
				if i, ok = scanKey(s, i); !ok {
					return false
				}
			}
			continue
		}
		if !ok {
			return false
		}
		// A value ended at i: close the containers it ends, or go on to
		// the next value of the innermost.
		for {
			i = skipSpace(s, i)
			if len(open) == 0 {
				return i == len(s)
			}
			if i >= len(s) {
				return false
			}
			c, top := s[i], open[len(open)-1]
			if c == top+2 { // ']' or '}'
				open, i = open[:len(open)-1], i+1
				continue
			}
			if c != ',' {
				return false
			}
			i = skipSpace(s, i+1)
			if top == '{' {
				if i, ok = scanKey(s, i); !ok {
					return false
				}
			}
			break
		}
	}
}

// skipSpace returns the index of the first byte of s from i on that is not
// JSON white space.
func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t') {
		i++
	}
	return i
}

// scanKey reads an object's key and its colon from i, returning the index
// of the value after them.
func scanKey(s string, i int) (int, bool) {
	if i >= len(s) || s[i] != '"' {
		return i, false
	}
	i, ok := scanString(s, i+1)
	if !ok {
		return i, false
	}
	if i = skipSpace(s, i); i >= len(s) || s[i] != ':' {
		return i, false
	}
	return skipSpace(s, i+1), true
}

// scanLiteral reads lit (true, false or null) at i.
func scanLiteral(s string, i int, lit string) (int, bool) {
	if len(s)-i < len(lit) || s[i:i+len(lit)] != lit {
		return i, false
	}
	return i + len(lit), true
}

// scanNumber reads a number at i: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(s string, i int) (int, bool) {
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = skipDigits(s, i+1)
	default:
		return i, false
	}
	if i < len(s) && s[i] == '.' {
		j := skipDigits(s, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := skipDigits(s, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func skipDigits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// SWAR constants: a byte of ones in each lane, a high bit in each lane.
const (
	lanes1   = 0x0101010101010101
	lanesMSB = 0x8080808080808080
)

// scanString reads the rest of a string whose opening quote is before i,
// returning the index after its closing quote. Eight bytes at a time it
// skips words holding no quote, backslash or control character.
func scanString(s string, i int) (int, bool) {
	for {
		for ; i+8 <= len(s); i += 8 {
			w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
			q, b := w^(lanes1*'"'), w^(lanes1*'\\')
			// A lane is flagged when it is below 0x20, or zero after the
			// XOR (a quote or a backslash); a word with no flag is plain.
			if ((w-lanes1*0x20)&^w|(q-lanes1)&^q|(b-lanes1)&^b)&lanesMSB != 0 {
				break
			}
		}
		if i >= len(s) {
			return i, false
		}
		switch c := s[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			if i+1 >= len(s) {
				return i, false
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(s)-i < 6 || !isHex(s[i+2]) || !isHex(s[i+3]) || !isHex(s[i+4]) || !isHex(s[i+5]) {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		default:
			i++
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
