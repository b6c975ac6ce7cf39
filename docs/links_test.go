// Package docs holds the user documentation. Its test keeps the relative
// links of README.md and of the pages here pointing at files and headings
// that exist, as GitHub resolves them.
package docs

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/agnivade/levenshtein"
)

// repoRoot is the repository's root, seen from this package's folder.
const repoRoot = ".."

// TestLinks fails for every relative link in README.md and docs/ that
// points at a file, or a heading, that does not exist.
func TestLinks(t *testing.T) {
	files := markdownFiles(t, repoRoot)
	if !slices.Contains(files, "README.md") || len(files) < 2 {
		t.Fatalf("found only %v: the README and the pages in docs/ are missing", files)
	}
	problems, err := checkLinks(repoRoot, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// markdownFiles are README.md and every Markdown file under docs/, as
// slash-separated paths relative to root.
func markdownFiles(t testing.TB, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isMarkdown(p) {
			return err
		}
		rel, err := filepath.Rel(root, p)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func isMarkdown(p string) bool {
	ext := strings.ToLower(path.Ext(p))
	return ext == ".md" || ext == ".markdown"
}

// link is one link found in a Markdown file.
type link struct {
	line   int    // 1-based
	text   string // as written, e.g. "[Design](design.md)"
	target string // the destination, e.g. "design.md#invariants"
}

var (
	// A fence opens with three or more backticks or tildes. Any
	// indentation is accepted, since fences inside list items are indented.
	fenceRe = regexp.MustCompile("^[ \t]*(`{3,}|~{3,})")
	// A link reference definition: [label]: destination
	definitionRe = regexp.MustCompile(`^ {0,3}\[([^\]]+)\]:[ \t]*(<[^>]*>|\S+)`)
	// HTML links and images.
	htmlLinkRe = regexp.MustCompile(`(?i)<(?:a|img)\s[^>]*?(?:href|src)\s*=\s*"([^"]*)"`)
	// An ATX heading, its closing sequence of #s left out.
	headingRe = regexp.MustCompile(`^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	// An HTML anchor: <a id="x"> or <a name="x">.
	htmlAnchorRe = regexp.MustCompile(`(?i)<a\s[^>]*?(?:id|name)\s*=\s*"([^"]*)"`)
	// A URL scheme (https:, mailto:), which makes a link external.
	schemeRe = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// proseLines calls f with every line of doc outside fenced code blocks,
// as written and with its code spans blanked out (links there are not
// links); the two have their bytes at the same offsets.
func proseLines(doc string, f func(n int, raw, blanked string)) {
	fence := ""
	for i, line := range strings.Split(doc, "\n") {
		if m := fenceRe.FindStringSubmatch(line); m != nil {
			rest := strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), m[1][:1]))
			switch {
			case fence == "":
				fence = m[1]
			case m[1][0] == fence[0] && len(m[1]) >= len(fence) && rest == "":
				fence = ""
			}
			continue
		}
		if fence == "" {
			f(i+1, line, blankCodeSpans(line))
		}
	}
}

// blankCodeSpans replaces each code span of line, backticks included,
// with spaces, keeping every other byte where it was.
func blankCodeSpans(line string) string {
	b := []byte(line)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := 1
		for i+n < len(b) && b[i+n] == '`' {
			n++
		}
		end := closingRun(b, i+n, n)
		if end < 0 {
			i += n // no closing run: the backticks are literal
			continue
		}
		for k := i; k < end+n; k++ {
			b[k] = ' '
		}
		i = end + n
	}
	return string(b)
}

// closingRun is the index of the next run of exactly n backticks in b at
// or after from, or -1.
func closingRun(b []byte, from, n int) int {
	for i := from; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		m := 1
		for i+m < len(b) && b[i+m] == '`' {
			m++
		}
		if m == n {
			return i
		}
		i += m
	}
	return -1
}

