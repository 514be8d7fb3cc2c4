//! The runtime cost of an evaluation, counted as cel-go's `CostTracker`
//! (`interpreter/runtimecost.go`) and Kubernetes' `library.CostEstimator` count it, and the
//! limits upstream puts on it (`apiserver/pkg/apis/cel/config.go`): an expression stops once it
//! has cost more than [`PER_CALL_LIMIT`], and the caller charges what each one cost to a
//! budget ([`RUNTIME_BUDGET`], [`MATCH_CONDITIONS_BUDGET`]).
//!
//! Hand-written because the `cel` crate counts no cost and has no hook into its evaluator. The
//! compiled expression is instrumented instead: what cel-go charges for each node (an
//! identifier, a field selection, a function call, a list or map built at runtime) is charged
//! by a call of [`CHARGE`] wrapped around the nearest node above it that is evaluated whenever
//! it is (every loop condition or step, every branch, every call whose cost depends on its
//! arguments), which passes the node's value through and charges this thread's [`Meter`]
//! (evaluation is on a CEL thread of its own, [`super::evaluator`]). Once the limit is passed
//! every charge fails, and with it the loop it is in, so that the evaluation ends within an
//! iteration. Literals, `&&`, `||` and `?:` cost nothing, as in cel-go; a list or map of
//! literals is a constant (cel-go's `OptOptimize` folds it) and costs nothing either.
//!
//! Calls cel-go charges by the size of their arguments (string comparison and concatenation,
//! `in` on a list, `matches`, `contains`, `startsWith`, the `lists`, `regex` and strings
//! libraries...) have their arguments wrapped too, each recording its size (or, for the `lists`
//! functions, its traversal cost) on a stack the call's own charge takes them from, as cel-go's
//! `refValStack` does; `==` and `!=` are calls of [`EQUALS`] and [`NOT_EQUALS`], which compare
//! and charge in one, and `_+_` is charged by its result, whose size is its operands'.
//!
//! The comprehension macros' loops keep the shapes the `cel` crate recognises (an `all`'s
//! `@result && p` folds errors as cel-go does; a `map`'s `@result + [f]` appends in place): the
//! accumulator in those places is charged with a neighbouring node, and an `all`'s or
//! `exists`'s step with the next condition (a failing step is an error the next elements may
//! absorb; a failing condition ends the loop).

use std::{cell::RefCell, sync::Arc};

use cel::{
    ExecutionError, IdedExpr, Value,
    common::{
        ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, LiteralValue, operators},
        types::{CelBool, CelInt, Kind},
        value::{CowVal, Val},
    },
};

/// Upstream's `celconfig.PerCallLimit`: what one expression may cost.
pub(crate) const PER_CALL_LIMIT: u64 = 1_000_000;

/// Upstream's `celconfig.RuntimeCELCostBudget`: what the validations of one binding (and one
/// parameter object) may cost together; the audit annotations have a budget of their own.
pub(crate) const RUNTIME_BUDGET: u64 = 10_000_000;

/// Upstream's `celconfig.RuntimeCELCostBudgetMatchConditions`.
pub(crate) const MATCH_CONDITIONS_BUDGET: u64 = 2_500_000;

/// cel-go's error for an expression past [`PER_CALL_LIMIT`].
pub(crate) const LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

/// Upstream's error for a filter past its budget (`filter.ForInput`).
pub(crate) const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// The function instrumented expressions call: `@cost(node, point)`. No source can name it.
pub(crate) const CHARGE: &str = "@cost";

/// `@cost_eq(a, b, point)`, `@cost_ne(a, b, point)`: `a == b` and `a != b` charged by the size
/// of the smaller operand, without recording the operands first.
pub(crate) const EQUALS: &str = "@cost_eq";
pub(crate) const NOT_EQUALS: &str = "@cost_ne";

/// cel-go's `common.StringTraversalCostFactor`.
const STRING_TRAVERSAL: f64 = 0.1;
/// cel-go's `common.RegexStringLengthCostFactor`.
const REGEX_LENGTH: f64 = 0.25;
/// cel-go's `common.ListCreateBaseCost`.
const LIST_CREATE: u64 = 10;
/// cel-go's `common.MapCreateBaseCost`.
const MAP_CREATE: u64 = 30;
/// cel-go's `common.StructCreateBaseCost`.
const STRUCT_CREATE: u64 = 40;
/// Kubernetes' cost of an authorization `check()`: two per expression.
const AUTHZ_CHECK: u64 = 350_000;
/// What a `map`/`filter` step costs beyond its function: `@result`, `[...]`, `_+_`.
const APPEND_STEP: u64 = 1 + LIST_CREATE + 1;
/// How many recorded argument sizes are kept; older ones (of calls an error skipped) go.
const RECORDED: usize = 1024;

