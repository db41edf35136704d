//! Python's printf-style `format % values`: `%s` (str), `%r`/`%a` (repr), `%d`/`%i`/`%u`,
//! `%x`/`%X`/`%o`, `%f`/`%F`, `%e`/`%E`, `%g`/`%G`, `%c` and `%%`, with `%(key)s` from a
//! dict, the flags `-`, `+`, space, `0` and `#`, width and precision (`*` included), and
//! Python's errors for too many or too few values. The rewrite in [`super::percent`] calls it.

use super::python;
use minijinja::value::{Rest, ValueKind};
use minijinja::{Error, ErrorKind, Value};

/// The `percent_format` filter: `format % args`, a tuple's items as `args`, any other operand
/// as the one argument.
pub fn percent_format(format: &str, args: Rest<Value>) -> Result<String, Error> {
    let args = args.0;
    // A single dict serves `%(key)s` lookups.
    let mapping = match &args[..] {
        [one] if one.kind() == ValueKind::Map => Some(one.clone()),
        _ => None,
    };
    let mut values = args.into_iter();
    let mut out = String::new();
    let mut chars = format.chars().peekable();
    let mut used_mapping = false;
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = Spec::default();
        let mut keyed = None;
        if chars.peek() == Some(&'(') {
            chars.next();
            let mut key = String::new();
            let mut depth = 1;
            for k in chars.by_ref() {
                match k {
                    '(' => depth += 1,
                    ')' if depth == 1 => break,
                    ')' => depth -= 1,
                    _ => {}
                }
                key.push(k);
            }
            let Some(mapping) = &mapping else {
                return Err(type_error("format requires a mapping"));
            };
            used_mapping = true;
            keyed = Some(
                mapping
                    .get_item(&Value::from(key.as_str()))
                    .ok()
                    .filter(|v| !v.is_undefined())
                    .ok_or_else(|| {
                        Error::new(ErrorKind::InvalidOperation, format!("KeyError: '{key}'"))
                    })?,
            );
        }
        while let Some(&flag) = chars.peek() {
            match flag {
                '-' => spec.left = true,
                '+' => spec.plus = true,
                ' ' => spec.space = true,
                '0' => spec.zero = true,
                '#' => spec.alternate = true,
                _ => break,
            }
            chars.next();
        }
        spec.width = number(&mut chars, &mut values)?;
        if chars.peek() == Some(&'.') {
            chars.next();
            spec.precision = Some(number(&mut chars, &mut values)?.unwrap_or(0));
        }
        while matches!(chars.peek(), Some('h' | 'l' | 'L')) {
            chars.next();
        }
        let conversion = chars.next().ok_or_else(|| {
            Error::new(ErrorKind::InvalidOperation, "ValueError: incomplete format")
        })?;
        if conversion == '%' {
            out.push('%');
            continue;
        }
        let value = match keyed {
            Some(value) => value,
            None if used_mapping => return Err(type_error("format requires a mapping")),
            None => values
                .next()
                .ok_or_else(|| type_error("not enough arguments for format string"))?,
        };
        out.push_str(&spec.convert(conversion, &value)?);
    }
    if values.next().is_some() && !used_mapping && mapping.is_none() {
        return Err(type_error(
            "not all arguments converted during string formatting",
        ));
    }
    Ok(out)
}

fn type_error(message: &str) -> Error {
    Error::new(ErrorKind::InvalidOperation, format!("TypeError: {message}"))
}

/// A width or precision: digits, `*` (the next value) or nothing.
fn number(
    chars: &mut std::iter::Peekable<std::str::Chars>,
    values: &mut std::vec::IntoIter<Value>,
) -> Result<Option<usize>, Error> {
    if chars.peek() == Some(&'*') {
        chars.next();
        let value = values
            .next()
            .ok_or_else(|| type_error("not enough arguments for format string"))?;
        let n = i64::try_from(value).map_err(|_| type_error("* wants int"))?;
        return Ok(Some(n.unsigned_abs() as usize));
    }
    let mut digits = String::new();
    while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
        digits.push(d);
        chars.next();
    }
    Ok(digits.parse().ok())
}

#[derive(Default)]
struct Spec {
    left: bool,
    plus: bool,
    space: bool,
    zero: bool,
    alternate: bool,
    width: Option<usize>,
    precision: Option<usize>,
}

