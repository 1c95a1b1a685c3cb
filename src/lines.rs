//! Reading lines with a length cap, so that input without newlines (`/dev/zero`, a runaway
//! client) cannot make a process hold unbounded memory.

#[cfg(test)]
use std::io::Read as _;
use std::io::{self, BufRead};

/// What [`read_line`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// A line is in the buffer, without its `\n` (and without a `\r` before it).
    Complete,
    /// The line was longer than the cap; it was read to its end and dropped (the buffer holds
    /// nothing of it). The count is its length in bytes.
    TooLong(u64),
    /// The input ended.
    End,
}

/// Reads the next line into `buf` (cleared first), holding at most `cap` bytes of it in memory.
/// A last line without a newline counts as a line.
///
/// # Errors
/// I/O errors of the reader.
pub fn read_line(reader: &mut impl BufRead, buf: &mut Vec<u8>, cap: usize) -> io::Result<Line> {
    buf.clear();
    let mut len: u64 = 0;
    let mut started = false;
    loop {
        let chunk = match reader.fill_buf() {
            Ok(chunk) => chunk,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            break;
        }
        started = true;
        let (part, newline) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], true),
            None => (chunk, false),
        };
        len += part.len() as u64;
        if len <= cap as u64 {
            buf.extend_from_slice(part);
        } else {
            buf.clear();
        }
        let used = part.len() + usize::from(newline);
        reader.consume(used);
        if newline {
            break;
        }
    }
    if !started {
        return Ok(Line::End);
    }
    if len > cap as u64 {
        buf.clear();
        return Ok(Line::TooLong(len));
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(Line::Complete)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], cap: usize, capacity: usize) -> Vec<Result<String, u64>> {
        let mut reader = io::BufReader::with_capacity(capacity, input);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            match read_line(&mut reader, &mut buf, cap).unwrap() {
                Line::Complete => out.push(Ok(String::from_utf8(buf.clone()).unwrap())),
                Line::TooLong(n) => {
                    assert!(buf.capacity() <= cap.max(capacity) * 2);
                    out.push(Err(n))
                }
                Line::End => return out,
            }
        }
    }

    #[test]
    fn long_lines_are_dropped_and_the_rest_go_on() {
        for capacity in [1, 3, 8, 1024] {
            assert_eq!(
                lines(b"ab\nabcdefgh\r\n\nabc\r\nxyz", 4, capacity),
                vec![
                    Ok("ab".into()),
                    Err(9),
                    Ok("".into()),
                    Ok("abc".into()),
                    Ok("xyz".into())
                ],
                "capacity {capacity}"
            );
        }
        assert_eq!(lines(b"", 4, 8), vec![]);
        assert_eq!(lines(b"\n", 4, 8), vec![Ok("".into())]);
    }

    #[test]
    fn memory_stays_bounded_without_newlines() {
        let zeros = io::repeat(0).take(50 << 20);
        let mut reader = io::BufReader::with_capacity(64 * 1024, zeros);
        let mut buf = Vec::new();
        assert_eq!(
            read_line(&mut reader, &mut buf, 1 << 20).unwrap(),
            Line::TooLong(50 << 20)
        );
        assert!(buf.capacity() <= 2 << 20, "{}", buf.capacity());
    }
}