/// How a call's cost depends on its arguments (cel-go's `costCall`, Kubernetes' `CallCost`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Rule {
    /// A fixed cost.
    Fixed,
    /// `ceil(size(arg0) * factor)`: `startsWith`, `lowerAscii`, `split`...
    Traverse(f64),
    /// `ceil(size(arg0) * 0.1)` for a string or bytes argument, else 1: `bytes()`, `string()`.
    Convert,
    /// `ceil(size(result) * 0.2)`: `join`.
    Joined,
    /// `size(arg1)` for a list, else 1: `in`.
    InList,
    /// `ceil(min(size(arg0), size(arg1)) * 0.1)`: equality and comparisons.
    MinSize,
    /// `ceil((size(arg0) + size(arg1)) * 0.1)` for strings or bytes, else 1: `_+_`, measured
    /// on its result, whose size that is.
    Concat,
    /// `ceil((1 + size(arg0)) * 0.1) * ceil(size(arg1) * 0.25)`: `matches`, `find`, `findAll`.
    Regex,
    /// `ceil(size(arg0) * 0.1) * ceil(size(arg1) * 0.1)` on a string: `contains`.
    Contains,
    /// The traversal cost of arg0: the `lists` library, `indexOf`, `lastIndexOf`.
    Traversal,
}

/// What an argument of a [`Rule`] needs recorded about its value.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Metric {
    Size,
    Traversal,
}

/// Where a sized call finds one argument's measure.
#[derive(Clone, Copy, Debug)]
enum Arg {
    /// Recorded by the charge point of this index.
    Recorded(usize),
    /// A literal's, known when instrumenting.
    Known(Measure),
}

/// An argument's measure: its size (cel-go's `actualSize`) or traversal cost, and its kind.
#[derive(Clone, Copy, Debug)]
struct Measure {
    value: u64,
    kind: Kind,
}

/// One charge point: a wrapped node.
#[derive(Debug)]
struct Point {
    /// What the node costs whatever its arguments.
    base: u64,
    rule: Rule,
    args: Vec<Arg>,
    /// What to record of the node's value, for the sized call it is an argument of.
    record: Option<Metric>,
}

/// An expression with its charge points.
#[derive(Debug)]
pub(crate) struct Instrumented {
    pub(crate) expr: IdedExpr,
    points: Arc<[Point]>,
}

/// `expr` instrumented.
pub(crate) fn instrument(expr: IdedExpr) -> Instrumented {
    let mut points = Vec::new();
    let expr = Instrumenter {
        points: &mut points,
    }
    .root(expr);
    Instrumented {
        expr,
        points: points.into(),
    }
}

/// What an evaluation cost, and whether it stopped at the limit.
pub(crate) struct Spent {
    pub(crate) cost: u64,
    pub(crate) exceeded: bool,
}

/// Evaluates `f` (which evaluates `instrumented.expr`) with a meter on this thread that stops
/// it past `limit`.
pub(crate) fn metered<R>(
    instrumented: &Instrumented,
    limit: u64,
    f: impl FnOnce() -> R,
) -> (R, Spent) {
    /// Puts back the meter that was there, whether `f` returns or unwinds.
    struct Reset(Option<Meter>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let previous = self.0.take();
            METER.with(|m| *m.borrow_mut() = previous);
        }
    }
    let meter = Meter {
        points: instrumented.points.clone(),
        limit,
        spent: 0,
        exceeded: false,
        recorded: Vec::new(),
    };
    let reset = Reset(METER.with(|m| m.borrow_mut().replace(meter)));
    let r = f();
    let spent = METER.with(|m| {
        m.borrow().as_ref().map_or(
            Spent {
                cost: 0,
                exceeded: false,
            },
            |m| Spent {
                cost: m.spent,
                exceeded: m.exceeded,
            },
        )
    });
    drop(reset);
    (r, spent)
}

thread_local! {
    static METER: RefCell<Option<Meter>> = const { RefCell::new(None) };
}

/// The cost of the evaluation running on this thread.
struct Meter {
    points: Arc<[Point]>,
    limit: u64,
    spent: u64,
    exceeded: bool,
    /// Recorded argument measures: the charge point and the measure.
    recorded: Vec<(usize, Measure)>,
}

impl Meter {
    fn charge(&mut self, index: usize, value: &dyn Val) -> Result<(), ExecutionError> {
        if self.exceeded {
            return Err(exceeded());
        }
        let Some(point) = self.points.get(index) else {
            return Ok(());
        };
        if point.rule == Rule::Fixed && point.record.is_none() {
            return self.spend(point.base);
        }
        let recorded = &mut self.recorded;
        let mut measures: Vec<Measure> = point
            .args
            .iter()
            .rev()
            .map(|arg| match *arg {
                Arg::Known(m) => m,
                Arg::Recorded(at) => take(recorded, at),
            })
            .collect();
        measures.reverse();
        let cost = point
            .base
            .saturating_add(call_cost(point.rule, &measures, value));
        if let Some(metric) = point.record {
            if recorded.len() >= RECORDED {
                recorded.drain(..RECORDED / 2);
            }
            recorded.push((index, measure(value, metric)));
        }
        self.spend(cost)
    }

