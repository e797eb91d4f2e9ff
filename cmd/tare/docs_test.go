package main

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare/internal/testkit/goldenfile"
	"github.com/tare-dev/tare/internal/testkit/scenario"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../.."

// foreignFlags are flags of other programs that the docs name in prose,
// in a span of their own (`--without-heartbeat`): not tare's, so not
// checked. In a command line (kubectl …, docker …) another program's
// flags are never checked.
var foreignFlags = map[string]string{
	"without-heartbeat": "celery worker",
	"without-control":   "celery worker",
	"rm":                "podman run",
}

// TestDocsNameWhatExists reads README.md and docs/*.md and checks that
// what they name exists: every test, fuzzer and benchmark a `go test -run`
// (-fuzz, -bench) line selects, every Test…/Fuzz…/Benchmark… they name,
// every flag of a tare command line (and every --flag named alone), every
// repository file or directory and every relative link. Each failure names
// the doc, its line and what is missing.
func TestDocsNameWhatExists(t *testing.T) {
	docs := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil || len(more) == 0 {
		t.Fatalf("no docs/*.md under %s: %v", repoRoot, err)
	}
	for _, m := range more {
		docs = append(docs, filepath.Join("docs", filepath.Base(m)))
	}
	c := newDocChecker(t)
	for _, doc := range docs {
		c.checkDoc(doc)
	}
	for _, p := range c.problems {
		t.Error(p)
	}
	t.Logf("checked %d docs: %d tare command lines, %d go test lines, %d test names, %d paths and links", len(docs), c.commandLines, c.testLines, c.testNames, c.paths)
	if c.commandLines == 0 || c.testLines == 0 || c.testNames == 0 || c.paths == 0 {
		t.Error("nothing checked of some kind: the reading of the docs is broken")
	}
}

// docChecker checks the docs against the repository and tare's commands.
type docChecker struct {
	t     *testing.T
	tests map[string][]string // package directory (slash-separated, from the root) → test, fuzz, benchmark and example functions
	root  *cobra.Command
	top   map[string]bool // the repository's top-level entries

	doc  string // the doc being read, from the root
	line int

	problems                                  []string // "doc:line: what is missing"
	commandLines, testLines, testNames, paths int      // how many were checked
}

// newDocChecker reads the repository's tests and tare's commands.
func newDocChecker(t *testing.T) *docChecker {
	c := &docChecker{t: t, tests: testFuncs(t), root: newRootCmd(), top: map[string]bool{}}
	entries, err := os.ReadDir(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		c.top[e.Name()] = true
	}
	return c
}

func (c *docChecker) errorf(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf("%s:%d: %s", c.doc, c.line, fmt.Sprintf(format, args...)))
}

var (
	codeSpan    = regexp.MustCompile("`([^`]+)`")
	link        = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	testName    = regexp.MustCompile(`(?:\b([a-z][a-z0-9]*(?:/[a-z0-9]+)*)\.)?\b((?:Test|Fuzz|Benchmark|Example)[A-Z0-9_]\w*)`)
	flagToken   = regexp.MustCompile(`^--([a-z][a-z0-9-]*)(?:=.*)?$`)
	pathToken   = regexp.MustCompile(`^(?:\./)?[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*/?$`)
	shellSplit  = regexp.MustCompile(`'[^']*'|"[^"]*"|\S+`)
	selectorArg = regexp.MustCompile(`-(?:run|fuzz|bench)[ =](?:'[^']*'|"[^"]*"|\S+)`)
)

