//! A journal record's payload: the commit's number, then its effects on redb's tables ([`Op`]s),
//! each a tag byte and its fields: byte strings as a `u32` length and the bytes, numbers as
//! `u64`s, all little-endian.

/// One effect on redb's tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// Insert into `memkv_data` (or `memkv_snapshots`), under the stored key.
    Put {
        snapshots: bool,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    /// Remove a stored key.
    Remove { snapshots: bool, key: Vec<u8> },
    /// Remove every stored key in `[start, end)`.
    RemoveRange {
        snapshots: bool,
        start: Vec<u8>,
        end: Vec<u8>,
    },
    /// Set a key of `memkv_meta`.
    Meta { key: String, value: u64 },
    /// Insert into the change log.
    LogPut { seq: u64, value: Vec<u8> },
    /// Remove the change log's entries up to and including `through`.
    LogTrim { through: u64 },
}

impl Op {
    /// Bytes of keys and values: about what the op adds to the journal.
    pub(crate) fn size(&self) -> u64 {
        let n = match self {
            Op::Put { key, value, .. } => key.len() + value.len(),
            Op::Remove { key, .. } => key.len(),
            Op::RemoveRange { start, end, .. } => start.len() + end.len(),
            Op::Meta { key, .. } => key.len() + 8,
            Op::LogPut { value, .. } => value.len() + 8,
            Op::LogTrim { .. } => 8,
        };
        n as u64
    }
}

/// Op tags in the journal (the high bit: `memkv_snapshots` rather than `memkv_data`).
const PUT: u8 = 1;
const REMOVE: u8 = 2;
const REMOVE_RANGE: u8 = 3;
const META: u8 = 4;
const LOG_PUT: u8 = 5;
const LOG_TRIM: u8 = 6;
const SNAPSHOTS: u8 = 0x80;

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    // Lengths fit: a record is at most `super::MAX_RECORD` bytes, checked when it is appended.
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Reads what [`Op::encode`] wrote, from the front of `input`.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn bytes(&mut self) -> Option<Vec<u8>> {
        let len = u32::from_le_bytes(self.take(4)?.try_into().ok()?);
        self.take(len as usize).map(<[u8]>::to_vec)
    }
}

impl Op {
    /// Appends the op's encoding to `out`.
    fn encode(&self, out: &mut Vec<u8>) {
        let table = |snapshots: bool| if snapshots { SNAPSHOTS } else { 0 };
        match self {
            Op::Put {
                snapshots,
                key,
                value,
            } => {
                out.push(PUT | table(*snapshots));
                put_bytes(out, key);
                put_bytes(out, value);
            }
            Op::Remove { snapshots, key } => {
                out.push(REMOVE | table(*snapshots));
                put_bytes(out, key);
            }
            Op::RemoveRange {
                snapshots,
                start,
                end,
            } => {
                out.push(REMOVE_RANGE | table(*snapshots));
                put_bytes(out, start);
                put_bytes(out, end);
            }
            Op::Meta { key, value } => {
                out.push(META);
                put_bytes(out, key.as_bytes());
                out.extend_from_slice(&value.to_le_bytes());
            }
            Op::LogPut { seq, value } => {
                out.push(LOG_PUT);
                out.extend_from_slice(&seq.to_le_bytes());
                put_bytes(out, value);
            }
            Op::LogTrim { through } => {
                out.push(LOG_TRIM);
                out.extend_from_slice(&through.to_le_bytes());
            }
        }
    }

    /// The next op of `r`; `None` at a malformed one.
    fn decode(r: &mut Reader<'_>) -> Option<Op> {
        let tag = r.byte()?;
        let snapshots = tag & SNAPSHOTS != 0;
        Some(match tag & !SNAPSHOTS {
            PUT => Op::Put {
                snapshots,
                key: r.bytes()?,
                value: r.bytes()?,
            },
            REMOVE => Op::Remove {
                snapshots,
                key: r.bytes()?,
            },
            REMOVE_RANGE => Op::RemoveRange {
                snapshots,
                start: r.bytes()?,
                end: r.bytes()?,
            },
            META if !snapshots => Op::Meta {
                key: String::from_utf8(r.bytes()?).ok()?,
                value: r.u64()?,
            },
            LOG_PUT if !snapshots => Op::LogPut {
                seq: r.u64()?,
                value: r.bytes()?,
            },
            LOG_TRIM if !snapshots => Op::LogTrim { through: r.u64()? },
            _ => return None,
        })
    }
}

/// A record's payload: `number`, then `ops`.
pub(crate) fn encode_record(number: u64, ops: &[Op]) -> Vec<u8> {
    let size: u64 = ops.iter().map(|op| op.size() + 9).sum();
    let mut out = Vec::with_capacity(8 + usize::try_from(size).unwrap_or(0));
    out.extend_from_slice(&number.to_le_bytes());
    for op in ops {
        op.encode(&mut out);
    }
    out
}

/// The number and ops of a record's payload; `None` if it is malformed.
pub(crate) fn decode_record(payload: &[u8]) -> Option<(u64, Vec<Op>)> {
    let mut r = Reader(payload);
    let number = r.u64()?;
    let mut ops = Vec::new();
    while !r.0.is_empty() {
        ops.push(Op::decode(&mut r)?);
    }
    Some((number, ops))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(n: u8) -> Op {
        Op::Put {
            snapshots: false,
            key: vec![n],
            value: vec![n; 3],
        }
    }

    #[test]
    fn every_op_reads_back_as_written() {
        let ops = vec![
            put(1),
            Op::Put {
                snapshots: true,
                key: vec![],
                value: vec![0; 70_000],
            },
            Op::Remove {
                snapshots: true,
                key: b"k".to_vec(),
            },
            Op::RemoveRange {
                snapshots: false,
                start: b"a".to_vec(),
                end: b"b".to_vec(),
            },
            Op::Meta {
                key: "journal_applied".into(),
                value: u64::MAX,
            },
            Op::LogPut {
                seq: 7,
                value: b"{}".to_vec(),
            },
            Op::LogTrim { through: 3 },
        ];
        let payload = encode_record(42, &ops);
        assert_eq!(decode_record(&payload), Some((42, ops)));
        // Cut anywhere inside an op, or with an unknown tag, a payload is malformed.
        for cut in [9, 12, payload.len() - 1] {
            assert_eq!(decode_record(&payload[..cut]), None, "cut at {cut}");
        }
        let mut bad = payload.clone();
        bad[8] = 0x7f;
        assert_eq!(decode_record(&bad), None);
    }
}