    fn spend(&mut self, cost: u64) -> Result<(), ExecutionError> {
        self.spent = self.spent.saturating_add(cost);
        if self.spent > self.limit {
            self.exceeded = true;
            return Err(exceeded());
        }
        Ok(())
    }

    /// Charges point `index` for comparing `a` and `b`.
    fn compare(&mut self, index: usize, a: &dyn Val, b: &dyn Val) -> Result<(), ExecutionError> {
        if self.exceeded {
            return Err(exceeded());
        }
        let base = self.points.get(index).map_or(0, |p| p.base);
        let smaller = actual_size(a).min(actual_size(b));
        self.spend(base.saturating_add(ceil(smaller as f64 * STRING_TRAVERSAL)))
    }
}

/// The measure point `at` recorded last, taken off the stack (size 1 if it is not there).
fn take(recorded: &mut Vec<(usize, Measure)>, at: usize) -> Measure {
    match recorded.iter().rposition(|(i, _)| *i == at) {
        Some(p) => recorded.remove(p).1,
        None => Measure {
            value: 1,
            kind: Kind::Dyn,
        },
    }
}

fn exceeded() -> ExecutionError {
    ExecutionError::function_error(CHARGE, LIMIT_EXCEEDED)
}

/// `@cost(value, point)`: charges `point` and answers `value`.
pub(crate) fn charge<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let mut args = args.into_iter();
    let (Some(value), Some(point)) = (args.next(), args.next()) else {
        return Err(ExecutionError::invalid_argument_count(2, 0));
    };
    let index = point_index(point.as_ref());
    METER.with(|m| match m.borrow_mut().as_mut() {
        Some(meter) => meter.charge(index, value.as_ref()),
        None => Ok(()),
    })?;
    Ok(value)
}

fn point_index(v: &dyn Val) -> usize {
    v.downcast_ref::<CelInt>()
        .and_then(|i| usize::try_from(*i.inner()).ok())
        .unwrap_or(usize::MAX)
}

fn compared<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    equal: bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [a, b, point] = <[CowVal<'b, 'v>; 3]>::try_from(args)
        .map_err(|a| ExecutionError::invalid_argument_count(3, a.len()))?;
    METER.with(|m| match m.borrow_mut().as_mut() {
        Some(meter) => meter.compare(point_index(point.as_ref()), a.as_ref(), b.as_ref()),
        None => Ok(()),
    })?;
    // The interpreter's own `==` on the operands.
    Ok(CowVal::owned(CelBool::from((a == b) == equal)))
}

/// `@cost_eq(a, b, point)`: `a == b`, charged.
pub(crate) fn equals<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    compared(args, true)
}

/// `@cost_ne(a, b, point)`: `a != b`, charged.
pub(crate) fn not_equals<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    compared(args, false)
}

fn ceil(x: f64) -> u64 {
    // Sizes are far below 2^52: the conversion is exact enough, and saturates.
    x.ceil() as u64
}

fn is_text(kind: Kind) -> bool {
    matches!(kind, Kind::String | Kind::Bytes)
}

fn call_cost(rule: Rule, m: &[Measure], result: &dyn Val) -> u64 {
    let size = |i: usize| m.get(i).map_or(1, |m| m.value);
    let kind = |i: usize| m.get(i).map_or(Kind::Dyn, |m| m.kind);
    match rule {
        Rule::Fixed => 0,
        Rule::Traverse(f) => ceil(size(0) as f64 * f),
        Rule::Convert if is_text(kind(0)) => ceil(size(0) as f64 * STRING_TRAVERSAL),
        Rule::Joined => ceil(actual_size(result) as f64 * 2.0 * STRING_TRAVERSAL),
        Rule::InList if kind(1) == Kind::List => size(1),
        Rule::MinSize => ceil(size(0).min(size(1)) as f64 * STRING_TRAVERSAL),
        Rule::Concat if is_text(result.get_type().kind()) => {
            ceil(actual_size(result) as f64 * STRING_TRAVERSAL)
        }
        Rule::Regex => ceil((1.0 + size(0) as f64) * STRING_TRAVERSAL)
            .saturating_mul(ceil(size(1) as f64 * REGEX_LENGTH)),
        Rule::Contains if kind(0) == Kind::String => ceil(size(0) as f64 * STRING_TRAVERSAL)
            .saturating_mul(ceil(size(1) as f64 * STRING_TRAVERSAL)),
        Rule::Traversal => size(0),
        Rule::Convert | Rule::InList | Rule::Concat | Rule::Contains => 1,
    }
}

