package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/heraldgw/herald"

// A layer is what docs/architecture.md's "Layers" calls it; the rules
// are written over layers, so a new package needs only its layer named.
type layer string

const (
	entry    layer = "entry"    // cmd/herald and what it runs
	wiring   layer = "wiring"   // the gateway and its config
	shared   layer = "shared"   // what every adapter uses
	adapter  layer = "adapter"  // one platform (or the local API) each
	domain   layer = "domain"   // types, store interfaces and logic of one part
	backend  layer = "backend"  // a store implementation
	suite    layer = "suite"    // the stores' conformance suite
	internal layer = "internal" // mechanisms below everything
	tests    layer = "tests"    // end-to-end tests and the adapters' test kit
)

// domains are the domain packages, and those planned: a package gets the
// domain rules by being named here.
var domains = []string{
	"sessions", "sessions/agent", "delegation", "cronjobs", "kanban",
	"controllers", "outbox", "lease", "tools", "llm", "chat", "notes",
	"delivery", "signals", "metrics", "approvals", "media", "mcp",
	"capability", "instances",
}

var backends = []string{"store/sqlite", "store/redis"}

// layerOf says where a package (its path inside the module) belongs, or
// "" when no list names it. Everything under adapters/ but the shared
// packages is an adapter, and everything under internal/ is internal, so
// a new adapter or helper is held to its rules without being listed.
func layerOf(pkg string) layer {
	switch {
	case pkg == "cmd/herald" || strings.HasPrefix(pkg, "cmd/herald/"):
		return entry
	case pkg == "gateway" || pkg == "config":
		return wiring
	case pkg == "adapters" || pkg == "adapters/chatfmt":
		return shared
	case pkg == "adapters/adaptertest" || pkg == "signals/signalstest":
		// Test support: the real adapters against the fake platforms for
		// the gateway's and delivery's tests, and an in-memory signal log.
		return tests
	case strings.HasPrefix(pkg, "adapters/"):
		return adapter
	case slices.Contains(domains, pkg):
		return domain
	case slices.Contains(backends, pkg):
		return backend
	case pkg == "store/storetest":
		return suite
	case strings.HasPrefix(pkg, "internal/"):
		return internal
	case pkg == "e2e":
		return tests
	}
	return ""
}

// A graph holds the module's packages (paths inside the module) and
// their imports of each other.
type graph struct {
	pkgs  []string
	code  map[string][]string // imports of the package's own files
	tests map[string][]string // imports of its _test.go files, itself left out
}

// depends reports the chain of imports by which from reaches to, or nil.
// withTests starts from from's tests' imports as well, and the chain then
// says "from's tests" when its first step is theirs alone; past the first
// step only the imported packages' own code counts, as in a test binary.
func (g *graph) depends(from, to string, withTests bool) []string {
	prev := map[string]string{from: ""}
	var queue []string
	step := func(p, by string) {
		if _, seen := prev[p]; !seen {
			prev[p] = by
			queue = append(queue, p)
		}
	}
	for _, p := range g.code[from] {
		step(p, from)
	}
	if withTests {
		for _, p := range g.tests[from] {
			step(p, from+"'s tests")
		}
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append(chain, p)
			}
			slices.Reverse(chain)
			return chain
		}
		for _, q := range g.code[p] {
			step(q, p)
		}
	}
	return nil
}

func TestEveryPackageHasALayer(t *testing.T) {
	g := load(t)
	for _, p := range g.pkgs {
		if layerOf(p) == "" {
			t.Errorf("%s is in no layer: name it in internal/archtest's layerOf (a domain package in domains) and give it a row in docs/architecture.md's packages table", p)
		}
	}
}

// The rules of docs/architecture.md's "Dependency rules", numbered as
// there; a failure names the rule and the chain of imports that breaks it.
const (
	rule1 = "dependency rule 1 (a domain package knows no store backend)"
	rule2 = "dependency rule 2 (a backend never imports the other)"
	rule3 = "dependency rule 3 (an adapter imports neither the gateway nor another adapter)"
	rule4 = "dependency rule 4 (internal/ knows no domain package)"
	rule5 = "dependency rule 5 (docs/architecture.md's packages table has one row per package)"
)

