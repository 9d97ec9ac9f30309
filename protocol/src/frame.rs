//! Frame splitting: every Kafka request and response is a 4-byte big-endian size followed by that
//! many bytes. The size is judged from the prefix alone, before any of the body is read, so an
//! oversized request can be refused after reading four bytes.

use bytes::{Buf, Bytes, BytesMut};

/// Size of the length prefix.
pub const FRAME_PREFIX_LEN: usize = 4;

/// A length prefix that cannot start an acceptable frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The announced size is over the configured maximum.
    #[error("frame of {size} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// Announced size.
        size: usize,
        /// Configured maximum.
        max: usize,
    },
    /// The announced size is negative.
    #[error("negative frame size {0}")]
    Negative(i32),
}

/// Validates a length prefix against `max` and returns the body size it announces.
pub fn frame_len(prefix: [u8; FRAME_PREFIX_LEN], max: usize) -> Result<usize, FrameError> {
    let size = i32::from_be_bytes(prefix);
    let size = usize::try_from(size).map_err(|_| FrameError::Negative(size))?;
    if size > max {
        Err(FrameError::TooLarge { size, max })
    } else {
        Ok(size)
    }
}

/// Splits complete frames off the front of a read buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameSplitter {
    max_frame_len: usize,
}

impl FrameSplitter {
    /// A splitter refusing bodies larger than `max_frame_len` bytes.
    pub fn new(max_frame_len: usize) -> Self {
        Self { max_frame_len }
    }

    /// The configured maximum body size.
    pub fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    /// Bytes still needed before [`FrameSplitter::split`] can return the next frame: at least
    /// the prefix, then the rest of the body. Errors as soon as a bad prefix is buffered.
    pub fn bytes_needed(&self, buf: &[u8]) -> Result<usize, FrameError> {
        let Some(prefix) = buf.first_chunk::<FRAME_PREFIX_LEN>() else {
            return Ok(FRAME_PREFIX_LEN - buf.len());
        };
        let body = frame_len(*prefix, self.max_frame_len)?;
        Ok((FRAME_PREFIX_LEN + body).saturating_sub(buf.len()))
    }

    /// Removes and returns the next complete frame body (without its prefix) from `buf`, or
    /// `Ok(None)` if more bytes are needed. On error `buf` is left untouched.
    pub fn split(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        let Some(prefix) = buf.first_chunk::<FRAME_PREFIX_LEN>() else {
            return Ok(None);
        };
        let body = frame_len(*prefix, self.max_frame_len)?;
        if buf.len() < FRAME_PREFIX_LEN + body {
            return Ok(None);
        }
        buf.advance(FRAME_PREFIX_LEN);
        Ok(Some(buf.split_to(body).freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_large_is_decided_from_the_prefix_alone() {
        let splitter = FrameSplitter::new(100);
        let mut buf = BytesMut::from(&[0, 0, 0, 101][..]);
        assert_eq!(
            splitter.split(&mut buf),
            Err(FrameError::TooLarge { size: 101, max: 100 })
        );
        assert_eq!(
            splitter.bytes_needed(&buf),
            Err(FrameError::TooLarge { size: 101, max: 100 })
        );
        assert_eq!(buf.len(), 4);
    }

    #[test]
    fn negative_size_is_an_error() {
        assert_eq!(
            frame_len([0xff, 0xff, 0xff, 0xff], 10),
            Err(FrameError::Negative(-1))
        );
    }

    #[test]
    fn splits_frames_and_waits_for_partial_ones() {
        let splitter = FrameSplitter::new(16);
        let mut buf = BytesMut::from(&[0, 0, 0, 2, b'a', b'b', 0, 0, 0, 3, b'c'][..]);
        assert_eq!(splitter.split(&mut buf).unwrap(), Some(Bytes::from_static(b"ab")));
        assert_eq!(splitter.bytes_needed(&buf), Ok(2));
        assert_eq!(splitter.split(&mut buf).unwrap(), None);
        buf.extend_from_slice(b"de");
        assert_eq!(
            splitter.split(&mut buf).unwrap(),
            Some(Bytes::from_static(b"cde"))
        );
        assert!(buf.is_empty());
        assert_eq!(splitter.bytes_needed(&buf), Ok(4));
        let mut empty_body = BytesMut::from(&[0, 0, 0, 0][..]);
        assert_eq!(splitter.split(&mut empty_body).unwrap(), Some(Bytes::new()));
    }
}