impl Spec {
    fn convert(&self, conversion: char, value: &Value) -> Result<String, Error> {
        let text = match conversion {
            's' | 'r' | 'a' => {
                let text = if conversion == 's' {
                    python::str(value)
                } else {
                    python::repr(value)
                };
                let text = match self.precision {
                    Some(p) => text.chars().take(p).collect(),
                    None => text,
                };
                return Ok(self.pad(String::new(), text, false));
            }
            'c' => {
                let c = match value.as_str() {
                    Some(s) if s.chars().count() == 1 => s.to_owned(),
                    _ => i64::try_from(value.clone())
                        .ok()
                        .and_then(|n| u32::try_from(n).ok())
                        .and_then(char::from_u32)
                        .map(String::from)
                        .ok_or_else(|| type_error("%c requires an int or a unicode character"))?,
                };
                return Ok(self.pad(String::new(), c, false));
            }
            'd' | 'i' | 'u' => {
                let n = real(value, conversion)?;
                let n = if n.is_finite() {
                    i128::try_from(value.clone()).unwrap_or(n.trunc() as i128)
                } else {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "OverflowError: cannot convert float infinity or nan to integer",
                    ));
                };
                return Ok(self.signed(n < 0, n.unsigned_abs().to_string()));
            }
            'x' | 'X' | 'o' => {
                let n = integer(value, conversion)?;
                let (digits, prefix) = match conversion {
                    'x' => (format!("{:x}", n.unsigned_abs()), "0x"),
                    'X' => (format!("{:X}", n.unsigned_abs()), "0X"),
                    _ => (format!("{:o}", n.unsigned_abs()), "0o"),
                };
                let digits = match self.alternate {
                    true => format!("{prefix}{digits}"),
                    false => digits,
                };
                return Ok(self.signed(n < 0, digits));
            }
            'f' | 'F' | 'e' | 'E' | 'g' | 'G' => {
                let f = real(value, conversion)?;
                let precision = self.precision.unwrap_or(6);
                let digits = if !f.is_finite() {
                    let word = if f.is_nan() { "nan" } else { "inf" };
                    match conversion.is_ascii_uppercase() {
                        true => word.to_ascii_uppercase(),
                        false => word.to_owned(),
                    }
                } else {
                    match conversion {
                        'f' | 'F' => format!("{:.*}", precision, f.abs()),
                        'e' | 'E' => exponent(f.abs(), precision, conversion == 'E'),
                        _ => general(f.abs(), precision, conversion == 'G', self.alternate),
                    }
                };
                return Ok(self.signed(f.is_sign_negative() && !f.is_nan(), digits));
            }
            other => other,
        };
        Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("ValueError: unsupported format character '{text}'"),
        ))
    }

    /// A number's digits with its sign, padded (with zeros after the sign under `0`).
    fn signed(&self, negative: bool, digits: String) -> String {
        let sign = match (negative, self.plus, self.space) {
            (true, ..) => "-",
            (false, true, _) => "+",
            (false, false, true) => " ",
            _ => "",
        };
        self.pad(sign.to_owned(), digits, self.zero)
    }

    fn pad(&self, sign: String, body: String, zeros: bool) -> String {
        let len = sign.chars().count() + body.chars().count();
        let fill = self.width.unwrap_or(0).saturating_sub(len);
        match (self.left, zeros) {
            (true, _) => format!("{sign}{body}{}", " ".repeat(fill)),
            (false, true) => format!("{sign}{}{body}", "0".repeat(fill)),
            (false, false) => format!("{}{sign}{body}", " ".repeat(fill)),
        }
    }
}

/// A number for `%d` and the float conversions; Python takes bools and refuses strings.
fn real(value: &Value, conversion: char) -> Result<f64, Error> {
    match value.kind() {
        ValueKind::Number | ValueKind::Bool => Ok(f64::try_from(value.clone())
            .or_else(|_| i64::try_from(value.clone()).map(|n| n as f64))
            .unwrap_or(f64::from(u8::from(value.is_true())))),
        _ => Err(type_error(&format!(
            "%{conversion} format: a real number is required, not {}",
            python_type(value)
        ))),
    }
}

/// An integer for `%x` and `%o`, which refuse floats.
fn integer(value: &Value, conversion: char) -> Result<i128, Error> {
    match value.kind() {
        ValueKind::Number if value.is_integer() => i128::try_from(value.clone())
            .map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string())),
        ValueKind::Bool => Ok(i128::from(value.is_true())),
        _ => Err(type_error(&format!(
            "%{conversion} format: an integer is required, not {}",
            python_type(value)
        ))),
    }
}

fn python_type(value: &Value) -> &'static str {
    match value.kind() {
        ValueKind::String => "str",
        ValueKind::Number => "float",
        ValueKind::None => "NoneType",
        ValueKind::Seq => "list",
        ValueKind::Map => "dict",
        _ => "object",
    }
}

/// `1.500000e+00`: Python writes at least two exponent digits, with a sign.
fn exponent(f: f64, precision: usize, upper: bool) -> String {
    let text = format!("{f:.precision$e}");
    let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if exp < 0 { '-' } else { '+' };
    let e = if upper { 'E' } else { 'e' };
    format!("{mantissa}{e}{sign}{:02}", exp.abs())
}

