//! Better words for the parser's one vague error.
//!
//! `promql-parser` words most errors well ("unclosed left parenthesis", "expected type
//! matrix in call to function 'rate', got vector"), but a plain syntax error is only
//! "invalid promql query", with no position. This module asks the same parser about
//! prefixes of the query to find where it stops making sense: a query that some
//! completion would make grammatical ends too early ("unexpected end of input", as
//! Prometheus says); otherwise the error is at the first token after the longest prefix
//! that some completion would make grammatical. It never parses anything itself.

use promql_parser::parser;

/// The parser's message for any syntax error it has no better words for.
const VAGUE: &str = "invalid promql query";

/// Queries longer than this keep the parser's message: the search parses each prefix a few
/// times, and an error message is not worth more than a few milliseconds.
const MAX_DIAGNOSED_LEN: usize = 2_000;

/// What may follow a prefix that is cut at a token boundary to make it a whole query:
/// nothing, an operand, a parenthesized operand, a grouping and its operand, a duration,
/// the rest of an argument list. The brackets the prefix left open are closed after it.
const COMPLETIONS: [&str; 10] = [
    "", " 1", " x", " (x)", " (a) (x)", " (a) x", " 5m", ", x", " 1, x", ", 1, 2",
];

/// The message for `query`'s parse error `message`.
pub(super) fn describe(query: &str, message: String) -> String {
    if message != VAGUE || query.len() > MAX_DIAGNOSED_LEN {
        return message;
    }
    if completable(query) {
        return "unexpected end of input".to_string();
    }
    let boundaries = query
        .char_indices()
        .map(|(i, _)| i)
        .filter(|&i| i > 0 && is_boundary(query, i));
    let mut boundaries: Vec<usize> = boundaries.collect();
    boundaries.reverse();
    for cut in boundaries {
        if completable(&query[..cut]) {
            let rest = query[cut..].trim_start();
            let at = query.len() - rest.len();
            let (line, column) = position(query, at);
            return format!("{line}:{column}: unexpected {:?}", token(rest));
        }
    }
    message
}

/// Whether `prefix`, followed by one of [`COMPLETIONS`] and the brackets it left open, is
/// grammatical.
fn completable(prefix: &str) -> bool {
    let Some(closers) = open_brackets(prefix) else {
        return false;
    };
    COMPLETIONS
        .iter()
        .any(|c| grammatical(&format!("{prefix}{c}{closers}")))
}

/// Whether `query` lexes and parses, leaving aside errors of type or arity ("expected 2
/// argument(s)"): those come after the grammar accepted it.
fn grammatical(query: &str) -> bool {
    parser::lexer(query).is_ok()
        && match parser::parse(query) {
            Ok(_) => true,
            Err(message) => message != VAGUE,
        }
}

/// A cut before whitespace or next to a delimiter or operator character: where a token can
/// end.
fn is_boundary(query: &str, i: usize) -> bool {
    let delimiter = |c: char| "(){}[],+-*/%^=!<>~@\"'`".contains(c) || c.is_whitespace();
    let before = query[..i].chars().next_back();
    let after = query[i..].chars().next();
    before.is_some_and(delimiter) || after.is_some_and(delimiter)
}

/// The closing brackets for those `prefix` left open (outside string literals), innermost
/// first; `None` inside an unterminated string or after an unmatched closing bracket.
fn open_brackets(prefix: &str) -> Option<String> {
    let mut stack = Vec::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in prefix.chars() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' && q != '`' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' | '`' => quote = Some(c),
            '(' => stack.push(')'),
            '{' => stack.push('}'),
            '[' => stack.push(']'),
            ')' | '}' | ']' => {
                let open = stack.pop();
                if open != Some(c) {
                    return None;
                }
            }
            _ => {}
        }
    }
    if quote.is_some() {
        return None;
    }
    Some(stack.into_iter().rev().collect())
}

/// The token `rest` starts with, roughly: a word, a quoted string or one character.
fn token(rest: &str) -> String {
    let mut chars = rest.chars();
    match chars.next() {
        None => String::new(),
        Some(q @ ('"' | '\'' | '`')) => {
            let end = rest[1..].find(q).map_or(rest.len(), |i| i + 2);
            rest[..end].to_string()
        }
        Some(c) if c.is_alphanumeric() || c == '_' || c == ':' || c == '.' => rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | ':' | '.'))
            .collect(),
        Some(c) => c.to_string(),
    }
}

/// Line and column (both from 1, the column in characters) of byte `at` in `query`.
pub(super) fn position(query: &str, at: usize) -> (usize, usize) {
    let before = &query[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}
