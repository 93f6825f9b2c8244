// Package statuscollector evaluates StatusCollectors: it compiles their CEL
// expressions with k8s.io/apiserver's CEL environment and cost limit, and summarizes the rows,
// one per (object, location) pair with a status, into the results of a StatusSummary.
package statuscollector

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apiserver/pkg/cel/environment"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
	"github.com/cluster-mapper/cluster-mapper/pkg/celexpr"
)

// DefaultLimit is the number of groups or select rows a summary keeps when the collector sets
// no limit.
const DefaultLimit = 20

// maxErrors is how many evaluation errors a summary lists.
const maxErrors = 5

// Row is one (object, location) pair with a status: the CEL variables obj, returned
// (returned.status) and location.
type Row struct {
	// Object is the source object's "namespace/name" (for select rows and errors).
	Object string
	// Location is the location's name.
	Location string
	// Obj is the source object (shared, READ-ONLY).
	Obj map[string]interface{}
	// Status is the status the location wrote back (shared, READ-ONLY).
	Status map[string]interface{}
	// LocationLabels are the labels of the location's SyncTarget. Nothing else of it (its
	// annotations, its status) reaches a collector's CEL (docs/tenancy.md).
	LocationLabels map[string]string
}

// Program is a compiled StatusCollector.
type Program struct {
	filter   cel.Program
	groupBy  []named
	combined []combined
	selects  []named
	limit    int
}

type named struct {
	name string
	prg  cel.Program
}

type combined struct {
	name string
	typ  controlv1alpha1.AggregationType
	prg  cel.Program // nil for Count
}

// env is the CEL environment of StatusCollectors: Kubernetes' base environment (its libraries
// and cost model) with the dynamic variables obj, returned and location.
var env = celexpr.Env(environment.NewExpressions,
	cel.Variable("obj", cel.DynType),
	cel.Variable("returned", cel.DynType),
	cel.Variable("location", cel.DynType),
)

// Compile compiles spec. The errors name each field that does not compile
// ("spec.groupBy[0].expression: ..."); the Program is nil when there is one.
func Compile(spec *controlv1alpha1.StatusCollectorSpec) (*Program, []error) {
	var errs []error
	compile := func(field, expr string) cel.Program {
		prg, err := celexpr.Compile(env, expr, types.DynKind, "a value")
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", field, err))
			return nil
		}
		return prg
	}
	p := &Program{limit: int(spec.Limit)}
	if p.limit <= 0 {
		p.limit = DefaultLimit
	}
	if spec.Filter != "" {
		p.filter = compile("spec.filter", spec.Filter)
	}
	for i, g := range spec.GroupBy {
		p.groupBy = append(p.groupBy, named{g.Name, compile(fmt.Sprintf("spec.groupBy[%d].expression", i), g.Expression)})
	}
	for i, c := range spec.CombinedFields {
		cf := combined{name: c.Name, typ: c.Type}
		if c.Type != controlv1alpha1.AggregationCount {
			if c.Subject == "" {
				errs = append(errs, fmt.Errorf("spec.combinedFields[%d].subject: required for %s", i, c.Type))
				continue
			}
			cf.prg = compile(fmt.Sprintf("spec.combinedFields[%d].subject", i), c.Subject)
		}
		p.combined = append(p.combined, cf)
	}
	for i, s := range spec.Select {
		p.selects = append(p.selects, named{s.Name, compile(fmt.Sprintf("spec.select[%d].expression", i), s.Expression)})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return p, nil
}

// activation returns the CEL variables of row.
func activation(row Row) map[string]interface{} {
	return map[string]interface{}{
		"obj":      row.Obj,
		"returned": map[string]interface{}{"status": row.Status},
		"location": map[string]interface{}{"metadata": map[string]interface{}{
			"name": row.Location, "labels": stringMap(row.LocationLabels)}},
	}
}

