package customization

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"

	celconfig "k8s.io/apiserver/pkg/apis/cel"

	controlv1alpha1 "github.com/cluster-mapper/cluster-mapper/pkg/apis/control/v1alpha1"
)

// ReasonBudgetExceeded is the reason of a RenderError whose rendering spent the CEL budget of
// its object version (a Meter's limit): the Customization that crossed it is not applied to
// the object (the view keeps its last rendering, or withholds an object that never rendered),
// and its status says Degraded.
const ReasonBudgetExceeded = controlv1alpha1.ReasonBudgetExceeded

// Meter counts the CEL cost of the evaluations made in a context that carries it (WithMeter):
// every expression of the Customizations (matchConditions, variables, mutations), as CEL's
// cost model measures it (cel.EvalDetails.ActualCost, the unit of k8s.io/apiserver's cost
// limits). A Meter with a limit bounds a rendering's total: a mutation is given at most what
// is left as its runtime budget (so the machinery stops it once that is spent, after the
// expression that crossed it), and Render fails with ReasonBudgetExceeded when the limit is
// spent. pkg/cache gives each object version's renderings one Meter and charges its cost to
// the object's namespace. Safe for concurrent use.
type Meter struct {
	limit int64
	spent atomic.Int64
}

// NewMeter returns a Meter that allows limit cost units in all (0 or less: no limit beyond
// the machinery's own per-expression and per-mutation limits).
func NewMeter(limit int64) *Meter {
	if limit <= 0 {
		limit = math.MaxInt64
	}
	return &Meter{limit: limit}
}

// Spent returns the cost counted so far (it may exceed the limit by the cost of the
// expression that crossed it: at most celconfig.PerCallLimit).
func (m *Meter) Spent() int64 { return m.spent.Load() }

// Limit returns the Meter's limit (math.MaxInt64 when it has none).
func (m *Meter) Limit() int64 { return m.limit }

// add counts cost.
func (m *Meter) add(cost uint64) {
	if cost > math.MaxInt64 {
		cost = math.MaxInt64
	}
	m.spent.Add(int64(cost))
}

// exceeded reports whether more than the limit was spent.
func (m *Meter) exceeded() bool { return m.spent.Load() > m.limit }

// budget returns the runtime budget a mutation may use: the machinery's
// (celconfig.RuntimeCELCostBudget), or what is left of the limit when that is less (at
// least 1, so that an expression that costs anything stops).
func (m *Meter) budget() int64 {
	if m == nil {
		return celconfig.RuntimeCELCostBudget
	}
	return max(1, min(celconfig.RuntimeCELCostBudget, m.limit-m.spent.Load()))
}

// exceededError is the error of a rendering that spent its Meter's limit.
func (m *Meter) exceededError() error {
	return fmt.Errorf("the rendering of this object version spent %d CEL cost units, more than the budget of %d per object version: the Customization is not applied to it", m.Spent(), m.limit)
}

// meterKey is the context key of a Meter.
type meterKey struct{}

// WithMeter returns ctx carrying m: Render (Snapshot.Render) counts the cost of every CEL
// evaluation made with it in m, and honours m's limit.
func WithMeter(ctx context.Context, m *Meter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

// meterFrom returns the Meter of ctx, nil if none.
func meterFrom(ctx context.Context) *Meter {
	m, _ := ctx.Value(meterKey{}).(*Meter)
	return m
}