// extractLinks finds the links of a Markdown document: inline links and
// images, link reference definitions, and HTML href and src attributes.
// Links in fenced code blocks and code spans are not links and are left
// out.
func extractLinks(doc string) []link {
	var links []link
	proseLines(doc, func(n int, raw, line string) {
		if m := definitionRe.FindStringSubmatchIndex(line); m != nil {
			links = append(links, link{line: n, text: raw[m[0]:m[1]], target: strings.Trim(raw[m[4]:m[5]], "<>")})
			return
		}
		for i := 0; i < len(line); i++ {
			if line[i] != '[' || escaped(line, i) {
				continue
			}
			closing := matchingBracket(line, i)
			if closing < 0 || closing+1 >= len(line) || line[closing+1] != '(' {
				continue
			}
			from, to, end := destination(line, closing+2)
			if end < 0 {
				continue
			}
			start := i
			if i > 0 && line[i-1] == '!' {
				start--
			}
			// Go on from i+1, so that an image inside a link's text is
			// found too.
			links = append(links, link{line: n, text: raw[start : end+1], target: raw[from:to]})
		}
		for _, m := range htmlLinkRe.FindAllStringSubmatchIndex(line, -1) {
			links = append(links, link{line: n, text: raw[m[0]:m[1]], target: raw[m[2]:m[3]]})
		}
	})
	return links
}