// checkDoc reads one doc (a path from the repository's root) line by line: fenced and indented code lines are
// read whole, prose only in its code spans; a code line ending in \ goes
// on on the next, and so does a prose line with a code span left open.
func (c *docChecker) checkDoc(doc string) {
	f, err := os.Open(filepath.Join(repoRoot, doc))
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	c.doc = filepath.ToSlash(doc)
	fenced, held, heldAt := false, "", 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		code := fenced || strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t")
		if code && strings.HasSuffix(line, "\\") || !code && strings.Count(held+line, "`")%2 == 1 {
			if held == "" {
				heldAt = n
			}
			held += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		c.line = n
		if held != "" {
			line, c.line, held = held+line, heldAt, ""
		}
		line = strings.ReplaceAll(line, `\|`, "|") // a pipe inside a table cell
		// A -run pattern is a regular expression, checked as one below,
		// not a name.
		for _, m := range testName.FindAllStringSubmatch(selectorArg.ReplaceAllString(line, ""), -1) {
			c.checkTestName(m[1], m[2])
		}
		for _, m := range link.FindAllStringSubmatch(line, -1) {
			c.checkLink(m[1])
		}
		var fragments []string
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			fragments = append(fragments, m[1])
		}
		if code {
			fragments = append(fragments, line)
		}
		for _, frag := range fragments {
			c.checkFragment(frag)
		}
	}
	if err := sc.Err(); err != nil {
		c.t.Fatal(err)
	}
}

// checkFragment checks a piece of code: its go test and tare command
// lines, a span of flags alone, and the paths it names.
func (c *docChecker) checkFragment(frag string) {
	if i := strings.Index(frag, " #"); i >= 0 {
		frag = frag[:i] // a shell comment
	}
	words := shellSplit.FindAllString(frag, -1)
	if len(words) > 0 && flagToken.MatchString(words[0]) {
		for _, w := range words {
			if m := flagToken.FindStringSubmatch(w); m != nil {
				c.checkAnyFlag(m[1])
			}
		}
	}
	for i, w := range words {
		switch {
		case w == "test" && i > 0 && words[i-1] == "go", w == "scripts/test" && commandPosition(words, i):
			c.checkGoTest(words[i+1:])
		case w == "tare" && commandPosition(words, i),
			w == "./cmd/tare" && i > 1 && words[i-1] == "run" && words[i-2] == "go":
			c.checkTareLine(words[i+1:])
		}
		c.checkPath(strings.Trim(w, `'"(),;`))
	}
}

// commandPosition says whether words[i] is where a command starts.
func commandPosition(words []string, i int) bool {
	if i == 0 {
		return true
	}
	switch words[i-1] {
	case "|", "||", "&&", ";", "$", "sudo", "exec", "time", "nohup", "(", "$(":
		return true
	}
	return false
}

// ends says whether w ends a command's arguments.
func ends(w string) bool {
	switch w {
	case "|", "||", "&&", ";", ">", ">>", "2>", "2>&1", ")", "&":
		return true
	}
	return strings.HasPrefix(w, ">") || strings.HasSuffix(w, ";")
}

// checkTareLine checks the words after "tare": the command they name,
// and each --flag of it up to the end of its arguments (or "--", after
// which come another program's).
func (c *docChecker) checkTareLine(words []string) {
	cmd := c.root
	i := 0
	for ; i < len(words); i++ {
		sub := subcommand(cmd, words[i])
		if sub == nil {
			break
		}
		cmd = sub
	}
	if cmd == c.root && (i == len(words) || !strings.HasPrefix(words[i], "-")) {
		return // not a command line: prose, or a placeholder like tare <command>
	}
	c.commandLines++
	for _, w := range words[i:] {
		if w == "--" || ends(w) {
			return
		}
		if m := flagToken.FindStringSubmatch(w); m != nil && !hasFlag(cmd, m[1]) {
			c.errorf("`%s --%s`: %s has no flag --%s", cmd.CommandPath(), m[1], cmd.CommandPath(), m[1])
		}
	}
}

// subcommand is cmd's command named name (or one of its aliases), or nil;
// help and completion are there as Execute adds them.
func subcommand(cmd *cobra.Command, name string) *cobra.Command {
	if name == "help" || name == "completion" {
		return &cobra.Command{Use: name}
	}
	for _, sub := range cmd.Commands() {
		if sub.Name() == name || slices.Contains(sub.Aliases, name) {
			return sub
		}
	}
	return nil
}

