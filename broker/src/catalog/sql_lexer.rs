//! Tokens of the SQL subset, as `nom` parsers: every one skips the whitespace and comments
//! before it, so errors point at the token itself; and the error type that keeps the
//! furthest failure, turned into a [`SyntaxError`] with line and column.

use std::borrow::Cow;

use nom::bytes::complete::take_while;
use nom::error::{ErrorKind, ParseError as NomParseError};
use nom::IResult;
use thiserror::Error;

/// A syntax error: where and what.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("syntax error at line {line}, column {column}: {message}")]
pub struct SyntaxError {
    pub line: usize,
    pub column: usize,
    pub message: String,
    /// 1-based index of the statement it is in (0 when not parsing a script: a lone type).
    pub statement: usize,
    /// A statement kafluss does not run (`SELECT`), rather than malformed text.
    pub unsupported: bool,
}

/// Longest identifier or string literal, in bytes.
pub const MAX_TOKEN_LEN: usize = 64 * 1024;

/// The nom error: where parsing stopped and what it wanted there. `or` keeps the error that
/// got furthest, which is the one that explains the input best.
#[derive(Debug, Clone, PartialEq)]
pub struct RawError<'a> {
    pub(crate) at: &'a str,
    pub(crate) message: Cow<'static, str>,
    /// The message already says what was found (a semantic check), don't append it.
    pub(crate) complete: bool,
}

impl<'a> NomParseError<&'a str> for RawError<'a> {
    fn from_error_kind(input: &'a str, kind: ErrorKind) -> Self {
        RawError {
            at: input,
            message: Cow::Owned(format!("unexpected input ({})", kind.description())),
            complete: false,
        }
    }

    fn append(_input: &'a str, _kind: ErrorKind, other: Self) -> Self {
        other
    }

    fn or(self, other: Self) -> Self {
        if other.at.len() <= self.at.len() {
            other
        } else {
            self
        }
    }
}

pub(crate) type PResult<'a, T> = IResult<&'a str, T, RawError<'a>>;

pub(crate) fn expected<'a, T>(at: &'a str, what: impl Into<Cow<'static, str>>) -> PResult<'a, T> {
    Err(nom::Err::Error(RawError {
        at,
        message: what.into(),
        complete: false,
    }))
}

/// A failure that stops the whole parse (no alternative can do better).
pub(crate) fn fail<'a, T>(at: &'a str, message: impl Into<Cow<'static, str>>) -> PResult<'a, T> {
    Err(nom::Err::Failure(RawError {
        at,
        message: message.into(),
        complete: true,
    }))
}

#[cfg(test)]
thread_local! {
    /// Bytes the lexer looked at on this thread: what the linear-time test counts.
    pub(crate) static SCANNED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts `bytes` examined (tests only; nothing at run time).
#[inline]
pub(crate) fn scanned(bytes: usize) {
    #[cfg(test)]
    SCANNED.with(|count| count.set(count.get() + bytes as u64));
    #[cfg(not(test))]
    let _ = bytes;
}

/// Skips whitespace and comments. An unterminated `/*` is a failure.
pub(crate) fn ws(input: &str) -> PResult<'_, ()> {
    let mut rest = input;
    let result = loop {
        let trimmed = rest.trim_start();
        if let Some(comment) = trimmed.strip_prefix("--") {
            rest = comment.find('\n').map_or("", |end| &comment[end..]);
        } else if let Some(comment) = trimmed.strip_prefix("/*") {
            match comment.find("*/") {
                Some(end) => rest = &comment[end + 2..],
                None => {
                    scanned(input.len());
                    return fail(trimmed, "unterminated comment: '/*' without '*/'");
                }
            }
        } else {
            break Ok((trimmed, ()));
        }
    };
    scanned(input.len() - rest.trim_start().len() + 1);
    result
}

pub(crate) fn is_word_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

pub(crate) fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// A bare word (`[A-Za-z_][A-Za-z0-9_]*`) after whitespace.
pub(crate) fn word(input: &str) -> PResult<'_, &str> {
    let (input, ()) = ws(input)?;
    if !input.starts_with(is_word_start) {
        return expected(input, "a word");
    }
    let (rest, text) = take_while(is_word_char)(input)?;
    scanned(text.len());
    if text.len() > MAX_TOKEN_LEN {
        return fail(input, format!("identifier longer than {MAX_TOKEN_LEN} bytes"));
    }
    Ok((rest, text))
}

/// The keyword `kw`, case-insensitively, as a whole word.
pub(crate) fn keyword(kw: &'static str) -> impl Fn(&str) -> PResult<'_, ()> {
    move |input| {
        let (start, ()) = ws(input)?;
        match word(start) {
            Ok((rest, text)) if text.eq_ignore_ascii_case(kw) => Ok((rest, ())),
            _ => expected(start, kw),
        }
    }
}

/// All of `kws` in sequence, or nothing (then `false`). Used for `IF NOT EXISTS`: once the
/// first keyword matched, the others are required.
pub(crate) fn optional_keywords<'a>(input: &'a str, kws: &[&'static str]) -> PResult<'a, bool> {
    let Some((first, others)) = kws.split_first() else {
        return Ok((input, false));
    };
    let Ok((mut input, ())) = keyword(first)(input) else {
        return Ok((input, false));
    };
    for kw in others {
        (input, ()) = keyword(kw)(input)?;
    }
    Ok((input, true))
}

/// `c` after whitespace.
pub(crate) fn symbol(c: char) -> impl Fn(&str) -> PResult<'_, ()> {
    move |input| {
        let (input, ()) = ws(input)?;
        match input.strip_prefix(c) {
            Some(rest) => Ok((rest, ())),
            None => expected(input, format!("'{c}'")),
        }
    }
}

/// An identifier: a bare word or a backquoted name.
pub(crate) fn identifier(input: &str) -> PResult<'_, String> {
    let (start, ()) = ws(input)?;
    if let Some(body) = start.strip_prefix('`') {
        return quoted(start, body, '`', "backquoted identifier").and_then(|(rest, name)| {
            if name.is_empty() {
                fail(start, "empty identifier")
            } else {
                Ok((rest, name))
            }
        });
    }
    match word(start) {
        Ok((rest, text)) => Ok((rest, text.to_string())),
        Err(nom::Err::Error(_)) => expected(start, "an identifier"),
        Err(other) => Err(other),
    }
}