func escaped(s string, i int) bool {
	n := 0
	for i--; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// matchingBracket is the index of the ']' that closes the '[' at open,
// or -1.
func matchingBracket(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch {
		case escaped(s, i):
		case s[i] == '[':
			depth++
		case s[i] == ']':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// destination reads a link destination and optional title starting at
// from (just after the '('). It returns where the destination starts and
// ends, and the index of the ')' that ends the link, or -1 when there is
// none.
func destination(s string, from int) (start, stop, end int) {
	i := from
	for i < len(s) && s[i] == ' ' {
		i++
	}
	if i < len(s) && s[i] == '<' {
		n := strings.IndexByte(s[i:], '>')
		if n < 0 {
			return 0, 0, -1
		}
		start, stop, i = i+1, i+n, i+n+1
	} else {
		start = i
		depth := 0
	scan:
		for ; i < len(s); i++ {
			switch {
			case escaped(s, i):
			case s[i] == ' ' || s[i] == '\t':
				break scan
			case s[i] == '(':
				depth++
			case s[i] == ')':
				if depth == 0 {
					break scan
				}
				depth--
			}
		}
		stop = i
	}
	// A title ("..." or '...') may follow; the link ends at the first ')'
	// after it.
	for ; i < len(s); i++ {
		switch s[i] {
		case '"', '\'':
			n := strings.IndexByte(s[i+1:], s[i])
			if n < 0 {
				return 0, 0, -1
			}
			i += n + 1
		case ')':
			return start, stop, i
		}
	}
	return 0, 0, -1
}

// slug is the anchor GitHub gives a heading: the heading's text as
// rendered (no Markdown), in lower case, without punctuation other than
// '-' and '_', with each space turned into '-'.
func slug(heading string) string {
	text := renderedText(heading)
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	inlineLinkRe = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTagRe    = regexp.MustCompile(`</?[a-zA-Z][^>]*>`)
)

// renderedText is a heading's text without links' destinations, images'
// sources, HTML tags and code spans' backticks. Emphasis markers need no
// care: slug drops '*' as punctuation.
func renderedText(s string) string {
	s = inlineLinkRe.ReplaceAllString(s, "$1")
	s = htmlTagRe.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, "`", "")
}

// anchors are the anchors of a Markdown document in order: its headings'
// slugs, numbered as GitHub numbers repeats (a second "Usage" is
// "usage-1"), and the ids and names of its HTML anchors.
func anchors(doc string) []string {
	var list []string
	seen := map[string]int{}
	proseLines(doc, func(_ int, raw, _ string) {
		for _, m := range htmlAnchorRe.FindAllStringSubmatch(raw, -1) {
			list = append(list, m[1])
		}
		m := headingRe.FindStringSubmatch(raw)
		if m == nil {
			return
		}
		base := slug(m[1])
		s := base
		for _, taken := seen[s]; taken; _, taken = seen[s] {
			seen[base]++
			s = fmt.Sprintf("%s-%d", base, seen[base])
		}
		seen[s] = 0
		list = append(list, s)
	})
	return list
}

// checkLinks checks every relative link in files (slash-separated paths
// relative to root) and returns one problem per broken link, each naming
// the file, the line, the link and the fix.
func checkLinks(root string, files []string) ([]string, error) {
	docs := map[string]string{} // read files by path relative to root
	read := func(p string) (string, error) {
		if doc, ok := docs[p]; ok {
			return doc, nil
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		docs[p] = string(data)
		return string(data), err
	}
	var problems []string
	for _, file := range files {
		doc, err := read(file)
		if err != nil {
			return nil, err
		}
		for _, l := range extractLinks(doc) {
			if p := checkLink(root, file, l, read); p != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: link %s: %s", file, l.line, l.text, p))
			}
		}
	}
	return problems, nil
}

// checkLink returns what is wrong with one link of file, and how to fix
// it, or "" when the link is external or resolves.
func checkLink(root, file string, l link, read func(string) (string, error)) string {
	target := l.target
	if target == "" {
		return "the destination is empty; fix: write the file or #anchor it points at"
	}
	if schemeRe.MatchString(target) || strings.HasPrefix(target, "//") {
		return "" // external: not checked here
	}
	rawPath, rawAnchor, _ := strings.Cut(target, "#")
	p, err := url.PathUnescape(rawPath)
	if err != nil {
		return fmt.Sprintf("the path %q is not valid URL encoding (%v); fix: write spaces as %%20 and a %% as %%25", rawPath, err)
	}
	anchor, err := url.PathUnescape(rawAnchor)
	if err != nil {
		return fmt.Sprintf("the anchor %q is not valid URL encoding (%v)", rawAnchor, err)
	}
	resolved := file // "#anchor" points into the file itself
	switch {
	case p == "":
	case strings.HasPrefix(p, "/"): // GitHub resolves it from the repository's root
		resolved = path.Clean(strings.TrimPrefix(p, "/"))
	default:
		resolved = path.Join(path.Dir(file), p)
	}
	if resolved == ".." || strings.HasPrefix(resolved, "../") {
		return fmt.Sprintf("%s is outside the repository, where GitHub cannot follow it; fix: link a file inside the repository, or an https: URL", resolved)
	}
	info, err := os.Stat(filepath.Join(root, filepath.FromSlash(resolved)))
	if err != nil {
		fix := "point it at an existing file, relative to the folder of " + file
		if near := nearestFile(root, resolved); near != "" {
			fix += fmt.Sprintf(" (did you mean %s?)", relativeTo(file, near))
		}
		return fmt.Sprintf("%s does not exist; fix: %s", resolved, fix)
	}
	if anchor == "" {
		return ""
	}
	if info.IsDir() {
		return fmt.Sprintf("%s is a folder, which has no #%s; fix: link a file in it, or drop the anchor", resolved, anchor)
	}
	if !isMarkdown(resolved) {
		return "" // line anchors (#L10) and the like of other files are GitHub's
	}
	doc, err := read(resolved)
	if err != nil {
		return fmt.Sprintf("read %s: %v", resolved, err)
	}
	list := anchors(doc)
	if slices.Contains(list, anchor) {
		return ""
	}
	fix := "use the anchor of an existing heading (lower case, spaces as '-', punctuation other than '-' and '_' dropped), or rename the heading"
	if near := nearest(anchor, list); near != "" {
		fix += fmt.Sprintf("; the closest anchor is #%s", near)
	}
	return fmt.Sprintf("%s has no heading whose anchor is #%s; fix: %s", resolved, anchor, fix)
}

// nearestFile is the file in resolved's folder whose name is closest to
// resolved's, as a path relative to root, or "".
func nearestFile(root, resolved string) string {
	entries, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(path.Dir(resolved))))
	if err != nil {
		return ""
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if near := nearest(path.Base(resolved), names); near != "" {
		return path.Join(path.Dir(resolved), near)
	}
	return ""
}

// relativeTo is target (relative to the root) as a link from file.
func relativeTo(file, target string) string {
	rel, err := filepath.Rel(filepath.FromSlash(path.Dir(file)), filepath.FromSlash(target))
	if err != nil {
		return target
	}
	return filepath.ToSlash(rel)
}

// nearest is the candidate closest to s by edit distance, when it is close
// enough to be a likely typo (at most a third of s's length), else "".
func nearest(s string, candidates []string) string {
	best, bestDist := "", len(s)/3+1
	for _, c := range candidates {
		if d := levenshtein.ComputeDistance(s, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

func TestSlug(t *testing.T) {
	tests := []struct {
		name    string
		heading string
		want    string
	}{
		{name: "plain words", heading: "Hot standby", want: "hot-standby"},
		{name: "capitals", heading: "Running under systemd", want: "running-under-systemd"},
		{name: "code span", heading: "SQL: `outbox_emit`", want: "sql-outbox_emit"},
		{name: "slash in code", heading: "Results of `scripts/bench`", want: "results-of-scriptsbench"},
		{name: "parentheses keep the dashes inside", heading: "Using an existing outbox table (`--columns`)", want: "using-an-existing-outbox-table---columns"},
		{name: "numbered step", heading: "3. Create the slot and backfill", want: "3-create-the-slot-and-backfill"},
		{name: "apostrophe", heading: "Order and the snapshot's cost", want: "order-and-the-snapshots-cost"},
		{name: "hash and ampersand", heading: "C# & F# with EF Core", want: "c--f-with-ef-core"},
		{name: "two spaces stay two dashes", heading: "a  b", want: "a--b"},
		{name: "underscore kept", heading: "`before_slot` rows", want: "before_slot-rows"},
		{name: "emphasis", heading: "*Rows* it **keeps**", want: "rows-it-keeps"},
		{name: "link text only", heading: "See [the design](design.md#invariants)", want: "see-the-design"},
		{name: "html tag", heading: "The <code>--since</code> flag", want: "the---since-flag"},
		{name: "non-ASCII letters kept", heading: "Über die Straße", want: "über-die-straße"},
		{name: "symbols and emoji dropped", heading: "Latency → p99 ✅ 4.6 ms", want: "latency--p99--46-ms"},
		{name: "colon and question mark", heading: "Why: a slot? Yes!", want: "why-a-slot-yes"},
		{name: "surrounding spaces", heading: "  Metrics  ", want: "metrics"},
		{name: "empty", heading: "", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := slug(tt.heading); got != tt.want {
				t.Errorf("slug(%q) = %q, want %q", tt.heading, got, tt.want)
			}
		})
	}
}

func TestAnchors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{name: "levels and closing hashes", doc: "# Title\n\n## Part one ##\n###### Deep", want: []string{"title", "part-one", "deep"}},
		{name: "repeats are numbered", doc: "## Usage\n## Usage\n## Usage", want: []string{"usage", "usage-1", "usage-2"}},
		{name: "a numbered repeat that is taken already", doc: "## A\n## A-1\n## A\n## A-1", want: []string{"a", "a-1", "a-2", "a-1-1"}},
		{name: "headings in code blocks are not headings", doc: "## Real\n```sh\n# a comment\n```\n~~~\n## Not one\n~~~\n## After", want: []string{"real", "after"}},
		{name: "a longer fence is closed only by as long a one", doc: "````md\n```\n## Inside\n````\n## Outside", want: []string{"outside"}},
		{name: "not headings", doc: "#hashtag\n    # indented code\n####### seven", want: nil},
		{name: "empty heading", doc: "##\n## x", want: []string{"", "x"}},
		{name: "html anchors", doc: `<a id="top"></a>` + "\n" + `Text <a name="old-name">here</a>`, want: []string{"top", "old-name"}},
		{name: "code span in heading", doc: "## The `--since` flag", want: []string{"the---since-flag"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := anchors(tt.doc); !slices.Equal(got, tt.want) {
				t.Errorf("anchors = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestExtractLinks(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string // line:target
	}{
		{name: "inline links", doc: "See [a](a.md) and [b](docs/b.md#part).", want: []string{"1:a.md", "1:docs/b.md#part"}},
		{name: "title", doc: `[a](a.md "The A") [b](b.md 'B')`, want: []string{"1:a.md", "1:b.md"}},
		{name: "angle brackets", doc: "[a](<my file.md>)", want: []string{"1:my file.md"}},
		{name: "parentheses in the destination", doc: "[a](file_(1).md)", want: []string{"1:file_(1).md"}},
		{name: "image", doc: "![chart](../x/chart.png)", want: []string{"1:../x/chart.png"}},
		{name: "image inside a link", doc: "[![badge](b.svg)](docs/ci.md)", want: []string{"1:docs/ci.md", "1:b.svg"}},
		{name: "code in the link text", doc: "[`scripts/outboxd.service`](../scripts/outboxd.service)", want: []string{"1:../scripts/outboxd.service"}},
		{name: "external links are extracted too", doc: "[k](https://example.com) [m](mailto:a@b.c)", want: []string{"1:https://example.com", "1:mailto:a@b.c"}},
		{name: "anchor only", doc: "[up](#top)", want: []string{"1:#top"}},
		{name: "fenced code is ignored", doc: "x\n```md\n[no](no.md)\n```\n[yes](yes.md)", want: []string{"5:yes.md"}},
		{name: "indented fence in a list", doc: "- item\n\n  ```sh\n  [no](no.md)\n  ```\n- [yes](yes.md)", want: []string{"6:yes.md"}},
		{name: "code span is ignored", doc: "`[no](no.md)` and ``[no](`no`.md)`` but [yes](yes.md)", want: []string{"1:yes.md"}},
		{name: "escaped bracket", doc: `\[no](no.md)`, want: nil},
		{name: "not a link", doc: "[text] (no.md) and [only text]", want: nil},
		{name: "reference definition", doc: "[ref]: docs/ref.md#x\n  [other]: <o.md>", want: []string{"1:docs/ref.md#x", "2:o.md"}},
		{name: "html", doc: `<a href="docs/a.md">a</a> <img src="img.png" alt="">`, want: []string{"1:docs/a.md", "1:img.png"}},
		{name: "unclosed", doc: "[a](a.md", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, l := range extractLinks(tt.doc) {
				got = append(got, fmt.Sprintf("%d:%s", l.line, l.target))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("links = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCheckLinks runs the check on a small tree of files and checks that
// each broken link is reported with its file, line, link and fix, and
// that good links are not.
func TestCheckLinks(t *testing.T) {
	tree := map[string]string{
		"README.md": "# Project\n\n" +
			"[design](docs/design.md) [part](docs/design.md#part-two) [self](#project) [code](main.go#L3)\n" +
			"[typo](docs/desing.md)\n" +
			"[anchor](docs/design.md#part-tow)\n" +
			"[outside](../elsewhere.md)\n" +
			"[folder](docs/) [folder anchor](docs/#x) [web](https://example.com/missing.md)\n",
		"docs/design.md": "# Design\n\n## Part one\n\n## Part two\n\n[back](../README.md#project) [missing](#nowhere)\n",
		"main.go":        "package main\n",
	}
	root := t.TempDir()
	for name, text := range tree {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := checkLinks(root, []string{"README.md", "docs/design.md"})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"README.md:4: link [typo](docs/desing.md): docs/desing.md does not exist", "did you mean docs/design.md?"},
		{"README.md:5: link [anchor](docs/design.md#part-tow): docs/design.md has no heading whose anchor is #part-tow", "the closest anchor is #part-two"},
		{"README.md:6: link [outside](../elsewhere.md): ../elsewhere.md is outside the repository"},
		{"README.md:7: link [folder anchor](docs/#x): docs is a folder"},
		{"docs/design.md:7: link [missing](#nowhere): docs/design.md has no heading whose anchor is #nowhere", "fix: "},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, parts := range want {
		for _, part := range parts {
			if !strings.Contains(got[i], part) {
				t.Errorf("problem %d = %q, want it to contain %q", i, got[i], part)
			}
		}
	}
}