/// cel-go's `actualSize`: the size of a string (in code points), bytes, a list or a map; 1 for
/// anything else.
fn actual_size(v: &dyn Val) -> u64 {
    match v.get_type().kind() {
        Kind::String | Kind::Bytes | Kind::List | Kind::Map => v
            .as_sizer()
            .map_or(1, |s| u64::try_from(*s.size().inner()).unwrap_or(0)),
        _ => 1,
    }
}

fn measure(v: &dyn Val, metric: Metric) -> Measure {
    let kind = v.get_type().kind();
    let value = match metric {
        Metric::Size => actual_size(v),
        Metric::Traversal => Value::try_from(v).map_or(1, |v| traversal(&v)),
    };
    Measure { value, kind }
}

/// Kubernetes' `traversalCost`: a tenth of every string's length, 1 per other scalar.
fn traversal(v: &Value) -> u64 {
    let text = |len: usize| (len as f64 * STRING_TRAVERSAL) as u64;
    match v {
        Value::String(s) => text(s.len()),
        Value::Bytes(b) => text(b.len()),
        Value::List(l) => l.iter().map(traversal).fold(0, u64::saturating_add),
        Value::Map(m) => m
            .map
            .iter()
            .map(|(k, v)| {
                let k = match k {
                    cel::objects::Key::String(s) => text(s.len()),
                    _ => 1,
                };
                k.saturating_add(traversal(v))
            })
            .fold(0, u64::saturating_add),
        _ => 1,
    }
}

/// How a call is charged, from its function's name and whether it has a target.
fn rule_of(call: &CallExpr) -> (u64, Rule) {
    let member = call.target.is_some();
    match call.func_name.as_str() {
        operators::LESS
        | operators::LESS_EQUALS
        | operators::GREATER
        | operators::GREATER_EQUALS => (0, Rule::MinSize),
        operators::ADD => (0, Rule::Concat),
        operators::IN => (0, Rule::InList),
        "startsWith" | "endsWith" | "quote" | "format" | "url" | "lowerAscii" | "upperAscii"
        | "substring" | "trim" => (0, Rule::Traverse(STRING_TRAVERSAL)),
        "replace" | "split" => (0, Rule::Traverse(2.0 * STRING_TRAVERSAL)),
        "join" => (0, Rule::Joined),
        "bytes" | "string" if !member => (0, Rule::Convert),
        "matches" | "find" | "findAll" => (0, Rule::Regex),
        "contains" if member => (0, Rule::Contains),
        "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf" if member => {
            (0, Rule::Traversal)
        }
        "check" if member => (AUTHZ_CHECK, Rule::Fixed),
        _ => (1, Rule::Fixed),
    }
}

/// Whether `e` is a constant cel-go folds: a literal, or a list or map of constants.
fn constant(e: &IdedExpr) -> bool {
    match &e.expr {
        Expr::Literal(_) => true,
        Expr::List(l) => l.optional_indices.is_empty() && l.elements.iter().all(constant),
        Expr::Map(m) => m.entries.iter().all(|e| match &e.expr {
            EntryExpr::MapEntry(e) => !e.optional && constant(&e.key) && constant(&e.value),
            EntryExpr::StructField(_) => false,
        }),
        _ => false,
    }
}

fn literal_measure(l: &LiteralValue) -> Measure {
    match l {
        LiteralValue::String(s) => Measure {
            value: s.inner().chars().count() as u64,
            kind: Kind::String,
        },
        LiteralValue::Bytes(b) => Measure {
            value: b.inner().len() as u64,
            kind: Kind::Bytes,
        },
        _ => Measure {
            value: 1,
            kind: Kind::Dyn,
        },
    }
}

/// Instruments an expression. A node's cost is charged by the nearest charge point above it
/// that is evaluated whenever it is (one per loop part and branch, and one per sized call):
/// `node` answers the instrumented node and the cost still to be charged for it, which its
/// parent adds to its own or charges where the node's evaluation is conditional.
struct Instrumenter<'a> {
    points: &'a mut Vec<Point>,
}

/// An instrumented node and the cost of it no charge point in it charges.
type Pending = (IdedExpr, u64);

