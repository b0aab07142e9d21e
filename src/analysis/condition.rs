//! `successCondition` / `failureCondition`: Argo's expressions (the expr language, through
//! the `expr-lang` crate) over a measurement's `result`, with the functions Argo adds to
//! the environment (`utils/evaluate`): `isNaN`, `isInf`, `asInt`, `asFloat`, `isNil`,
//! `default`.

use expr::{Context, Environment, Value};

use super::Phase;

/// A measurement's result as a provider returns it: Prometheus gives a vector's values as
/// a list (`result[0]`) or a scalar; job and web results are what the scenario scripts.
#[derive(Debug, Clone, PartialEq)]
pub enum ResultValue {
    Number(f64),
    List(Vec<f64>),
    Text(String),
    Bool(bool),
    Nil,
}

impl ResultValue {
    fn to_expr(&self) -> Value {
        match self {
            ResultValue::Number(f) => Value::Float(*f),
            ResultValue::List(v) => Value::Array(v.iter().map(|f| Value::Float(*f)).collect()),
            ResultValue::Text(s) => Value::String(s.clone()),
            ResultValue::Bool(b) => Value::Bool(*b),
            ResultValue::Nil => Value::Nil,
        }
    }

    /// The measurement's `value` as Argo records it: `[0.95,1]` for a vector, `0.95` for a
    /// scalar (Go's shortest float formatting: `NaN`, `+Inf`).
    pub fn recorded(&self) -> String {
        match self {
            ResultValue::Number(f) => go_float(*f),
            ResultValue::List(v) => format!(
                "[{}]",
                v.iter().map(|f| go_float(*f)).collect::<Vec<_>>().join(",")
            ),
            ResultValue::Text(s) => s.clone(),
            ResultValue::Bool(b) => b.to_string(),
            ResultValue::Nil => "<nil>".into(),
        }
    }
}

/// `strconv.FormatFloat(f, 'f', -1, 64)` as Prometheus' `SampleValue.String` prints it.
pub fn go_float(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f.is_infinite() {
        if f > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{f}")
    }
}

/// `EvaluateResult`: the measurement's phase from the two conditions. Neither given:
/// Successful. Only success: Failed when it does not hold. Only failure: Successful when it
/// does not hold. Both: Failed if failure holds, Successful if success holds, else
/// Inconclusive. An expression that does not evaluate to a boolean is an Error.
pub fn evaluate(
    result: &ResultValue,
    success: Option<&str>,
    failure: Option<&str>,
) -> Result<Phase, String> {
    let eval = |kind: &str, c: &str| {
        eval_condition(result, c).map_err(|e| {
            // `formatEvalError`: an empty result says so rather than how the index failed.
            if matches!(result, ResultValue::Nil)
                || matches!(result, ResultValue::List(v) if v.is_empty())
            {
                format!(
                    "could not evaluate {kind} \"{c}\": metric result is nil or empty: no data returned from the metric provider"
                )
            } else {
                format!("could not evaluate {kind} \"{c}\": {e}")
            }
        })
    };
    let success_holds = success.map(|c| eval("successCondition", c)).transpose()?;
    let failure_holds = failure.map(|c| eval("failureCondition", c)).transpose()?;
    let (success_holds, failure_holds) = match (success_holds, failure_holds) {
        (None, None) => return Ok(Phase::Successful),
        (Some(s), None) => (s, !s),
        (None, Some(f)) => (!f, f),
        (Some(s), Some(f)) => (s, f),
    };
    Ok(if failure_holds {
        Phase::Failed
    } else if !success_holds {
        Phase::Inconclusive
    } else {
        Phase::Successful
    })
}

/// The deepest nesting of `[` (index, member access, array literal) a condition may have:
/// the expression parser's time doubles with each level (16 levels take 0.25 s, and a
/// 76-byte condition found by fuzzing took 51 s), and Argo's examples use one or two.
pub const MAX_BRACKET_DEPTH: usize = 8;

/// Refuses a condition nested deeper than [`MAX_BRACKET_DEPTH`] (brackets inside string
/// literals do not count).
fn check_depth(condition: &str) -> Result<(), String> {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in condition.chars() {
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '"' | '\'' | '`' => quote = Some(c),
                '[' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                ']' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
    }
    if deepest > MAX_BRACKET_DEPTH {
        return Err(format!(
            "the condition nests `[` {deepest} deep; canarysim reads at most {MAX_BRACKET_DEPTH} levels"
        ));
    }
    Ok(())
}

