package controllers

import (
	"strconv"
	"strings"

	"github.com/heraldgw/herald/internal/errs"
)

// options reads a command's words: its text, the text of textFlag
// (--contract, --until: the words after it, to the next option or the
// end) and the number of countFlag (--max-turns, --times: a whole
// number of at least 1, 0 when not given). Any other --option is
// refused.
func options(op string, words []string, countFlag, textFlag string) (text, flagged string, count int, err error) {
	var main, flag []string
	into := &main
	for i := 0; i < len(words); i++ {
		switch w := words[i]; w {
		case countFlag:
			if i+1 >= len(words) {
				return "", "", 0, errs.E(op, errs.Invalid, "%s needs a number", countFlag)
			}
			n, err := strconv.Atoi(words[i+1])
			if err != nil || n < 1 {
				return "", "", 0, errs.E(op, errs.Invalid, "%s %q: want a whole number of at least 1", countFlag, words[i+1])
			}
			count = n
			i++
			into = &main
		case textFlag:
			into = &flag
		default:
			if strings.HasPrefix(w, "--") {
				return "", "", 0, errs.E(op, errs.Invalid, "unknown option %s", w)
			}
			*into = append(*into, w)
		}
	}
	return strings.Join(main, " "), strings.Join(flag, " "), count, nil
}
