//! A small, strict parser for Structured Field Values (RFC 9651, which obsoletes RFC 8941):
//! Lists, Dictionaries and Items, with Inner Lists and Parameters, and all eight bare-item
//! types (Integer, Decimal, String, Token, Byte Sequence, Boolean, Date, Display String).
//!
//! Any error fails the whole field (SF's all-or-nothing rule), and so does a field longer
//! than [`MAX_FIELD_BYTES`] or with more than [`MAX_MEMBERS`] members, inner-list items or
//! parameters on one item. The parser never panics and never recurses more than one level.

/// The longest field value (after joining field lines) that is parsed at all.
pub const MAX_FIELD_BYTES: usize = 4096;
/// The most members of a List or Dictionary, items of an Inner List, or parameters of one
/// item or inner list that are accepted; more fails the field.
pub const MAX_MEMBERS: usize = 64;

/// A bare item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BareItem {
    /// An Integer: at most 15 digits, so within ±999 999 999 999 999.
    Integer(i64),
    /// A Decimal, in thousandths (`1.5` is `1500`): at most 12 integer and 3 fractional
    /// digits.
    Decimal(i64),
    /// A String (printable ASCII; escapes already resolved).
    String(String),
    /// A Token.
    Token(String),
    /// A Byte Sequence, decoded from base64.
    ByteSequence(Vec<u8>),
    /// A Boolean (`?1` / `?0`).
    Boolean(bool),
    /// A Date (`@` and an Integer of Unix seconds).
    Date(i64),
    /// A Display String (`%"..."`, percent-decoded UTF-8).
    DisplayString(String),
}

impl BareItem {
    /// The Integer value, if this is an Integer.
    pub fn as_integer(&self) -> Option<i64> {
        match self {
            BareItem::Integer(i) => Some(*i),
            _ => None,
        }
    }

    /// The text of a String or a Token.
    pub fn as_name(&self) -> Option<&str> {
        match self {
            BareItem::String(s) | BareItem::Token(s) => Some(s),
            _ => None,
        }
    }
}

/// Parameters, in order of first appearance; a repeated key keeps its first position and
/// its last value.
pub type Parameters = Vec<(String, BareItem)>;

/// Looks a parameter up by key.
pub fn param<'p>(params: &'p Parameters, key: &str) -> Option<&'p BareItem> {
    params.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// An Item: a bare item with parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The bare item.
    pub bare: BareItem,
    /// Its parameters.
    pub params: Parameters,
}

/// An Inner List: `(a b c);p=1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InnerList {
    /// The items.
    pub items: Vec<Item>,
    /// The parameters of the inner list itself.
    pub params: Parameters,
}

/// A member of a List or a value of a Dictionary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Member {
    /// A single Item.
    Item(Item),
    /// An Inner List.
    InnerList(InnerList),
}

/// A List.
pub type List = Vec<Member>;
/// A Dictionary, in order of first appearance; a repeated key keeps its first position and
/// its last value.
pub type Dictionary = Vec<(String, Member)>;

/// Parses a List field value. `None` on any error.
pub fn parse_list(input: &str) -> Option<List> {
    top(input, |p| {
        let mut out = Vec::new();
        p.members(|p| {
            out.push(p.member()?);
            Some(out.len())
        })?;
        Some(out)
    })
}

/// Parses a Dictionary field value. `None` on any error.
pub fn parse_dictionary(input: &str) -> Option<Dictionary> {
    top(input, |p| {
        let mut out: Dictionary = Vec::new();
        p.members(|p| {
            let key = p.key()?;
            let member = if p.eat(b'=') {
                p.member()?
            } else {
                Member::Item(Item {
                    bare: BareItem::Boolean(true),
                    params: p.params()?,
                })
            };
            match out.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = member,
                None => out.push((key, member)),
            }
            Some(out.len())
        })?;
        Some(out)
    })
}

/// Parses an Item field value. `None` on any error.
pub fn parse_item(input: &str) -> Option<Item> {
    top(input, |p| p.item())
}