// hasFlag says whether cmd takes --name: its own flags, those it inherits,
// and --help (and --version on tare itself), which cobra adds when it
// runs. Hidden and deprecated flags count: they are still taken.
func hasFlag(cmd *cobra.Command, name string) bool {
	if name == "help" || name == "version" && !cmd.HasParent() {
		return true
	}
	return cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil
}

// checkAnyFlag checks a --flag named alone: some tare command takes it.
func (c *docChecker) checkAnyFlag(name string) {
	if _, ok := foreignFlags[name]; ok || name == "help" || name == "version" {
		return
	}
	found := false
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		found = found || hasFlag(cmd, name)
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(c.root)
	if !found {
		c.errorf("`--%s` is no flag of any tare command (another program's? add it to foreignFlags in cmd/tare/docs_test.go)", name)
	}
}

// checkGoTest checks the words after "go test" (or scripts/test): each
// -run, -fuzz and -bench pattern selects a function of the packages
// named (./... for all, the root when none).
func (c *docChecker) checkGoTest(words []string) {
	type selector struct{ flag, pattern string }
	var sels []selector
	var pkgs []string
	for i := 0; i < len(words) && !ends(words[i]); i++ {
		w := strings.Trim(words[i], `'"`)
		flag, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
		switch {
		case strings.HasPrefix(w, "-") && (flag == "run" || flag == "fuzz" || flag == "bench"):
			if !hasValue {
				if i+1 == len(words) {
					continue
				}
				i++
				value = strings.Trim(words[i], `'"`)
			}
			sels = append(sels, selector{flag, value})
		case strings.HasPrefix(w, "."):
			pkgs = append(pkgs, w)
		}
	}
	if len(sels) == 0 {
		return
	}
	c.testLines++
	if len(pkgs) == 0 {
		pkgs = []string{"."}
	}
	for _, sel := range sels {
		if sel.pattern == "^$" || sel.pattern == "NONE" {
			continue // runs nothing on purpose: beside -fuzz, or to start the services
		}
		top, _, _ := strings.Cut(sel.pattern, "/") // a subtest's name is not checked
		re, err := regexp.Compile(top)
		if err != nil {
			c.errorf("`go test -%s %s`: not a regular expression: %v", sel.flag, sel.pattern, err)
			continue
		}
		prefixes := map[string][]string{"run": {"Test", "Fuzz", "Example"}, "fuzz": {"Fuzz"}, "bench": {"Benchmark"}}[sel.flag]
		matched := false
		for _, pkg := range pkgs {
			dir, all := strings.CutSuffix(strings.TrimPrefix(strings.TrimSuffix(pkg, "/"), "./"), "...")
			dir = strings.TrimSuffix(dir, "/")
			if dir == "." {
				dir = ""
			}
			if !all {
				if _, ok := c.tests[dir]; !ok {
					c.errorf("`go test … %s`: no package with tests at %s", pkg, orRoot(dir))
					continue
				}
			}
			for d, names := range c.tests {
				if d != dir && !(all && (dir == "" || d == dir || strings.HasPrefix(d, dir+"/"))) {
					continue
				}
				for _, name := range names {
					if hasAnyPrefix(name, prefixes) && re.MatchString(name) {
						matched = true
					}
				}
			}
		}
		if !matched {
			c.errorf("`go test -%s %s %s` selects no %s function", sel.flag, sel.pattern, strings.Join(pkgs, " "), strings.Join(prefixes, "/"))
		}
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(s, p) })
}

// orRoot names the root package as such in messages.
func orRoot(dir string) string {
	if dir == "" {
		return "the repository's root"
	}
	return dir
}