/// One condition over `result`.
pub fn eval_condition(result: &ResultValue, condition: &str) -> Result<bool, String> {
    check_depth(condition)?;
    let env = environment(result);
    let mut ctx = Context::default();
    ctx.insert("result".to_string(), result.to_expr());
    match env.eval(condition, &ctx) {
        Ok(Value::Bool(b)) => Ok(b),
        Ok(other) => Err(format!("expected bool, but got {}", go_type(&other))),
        Err(e) => Err(e.to_string()),
    }
}

/// Checks that a condition parses (at validation, before any measurement).
pub fn check_syntax(condition: &str) -> Result<(), String> {
    check_depth(condition)?;
    expr::compile(condition)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn environment(result: &ResultValue) -> Environment<'static> {
    let mut env = Environment::new();
    env.add_function("isNaN", |c| match c.args.as_slice() {
        [Value::Float(f)] => Ok(Value::Bool(f.is_nan())),
        [Value::Integer(_)] => Ok(Value::Bool(false)),
        [other] => Err(format!("reflect: Call using {} as type float64", go_type(other)).into()),
        _ => Err("isNaN takes one argument".to_string().into()),
    });
    env.add_function("isInf", |c| match c.args.as_slice() {
        [Value::Float(f)] => Ok(Value::Bool(f.is_infinite())),
        [Value::Integer(_)] => Ok(Value::Bool(false)),
        [other] => Err(format!("reflect: Call using {} as type float64", go_type(other)).into()),
        _ => Err("isInf takes one argument".to_string().into()),
    });
    env.add_function("asInt", |c| match c.args.as_slice() {
        [Value::Integer(i)] => Ok(Value::Integer(*i)),
        [Value::Float(f)] => Ok(Value::Integer(*f as i64)),
        [Value::String(s)] => s
            .trim()
            .parse::<i64>()
            .map(Value::Integer)
            .map_err(|e| format!("strconv.ParseInt: parsing {s:?}: {e}").into()),
        [other] => Err(format!("asInt: cannot convert {}", go_type(other)).into()),
        _ => Err("asInt takes one argument".to_string().into()),
    });
    env.add_function("asFloat", |c| match c.args.as_slice() {
        [Value::Integer(i)] => Ok(Value::Float(*i as f64)),
        [Value::Float(f)] => Ok(Value::Float(*f)),
        [Value::String(s)] => s
            .trim()
            .parse::<f64>()
            .map(Value::Float)
            .map_err(|e| format!("strconv.ParseFloat: parsing {s:?}: {e}").into()),
        [other] => Err(format!("asFloat: cannot convert {}", go_type(other)).into()),
        _ => Err("asFloat takes one argument".to_string().into()),
    });
    let is_nil = matches!(result, ResultValue::Nil);
    env.add_function("isNil", move |_| Ok(Value::Bool(is_nil)));
    let current = result.to_expr();
    env.add_function("default", move |c| match c.args.as_slice() {
        [fallback] if is_nil => Ok(fallback.clone()),
        [_] => Ok(current.clone()),
        _ => Err("default takes one argument".to_string().into()),
    });
    env
}