/// The body of a quoted token: `quote` ends it, a doubled `quote` stands for one.
pub(crate) fn quoted<'a>(
    start: &'a str,
    body: &'a str,
    quote: char,
    what: &'static str,
) -> PResult<'a, String> {
    let mut value = String::new();
    let mut rest = body;
    loop {
        let Some(end) = rest.find(quote) else {
            return fail(start, format!("unterminated {what}"));
        };
        value.push_str(&rest[..end]);
        rest = &rest[end + quote.len_utf8()..];
        if let Some(after) = rest.strip_prefix(quote) {
            value.push(quote);
            rest = after;
        } else {
            break;
        }
        if value.len() > MAX_TOKEN_LEN {
            return fail(start, format!("{what} longer than {MAX_TOKEN_LEN} bytes"));
        }
    }
    scanned(body.len() - rest.len());
    if value.len() > MAX_TOKEN_LEN {
        return fail(start, format!("{what} longer than {MAX_TOKEN_LEN} bytes"));
    }
    Ok((rest, value))
}

/// `'text'` with `''` for a quote.
pub(crate) fn string_literal(input: &str) -> PResult<'_, String> {
    let (start, ()) = ws(input)?;
    match start.strip_prefix('\'') {
        Some(body) => quoted(start, body, '\'', "string literal"),
        None => expected(start, "a string literal ('...')"),
    }
}

/// An unsigned integer of at most 10 digits that fits `u32`.
pub(crate) fn unsigned(input: &str) -> PResult<'_, u32> {
    let (start, ()) = ws(input)?;
    let (rest, digits) = take_while(|c: char| c.is_ascii_digit())(start)?;
    if digits.is_empty() {
        return expected(start, "a number");
    }
    match digits.parse::<u32>() {
        Ok(value) if digits.len() <= 10 => Ok((rest, value)),
        _ => fail(start, format!("number {digits} is too large")),
    }
}

/// `first (',' next)*` where each item is parsed by `item`.
pub(crate) fn comma_list<'a, T>(
    input: &'a str,
    mut item: impl FnMut(&'a str) -> PResult<'a, T>,
) -> PResult<'a, Vec<T>> {
    let (mut input, first) = item(input)?;
    let mut items = vec![first];
    while let Ok((rest, ())) = symbol(',')(input) {
        let (rest, next) = item(rest)?;
        items.push(next);
        input = rest;
    }
    Ok((input, items))
}

/// `'(' item (',' item)* ')'`.
pub(crate) fn parenthesized<'a, T>(
    input: &'a str,
    item: impl FnMut(&'a str) -> PResult<'a, T>,
) -> PResult<'a, Vec<T>> {
    let (input, ()) = symbol('(')(input)?;
    let (input, items) = comma_list(input, item)?;
    let (input, ()) = symbol(')')(input)?;
    Ok((input, items))
}

/// 1-based line and column (in characters) of `at`, a suffix of `script`.
fn position(script: &str, at: &str) -> (usize, usize) {
    let offset = script.len().saturating_sub(at.len());
    scanned(offset);
    let before = &script[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// What the input holds at `at`, for "expected X, found Y": a word, or one character; one
/// that prints as nothing or moves the cursor ([`is_invisible`]) is named by its code point
/// (`U+FEFF`), which a quoted raw character would hide.
pub(crate) fn found(at: &str) -> String {
    let Some(first) = at.chars().next() else {
        return "end of input".to_string();
    };
    if first == '\u{FEFF}' {
        return "U+FEFF (a byte order mark: one is skipped only at the very start of a script)".to_string();
    }
    if is_invisible(first) {
        return format!("U+{:04X} (an invisible character)", u32::from(first));
    }
    let token: String = if is_word_char(first) {
        at.chars().take_while(|c| is_word_char(*c)).take(40).collect()
    } else {
        first.to_string()
    };
    format!("'{token}'")
}

/// Control and whitespace characters and the usual invisible ones of Unicode (format
/// characters such as zero-width spaces, joiners, direction marks and the byte order mark,
/// variation selectors, fillers, tags).
pub(crate) fn is_invisible(c: char) -> bool {
    c.is_control()
        || c.is_whitespace()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{17B4}'
                | '\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF0}'..='\u{FFFB}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

pub(crate) fn syntax_error(script: &str, error: nom::Err<RawError<'_>>) -> SyntaxError {
    let raw = match error {
        nom::Err::Error(raw) | nom::Err::Failure(raw) => raw,
        nom::Err::Incomplete(_) => RawError {
            at: "",
            message: Cow::Borrowed("more input"),
            complete: false,
        },
    };
    let (line, column) = position(script, raw.at);
    let message = if raw.complete {
        raw.message.into_owned()
    } else {
        format!("expected {}, found {}", raw.message, found(raw.at))
    };
    SyntaxError {
        line,
        column,
        message,
        statement: 0,
        unsupported: false,
    }
}
