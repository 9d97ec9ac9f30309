//! JSON lexical limits and errors; and, for tests only (the reference parser of
//! `json_reference`), the lexical pre-pass over a JSON value before simd-json parses it.
//!
//! simd-json parses numbers into f64/i64/u64 and refuses what does not fit (`1e309`, integers
//! beyond 64 bits), but DECIMAL and FLOAT/DOUBLE need each number's exact source text and an
//! out-of-range number is a conversion failure (rescuable), not invalid JSON. So this pass
//! copies the value into simd-json's padded input, records the span of every number token in
//! document order and replaces the token by `0` and spaces; the converter then pairs the
//! n-th number node of the tape with the n-th span. The same pass enforces the rules that
//! simd-json does not: nesting depth, unpaired surrogates, control characters in strings and
//! the strict number grammar (the replaced tokens are no longer seen by simd-json).

use std::fmt;

/// Deepest container nesting below the JSON root object. The root does not count, as in the
/// schema rule (a top-level field is depth 0), so a table at the schema depth limit can be
/// filled: `{"a":[[1]]}` has depth 2.
pub const MAX_JSON_DEPTH: usize = 64;

#[cfg(test)]
/// Bytes of padding simd-json needs after the document.
pub(crate) const PADDING: usize = simd_json::INPUT_PADDING;

#[cfg(test)]
/// Source span (byte offsets into the original value) of one number token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub start: u32,
    pub end: u32,
}

/// A lexical error found by the pre-pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LexError {
    pub offset: usize,
    pub kind: LexErrorKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LexErrorKind {
    #[cfg(test)]
    TooLarge,
    TooDeep,
    BadNumber,
    ControlCharacter,
    BadEscape,
    UnpairedSurrogate,
    UnterminatedString,
}

impl fmt::Display for LexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            #[cfg(test)]
            LexErrorKind::TooLarge => "value larger than 4 GiB",
            LexErrorKind::TooDeep => "nesting deeper than 64 levels below the root",
            LexErrorKind::BadNumber => "malformed number",
            LexErrorKind::ControlCharacter => "unescaped control character in string",
            LexErrorKind::BadEscape => "invalid escape sequence",
            LexErrorKind::UnpairedSurrogate => "unpaired UTF-16 surrogate escape",
            LexErrorKind::UnterminatedString => "unterminated string",
        };
        write!(f, "{what} at byte {}", self.offset)
    }
}

#[cfg(test)]
/// Copies `input` into `padded` (resized to `input.len() + PADDING`), with every number token
/// replaced by `0` and spaces, and pushes each token's span to `numbers` (cleared first).
pub(crate) fn prepare(input: &[u8], padded: &mut Vec<u8>, numbers: &mut Vec<Span>) -> Result<(), LexError> {
    if u32::try_from(input.len()).is_err() {
        return Err(LexError {
            offset: 0,
            kind: LexErrorKind::TooLarge,
        });
    }
    numbers.clear();
    padded.clear();
    padded.extend_from_slice(input);
    padded.resize(input.len() + PADDING, b' ');
    let mut depth = 0usize;
    let mut i = 0usize;
    let len = input.len();
    while i < len {
        match input[i] {
            b'"' => i = skip_string(input, i + 1)?,
            b'{' | b'[' => {
                depth += 1;
                // The root container is depth 1 here; below it MAX_JSON_DEPTH more may nest.
                if depth > MAX_JSON_DEPTH + 1 {
                    return Err(LexError {
                        offset: i,
                        kind: LexErrorKind::TooDeep,
                    });
                }
                i += 1;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < len && matches!(input[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
                    i += 1;
                }
                if !is_json_number(&input[start..i]) {
                    return Err(LexError {
                        offset: start,
                        kind: LexErrorKind::BadNumber,
                    });
                }
                padded[start] = b'0';
                padded[start + 1..i].fill(b' ');
                // Both fit: the input length was checked against u32 above.
                numbers.push(Span {
                    start: start as u32,
                    end: i as u32,
                });
            }
            _ => i += 1,
        }
    }
    Ok(())
}

#[cfg(test)]
/// Skips a string body starting after its opening quote; returns the index after the
/// closing quote.
fn skip_string(input: &[u8], mut i: usize) -> Result<usize, LexError> {
    let err = |offset, kind| Err(LexError { offset, kind });
    while i < input.len() {
        match input[i] {
            b'"' => return Ok(i + 1),
            b'\\' => match input.get(i + 1) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                Some(b'u') => {
                    let Some(unit) = hex4(input, i + 2) else {
                        return err(i, LexErrorKind::BadEscape);
                    };
                    match unit {
                        0xD800..=0xDBFF => {
                            let low = if input.get(i + 6) == Some(&b'\\') && input.get(i + 7) == Some(&b'u') {
                                hex4(input, i + 8)
                            } else {
                                None
                            };
                            if !matches!(low, Some(0xDC00..=0xDFFF)) {
                                return err(i, LexErrorKind::UnpairedSurrogate);
                            }
                            i += 12;
                        }
                        0xDC00..=0xDFFF => return err(i, LexErrorKind::UnpairedSurrogate),
                        _ => i += 6,
                    }
                }
                _ => return err(i, LexErrorKind::BadEscape),
            },
            0x00..=0x1F => return err(i, LexErrorKind::ControlCharacter),
            _ => i += 1,
        }
    }
    err(input.len(), LexErrorKind::UnterminatedString)
}

