//! The runtime cost of an evaluation, counted as cel-go's `CostTracker`
//! (`interpreter/runtimecost.go`) and Kubernetes' `library.CostEstimator` count it, and the
//! limits upstream puts on it (`apiserver/pkg/apis/cel/config.go`): an expression stops once it
//! has cost more than [`PER_CALL_LIMIT`], and the caller charges what each one cost to a
//! budget ([`RUNTIME_BUDGET`], [`MATCH_CONDITIONS_BUDGET`]).
//!
//! Hand-written because the `cel` crate counts no cost and has no hook into its evaluator. The
//! compiled expression is instrumented instead: every node cel-go charges for (an identifier, a
//! field selection, a function call, a list or map built at runtime) is wrapped in a call of
//! [`CHARGE`], which passes the node's value through and charges its cost to this thread's
//! [`Meter`] (evaluation is on a CEL thread of its own, [`super::evaluator`]). Once the limit is
//! passed, every charge fails, which ends the evaluation within one loop iteration. Literals,
//! `&&`, `||` and `?:` cost nothing, as in cel-go; a list or map of literals is a constant
//! (cel-go's `OptOptimize` folds it) and costs nothing either.
//!
//! Calls cel-go charges by the size of their arguments (string comparison and concatenation,
//! `in` on a list, `matches`, `contains`, `startsWith`, the `lists`, `regex` and strings
//! libraries...) have their arguments wrapped too, each recording its size (or, for the `lists`
//! functions, its traversal cost) on a stack the call's own charge takes them from, as cel-go's
//! `refValStack` does.
//!
//! The comprehension macros' loops keep the shapes the `cel` crate recognises (an `all`'s
//! `@result && p` folds errors as cel-go does; a `map`'s `@result + [f]` appends in place): the
//! accumulator in those places is charged with a neighbouring node.

use std::{cell::RefCell, sync::Arc};