// checkTestName checks a test, fuzzer or benchmark named in the text:
// in package pkg when the name is qualified by one that is a directory
// here (host.FuzzParseSchedstat, cmd/tare.FuzzSummaryFile), else in any.
func (c *docChecker) checkTestName(pkg, name string) {
	c.testNames++
	if names, ok := c.tests[pkg]; ok && pkg != "" {
		if !slices.Contains(names, name) {
			c.errorf("%s.%s: package %s has no function %s", pkg, name, pkg, name)
		}
		return
	}
	for _, names := range c.tests {
		if slices.Contains(names, name) {
			return
		}
	}
	c.errorf("%s: no package has a function %s", name, name)
}

// checkPath checks a word that names a file or directory of the
// repository: a path whose first part is one of its top-level entries.
func (c *docChecker) checkPath(w string) {
	if !strings.Contains(w, "/") || !pathToken.MatchString(w) || strings.Contains(w, "...") || testName.MatchString(w) {
		return
	}
	rel := strings.TrimPrefix(w, "./")
	first, _, _ := strings.Cut(rel, "/")
	if !c.top[first] {
		return
	}
	c.paths++
	if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(rel))); err != nil {
		c.errorf("%s: no such file or directory in the repository", w)
	}
}

// checkLink checks a relative link: the file exists, from the doc's
// directory.
func (c *docChecker) checkLink(target string) {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
		return
	}
	target, _, _ = strings.Cut(target, "#")
	c.paths++
	if _, err := os.Stat(filepath.Join(repoRoot, filepath.Dir(c.doc), filepath.FromSlash(target))); err != nil {
		c.errorf("link %s: no such file from %s", target, filepath.Dir(c.doc))
	}
}

// TestDocsCheckerCatches runs the docs check on a doc with one mistake of
// every kind it looks for, beside names that exist
// (testdata/docscheck.md): each mistake is reported, with its line, and
// nothing else.
func TestDocsCheckerCatches(t *testing.T) {
	c := newDocChecker(t)
	c.checkDoc("cmd/tare/testdata/docscheck.md")
	goldenfile.Check(t, "docscheck.golden.txt", []byte(strings.Join(c.problems, "\n")+"\n"))
}

// testFuncs lists the Test, Fuzz, Benchmark and Example functions of every
// package of the repository, by directory.
func testFuncs(t *testing.T) map[string][]string {
	t.Helper()
	funcs := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != repoRoot && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, filepath.Dir(path))
		dir := filepath.ToSlash(rel)
		if dir == "." {
			dir = ""
		}
		if _, ok := funcs[dir]; !ok {
			funcs[dir] = nil
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && hasAnyPrefix(fn.Name.Name, []string{"Test", "Fuzz", "Benchmark", "Example"}) {
				funcs[dir] = append(funcs[dir], fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return funcs
}

// TestVerdictDocNamesEveryScenario: the table of docs/verdict.md's "The
// scenario matrix" names every scenario of the verdict matrix by its name
// in internal/testkit/scenario, and no scenario the matrix does not have.
func TestVerdictDocNamesEveryScenario(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs", "verdict.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## The scenario matrix\n")
	if !ok {
		t.Fatal(`docs/verdict.md has no section "## The scenario matrix"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	documented := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "|") {
			continue
		}
		name := strings.TrimSpace(cells[1])
		if name == "scenario" || strings.Trim(name, "-") == "" {
			continue // the header, and the line under it
		}
		if documented[name] {
			t.Errorf("docs/verdict.md names the scenario %q twice", name)
		}
		documented[name] = true
	}
	for _, sc := range scenario.Matrix() {
		if !documented[sc.Name] {
			t.Errorf("the scenario %q is not in docs/verdict.md's matrix table: say what it sets up, what verdict it expects and why", sc.Name)
		}
		delete(documented, sc.Name)
	}
	for _, name := range slices.Sorted(maps.Keys(documented)) {
		t.Errorf("docs/verdict.md's matrix table names %q, which is no scenario of internal/testkit/scenario's Matrix", name)
	}
}