#[cfg(test)]
fn hex4(input: &[u8], at: usize) -> Option<u16> {
    let digits = input.get(at..at + 4)?;
    let mut unit = 0u16;
    for &d in digits {
        let v = (d as char).to_digit(16)?;
        unit = (unit << 4) | v as u16;
    }
    Some(unit)
}

#[cfg(test)]
/// RFC 8259 number grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
pub(crate) fn is_json_number(token: &[u8]) -> bool {
    let mut i = 0;
    if token.first() == Some(&b'-') {
        i += 1;
    }
    match token.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            while matches!(token.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
        }
        _ => return false,
    }
    if token.get(i) == Some(&b'.') {
        i += 1;
        let digits = i;
        while matches!(token.get(i), Some(b'0'..=b'9')) {
            i += 1;
        }
        if i == digits {
            return false;
        }
    }
    if matches!(token.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(token.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let digits = i;
        while matches!(token.get(i), Some(b'0'..=b'9')) {
            i += 1;
        }
        if i == digits {
            return false;
        }
    }
    i == token.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(input: &str) -> Result<(String, Vec<String>), LexErrorKind> {
        let mut padded = Vec::new();
        let mut numbers = Vec::new();
        prepare(input.as_bytes(), &mut padded, &mut numbers).map_err(|e| e.kind)?;
        assert_eq!(padded.len(), input.len() + PADDING);
        let texts = numbers
            .iter()
            .map(|s| input[s.start as usize..s.end as usize].to_string())
            .collect();
        Ok((String::from_utf8(padded[..input.len()].to_vec()).unwrap(), texts))
    }

    #[test]
    fn numbers_are_recorded_and_blanked() {
        let (padded, texts) = run(r#"{"a":-12.5e+3,"b":"1\"2","c":[0,1e309]}"#).unwrap();
        assert_eq!(texts, ["-12.5e+3", "0", "1e309"]);
        assert_eq!(padded, r#"{"a":0       ,"b":"1\"2","c":[0,0    ]}"#);
    }

    #[test]
    fn number_grammar_is_strict() {
        for good in [
            "0",
            "-0",
            "1.5",
            "10e-3",
            "1E+2",
            "123456789012345678901234567890",
        ] {
            assert!(is_json_number(good.as_bytes()), "{good}");
        }
        for bad in [
            "01", "-", "1.", ".5", "1e", "1e+", "+1", "--1", "1-2", "0x1", "1.2.3",
        ] {
            assert!(!is_json_number(bad.as_bytes()), "{bad}");
        }
        assert_eq!(run(r#"{"a":01}"#).unwrap_err(), LexErrorKind::BadNumber);
    }

    #[test]
    fn surrogates_must_pair() {
        assert!(run(r#"{"a":"\ud83d\ude00"}"#).is_ok());
        assert!(run(r#"{"a":"\uD83D\uDE00x"}"#).is_ok());
        for bad in [
            r#"{"a":"\ud83d"}"#,
            r#"{"a":"\ud83dx"}"#,
            r#"{"a":"\ude00"}"#,
            r#"{"a":"\ud83d\u0041"}"#,
            r#"{"\udc00":1}"#,
        ] {
            assert_eq!(run(bad).unwrap_err(), LexErrorKind::UnpairedSurrogate, "{bad}");
        }
    }

    #[test]
    fn string_lexing_errors() {
        assert_eq!(
            run("{\"a\":\"x\ny\"}").unwrap_err(),
            LexErrorKind::ControlCharacter
        );
        assert_eq!(run(r#"{"a":"\x"}"#).unwrap_err(), LexErrorKind::BadEscape);
        assert_eq!(run(r#"{"a":"\u12"}"#).unwrap_err(), LexErrorKind::BadEscape);
        assert_eq!(run(r#"{"a":"abc"#).unwrap_err(), LexErrorKind::UnterminatedString);
    }

    #[test]
    fn depth_limit_excludes_the_root() {
        let ok = format!("{{\"a\":{}{}}}", "[".repeat(64), "]".repeat(64));
        assert!(run(&ok).is_ok());
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(65), "]".repeat(65));
        assert_eq!(run(&deep).unwrap_err(), LexErrorKind::TooDeep);
        // Brackets inside strings do not count.
        let quoted = format!("{{\"a\":\"{}\"}}", "[".repeat(100));
        assert!(run(&quoted).is_ok());
    }
}