use cel::{
    ExecutionError, IdedExpr, Value,
    common::{
        ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, LiteralValue, operators},
        types::{CelInt, Kind},
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
    /// `ceil((size(arg0) + size(arg1)) * 0.1)` for strings or bytes, else 1: `_+_`.
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
    .node(expr);
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
        self.spent = self.spent.saturating_add(cost);
        if self.spent > self.limit {
            self.exceeded = true;
            return Err(exceeded());
        }
        Ok(())
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
pub(crate) fn charge<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let mut args = args.into_iter();
    let (Some(value), Some(point)) = (args.next(), args.next()) else {
        return Err(ExecutionError::invalid_argument_count(2, 0));
    };
    let index = point
        .downcast_ref::<CelInt>()
        .and_then(|i| usize::try_from(*i.inner()).ok())
        .unwrap_or(usize::MAX);
    METER.with(|m| match m.borrow_mut().as_mut() {
        Some(meter) => meter.charge(index, value.as_ref()),
        None => Ok(()),
    })?;
    Ok(value)
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
        Rule::Concat if is_text(kind(0)) => {
            ceil(size(0).saturating_add(size(1)) as f64 * STRING_TRAVERSAL)
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
        operators::EQUALS
        | operators::NOT_EQUALS
        | operators::LESS
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

struct Instrumenter<'a> {
    points: &'a mut Vec<Point>,
}

impl Instrumenter<'_> {
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

    fn fixed(&mut self, e: IdedExpr, base: u64) -> IdedExpr {
        self.wrap(
            e,
            Point {
                base,
                rule: Rule::Fixed,
                args: Vec::new(),
                record: None,
            },
        )
    }

    /// The charge point `e` is, if it is one.
    fn point_of(&self, e: &IdedExpr) -> Option<usize> {
        match &e.expr {
            Expr::Call(c) if c.func_name == CHARGE => match c.args.get(1).map(|a| &a.expr) {
                Some(Expr::Literal(LiteralValue::Int(i))) => usize::try_from(*i.inner()).ok(),
                _ => None,
            },
            _ => None,
        }
    }

    /// `e` (instrumented) with `cost` more charged when it is evaluated.
    fn extra(&mut self, e: IdedExpr, cost: u64) -> IdedExpr {
        match self.point_of(&e) {
            Some(i) => {
                self.points[i].base += cost;
                e
            }
            None => self.fixed(e, cost),
        }
    }

    /// `e` (instrumented) as an argument whose measure a sized call needs.
    fn argument(&mut self, e: IdedExpr, metric: Metric) -> (IdedExpr, Arg) {
        if let Expr::Literal(l) = &e.expr {
            if metric == Metric::Size {
                let m = literal_measure(l);
                return (e, Arg::Known(m));
            }
        }
        match self.point_of(&e) {
            Some(i) if self.points[i].record.is_none() => {
                self.points[i].record = Some(metric);
                (e, Arg::Recorded(i))
            }
            _ => {
                let i = self.points.len();
                let e = self.wrap(
                    e,
                    Point {
                        base: 0,
                        rule: Rule::Fixed,
                        args: Vec::new(),
                        record: Some(metric),
                    },
                );
                (e, Arg::Recorded(i))
            }
        }
    }

    fn node(&mut self, e: IdedExpr) -> IdedExpr {
        let id = e.id;
        match e.expr {
            Expr::Literal(_) | Expr::Unspecified => e,
            Expr::Ident(_) => self.fixed(e, 1),
            Expr::Select(mut s) => {
                let operand = std::mem::take(&mut *s.operand);
                *s.operand = self.node(operand);
                self.fixed(
                    IdedExpr {
                        id,
                        expr: Expr::Select(s),
                    },
                    1,
                )
            }
            Expr::List(_) | Expr::Map(_) if constant(&e) => e,
            Expr::List(mut l) => {
                l.elements = l.elements.into_iter().map(|e| self.node(e)).collect();
                self.fixed(
                    IdedExpr {
                        id,
                        expr: Expr::List(l),
                    },
                    LIST_CREATE,
                )
            }
            Expr::Map(mut m) => {
                for entry in &mut m.entries {
                    if let EntryExpr::MapEntry(me) = &mut entry.expr {
                        me.key = self.node(std::mem::take(&mut me.key));
                        me.value = self.node(std::mem::take(&mut me.value));
                    }
                }
                self.fixed(
                    IdedExpr {
                        id,
                        expr: Expr::Map(m),
                    },
                    MAP_CREATE,
                )
            }
            Expr::Struct(mut s) => {
                for entry in &mut s.entries {
                    if let EntryExpr::StructField(f) = &mut entry.expr {
                        f.value = self.node(std::mem::take(&mut f.value));
                    }
                }
                self.fixed(
                    IdedExpr {
                        id,
                        expr: Expr::Struct(s),
                    },
                    STRUCT_CREATE,
                )
            }
            Expr::Call(c) => self.call(id, c),
            Expr::Comprehension(c) => {
                let c = self.comprehension(*c);
                IdedExpr {
                    id,
                    expr: Expr::Comprehension(Box::new(c)),
                }
            }
        }
    }

    fn call(&mut self, id: u64, mut c: CallExpr) -> IdedExpr {
        match c.func_name.as_str() {
            // No cost of their own, as cel-go's `evalAnd`, `evalOr` and conditionals.
            operators::LOGICAL_AND | operators::LOGICAL_OR | operators::CONDITIONAL => {
                c.args = c.args.into_iter().map(|a| self.node(a)).collect();
                return IdedExpr {
                    id,
                    expr: Expr::Call(c),
                };
            }
            _ => {}
        }
        let (base, rule) = rule_of(&c);
        // A call of a namespaced function (`optional.of(x)`): its target is the name, which
        // must stay a name for the function to be found.
        let namespaced = c
            .target
            .as_ref()
            .is_some_and(|t| qualified_root(t) == Some("optional"));
        let sized = rule != Rule::Fixed;
        let metric = if rule == Rule::Traversal {
            Metric::Traversal
        } else {
            Metric::Size
        };
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
                    t
                };
                c.target = Some(Box::new(t));
            }
        }
        let mut instrumented = Vec::with_capacity(c.args.len());
        for a in std::mem::take(&mut c.args) {
            let a = self.node(a);
            if sized {
                let (a, arg) = self.argument(a, Metric::Size);
                args.push(arg);
                instrumented.push(a);
            } else {
                instrumented.push(a);
            }
        }
        c.args = instrumented;
        self.wrap(
            IdedExpr {
                id,
                expr: Expr::Call(c),
            },
            Point {
                base,
                rule,
                args,
                record: None,
            },
        )
    }

    fn comprehension(&mut self, mut c: ComprehensionExpr) -> ComprehensionExpr {
        let accu = c.accu_var.clone();
        let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if *n == accu);
        c.iter_range = self.node(std::mem::take(&mut c.iter_range));
        c.accu_init = self.node(std::mem::take(&mut c.accu_init));
        // `@result && p`, `@result || p` (`all`, `exists`): the crate folds errors as cel-go
        // when the step keeps this shape; `@result` is charged with `p`.
        if let Expr::Call(step) = &mut c.loop_step.expr {
            let logical = matches!(
                step.func_name.as_str(),
                operators::LOGICAL_AND | operators::LOGICAL_OR
            );
            if logical && step.target.is_none() && step.args.len() == 2 && is_accu(&step.args[0])
            {
                let p = std::mem::take(&mut step.args[1]);
                let p = self.node(p);
                step.args[1] = self.extra(p, 1);
                c.loop_cond = self.node(std::mem::take(&mut c.loop_cond));
                c.result = self.node(std::mem::take(&mut c.result));
                return c;
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
                let mut step = std::mem::take(&mut c.loop_step);
                if let Expr::Call(g) = &mut step.expr {
                    if guarded {
                        let guard = self.node(std::mem::take(&mut g.args[0]));
                        g.args[0] = self.extra(guard, 1);
                        if let Expr::Call(add) = &mut g.args[1].expr {
                            self.append(add);
                        }
                    } else {
                        self.append(g);
                    }
                }
                c.loop_step = step;
                c.iter_range = self.extra(std::mem::take(&mut c.iter_range), 1);
                return c;
            }
        }
        c.loop_cond = self.node(std::mem::take(&mut c.loop_cond));
        c.loop_step = self.node(std::mem::take(&mut c.loop_step));
        c.result = self.node(std::mem::take(&mut c.result));
        c
    }

    /// Instruments the `[f]` of `@result + [f]`, charging the step's cost with `f`.
    fn append(&mut self, add: &mut CallExpr) {
        if let Expr::List(l) = &mut add.args[1].expr {
            let elements = std::mem::take(&mut l.elements);
            let mut first = true;
            for e in elements {
                let e = self.node(e);
                let e = if first {
                    first = false;
                    self.extra(e, APPEND_STEP)
                } else {
                    e
                };
                l.elements.push(e);
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
