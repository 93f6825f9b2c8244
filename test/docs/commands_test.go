package docs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/cluster-mapper/cluster-mapper/pkg/apiserver"
	"github.com/cluster-mapper/cluster-mapper/pkg/buildversion"
	controllerapp "github.com/cluster-mapper/cluster-mapper/pkg/controller/app"
	"github.com/cluster-mapper/cluster-mapper/pkg/kubectlmapper"
	mapperapp "github.com/cluster-mapper/cluster-mapper/pkg/mapper/app"
)

// commands returns the command trees of cmd/, as their mains build them.
func commands() map[string]*cobra.Command {
	out := map[string]*cobra.Command{
		"mapper-apiserver":  apiserver.NewCommand(),
		"mapper":            mapperapp.NewCommand(),
		"mapper-controller": controllerapp.NewCommand(),
		"kubectl-mapper":    kubectlmapper.NewCommand(genericiooptions.IOStreams{}),
	}
	for _, c := range out {
		buildversion.AddFlag(c)
	}
	return out
}

// walk calls f for cmd and every subcommand.
func walk(cmd *cobra.Command, f func(*cobra.Command)) {
	f(cmd)
	for _, c := range cmd.Commands() {
		walk(c, f)
	}
}

// TestFlagUsage checks that every flag's help renders as written: pflag takes a `quoted` word
// of the usage as the flag's value name, so a phrase in backticks prints as a broken type
// ("--remove-extra-subjects kubectl auth reconcile").
func TestFlagUsage(t *testing.T) {
	for name, root := range commands() {
		walk(root, func(c *cobra.Command) {
			c.Flags().VisitAll(func(f *pflag.Flag) {
				if varname, _ := pflag.UnquoteUsage(f); strings.ContainsAny(varname, " \t") {
					t.Errorf("%s: flag --%s prints its value name as %q (backticks in its usage)", c.CommandPath(), f.Name, varname)
				}
			})
		})
		if name == "" {
			t.Fatal("unnamed command")
		}
	}
}

var (
	// commandLineRE finds an invocation of a command of cmd/ at the start of a shell line:
	// bin/mapper, mapper-apiserver, go run ./cmd/mapper-controller, kubectl mapper (the plugin
	// kubectl-mapper), after VAR=... assignments.
	commandLineRE = regexp.MustCompile(`^(?:[A-Z_]+=\S+\s+)*(?:\./)?(?:bin/|go run \./cmd/)?(kubectl[- ]mapper|mapper-apiserver|mapper-controller|mapper)(\s.*)?$`)
	makeLineRE    = regexp.MustCompile(`^make\s+([a-z][-a-z]*)`)
)

// TestDocCommands runs, in a dry way, the command lines of README.md's and docs/' shell blocks
// that invoke a command of cmd/ or make: the subcommand must exist and every flag must parse
// (cobra's own lookup and pflag's parser, as the binary would do), and a make target must be in
// the Makefile. A renamed flag or subcommand then fails here instead of in a reader's shell.
func TestDocCommands(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, page := range pages(t) {
		data, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range ParsePage(data).Blocks {
			if b.Info != "sh" && b.Info != "bash" && b.Info != "console" && b.Info != "" {
				continue
			}
			for i, line := range joinContinuations(b.Lines) {
				line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "$ "))
				where := fmt.Sprintf("%s:%d", page, b.Line+1+i)
				if m := makeLineRE.FindStringSubmatch(line); m != nil {
					checked++
					if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(m[1]) + `:`).Match(makefile) {
						t.Errorf("%s: make %s: no such target in the Makefile", where, m[1])
					}
					continue
				}
				m := commandLineRE.FindStringSubmatch(line)
				if m == nil {
					continue
				}
				checked++
				if err := dryRun(commands()[strings.Replace(m[1], " ", "-", 1)], shellWords(m[2])); err != nil {
					t.Errorf("%s: %s: %v", where, line, err)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no command lines found in the docs: the parser is broken")
	}
}

// dryRun finds the subcommand args name and parses its flags, without running it; --help is
// a flag like any other.
func dryRun(root *cobra.Command, args []string) error {
	c, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if err := c.ParseFlags(rest); !errors.Is(err, pflag.ErrHelp) {
		return err
	}
	return nil
}

// joinContinuations joins lines ending in a backslash with the next, and drops comments.
func joinContinuations(lines []string) []string {
	var out []string
	cur := ""
	for _, l := range lines {
		if i := strings.Index(l, " #"); i >= 0 && !strings.Contains(l[:i], "'") && !strings.Contains(l[:i], `"`) {
			l = l[:i]
		}
		if strings.HasSuffix(strings.TrimRight(l, " "), `\`) {
			cur += strings.TrimSuffix(strings.TrimRight(l, " "), `\`) + " "
			continue
		}
		out = append(out, cur+l)
		cur = ""
	}
	return append(out, cur)
}

// shellWords splits a command line into words as a POSIX shell would for the simple lines the
// docs show: single and double quotes group, a redirection or pipe ends the command.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '>' || r == '|' || r == '&' || r == ';':
			if inWord {
				words = append(words, cur.String())
			}
			return words
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
