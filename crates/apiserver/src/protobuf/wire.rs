//! The protobuf wire format: varints, keys and length-delimited slices, read from a byte slice.
//!
//! Every read is bounds-checked and reports what was wrong, so a hostile or truncated body
//! becomes an error, never a panic.

use super::ProtobufError;

/// How a field's value is laid out on the wire (the low three bits of its key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WireType {
    /// A base-128 varint: ints, bools.
    Varint,
    /// Eight little-endian bytes: double, fixed64.
    Fixed64,
    /// A varint length then that many bytes: strings, bytes, messages, packed scalars.
    Len,
    /// The start of a proto2 group (deprecated, never written by Kubernetes; skipped).
    StartGroup,
    /// The end of a proto2 group.
    EndGroup,
    /// Four little-endian bytes: float, fixed32.
    Fixed32,
}

impl WireType {
    fn from_bits(bits: u64) -> Result<Self, ProtobufError> {
        Ok(match bits {
            0 => Self::Varint,
            1 => Self::Fixed64,
            2 => Self::Len,
            3 => Self::StartGroup,
            4 => Self::EndGroup,
            5 => Self::Fixed32,
            other => {
                return Err(ProtobufError::malformed(format!(
                    "invalid wire type {other}"
                )));
            }
        })
    }
}

/// Groups nested deeper than this are refused rather than risk the stack.
const MAX_GROUP_DEPTH: usize = 32;

/// A cursor over one message's bytes.
pub(super) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Starts reading at the first byte of `buf`.
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Whether every byte has been consumed.
    pub(super) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// Reads a base-128 varint of at most ten bytes.
    pub(super) fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let Some(&byte) = self.buf.get(self.pos) else {
                return Err(ProtobufError::malformed("truncated varint"));
            };
            self.pos += 1;
            if i == 9 && byte > 1 {
                return Err(ProtobufError::malformed("varint overflows 64 bits"));
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ProtobufError::malformed("varint longer than 10 bytes"))
    }

    /// Reads a field key: its tag number and wire type.
    pub(super) fn key(&mut self) -> Result<(u32, WireType), ProtobufError> {
        let key = self.varint()?;
        let wire = WireType::from_bits(key & 7)?;
        let tag = u32::try_from(key >> 3)
            .ok()
            .filter(|t| (1..=0x1fff_ffff).contains(t))
            .ok_or_else(|| {
                ProtobufError::malformed(format!("invalid field number {}", key >> 3))
            })?;
        Ok((tag, wire))
    }

    /// Reads `n` raw bytes.
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], ProtobufError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.buf.len())
            .ok_or_else(|| ProtobufError::malformed(format!("truncated {what}")))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// Reads a length-delimited value's bytes.
    pub(super) fn len_delimited(&mut self) -> Result<&'a [u8], ProtobufError> {
        let len = self.varint()?;
        let len = usize::try_from(len)
            .map_err(|_| ProtobufError::malformed(format!("length {len} too large")))?;
        self.take(len, "length-delimited field")
    }

    /// Reads eight little-endian bytes.
    pub(super) fn fixed64(&mut self) -> Result<u64, ProtobufError> {
        let bytes = self.take(8, "fixed64")?;
        let mut arr = [0u8; 8];
        arr.copy_from_slice(bytes);
        Ok(u64::from_le_bytes(arr))
    }

    /// Skips a value of an unknown field, as proto2 parsers must.
    pub(super) fn skip(&mut self, tag: u32, wire: WireType) -> Result<(), ProtobufError> {
        self.skip_at(tag, wire, 0)
    }

    fn skip_at(&mut self, tag: u32, wire: WireType, depth: usize) -> Result<(), ProtobufError> {
        match wire {
            WireType::Varint => self.varint().map(drop),
            WireType::Fixed64 => self.take(8, "fixed64").map(drop),
            WireType::Fixed32 => self.take(4, "fixed32").map(drop),
            WireType::Len => self.len_delimited().map(drop),
            WireType::StartGroup => {
                if depth >= MAX_GROUP_DEPTH {
                    return Err(ProtobufError::malformed("groups nested too deeply"));
                }
                loop {
                    if self.is_empty() {
                        return Err(ProtobufError::malformed(format!(
                            "unterminated group {tag}"
                        )));
                    }
                    let (inner, inner_wire) = self.key()?;
                    if inner_wire == WireType::EndGroup {
                        if inner != tag {
                            return Err(ProtobufError::malformed(format!(
                                "group {tag} closed by end-group {inner}"
                            )));
                        }
                        return Ok(());
                    }
                    self.skip_at(inner, inner_wire, depth + 1)?;
                }
            }
            WireType::EndGroup => Err(ProtobufError::malformed(format!(
                "unexpected end-group {tag}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints() {
        let cases: &[(&[u8], Option<u64>)] = &[
            (&[0x00], Some(0)),
            (&[0x01], Some(1)),
            (&[0xac, 0x02], Some(300)),
            (
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
                Some(u64::MAX),
            ),
            (
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
                None,
            ),
            (&[0x80], None),
            (&[], None),
        ];
        for (bytes, want) in cases {
            let got = Reader::new(bytes).varint().ok();
            assert_eq!(got, *want, "{bytes:02x?}");
        }
    }

    #[test]
    fn keys() {
        assert_eq!(Reader::new(&[0x0a]).key().unwrap(), (1, WireType::Len));
        assert_eq!(Reader::new(&[0x10]).key().unwrap(), (2, WireType::Varint));
        assert!(Reader::new(&[0x00]).key().is_err(), "field 0 is invalid");
        assert!(
            Reader::new(&[0x0e]).key().is_err(),
            "wire type 6 is invalid"
        );
    }

    #[test]
    fn skips_every_wire_type() {
        // field 1 varint, field 2 fixed64, field 3 len 2, field 4 group{field 5 varint}, field 6 fixed32
        let body = [
            0x08, 0x96, 0x01, 0x11, 1, 2, 3, 4, 5, 6, 7, 8, 0x1a, 0x02, b'h', b'i', 0x23, 0x28,
            0x01, 0x24, 0x35, 1, 2, 3, 4,
        ];
        let mut r = Reader::new(&body);
        while !r.is_empty() {
            let (tag, wire) = r.key().unwrap();
            r.skip(tag, wire).unwrap();
        }
        for cut in 0..body.len() {
            let mut r = Reader::new(&body[..cut]);
            let mut result = Ok(());
            while result.is_ok() && !r.is_empty() {
                result = r.key().and_then(|(tag, wire)| r.skip(tag, wire));
            }
            let boundary = [0, 3, 12, 16, 20].contains(&cut);
            assert_eq!(result.is_ok(), boundary, "cut at {cut}: {result:?}");
        }
    }

    #[test]
    fn length_past_end_is_an_error() {
        let err = Reader::new(&[0x05, b'a']).len_delimited().unwrap_err();
        assert!(err.to_string().contains("truncated"), "{err}");
        assert!(
            Reader::new(&[0xff, 0xff, 0xff, 0xff, 0x0f])
                .len_delimited()
                .is_err()
        );
    }
}