/// `%g`: fixed or exponent notation by the exponent after rounding to `precision` significant
/// digits, trailing zeros dropped unless `#`.
fn general(f: f64, precision: usize, upper: bool, alternate: bool) -> String {
    let p = precision.max(1);
    let rounded = format!("{f:.*e}", p - 1);
    let exp: i32 = rounded
        .split_once('e')
        .and_then(|(_, e)| e.parse().ok())
        .unwrap_or(0);
    let text = if -4 <= exp && exp < p as i32 {
        format!("{f:.*}", (p as i32 - 1 - exp).max(0) as usize)
    } else {
        exponent(f, p - 1, upper)
    };
    if alternate {
        return text;
    }
    let (number, exp_part) = match text.find(['e', 'E']) {
        Some(at) => text.split_at(at),
        None => (text.as_str(), ""),
    };
    let number = if number.contains('.') {
        number.trim_end_matches('0').trim_end_matches('.')
    } else {
        number
    };
    format!("{number}{exp_part}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(format: &str, args: Vec<Value>) -> Result<String, String> {
        percent_format(format, Rest(args)).map_err(|e| e.to_string())
    }

    /// Each expected text is what Python 3 prints for the same `format % values`.
    #[test]
    fn formats_as_python_does() {
        let cases: Vec<(&str, Vec<Value>, &str)> = vec![
            ("%s", vec![Value::from("hi")], "hi"),
            ("%s|%s", vec![Value::from(1), Value::from(true)], "1|True"),
            ("%r", vec![Value::from("it's")], "\"it's\""),
            (
                "%5s|%-5s|",
                vec![Value::from("ab"), Value::from("cd")],
                "   ab|cd   |",
            ),
            ("%.2s", vec![Value::from("abc")], "ab"),
            ("%d %i", vec![Value::from(3.9), Value::from(-2)], "3 -2"),
            (
                "%05d|%+d|% d",
                vec![Value::from(42), Value::from(7), Value::from(7)],
                "00042|+7| 7",
            ),
            (
                "%x %X %#x %o %#o",
                vec![
                    Value::from(255),
                    Value::from(255),
                    Value::from(255),
                    Value::from(8),
                    Value::from(8),
                ],
                "ff FF 0xff 10 0o10",
            ),
            ("%f", vec![Value::from(1.5)], "1.500000"),
            (
                "%.2f|%8.3f|%-8.1f|",
                vec![Value::from(1.23456), Value::from(-2.5), Value::from(1)],
                "1.23|  -2.500|1.0     |",
            ),
            (
                "%e|%.2E",
                vec![Value::from(12345.678), Value::from(0.00012)],
                "1.234568e+04|1.20E-04",
            ),
            (
                "%g|%g|%g|%g",
                vec![
                    Value::from(0.0001),
                    Value::from(123456789),
                    Value::from(1.5),
                    Value::from(100),
                ],
                "0.0001|1.23457e+08|1.5|100",
            ),
            ("%c%c", vec![Value::from(72), Value::from("i")], "Hi"),
            ("100%% %s", vec![Value::from("sure")], "100% sure"),
            (
                "%*d|%.*f",
                vec![
                    Value::from(4),
                    Value::from(7),
                    Value::from(1),
                    Value::from(2.25),
                ],
                "   7|2.2",
            ),
            (
                "%s",
                vec![Value::from(vec![Value::from(1), Value::from(2)])],
                "[1, 2]",
            ),
            ("%s", vec![Value::from(())], "None"),
        ];
        for (format, args, want) in cases {
            assert_eq!(fmt(format, args).as_deref(), Ok(want), "{format}");
        }
        let mapping = Value::from(std::collections::BTreeMap::from([
            ("name", "Ada"),
            ("n", "3"),
        ]));
        assert_eq!(
            fmt("%(name)s has %(n)s", vec![mapping.clone()]).as_deref(),
            Ok("Ada has 3")
        );
        assert_eq!(
            fmt("%s", vec![mapping]).as_deref(),
            Ok("{'n': '3', 'name': 'Ada'}")
        );
    }

    #[test]
    fn wrong_values_fail_with_pythons_messages() {
        let cases: Vec<(&str, Vec<Value>, &str)> = vec![
            (
                "%s %s",
                vec![Value::from(1)],
                "not enough arguments for format string",
            ),
            (
                "%s",
                vec![Value::from(1), Value::from(2)],
                "not all arguments converted during string formatting",
            ),
            (
                "%d",
                vec![Value::from("x")],
                "%d format: a real number is required, not str",
            ),
            (
                "%x",
                vec![Value::from(1.5)],
                "%x format: an integer is required, not float",
            ),
            ("%(a)s", vec![Value::from(1)], "format requires a mapping"),
            (
                "%y",
                vec![Value::from(1)],
                "unsupported format character 'y'",
            ),
        ];
        for (format, args, want) in cases {
            let got = fmt(format, args).unwrap_err();
            assert!(got.contains(want), "{format}: {got}");
        }
    }
}