func stringMap(m map[string]string) map[string]interface{} {
	out := make(map[string]interface{}, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// group accumulates one group.
type group struct {
	key    string
	values []interface{} // groupBy values
	count  int64
	acc    []accumulator
}

type accumulator struct {
	sum, min, max float64
	n             int64
	allInts       bool
}

// ErrBudgetExceeded is the error of SummarizeWithin when the evaluations spent more than the
// budget: the summary is not complete and must not be written.
var ErrBudgetExceeded = errors.New("the CEL cost of the summary went past its budget")

// Summarize evaluates the program on rows (in the caller's order) and returns the results of
// a StatusSummary: rows counted, groups (sorted by their groupBy values, at most limit), or
// without combinedFields the select rows (at most limit), and the first evaluation errors. A
// row whose filter or groupBy fails is left out; a subject that fails or is not a number
// leaves that value out of its group's aggregation. Values are JSON. It has no budget beyond
// each expression's own cost limit (SummarizeWithin has).
func (p *Program) Summarize(rows []Row) controlv1alpha1.StatusSummaryResults {
	res, _, _ := p.SummarizeWithin(rows, 0)
	return res
}

// SummarizeWithin is Summarize with a budget: it returns the results, the CEL cost the
// evaluations spent (k8s.io/apiserver's cost units, cel.EvalDetails.ActualCost), and
// ErrBudgetExceeded, with incomplete results, as soon as they spent more than budget (0 or
// less: no budget).
func (p *Program) SummarizeWithin(rows []Row, budget int64) (controlv1alpha1.StatusSummaryResults, int64, error) {
	var res controlv1alpha1.StatusSummaryResults
	var cost int64
	eval := func(prg cel.Program, act map[string]interface{}) (ref.Val, error) {
		v, details, err := prg.Eval(act)
		if details != nil {
			if c := details.ActualCost(); c != nil {
				cost += int64(min(*c, math.MaxInt64/2))
			}
		}
		return v, err
	}
	over := func() bool { return budget > 0 && cost > budget }
	errorf := func(row Row, format string, args ...interface{}) {
		if len(res.Errors) < maxErrors {
			res.Errors = append(res.Errors, fmt.Sprintf("%s at %s: ", row.Object, row.Location)+fmt.Sprintf(format, args...))
		}
	}
	groups := map[string]*group{}
	for _, row := range rows {
		if over() {
			return res, cost, ErrBudgetExceeded
		}
		act := activation(row)
		if p.filter != nil {
			v, err := eval(p.filter, act)
			if err != nil {
				errorf(row, "filter: %v", err)
				continue
			}
			if b, ok := v.(types.Bool); !ok || !bool(b) {
				continue
			}
		}
		res.Rows++
		if len(p.combined) == 0 {
			if len(res.Selected) < p.limit {
				sr := controlv1alpha1.SummaryRow{Object: row.Object, Location: row.Location}
				for _, s := range p.selects {
					v, err := eval(s.prg, act)
					if err != nil {
						errorf(row, "select %s: %v", s.name, err)
						continue
					}
					sr.Values = append(sr.Values, controlv1alpha1.NamedValue{Name: s.name, Value: toJSON(v)})
				}
				res.Selected = append(res.Selected, sr)
			}
			continue
		}
		values := make([]interface{}, 0, len(p.groupBy))
		failed := false
		for _, g := range p.groupBy {
			v, err := eval(g.prg, act)
			if err != nil {
				errorf(row, "groupBy %s: %v", g.name, err)
				failed = true
				break
			}
			values = append(values, nativeOf(v))
		}
		if failed {
			continue
		}
		kb, _ := json.Marshal(values)
		g := groups[string(kb)]
		if g == nil {
			g = &group{key: string(kb), values: values, acc: make([]accumulator, len(p.combined))}
			for i := range g.acc {
				g.acc[i] = accumulator{min: math.Inf(1), max: math.Inf(-1), allInts: true}
			}
			groups[g.key] = g
		}
		g.count++
		for i, c := range p.combined {
			if c.prg == nil {
				continue
			}
			v, err := eval(c.prg, act)
			if err != nil {
				errorf(row, "%s: %v", c.name, err)
				continue
			}
			f, isInt, ok := number(v)
			if !ok {
				errorf(row, "%s: %s is not a number", c.name, toJSON(v))
				continue
			}
			a := &g.acc[i]
			a.sum += f
			a.min, a.max = math.Min(a.min, f), math.Max(a.max, f)
			a.n++
			a.allInts = a.allInts && isInt
		}
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	res.GroupCount = int64(len(keys))
	var text []string
	for _, k := range keys {
		g := groups[k]
		sg := controlv1alpha1.SummaryGroup{}
		var parts []string
		for i, gb := range p.groupBy {
			v := jsonOf(g.values[i])
			sg.GroupBy = append(sg.GroupBy, controlv1alpha1.NamedValue{Name: gb.name, Value: v})
			parts = append(parts, gb.name+"="+strings.Trim(v, `"`))
		}
		var vals []string
		for i, c := range p.combined {
			v := g.acc[i].result(c.typ, g.count)
			sg.Values = append(sg.Values, controlv1alpha1.NamedValue{Name: c.name, Value: v})
			vals = append(vals, c.name+"="+v)
		}
		if len(res.Groups) < p.limit {
			res.Groups = append(res.Groups, sg)
		}
		line := strings.Join(vals, ",")
		if len(parts) > 0 {
			line = strings.Join(parts, ",") + ": " + line
		}
		text = append(text, line)
	}
	res.Text = strings.Join(text, "; ")
	if len(res.Text) > 256 {
		res.Text = res.Text[:253] + "..."
	}
	if over() {
		return res, cost, ErrBudgetExceeded
	}
	return res, cost, nil
}

// result returns the JSON of an aggregation over a group of count rows.
func (a accumulator) result(typ controlv1alpha1.AggregationType, count int64) string {
	if typ == controlv1alpha1.AggregationCount {
		return fmt.Sprint(count)
	}
	if a.n == 0 {
		return "null"
	}
	var f float64
	switch typ {
	case controlv1alpha1.AggregationSum:
		f = a.sum
	case controlv1alpha1.AggregationMin:
		f = a.min
	case controlv1alpha1.AggregationMax:
		f = a.max
	case controlv1alpha1.AggregationAvg:
		return jsonOf(a.sum / float64(a.n))
	}
	if a.allInts {
		return fmt.Sprint(int64(f))
	}
	return jsonOf(f)
}

// number returns v as a float64 and whether it is an integer.
func number(v ref.Val) (float64, bool, bool) {
	switch n := v.(type) {
	case types.Int:
		return float64(n), true, true
	case types.Uint:
		return float64(n), true, true
	case types.Double:
		return float64(n), false, true
	}
	return 0, false, false
}

// nativeOf returns v as a JSON-compatible Go value.
func nativeOf(v ref.Val) interface{} {
	switch t := v.Value().(type) {
	case bool, int64, uint64, float64, string:
		return t
	}
	if pb, err := v.ConvertToNative(reflect.TypeOf(&structpb.Value{})); err == nil {
		if b, err := protojson.Marshal(pb.(*structpb.Value)); err == nil {
			var out interface{}
			if json.Unmarshal(b, &out) == nil {
				return out
			}
		}
	}
	return fmt.Sprint(v.Value())
}

// toJSON returns the JSON of v.
func toJSON(v ref.Val) string { return jsonOf(nativeOf(v)) }

func jsonOf(v interface{}) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%q", fmt.Sprint(v))
	}
	return string(b)
}