/// Go's name of a value's type, for error messages.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Integer(_) => "int",
        Value::Float(_) => "float64",
        Value::Bool(_) => "bool",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Map(_) => "map[string]interface {}",
        Value::Nil => "<nil>",
        _ => "interface {}",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(v: &[f64]) -> ResultValue {
        ResultValue::List(v.to_vec())
    }

    #[test]
    fn brackets_nested_beyond_the_bound_are_refused_before_the_parser_sees_them() {
        // Found by fuzzing (analysis_query): 51 s in the expression parser.
        let slow = "s[startsWith[B[a[u[[[h[B[a[u[[[_[[[[a[a[_[ith[B[a[u[[[_[[[[a[a[all[u[[[[X[(r";
        let list = ResultValue::List(vec![0.97]);
        let refused = eval_condition(&list, slow).unwrap_err();
        assert!(
            refused.contains("nests `[` 38 deep; canarysim reads at most 8 levels"),
            "{refused}"
        );
        assert_eq!(check_syntax(slow).unwrap_err(), refused);
        // Eight levels are read; brackets in string literals do not count.
        assert_eq!(eval_condition(&list, "result[0] >= 0.95"), Ok(true));
        let nested8 = format!("{}0{} == 0", "[".repeat(8), "]".repeat(8));
        assert!(check_depth(&nested8).is_ok());
        assert!(check_depth(&format!("[{nested8}]")).is_err());
        assert!(check_depth(&format!("result[0] > 0 || \"{}\" == ''", "[".repeat(40))).is_ok());
    }

    #[test]
    fn argo_documented_conditions() {
        let r = list(&[0.97]);
        assert_eq!(eval_condition(&r, "result[0] >= 0.95"), Ok(true));
        assert_eq!(
            eval_condition(&list(&[0.9]), "result[0] >= 0.95"),
            Ok(false)
        );
        assert_eq!(eval_condition(&r, "len(result) > 0"), Ok(true));
        assert_eq!(eval_condition(&list(&[]), "len(result) > 0"), Ok(false));
        assert_eq!(
            eval_condition(&list(&[120.0, 480.0]), "all(result, {# < 500})"),
            Ok(true)
        );
        assert_eq!(
            eval_condition(&list(&[120.0, 520.0]), "all(result, {# < 500})"),
            Ok(false)
        );
        assert_eq!(
            eval_condition(&list(&[f64::NAN]), "isNaN(result[0])"),
            Ok(true)
        );
        assert_eq!(
            eval_condition(&ResultValue::Number(f64::NAN), "isNaN(result)"),
            Ok(true)
        );
        assert_eq!(
            eval_condition(&ResultValue::Text("3".into()), "asInt(result) == 3"),
            Ok(true)
        );
        assert_eq!(eval_condition(&ResultValue::Nil, "isNil()"), Ok(true));
        assert_eq!(
            eval_condition(&ResultValue::Nil, "default(0) == 0"),
            Ok(true)
        );
    }

    #[test]
    fn a_nan_fails_a_comparison_and_an_empty_vector_errors_on_index() {
        assert_eq!(
            eval_condition(&list(&[f64::NAN]), "result[0] >= 0.95"),
            Ok(false)
        );
        assert!(eval_condition(&list(&[]), "result[0] >= 0.95").is_err());
        // isNaN on the whole vector: Go's reflect refuses the []float64.
        assert!(eval_condition(&list(&[f64::NAN]), "isNaN(result)").is_err());
    }

    #[test]
    fn phases_combine_as_argo_combines_them() {
        let r = list(&[0.9]);
        let ok = Some("result[0] >= 0.95");
        let bad = Some("result[0] < 0.8");
        assert_eq!(evaluate(&r, None, None), Ok(Phase::Successful));
        assert_eq!(evaluate(&r, ok, None), Ok(Phase::Failed));
        assert_eq!(evaluate(&r, None, bad), Ok(Phase::Successful));
        // 0.9: neither ≥ 0.95 nor < 0.8.
        assert_eq!(evaluate(&r, ok, bad), Ok(Phase::Inconclusive));
        assert_eq!(evaluate(&list(&[0.7]), ok, bad), Ok(Phase::Failed));
        assert_eq!(evaluate(&list(&[0.99]), ok, bad), Ok(Phase::Successful));
        assert_eq!(
            evaluate(&r, Some("result[0] + 1"), None),
            Err("could not evaluate successCondition \"result[0] + 1\": expected bool, but got float64".into())
        );
        assert_eq!(
            evaluate(&list(&[]), Some("result[0] >= 0.95"), None),
            Err("could not evaluate successCondition \"result[0] >= 0.95\": metric result is nil or empty: no data returned from the metric provider".into())
        );
    }

    #[test]
    fn values_are_recorded_as_argo_records_them() {
        assert_eq!(list(&[0.95, 1.0]).recorded(), "[0.95,1]");
        assert_eq!(list(&[f64::NAN]).recorded(), "[NaN]");
        assert_eq!(list(&[]).recorded(), "[]");
        assert_eq!(ResultValue::Number(f64::INFINITY).recorded(), "+Inf");
    }
}