impl Instrumenter<'_> {
    /// The whole expression: nothing left pending.
    fn root(&mut self, e: IdedExpr) -> IdedExpr {
        let (e, pending) = self.node(e);
        self.charged(e, pending)
    }

    /// Wraps `e` in a charge point.
    fn wrap(&mut self, e: IdedExpr, point: Point) -> IdedExpr {
        let index = self.points.len();
        self.points.push(point);
        let id = e.id;
        IdedExpr {
            id,
            expr: Expr::Call(CallExpr {
                func_name: CHARGE.to_string(),
                target: None,
                args: vec![
                    e,
                    IdedExpr {
                        id,
                        expr: Expr::Literal(LiteralValue::Int(CelInt::from(index as i64))),
                    },
                ],
            }),
        }
    }

    /// The charge point `e` is, if it is one.
    fn point_of(&self, e: &IdedExpr) -> Option<usize> {
        let point = |c: &CallExpr, at: usize| match c.args.get(at).map(|a| &a.expr) {
            Some(Expr::Literal(LiteralValue::Int(i))) => usize::try_from(*i.inner()).ok(),
            _ => None,
        };
        match &e.expr {
            Expr::Call(c) if c.func_name == CHARGE => point(c, 1),
            _ => None,
        }
    }

    /// A charge point evaluated whenever `e` is, whose failure fails `e`: `e` itself, the
    /// condition of a `?:`, the operand of a selection, an equality.
    fn sure_point(&self, e: &IdedExpr) -> Option<usize> {
        match &e.expr {
            Expr::Call(c) if c.func_name == CHARGE => self.point_of(e),
            Expr::Call(c) if c.func_name == EQUALS || c.func_name == NOT_EQUALS => {
                match c.args.get(2).map(|a| &a.expr) {
                    Some(Expr::Literal(LiteralValue::Int(i))) => usize::try_from(*i.inner()).ok(),
                    _ => None,
                }
            }
            Expr::Call(c) if c.func_name == operators::CONDITIONAL && c.args.len() == 3 => {
                self.sure_point(&c.args[0])
            }
            Expr::Select(s) => self.sure_point(&s.operand),
            _ => None,
        }
    }

    /// `e` with `cost` more charged whenever it is evaluated.
    fn charged(&mut self, e: IdedExpr, cost: u64) -> IdedExpr {
        if cost == 0 {
            return e;
        }
        match self.sure_point(&e) {
            Some(i) => {
                self.points[i].base += cost;
                e
            }
            None => self.wrap(
                e,
                Point {
                    base: cost,
                    rule: Rule::Fixed,
                    args: Vec::new(),
                    record: None,
                },
            ),
        }
    }

    /// A node evaluated only sometimes, or repeatedly: charged by itself.
    fn own(&mut self, e: IdedExpr, extra: u64) -> IdedExpr {
        let (e, pending) = self.node(e);
        self.charged(e, pending + extra)
    }

    /// An argument whose measure a sized call needs, with its pending cost.
    fn argument(&mut self, (e, pending): Pending, metric: Metric) -> (IdedExpr, Arg) {
        if let Expr::Literal(l) = &e.expr
            && metric == Metric::Size
            && pending == 0
        {
            let known = Arg::Known(literal_measure(l));
            return (e, known);
        }
        match self.point_of(&e) {
            Some(i) if self.points[i].record.is_none() => {
                self.points[i].record = Some(metric);
                self.points[i].base += pending;
                (e, Arg::Recorded(i))
            }
            _ => {
                let i = self.points.len();
                let e = self.wrap(
                    e,
                    Point {
                        base: pending,
                        rule: Rule::Fixed,
                        args: Vec::new(),
                        record: Some(metric),
                    },
                );
                (e, Arg::Recorded(i))
            }
        }
    }

    fn node(&mut self, e: IdedExpr) -> Pending {
        let id = e.id;
        let rebuilt = |expr| IdedExpr { id, expr };
        match e.expr {
            Expr::Literal(_) | Expr::Unspecified => (e, 0),
            Expr::Ident(_) => (e, 1),
            Expr::Select(mut s) => {
                let (operand, pending) = self.node(std::mem::take(&mut *s.operand));
                *s.operand = operand;
                (rebuilt(Expr::Select(s)), pending + 1)
            }
            Expr::List(_) | Expr::Map(_) if constant(&e) => (e, 0),
            Expr::List(mut l) => {
                let mut pending = LIST_CREATE;
                for e in &mut l.elements {
                    let (n, p) = self.node(std::mem::take(e));
                    *e = n;
                    pending += p;
                }
                (rebuilt(Expr::List(l)), pending)
            }
            Expr::Map(mut m) => {
                let mut pending = MAP_CREATE;
                for entry in &mut m.entries {
                    if let EntryExpr::MapEntry(me) = &mut entry.expr {
                        let (k, pk) = self.node(std::mem::take(&mut me.key));
                        let (v, pv) = self.node(std::mem::take(&mut me.value));
                        me.key = k;
                        // An optional entry's value may be none, but it is evaluated.
                        me.value = v;
                        pending += pk + pv;
                    }
                }
                (rebuilt(Expr::Map(m)), pending)
            }
            Expr::Struct(mut s) => {
                let mut pending = STRUCT_CREATE;
                for entry in &mut s.entries {
                    if let EntryExpr::StructField(f) = &mut entry.expr {
                        let (v, p) = self.node(std::mem::take(&mut f.value));
                        f.value = v;
                        pending += p;
                    }
                }
                (rebuilt(Expr::Struct(s)), pending)
            }
            Expr::Call(c) => self.call(id, c),
            Expr::Comprehension(c) => {
                let (c, pending) = self.comprehension(*c);
                (rebuilt(Expr::Comprehension(Box::new(c))), pending)
            }
        }
    }

    fn call(&mut self, id: u64, mut c: CallExpr) -> Pending {
        match c.func_name.as_str() {
            // No cost of their own, as cel-go's `evalAnd`, `evalOr` and conditionals; the first
            // operand is always evaluated, the others only sometimes.
            operators::CONDITIONAL if c.args.len() == 3 => {
                // One branch or the other is evaluated: what the cheaper one costs beyond its
                // own charge points is charged with the condition, the rest in each branch.
                let mut args = std::mem::take(&mut c.args).into_iter();
                let (Some(cond), Some(yes), Some(no)) = (args.next(), args.next(), args.next())
                else {
                    return (
                        IdedExpr {
                            id,
                            expr: Expr::Call(c),
                        },
                        0,
                    );
                };
                let (cond, cond_cost) = self.node(cond);
                let (yes, yes_cost) = self.node(yes);
                let (no, no_cost) = self.node(no);
                let both = yes_cost.min(no_cost);
                let yes = self.charged(yes, yes_cost - both);
                let no = self.charged(no, no_cost - both);
                c.args = vec![cond, yes, no];
                return (
                    IdedExpr {
                        id,
                        expr: Expr::Call(c),
                    },
                    cond_cost + both,
                );
            }
            operators::LOGICAL_AND | operators::LOGICAL_OR | operators::CONDITIONAL => {
                let mut pending = 0;
                let args = std::mem::take(&mut c.args);
                for (i, a) in args.into_iter().enumerate() {
                    let a = if i == 0 {
                        let (a, p) = self.node(a);
                        pending = p;
                        a
                    } else {
                        self.own(a, 0)
                    };
                    c.args.push(a);
                }
                return (
                    IdedExpr {
                        id,
                        expr: Expr::Call(c),
                    },
                    pending,
                );
            }
            _ => {}
        }
        let equality = matches!(
            c.func_name.as_str(),
            operators::EQUALS | operators::NOT_EQUALS
        );
        if equality && c.args.len() == 2 && c.target.is_none() {
            return self.equality(id, c);
        }
        let (base, rule) = rule_of(&c);
        // A comparison or `_+_` with a literal that is no string or bytes costs 1.
        let scalar_literal = c
            .args
            .iter()
            .any(|a| matches!(&a.expr, Expr::Literal(l) if !is_text(literal_measure(l).kind)));
        let (base, rule) = match rule {
            Rule::MinSize | Rule::Concat if scalar_literal => (1, Rule::Fixed),
            _ => (base, rule),
        };
        // A call of a namespaced function (`optional.of(x)`): its target is the name, which
        // must stay a name for the function to be found.
        let namespaced = c
            .target
            .as_ref()
            .is_some_and(|t| qualified_root(t) == Some("optional"));
        let sized = !matches!(rule, Rule::Fixed | Rule::Joined | Rule::Concat);
        let metric = if rule == Rule::Traversal {
            Metric::Traversal
        } else {
            Metric::Size
        };
        let mut pending = base;
        let mut args = Vec::new();
        if let Some(t) = c.target.take() {
            if namespaced {
                c.target = Some(t);
            } else {
                let t = self.node(*t);
                let t = if sized {
                    let (t, arg) = self.argument(t, metric);
                    args.push(arg);
                    t
                } else {
                    pending += t.1;
                    t.0
                };
                c.target = Some(Box::new(t));
            }
        }
        for a in &mut c.args {
            let n = self.node(std::mem::take(a));
            *a = if sized {
                let (n, arg) = self.argument(n, Metric::Size);
                args.push(arg);
                n
            } else {
                pending += n.1;
                n.0
            };
        }
        let call = IdedExpr {
            id,
            expr: Expr::Call(c),
        };
        if rule == Rule::Fixed {
            return (call, pending);
        }
        let call = self.wrap(
            call,
            Point {
                base: pending,
                rule,
                args,
                record: None,
            },
        );
        (call, 0)
    }

    /// `a == b`, `a != b` as `@cost_eq(a, b, point)`, `@cost_ne(a, b, point)`; with a literal
    /// that is no string or bytes, they cost 1 and stay as they are.
    fn equality(&mut self, id: u64, mut c: CallExpr) -> Pending {
        let scalar_literal = c
            .args
            .iter()
            .any(|a| matches!(&a.expr, Expr::Literal(l) if !is_text(literal_measure(l).kind)));
        let mut pending = 0;
        for a in &mut c.args {
            let (n, p) = self.node(std::mem::take(a));
            *a = n;
            pending += p;
        }
        if scalar_literal {
            return (
                IdedExpr {
                    id,
                    expr: Expr::Call(c),
                },
                pending + 1,
            );
        }
        let index = self.points.len();
        self.points.push(Point {
            base: pending,
            rule: Rule::MinSize,
            args: Vec::new(),
            record: None,
        });
        c.func_name = if c.func_name == operators::EQUALS {
            EQUALS
        } else {
            NOT_EQUALS
        }
        .to_string();
        c.args.push(IdedExpr {
            id,
            expr: Expr::Literal(LiteralValue::Int(CelInt::from(index as i64))),
        });
        (
            IdedExpr {
                id,
                expr: Expr::Call(c),
            },
            0,
        )
    }

    /// A comprehension: its range and initial value are evaluated once, with it; its loop
    /// parts each charge for themselves.
    fn comprehension(&mut self, mut c: ComprehensionExpr) -> (ComprehensionExpr, u64) {
        let accu = c.accu_var.clone();
        let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if *n == accu);
        let (range, range_cost) = self.node(std::mem::take(&mut c.iter_range));
        let (init, init_cost) = self.node(std::mem::take(&mut c.accu_init));
        c.iter_range = range;
        c.accu_init = init;
        let pending = range_cost + init_cost;
        // `@result && p`, `@result || p` (`all`, `exists`): the crate folds errors as cel-go
        // when the step keeps this shape; `@result` is charged with `p`.
        if let Expr::Call(step) = &mut c.loop_step.expr {
            let logical = matches!(
                step.func_name.as_str(),
                operators::LOGICAL_AND | operators::LOGICAL_OR
            );
            if logical && step.target.is_none() && step.args.len() == 2 && is_accu(&step.args[0]) {
                // The condition (`@not_strictly_false(@result)`) is evaluated before every
                // step, and stops the loop when it fails (a failing step is only an error
                // the next elements may absorb): the step's cost is charged with the next
                // condition's (the condition that ends the loop early charges one step more).
                if let Expr::Call(step) = &mut c.loop_step.expr {
                    let (p, p_cost) = self.node(std::mem::take(&mut step.args[1]));
                    step.args[1] = p;
                    c.loop_cond = self.own(std::mem::take(&mut c.loop_cond), 1 + p_cost);
                }
                c.result = self.own(std::mem::take(&mut c.result), 0);
                return (c, pending);
            }
        }
        // `@result + [f]`, `g ? @result + [f] : @result` (`map`, `filter`), with a literal
        // condition and `@result` as the result: the crate appends in place when it keeps
        // this shape. cel-go charges `@result`, `[f]` and `_+_` with `f`, and `@result` of
        // the skipped step with `g`; the result's `@result` is charged with the range.
        if matches!(c.loop_cond.expr, Expr::Literal(_)) && is_accu(&c.result) {
            let appends = |e: &IdedExpr| match &e.expr {
                Expr::Call(add) if add.func_name == operators::ADD && add.target.is_none() => {
                    add.args.len() == 2
                        && is_accu(&add.args[0])
                        && matches!(&add.args[1].expr, Expr::List(l) if !l.elements.is_empty())
                }
                _ => false,
            };
            let guarded = match &c.loop_step.expr {
                Expr::Call(g) if g.func_name == operators::CONDITIONAL && g.target.is_none() => {
                    g.args.len() == 3 && appends(&g.args[1]) && is_accu(&g.args[2])
                }
                _ => false,
            };
            if guarded || appends(&c.loop_step) {
                if let Expr::Call(g) = &mut c.loop_step.expr {
                    if guarded {
                        let guard = std::mem::take(&mut g.args[0]);
                        g.args[0] = self.own(guard, 1);
                        if let Expr::Call(add) = &mut g.args[1].expr {
                            self.append(add);
                        }
                    } else {
                        self.append(g);
                    }
                }
                return (c, pending + 1);
            }
        }
        c.loop_cond = self.own(std::mem::take(&mut c.loop_cond), 0);
        c.loop_step = self.own(std::mem::take(&mut c.loop_step), 0);
        c.result = self.own(std::mem::take(&mut c.result), 0);
        (c, pending)
    }

    /// Instruments the `[f, ...]` of `@result + [f, ...]`, charging the step's cost with `f`.
    fn append(&mut self, add: &mut CallExpr) {
        if let Expr::List(l) = &mut add.args[1].expr {
            let mut extra = APPEND_STEP;
            for e in &mut l.elements {
                *e = self.own(std::mem::take(e), extra);
                extra = 0;
            }
        }
    }
}

