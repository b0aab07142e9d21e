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
pub(crate) fn go_float(f: f64) -> String {
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
pub(crate) fn evaluate(
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
pub(crate) const MAX_BRACKET_DEPTH: usize = 8;

/// The most `?` (ternary, `??`, `?.`) a condition may use: each is another alternative
/// the parser backtracks through, and together with brackets its time multiplies (a
/// 93-byte condition found by fuzzing, 8 brackets deep with 22 `?`, took 0.5 s; with at most
/// 8 `?` the same shapes parse within 10 ms). Argo's examples use none.
pub(crate) const MAX_QUESTION_MARKS: usize = 8;

/// Refuses a condition nested deeper than [`MAX_BRACKET_DEPTH`] or with more `?` than
/// [`MAX_QUESTION_MARKS`] (brackets and `?` inside string literals do not count).
fn check_depth(condition: &str) -> Result<(), String> {
    let (mut depth, mut deepest, mut questions) = (0usize, 0usize, 0usize);
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
                '?' => questions += 1,
                _ => {}
            },
        }
    }
    if questions > MAX_QUESTION_MARKS {
        return Err(format!(
            "the condition uses `?` {questions} times; canarysim reads at most {MAX_QUESTION_MARKS}"
        ));
    }
    if deepest > MAX_BRACKET_DEPTH {
        return Err(format!(
            "the condition nests `[` {deepest} deep; canarysim reads at most {MAX_BRACKET_DEPTH} levels"
        ));
    }
    Ok(())
}

/// The most numbers a condition's ranges (`a..b`) may hold together: expr's default memory
/// budget (`conf.MemoryBudget`, 1,000,000), past which Argo's evaluation fails too. The
/// Rust evaluator has no budget and builds the whole range: a 60-byte condition found by
/// fuzzing asked it for 890 million numbers (a 64 GB allocation).
pub(crate) const MAX_RANGE_NUMBERS: i128 = 1_000_000;

/// Refuses a range whose bounds are not integer literals (its size is known only once it
/// is built), and ranges holding more than [`MAX_RANGE_NUMBERS`] together (their sizes
/// multiplied, since one may be evaluated once per element of another).
fn check_ranges(condition: &str) -> Result<(), String> {
    let chars: Vec<char> = condition.chars().collect();
    let mut numbers: i128 = 1;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if matches!(c, '"' | '\'' | '`') => quote = Some(c),
            None if c == '.' && chars.get(i + 1) == Some(&'.') => {
                let bounds = range_start(&chars[..i]).zip(range_end(&chars[i + 2..]));
                let Some((start, end)) = bounds else {
                    return Err(
                        "canarysim evaluates a range (`a..b`) only between integer literals"
                            .to_string(),
                    );
                };
                numbers = numbers.saturating_mul((end - start + 1).max(1));
                if numbers > MAX_RANGE_NUMBERS {
                    return Err(format!(
                        "the condition's ranges would hold {numbers} numbers; expr's memory budget is {MAX_RANGE_NUMBERS}"
                    ));
                }
                i += 1;
            }
            None => {}
        }
        i += 1;
    }
    Ok(())
}

/// Word operators that bind looser than `..`: a literal beside one is the range's bound.
const LOOSER_WORDS: [&str; 8] = [
    "in",
    "not",
    "and",
    "or",
    "matches",
    "contains",
    "startsWith",
    "endsWith",
];