func TestDependencyRules(t *testing.T) {
	g := load(t)
	forbid := func(t *testing.T, rule, from, to string, withTests bool) {
		t.Helper()
		if chain := g.depends(from, to, withTests); chain != nil {
			t.Errorf("%s: %s imports %s: %s", rule, from, to, strings.Join(chain, " → "))
		}
	}
	for _, p := range g.pkgs {
		l := layerOf(p)
		// A domain's tests import both backends to run on each.
		if l == domain {
			for _, b := range backends {
				forbid(t, rule1, p, b, false)
			}
		}
		if l == backend {
			for _, b := range backends {
				if b != p {
					forbid(t, rule2, p, b, true)
				}
			}
		}
		if l == shared || l == adapter {
			forbid(t, rule3, p, "gateway", true)
			for _, q := range g.pkgs {
				if q != p && layerOf(q) == adapter {
					forbid(t, rule3, p, q, true)
				}
			}
		}
		// internal/testkit is held to this too: its fakes speak the
		// platforms' and the model's wire protocols, not herald's types.
		if l == internal {
			for _, d := range domains {
				forbid(t, rule4, p, d, true)
			}
		}
	}
}

func TestPackagesTableNamesEveryPackage(t *testing.T) {
	g := load(t)
	dir, err := root()
	if err != nil {
		t.Fatal(err)
	}
	rows := packageRows(t, filepath.Join(dir, "docs", "architecture.md"))
	var missing, extra, twice []string
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r] {
			twice = append(twice, r)
		}
		seen[r] = true
		if !slices.Contains(g.pkgs, r) {
			extra = append(extra, r)
		}
	}
	for _, p := range g.pkgs {
		if !seen[p] {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s: no row for %s: add one each, | `path` | what it holds |", rule5, strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		t.Errorf("%s: rows for %s, which go list does not print: remove them or fix their paths", rule5, strings.Join(extra, ", "))
	}
	if len(twice) > 0 {
		t.Errorf("%s: more than one row for %s", rule5, strings.Join(twice, ", "))
	}
}

var rowPath = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|")

// packageRows returns the first column of the table under "## Packages".
func packageRows(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Packages"
			continue
		}
		if m := rowPath.FindStringSubmatch(line); in && m != nil {
			rows = append(rows, m[1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no packages table under \"## Packages\"", name)
	}
	return rows
}

// root is the module's root: the nearest directory above the test's
// that holds go.mod.
func root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the test's directory")
		}
		dir = up
	}
}

// load lists the module's packages with go list, once for all the tests.
//
// go test caches a result until a file the test opened changes, and go
// list's reads are not the test's: without more, a new import elsewhere
// in the module would leave this package's cached pass standing. So the
// test opens every directory of the module first, which puts each file's
// size and modification time into the cache's key.
func load(t *testing.T) *graph {
	t.Helper()
	g, err := loaded()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

var loaded = sync.OnceValues(func() (*graph, error) {
	dir, err := root()
	if err != nil {
		return nil, err
	}
	if err := watch(dir); err != nil {
		return nil, err
	}
	// The go command runs with the test's own environment: it needs the
	// toolchain's settings (GOCACHE, GOFLAGS, GOPROXY…), and it is the
	// developer's tool reading the module, not a process herald starts.
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v\n%s", err, stderr.Bytes())
	}
	g := &graph{code: map[string][]string{}, tests: map[string][]string{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list's output: %v", err)
		}
		path := inModule(p.ImportPath)
		g.pkgs = append(g.pkgs, path)
		g.code[path] = inModuleAll(p.Imports, "")
		g.tests[path] = inModuleAll(append(p.TestImports, p.XTestImports...), path)
	}
	if len(g.pkgs) == 0 {
		return nil, errors.New("go list printed no package")
	}
	return g, nil
})

// listed is what the test reads of a package go list prints.
type listed struct {
	ImportPath                         string
	Imports, TestImports, XTestImports []string
}

// watch opens every directory of the module that can hold a package.
// One that goes while it walks (another test's scratch directory) is
// passed over.
func watch(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != dir && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
			return filepath.SkipDir
		}
		return nil
	})
}

// inModule is a package's path inside the module, or "" for one outside.
func inModule(importPath string) string {
	if importPath == module {
		return "."
	}
	rest, ok := strings.CutPrefix(importPath, module+"/")
	if !ok {
		return ""
	}
	return rest
}

// inModuleAll keeps the imports inside the module, but self.
func inModuleAll(imports []string, self string) []string {
	var in []string
	for _, imp := range imports {
		if p := inModule(imp); p != "" && p != self && !slices.Contains(in, p) {
			in = append(in, p)
		}
	}
	return in
}