fn top<T>(input: &str, f: impl FnOnce(&mut Parser<'_>) -> Option<T>) -> Option<T> {
    if input.len() > MAX_FIELD_BYTES || !input.is_ascii() {
        return None;
    }
    let mut p = Parser {
        b: input.as_bytes(),
        i: 0,
    };
    p.skip_sp();
    let v = f(&mut p)?;
    p.skip_sp();
    if p.i != p.b.len() {
        return None;
    }
    Some(v)
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

fn is_lcalpha(c: u8) -> bool {
    c.is_ascii_lowercase()
}

fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn skip_sp(&mut self) {
        while self.eat(b' ') {}
    }

    fn skip_ows(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    /// The comma-separated member loop shared by Lists and Dictionaries. `one` parses a
    /// member and returns how many members there are now.
    fn members(&mut self, mut one: impl FnMut(&mut Self) -> Option<usize>) -> Option<()> {
        while self.peek().is_some() {
            if one(self)? > MAX_MEMBERS {
                return None;
            }
            self.skip_ows();
            if self.peek().is_none() {
                return Some(());
            }
            if !self.eat(b',') {
                return None;
            }
            self.skip_ows();
            self.peek()?; // a trailing comma fails
        }
        Some(())
    }

    fn member(&mut self) -> Option<Member> {
        if self.peek() == Some(b'(') {
            self.inner_list().map(Member::InnerList)
        } else {
            self.item().map(Member::Item)
        }
    }

    fn inner_list(&mut self) -> Option<InnerList> {
        if !self.eat(b'(') {
            return None;
        }
        let mut items = Vec::new();
        loop {
            self.skip_sp();
            if self.eat(b')') {
                return Some(InnerList {
                    items,
                    params: self.params()?,
                });
            }
            items.push(self.item()?);
            if items.len() > MAX_MEMBERS {
                return None;
            }
            if !matches!(self.peek(), Some(b' ' | b')')) {
                return None;
            }
        }
    }

    fn item(&mut self) -> Option<Item> {
        let bare = self.bare_item()?;
        Some(Item {
            bare,
            params: self.params()?,
        })
    }

    fn params(&mut self) -> Option<Parameters> {
        let mut out: Parameters = Vec::new();
        while self.eat(b';') {
            self.skip_sp();
            let key = self.key()?;
            let value = if self.eat(b'=') {
                self.bare_item()?
            } else {
                BareItem::Boolean(true)
            };
            match out.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = value,
                None => out.push((key, value)),
            }
            if out.len() > MAX_MEMBERS {
                return None;
            }
        }
        Some(out)
    }

    fn key(&mut self) -> Option<String> {
        let start = self.i;
        match self.peek() {
            Some(c) if is_lcalpha(c) || c == b'*' => self.i += 1,
            _ => return None,
        }
        while let Some(c) = self.peek() {
            if is_lcalpha(c) || c.is_ascii_digit() || b"_-.*".contains(&c) {
                self.i += 1;
            } else {
                break;
            }
        }
        self.text(start)
    }

    /// The ASCII text from `start` to the cursor.
    fn text(&self, start: usize) -> Option<String> {
        let bytes = self.b.get(start..self.i)?;
        core::str::from_utf8(bytes).ok().map(str::to_owned)
    }

    fn bare_item(&mut self) -> Option<BareItem> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => self.number(),
            b'"' => self.string().map(BareItem::String),
            b'*' | b'a'..=b'z' | b'A'..=b'Z' => self.token().map(BareItem::Token),
            b':' => self.byte_sequence().map(BareItem::ByteSequence),
            b'?' => self.boolean().map(BareItem::Boolean),
            b'@' => {
                self.i += 1;
                match self.number()? {
                    BareItem::Integer(i) => Some(BareItem::Date(i)),
                    _ => None,
                }
            }
            b'%' => self.display_string().map(BareItem::DisplayString),
            _ => None,
        }
    }

    /// RFC 9651 §4.2.4.
    fn number(&mut self) -> Option<BareItem> {
        let neg = self.eat(b'-');
        if !self.peek()?.is_ascii_digit() {
            return None;
        }
        let mut int: i64 = 0;
        let mut int_digits = 0usize;
        let mut frac: i64 = 0;
        let mut frac_digits = 0usize;
        let mut decimal = false;
        while let Some(c) = self.peek() {
            if c.is_ascii_digit() {
                let d = i64::from(c - b'0');
                if decimal {
                    frac_digits += 1;
                    if frac_digits > 3 {
                        return None;
                    }
                    frac = frac * 10 + d;
                } else {
                    int_digits += 1;
                    if int_digits > 15 {
                        return None;
                    }
                    int = int * 10 + d;
                }
            } else if c == b'.' && !decimal {
                if int_digits > 12 {
                    return None;
                }
                decimal = true;
            } else {
                break;
            }
            self.i += 1;
        }
        let sign = if neg { -1 } else { 1 };
        if !decimal {
            return Some(BareItem::Integer(sign * int));
        }
        if frac_digits == 0 {
            return None; // ends with "."
        }
        for _ in frac_digits..3 {
            frac *= 10;
        }
        Some(BareItem::Decimal(sign * (int * 1000 + frac)))
    }

    fn string(&mut self) -> Option<String> {
        if !self.eat(b'"') {
            return None;
        }
        let mut out = String::new();
        loop {
            match self.next()? {
                b'\\' => match self.next()? {
                    c @ (b'"' | b'\\') => out.push(char::from(c)),
                    _ => return None,
                },
                b'"' => return Some(out),
                c if (0x20..0x7f).contains(&c) => out.push(char::from(c)),
                _ => return None,
            }
        }
    }

    fn token(&mut self) -> Option<String> {
        let start = self.i;
        match self.peek() {
            Some(c) if c.is_ascii_alphabetic() || c == b'*' => self.i += 1,
            _ => return None,
        }
        while let Some(c) = self.peek() {
            if is_tchar(c) || c == b':' || c == b'/' {
                self.i += 1;
            } else {
                break;
            }
        }
        self.text(start)
    }

    fn byte_sequence(&mut self) -> Option<Vec<u8>> {
        if !self.eat(b':') {
            return None;
        }
        let start = self.i;
        let len = self.b.get(start..)?.iter().position(|&c| c == b':')?;
        let content = self.b.get(start..start + len)?;
        self.i = start + len + 1;
        base64_decode(content)
    }

    fn boolean(&mut self) -> Option<bool> {
        if !self.eat(b'?') {
            return None;
        }
        match self.next()? {
            b'1' => Some(true),
            b'0' => Some(false),
            _ => None,
        }
    }

    fn display_string(&mut self) -> Option<String> {
        if !self.eat(b'%') || !self.eat(b'"') {
            return None;
        }
        let mut bytes = Vec::new();
        loop {
            match self.next()? {
                b'%' => {
                    let hi = lower_hex(self.next()?)?;
                    let lo = lower_hex(self.next()?)?;
                    bytes.push(hi << 4 | lo);
                }
                b'"' => return String::from_utf8(bytes).ok(),
                c if (0x20..0x7f).contains(&c) => bytes.push(c),
                _ => return None,
            }
        }
    }
}

