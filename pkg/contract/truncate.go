package contract

import (
	"fmt"
	"strings"
)

// maxQuoted is how many bytes of a user-supplied value an error message or log line repeats.
const maxQuoted = 256

// Truncate returns s, or its first max bytes followed by "...(N more bytes)" when it is longer,
// so that a hostile value (a 200 KB annotation) never becomes a 200 KB log line or Status
// message. It never cuts a UTF-8 sequence in half.
func Truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && s[cut]&0xC0 == 0x80 { // back up to the start of a UTF-8 sequence
		cut--
	}
	return fmt.Sprintf("%s...(%d more bytes)", s[:cut], len(s)-cut)
}

// JoinFirst joins the first n of items with ", " and says how many more there are
// ("a, b and 3 more"), so that a status message naming locations or resources stays short
// however many there are.
func JoinFirst(items []string, n int) string {
	out := strings.Join(items[:min(len(items), n)], ", ")
	if len(items) > n {
		out += fmt.Sprintf(" and %d more", len(items)-n)
	}
	return out
}