/// The first name of a qualified name (`a` of `a.b.c`), if `e` is one.
fn qualified_root(e: &IdedExpr) -> Option<&str> {
    match &e.expr {
        Expr::Ident(n) => Some(n),
        Expr::Select(s) if !s.test => qualified_root(&s.operand),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::json;

    use super::*;
    use crate::policy::{expression::Compiled, values::value_of};

    fn cost_of(src: &str, object: serde_json::Value) -> (Result<Value, String>, u64) {
        let o = value_of(&object);
        let e = Compiled::new(src).eval_metered(&[("object", &o)]);
        (e.value, e.cost)
    }

    fn list(n: usize) -> String {
        let items: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
        format!("[{}]", items.join(", "))
    }

    /// Figures worked out from cel-go's `CostTracker` and Kubernetes' `CostEstimator`.
    #[test]
    fn expressions_cost_what_cel_go_counts() {
        let long = "a".repeat(1_000);
        let xs: Vec<i64> = (0..500).collect();
        let obj = json!({"spec": {"replicas": 3}, "a": long, "b": long, "xs": xs,
            "name": "a".repeat(99)});
        let cases = [
            // Three names and selections, one comparison.
            ("object.spec.replicas <= 5", 4),
            // Per element: `@not_strictly_false(@result)` 2, `@result && x > 0` 3; the result 1.
            ("[1, 2, 3].all(x, x > 0)", 16),
            // Per element: `@result + [x * 2]` 14 (a list built: 10); the result 1.
            ("[1, 2, 3].map(x, x * 2)", 43),
            // String equality: a tenth of the shorter string.
            ("object.a == object.b", 4 + 100),
            // `in` a list: its size.
            ("0 in object.xs", 2 + 500),
            // `matches`: ceil((1 + 99) / 10) * ceil(6 / 4).
            ("object.name.matches('[a-z]+')", 2 + 10 * 2),
            // The `lists` library: a traversal, 1 per integer.
            ("object.xs.sum() > 0", 2 + 500 + 1),
            // Constant lists cost nothing, as cel-go folds them.
            ("size([1, 2, 3]) == 3", 2),
            // `has()` is a selection.
            ("has(object.spec.replicas)", 3),
        ];
        for (src, want) in cases {
            let (value, cost) = cost_of(src, obj.clone());
            assert!(value.is_ok(), "{src}: {value:?}");
            assert_eq!(cost, want, "{src}");
        }
    }

    #[test]
    fn instrumenting_keeps_what_expressions_mean() {
        let obj = json!({"spec": {"replicas": 3, "xs": [0, 2]}});
        for src in [
            // An error beside a deciding element is absorbed, as in cel-go.
            "object.spec.xs.exists(x, 4 / x == 2)",
            "!object.spec.xs.all(x, 4 / x == 1)",
            "object.spec.xs.filter(x, x > 0) == [2] && object.spec.xs.map(x, x + 1) == [1, 3]",
            "object.spec.xs.map(x, x > 0, x * 10) == [20]",
            "object.spec.xs.exists_one(x, x == 2)",
            "optional.of(1).hasValue() && !optional.none().hasValue()",
            "has(object.spec.replicas) && !has(object.spec.paused)",
            "object.?spec.?replicas.orValue(0) == 3",
            "'abc'.startsWith('a') && 'a' + 'b' == 'ab' && 'b' in ['a', 'b']",
            "{'a': object.spec.replicas}.a == 3 && [object.spec.replicas][0] == 3",
        ] {
            let (value, _) = cost_of(src, obj.clone());
            assert_eq!(value, Ok(Value::Bool(true)), "{src}");
        }
    }

    #[test]
    fn an_expression_past_the_per_call_limit_stops_with_cel_gos_error() {
        let l = list(100);
        let src = format!("{l}.all(a, {l}.all(b, {l}.all(c, {l}.all(d, a + b + c + d > 0))))");
        let started = Instant::now();
        let (value, cost) = cost_of(&src, json!({}));
        let took = started.elapsed();
        println!("four-deep comprehension: cost {cost}, stopped after {took:?}");
        assert_eq!(
            value,
            Err(format!(
                "expression '{src}' resulted in error: {LIMIT_EXCEEDED}"
            ))
        );
        assert!(
            cost > PER_CALL_LIMIT && cost < PER_CALL_LIMIT + 100,
            "{cost}"
        );
        // Upstream's limit is about a tenth of a second of cel-go; a debug build is slower.
        let bound = if cfg!(debug_assertions) { 10 } else { 1 };
        assert!(took.as_secs() < bound, "{took:?}");
    }
}