fn lower_hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

fn b64_value(c: u8) -> Option<u32> {
    let v = match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(v))
}

/// Standard base64 as RFC 9651 §4.2.7 wants it read: `=` only at the end (at most two, and
/// then the length must be a multiple of 4), missing padding tolerated, non-zero pad bits
/// tolerated. Any other character, or a length that leaves a lone 6-bit group, fails.
fn base64_decode(s: &[u8]) -> Option<Vec<u8>> {
    let data_len = s.iter().rposition(|&c| c != b'=').map_or(0, |p| p + 1);
    let pads = s.len() - data_len;
    let data = s.get(..data_len)?;
    if pads > 2 || (pads > 0 && !s.len().is_multiple_of(4)) || data_len % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(data_len / 4 * 3 + 2);
    for chunk in data.chunks(4) {
        let mut acc = 0u32;
        for &c in chunk {
            acc = acc << 6 | b64_value(c)?;
        }
        let bytes = (acc << (6 * (4 - chunk.len()) as u32)).to_be_bytes();
        // `bytes[0]` is always zero; a chunk of n chars carries n - 1 whole bytes.
        out.extend_from_slice(bytes.get(1..chunk.len())?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(s: &str) -> BareItem {
        BareItem::Token(s.into())
    }
    fn st(s: &str) -> BareItem {
        BareItem::String(s.into())
    }
    fn item(bare: BareItem, params: &[(&str, BareItem)]) -> Member {
        Member::Item(Item {
            bare,
            params: params
                .iter()
                .map(|(k, v)| ((*k).into(), v.clone()))
                .collect(),
        })
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_item("42").unwrap().bare, BareItem::Integer(42));
        assert_eq!(parse_item("-42").unwrap().bare, BareItem::Integer(-42));
        assert_eq!(
            parse_item("999999999999999").unwrap().bare,
            BareItem::Integer(999_999_999_999_999)
        );
        assert_eq!(
            parse_item("-999999999999999").unwrap().bare,
            BareItem::Integer(-999_999_999_999_999)
        );
        assert_eq!(parse_item("1000000000000000"), None);
        assert_eq!(parse_item("1.5").unwrap().bare, BareItem::Decimal(1500));
        assert_eq!(parse_item("-0.001").unwrap().bare, BareItem::Decimal(-1));
        assert_eq!(
            parse_item("123456789012.123").unwrap().bare,
            BareItem::Decimal(123_456_789_012_123)
        );
        for bad in [
            "1234567890123.1",
            "1.1234",
            "1.",
            "-",
            "- 1",
            "--1",
            "+1",
            "1e3",
            "0x10",
            ".5",
        ] {
            assert_eq!(parse_item(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn strings_tokens_bytes_booleans() {
        assert_eq!(
            parse_item(r#""a \"q\" \\""#).unwrap().bare,
            st(r#"a "q" \"#)
        );
        assert_eq!(parse_item(r#""\n""#), None);
        assert_eq!(parse_item("\"abc"), None);
        assert_eq!(parse_item("\"a\tb\""), None);
        assert_eq!(
            parse_item("foo123/456:x").unwrap().bare,
            tok("foo123/456:x")
        );
        assert_eq!(parse_item("*foo").unwrap().bare, tok("*foo"));
        assert_eq!(
            parse_item(":aGVsbG8=:").unwrap().bare,
            BareItem::ByteSequence(b"hello".to_vec())
        );
        assert_eq!(
            parse_item(":aGVsbG8:").unwrap().bare,
            BareItem::ByteSequence(b"hello".to_vec())
        );
        assert_eq!(
            parse_item("::").unwrap().bare,
            BareItem::ByteSequence(vec![])
        );
        for bad in [
            ":aGVsbG8=",
            ":a:",
            ":ab=c:",
            ":ab===:",
            ":ab!c:",
            ":aGVsbG8=x:",
            ":aGVsbG8==:",
        ] {
            assert_eq!(parse_item(bad), None, "{bad:?}");
        }
        assert_eq!(parse_item("?1").unwrap().bare, BareItem::Boolean(true));
        assert_eq!(parse_item("?0").unwrap().bare, BareItem::Boolean(false));
        assert_eq!(parse_item("?2"), None);
        assert_eq!(
            parse_item("@1659578233").unwrap().bare,
            BareItem::Date(1_659_578_233)
        );
        assert_eq!(parse_item("@1.5"), None);
        assert_eq!(
            parse_item("%\"f%c3%bc\"").unwrap().bare,
            BareItem::DisplayString("fü".into())
        );
        assert_eq!(parse_item("%\"f%C3%BC\""), None);
        assert_eq!(parse_item("%\"%ff\""), None);
    }

    #[test]
    fn params_and_keys() {
        let i = parse_item("\"x\"; r=1;t=2;r=3;flag").unwrap();
        assert_eq!(
            i.params,
            vec![
                ("r".into(), BareItem::Integer(3)),
                ("t".into(), BareItem::Integer(2)),
                ("flag".into(), BareItem::Boolean(true))
            ]
        );
        assert_eq!(parse_item("\"x\";Q=1"), None);
        assert_eq!(parse_item("\"x\";1a=1"), None);
        assert_eq!(
            parse_item("\"x\";a_b-c.d*=1").unwrap().params[0].0,
            "a_b-c.d*"
        );
        assert_eq!(parse_item("\"x\" ;r=1"), None);
    }

    #[test]
    fn lists() {
        assert_eq!(parse_list(""), Some(vec![]));
        assert_eq!(
            parse_list(" \"a\";q=1 ,\t\"b\", (1 2);p ").unwrap(),
            vec![
                item(st("a"), &[("q", BareItem::Integer(1))]),
                item(st("b"), &[]),
                Member::InnerList(InnerList {
                    items: vec![
                        Item {
                            bare: BareItem::Integer(1),
                            params: vec![]
                        },
                        Item {
                            bare: BareItem::Integer(2),
                            params: vec![]
                        }
                    ],
                    params: vec![("p".into(), BareItem::Boolean(true))],
                }),
            ]
        );
        for bad in ["a,", ",a", "a,,b", "a b", "(1 2", "(1,2)", "a;", "é"] {
            assert_eq!(parse_list(bad), None, "{bad:?}");
        }
        let many = vec!["1"; MAX_MEMBERS].join(",");
        assert_eq!(parse_list(&many).map(|l| l.len()), Some(MAX_MEMBERS));
        assert_eq!(parse_list(&format!("{many},1")), None);
        assert_eq!(parse_list(&" ".repeat(MAX_FIELD_BYTES + 1)), None);
    }

    #[test]
    fn dictionaries() {
        let d = parse_dictionary("limit=100, remaining=50, reset=5, limit=7, flag;x").unwrap();
        assert_eq!(
            d,
            vec![
                ("limit".into(), item(BareItem::Integer(7), &[])),
                ("remaining".into(), item(BareItem::Integer(50), &[])),
                ("reset".into(), item(BareItem::Integer(5), &[])),
                (
                    "flag".into(),
                    item(BareItem::Boolean(true), &[("x", BareItem::Boolean(true))])
                ),
            ]
        );
        assert_eq!(parse_dictionary("\"default\";r=1"), None);
        assert_eq!(parse_dictionary("Limit=1"), None);
        assert_eq!(parse_list("limit=100"), None);
    }
}
