// Package readme runs the shell blocks of README.md and the chart's README, verbatim, against
// real kube-apiservers and an OCI registry in process (TestReadme), so that every install,
// upgrade and opt-in command a user copies runs as typed.
//
// Each ```sh block of those files is marked, on the line before its fence, by a comment the
// rendered page does not show:
//
//	<!-- readme-test: run <name> -->       run by TestReadme, in the scenario that names it
//	<!-- readme-test: skip: <reason> -->    not run, and why
//
// An unmarked block, a skip without a reason, a name used twice or a run block no scenario
// runs fails the test.
package readme

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Block is one shell block of a markdown file.
type Block struct {
	File string
	// Line is the first line of the block's text (after the fence), 1-based.
	Line int
	// Name is the block's name (run), empty for a skipped block.
	Name string
	// Skip is why the block is not run, empty for a block that runs.
	Skip string
	Text string
}

var (
	fenceRE  = regexp.MustCompile("^```(sh|bash|shell|console)\\s*$")
	markRE   = regexp.MustCompile(`^<!-- readme-test: (.*) -->$`)
	runRE    = regexp.MustCompile(`^run ([a-z0-9-]+)$`)
	skipRE   = regexp.MustCompile(`^skip: (\S.*)$`)
	anyFence = regexp.MustCompile("^```")
)

// ParseBlocks reads the shell blocks of a markdown file with their marks.
func ParseBlocks(path string) ([]Block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		blocks []Block
		prev   string
		cur    *Block
		inCode bool // inside a fence of another language
		n      int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur != nil:
			if anyFence.MatchString(line) {
				blocks = append(blocks, *cur)
				cur = nil
			} else {
				cur.Text += line + "\n"
			}
		case inCode:
			if anyFence.MatchString(line) {
				inCode = false
			}
		case fenceRE.MatchString(line):
			b := Block{File: path, Line: n + 1}
			m := markRE.FindStringSubmatch(prev)
			if m == nil {
				return nil, fmt.Errorf("%s:%d: a shell block without a mark on the line before it (<!-- readme-test: run <name> --> or <!-- readme-test: skip: <reason> -->)", path, n)
			}
			if r := runRE.FindStringSubmatch(m[1]); r != nil {
				b.Name = r[1]
			} else if s := skipRE.FindStringSubmatch(m[1]); s != nil {
				b.Skip = s[1]
			} else {
				return nil, fmt.Errorf("%s:%d: mark %q is neither `run <name>` nor `skip: <reason>`", path, n-1, m[1])
			}
			cur = &b
		case anyFence.MatchString(line):
			inCode = true
		}
		prev = strings.TrimSpace(line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: the shell block is not closed", path, cur.Line)
	}
	return blocks, nil
}

// Substitute replaces the value of each `NAME=value` assignment that starts a line of text, for
// the names in vars (the documented variables a user sets to their own registry and cluster),
// keeping the rest of the line (its comment). It returns the names it replaced.
func Substitute(text string, vars map[string]string) (string, map[string]bool) {
	done := map[string]bool{}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		name, rest, ok := strings.Cut(l, "=")
		v, want := vars[name]
		if !ok || !want {
			continue
		}
		// Only the value is replaced: what follows it (a comment) keeps its spacing.
		tail := ""
		if j := strings.IndexAny(rest, " \t"); j >= 0 {
			tail = rest[j:]
		}
		lines[i] = name + "=" + v + tail
		done[name] = true
	}
	return strings.Join(lines, "\n"), done
}