/// The integer literal just before `..` (with a unary minus), unless it is the end of a
/// larger operand (`2*3..`, `x1..`, `(1)..`), which binds tighter than the range.
fn range_start(before: &[char]) -> Option<i128> {
    let text: String = before.iter().collect();
    let text = text.trim_end();
    let digits = text.len() - text.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits > 30 {
        return None;
    }
    let value: i128 = text[text.len() - digits..].parse().ok()?;
    let rest = text[..text.len() - digits].trim_end();
    let (value, rest) = match rest.strip_suffix('-') {
        Some(sign) => (-value, sign.trim_end()),
        None => (value, rest),
    };
    let binds_tighter = |c: char| c.is_alphanumeric() || "_.)]+-*/%^?".contains(c);
    let word = rest
        .rsplit(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or("");
    if rest.ends_with(binds_tighter) && !rest.ends_with("..") && !LOOSER_WORDS.contains(&word) {
        // After `-`, an operand makes it a subtraction; otherwise an operator or a name
        // takes the literal into a larger operand.
        return None;
    }
    Some(value)
}

/// The integer literal just after `..` (with a unary minus), unless an operator that binds
/// tighter follows it (`..2*3`, `..2.5`, `..x`).
fn range_end(after: &[char]) -> Option<i128> {
    let text: String = after.iter().collect();
    let text = text.trim_start();
    let (sign, text) = match text.strip_prefix('-') {
        Some(rest) => (-1, rest.trim_start()),
        None => (1, text),
    };
    let digits = text.len() - text.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits > 30 {
        return None;
    }
    let value: i128 = text[..digits].parse().ok()?;
    let rest = text[digits..].trim_start();
    let binds_tighter = |c: char| c.is_alphanumeric() || "_.([+-*/%^?".contains(c);
    let word = rest
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or("");
    if rest.starts_with(binds_tighter) && !LOOSER_WORDS.contains(&word) {
        return None;
    }
    Some(sign * value)
}

/// The checks a condition passes before the expression library sees it.
fn check_bounds(condition: &str) -> Result<(), String> {
    check_depth(condition)?;
    check_ranges(condition)
}

/// One condition over `result`.
pub fn eval_condition(result: &ResultValue, condition: &str) -> Result<bool, String> {
    check_bounds(condition)?;
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
pub(crate) fn check_syntax(condition: &str) -> Result<(), String> {
    check_bounds(condition)?;
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
        // Found by fuzzing (analysis_query): 0.5 s in the parser, 8 brackets and 22 `?`.
        let slow = "sS??H??ss??H[r^p[s[s%o[s%o[s^0-s%o[s^0-t?H??ss??s[s%owAwm??if-t?H??ss??s[s%owAwm??if-tr_??Hei";
        assert_eq!(
            check_syntax(slow).unwrap_err(),
            "the condition uses `?` 22 times; canarysim reads at most 8"
        );
        assert_eq!(
            eval_condition(&list, "result[0] > 0.5 ? true : false"),
            Ok(true)
        );
        assert_eq!(eval_condition(&list, "(result[0] ?? 0) > 0.5"), Ok(true));
        assert!(check_depth("'????????????' == '' || result[0] > 0").is_ok());
    }

    #[test]
    fn ranges_are_bounded_by_expr_memory_budget() {
        // Found by fuzzing (analysis_query): a 64 GB allocation, the process aborted.
        let huge = "444444-888884444-444444-44+34445-4444444..444444-44+3444+3";
        let r = list(&[0.97]);
        let refused = eval_condition(&r, huge).unwrap_err();
        assert!(
            refused.contains("only between integer literals"),
            "{refused}"
        );
        assert_eq!(check_syntax(huge).unwrap_err(), refused);
        let too_many = eval_condition(&r, "len(0..1000000) > 0").unwrap_err();
        assert!(
            too_many.contains("would hold 1000001 numbers; expr's memory budget is 1000000"),
            "{too_many}"
        );
        // Nested, their sizes multiply.
        assert!(eval_condition(&r, "len(map(1..1000, {1..1001})) > 0").is_err());
        assert_eq!(eval_condition(&r, "len(-5..-1) == 5"), Ok(true));
        assert_eq!(eval_condition(&r, "len(1..1000000) == 1000000"), Ok(true));
        assert_eq!(
            eval_condition(&r, "3 in 1 .. 5 and result[0] > 0.5"),
            Ok(true)
        );
        for larger_operand in [
            "len(2*3..7) > 0",
            "len(1..2*3) > 0",
            "len(x1..3) > 0",
            "len(1..3.5) > 0",
        ] {
            assert!(
                eval_condition(&r, larger_operand).is_err(),
                "{larger_operand}"
            );
        }
        // Dots inside strings are not ranges.
        assert_eq!(
            eval_condition(&r, "'a..b' != '' && result[0] > 0"),
            Ok(true)
        );
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
