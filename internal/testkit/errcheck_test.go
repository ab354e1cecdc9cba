package testkit

import (
	"go/ast"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// cleanup names calls whose errors a test may drop: writes to memory or
// to a response whose client may be gone, prints, and the cleanup of
// processes, files and connections, which cannot change a test's outcome.
var cleanup = map[string]bool{
	"Close": true, "Kill": true, "Signal": true, "Wait": true, "Shutdown": true,
	"Remove": true, "RemoveAll": true, "Flush": true, "SetDeadline": true,
	"SetReadDeadline": true, "SetWriteDeadline": true,
}

var harmless = map[string]bool{
	"fmt.Print": true, "fmt.Printf": true, "fmt.Println": true,
	"fmt.Fprint": true, "fmt.Fprintf": true, "fmt.Fprintln": true,
	"io.WriteString": true, "io.Copy": true, "crypto/rand.Read": true,
	"(io.Writer).Write": true, "(net/http.ResponseWriter).Write": true,
	"(*encoding/json.Encoder).Encode": true, "(hash.Hash).Write": true,
}

// setup names calls whose errors a test may never discard, even when it
// keeps no result: the files, documents and keys a test builds before it
// checks anything. A test that drops one of these checks nothing when it
// fails. Calls made for their effect on what a test counts (opening a
// forged token to count a refusal, a reload under a fault, a loader run
// until its context ends) may discard their error: their outcome is the
// test's subject, asserted where it is counted.
func setup(obj types.Object) bool {
	fn, ok := obj.(*types.Func)
	if !ok || fn.Pkg() == nil {
		return false
	}
	switch fn.Pkg().Path() {
	case "os", "encoding/json", "strconv":
		return fn.Name() != "Close" && !strings.HasPrefix(fn.Name(), "Remove")
	case "fmt":
		return strings.HasPrefix(fn.Name(), "Sscan")
	}
	return fn.FullName() == "github.com/stateseal/stateseal/backends.GenerateLocal" ||
		fn.FullName() == "(*encoding/json.Decoder).Decode"
}

func isBlank(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "_"
}

func droppable(obj types.Object) bool {
	if obj == nil {
		return false
	}
	name, full := obj.Name(), obj.Name()
	if fn, ok := obj.(*types.Func); ok {
		full = fn.FullName()
	}
	if harmless[full] || cleanup[name] {
		return true
	}
	// In-memory builders never fail.
	for _, r := range []string{"(*strings.Builder).", "(*bytes.Buffer).", "(hash.Hash)."} {
		if strings.HasPrefix(full, r) {
			return true
		}
	}
	return false
}

// TestTestsCheckErrors (issue 26): no test of the module ignores an error
// it can get. A setup call whose error went to "_" turned a refused KEK
// URL into a nil dereference, a few runs in a hundred. Every call in a
// _test.go file whose last result is an error, and whose other results
// the test keeps, has that error checked; so does every setup call (see
// setup), kept or not. Cleanups and in-memory writes (see droppable) are
// exempt. testkit.Must and testkit.Check are the short form.
func TestTestsCheckErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the whole module")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
		Tests: true, Dir: root, Env: append(os.Environ(), "GOFLAGS=-mod=mod")}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		t.Fatal(err)
	}
	errT := types.Universe.Lookup("error").Type()
	found := map[string]bool{}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Errorf("%s: %v", p.ID, e)
		}
		for _, f := range p.Syntax {
			name := p.Fset.File(f.Pos()).Name()
			if !strings.HasSuffix(name, "_test.go") {
				continue
			}
			// lastError reports a call whose last result is an error, and
			// the function it calls.
			lastError := func(e ast.Expr) (*ast.CallExpr, int, bool, bool) {
				call, ok := ast.Unparen(e).(*ast.CallExpr)
				if !ok {
					return nil, 0, false, false
				}
				var last types.Type
				n := 1
				switch ty := p.TypesInfo.TypeOf(call).(type) {
				case *types.Tuple:
					n = ty.Len()
					if n > 0 {
						last = ty.At(n - 1).Type()
					}
				default:
					last = ty
				}
				if last == nil || !types.Identical(last, errT) {
					return nil, 0, false, false
				}
				var obj types.Object
				switch fun := ast.Unparen(call.Fun).(type) {
				case *ast.Ident:
					obj = p.TypesInfo.Uses[fun]
				case *ast.SelectorExpr:
					obj = p.TypesInfo.Uses[fun.Sel]
				}
				return call, n, !droppable(obj), setup(obj)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch s := n.(type) {
				case *ast.AssignStmt:
					if len(s.Rhs) != 1 {
						return true
					}
					call, results, must, isSetup := lastError(s.Rhs[0])
					if !must || results != len(s.Lhs) || !isBlank(s.Lhs[len(s.Lhs)-1]) {
						return true
					}
					kept := false
					for _, l := range s.Lhs[:len(s.Lhs)-1] {
						kept = kept || !isBlank(l)
					}
					if kept || isSetup {
						found[p.Fset.Position(call.Pos()).String()+": the error of "+types.ExprString(call.Fun)+" is assigned to _"] = true
					}
				case *ast.ExprStmt:
					if call, _, must, isSetup := lastError(s.X); must && isSetup {
						found[p.Fset.Position(call.Pos()).String()+": the error of "+types.ExprString(call.Fun)+" is dropped"] = true
					}
				}
				return true
			})
		}
	}
	var list []string
	for k := range found {
		list = append(list, strings.TrimPrefix(k, root+"/"))
	}
	sort.Strings(list)
	for _, l := range list {
		t.Error(l)
	}
}
